"""Merge-on-read tables Apache Hudi writes and the daemon clusters with their log files merged (issue #34,
hudi-mor-reference §8.3 item 6): one release's table written once, copies of it at each step, and the rows each
reader or writer gives.

:func:`write_mor_table` has one release's worker write the oracle workload (``tests/harness/mor_oracle.py``:
inserts into several file groups in two partitions, upserts into many of them, a SQL DELETE and
``_hoodie_is_deleted`` upserts), read its snapshot and compact a copy (the compaction oracle); the interop tests
share it per session (``mor_written`` in ``tests/interop/conftest.py``). :func:`cluster_mor_table` has the daemon
schedule a plan on another copy, Hudi's clustering execute that plan on the table as it is right after scheduling
(the clustering oracle), the daemon execute it on a copy taken then, and Hudi read the result (snapshot and
read-optimized)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hudi_clusterd.domain.plan import ClusteringPlan
from hudi_clusterd.domain.policy import parse_policy
from hudi_clusterd.formats.log import Release
from hudi_clusterd.ops.events import Outcome
from hudi_clusterd.ops.execute import execute_pending
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.harness.apache_hudi import HudiRequestError, HudiWorker
from tests.harness.hudi_versions import HUDI_1_0_2, HudiSetup, table_service_options
from tests.harness.mor_oracle import Workload, completed_instants, write_workload, writer_options

# every column Hudi's readers and writers must agree on (all but ``_hoodie_file_name``)
ROW_COLUMNS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
               "id", "part", "ts", "value")
# a plan of every slice of the table: every base file is small, nothing is "hot"
POLICY = {"hoodie.clustering.plan.strategy.small.file.limit": str(100 * 1024 * 1024),
          "hoodie.clustering.plan.strategy.target.file.max.bytes": str(1024 * 1024 * 1024)}
_BASE = re.compile(r"[^._][^_]*_\d+-\d+-\d+_(\d+)\.parquet")


@dataclass(frozen=True)
class WrittenMor:
    """The workload's table one release wrote (never written to again), Hudi's snapshot read of it, and a copy of it
    Hudi compacted (every slice with logs) before any plan of ours."""

    setup: HudiSetup
    path: Path
    workload: Workload
    snapshot: pa.Table
    compacted: Path
    compaction: str | None  # the compaction's instant
    compaction_error: str | None  # why Hudi could not compact it (Hudi 1.0.2)


@dataclass(frozen=True)
class ClusteredMor:
    """One release's table, clustered by us and (our plan) by Hudi."""

    source: WrittenMor
    instant: str  # our clustering instant
    plan: ClusteringPlan
    hudis: Path  # the table as it was right after our plan was scheduled, that plan executed by Hudi's clustering
    ours: Path  # the table our daemon clustered
    outcome: str
    after: pa.Table  # Hudi's snapshot read of ``ours``
    read_optimized: pa.Table  # Hudi's read-optimized read of ``ours``

    @property
    def setup(self) -> HudiSetup:
        return self.source.setup

    @property
    def written(self) -> Path:
        return self.source.path

    @property
    def before(self) -> pa.Table:
        return self.source.snapshot


def copy_table(src: Path, dst: Path) -> Path:
    """A copy of the table (Hudi keeps no absolute path in it; the copy keeps the files' modification times)."""
    shutil.copytree(src, dst)
    return dst


def merge_release(setup: HudiSetup) -> Release:
    """Whose merge semantics apply to the table ``setup`` writes: its writer's (0.15's for a version-6 table)."""
    return Release.HUDI_0_15 if setup.table_version == 6 else Release.HUDI_1_X


def write_mor_table(hudi: HudiWorker, root: Path) -> WrittenMor:
    """``hudi``'s setup writes the oracle workload in ``root``, reads its snapshot and compacts a copy."""
    setup = hudi.setup
    written = root / "table"
    workload = write_workload(hudi, setup, written, f"mor_workload_{setup.name.replace('.', '_').replace('-', '_')}")
    assert not [p for p in (written / ".hoodie").rglob("*.commit") if "metadata" not in p.parts], \
        "Hudi compacted while the workload was written"
    snapshot = hudi.read(written)
    compacted = copy_table(written, root / "compacted")
    compaction = error = None
    try:
        hudi.sql(f"CALL run_compaction(op => 'scheduleAndExecute', path => '{compacted}')")
        [compaction] = sorted(set(completed_instants(compacted)) - set(completed_instants(written)))
    except HudiRequestError as exc:
        if setup is not HUDI_1_0_2:
            raise
        error = str(exc).splitlines()[0][:300]
    return WrittenMor(setup, written, workload, snapshot, compacted, compaction, error)


def cluster_mor_table(hudi: HudiWorker, spark: Any, source: WrittenMor, root: Path) -> ClusteredMor:
    """The daemon plans every slice of a copy of ``source`` in ``root``, Hudi's clustering executes that plan, and
    the daemon executes it on a copy taken right after scheduling (see the module docstring)."""
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner

    setup = hudi.setup
    assert setup is source.setup
    ours = copy_table(source.path, root / "ours")
    policy = parse_policy(POLICY, source="test")[0]
    scheduled = schedule(HoodieTable.open(str(ours)), policy, force=True, hot_commits=0)
    assert scheduled.instant is not None and scheduled.plan is not None, scheduled.planning
    instant, plan = scheduled.instant, scheduled.plan
    # the clustering oracle: Hudi executes our plan where it was scheduled (the plan names its files by absolute
    # path), on the table as it is now; the copy kept aside then takes the table's place for our execution
    kept = copy_table(ours, root / "kept")
    hudi.run_clustering(ours, "execute", options=table_service_options(writer_options(setup)), instants=[instant])
    hudis = ours.rename(root / "hudis")
    kept.rename(ours)
    table = HoodieTable.open(str(ours), merge_release=merge_release(setup))
    result = execute_pending(table, SparkGroupRunner(spark, owns_session=False), instant, parallelism=2)
    after = hudi.read(ours)
    read_optimized = hudi.read(ours, options={"hoodie.datasource.query.type": "read_optimized"})
    return ClusteredMor(source, instant, plan, hudis, ours, str(result.outcome), after, read_optimized)


def instant_files(table: Path, instant: str) -> list[Path]:
    """The base files written at ``instant`` (a clustering's or a compaction's), in every partition."""
    return sorted(p for p in table.glob("*/*.parquet") if (m := _BASE.fullmatch(p.name)) and m.group(1) == instant)


def latest_base_files(table: Path, group_ids: Iterable[tuple[str, str]]) -> list[Path]:
    """The newest base file of each ``(partition, file id)`` group."""
    out = []
    for partition, file_id in group_ids:
        files = sorted(table.glob(f"{partition}/{file_id}_*.parquet"), key=lambda p: p.stem.rsplit("_", 1)[-1])
        assert files, f"no base file of {partition}/{file_id} in {table}"
        out.append(files[-1])
    return out


def read_rows(files: Sequence[Path], columns: Sequence[str] = ROW_COLUMNS) -> list[dict[str, Any]]:
    """The rows of ``files`` on ``columns``, sorted (a multiset made comparable)."""
    assert files, "no files"
    return sorted_rows(pa.concat_tables([pq.read_table(f, columns=list(columns)) for f in files]), columns)


def sorted_rows(table: pa.Table, columns: Sequence[str] = ROW_COLUMNS) -> list[dict[str, Any]]:
    rows = table.select(list(columns)).to_pylist()
    return sorted(rows, key=lambda r: tuple(str(r[c]) for c in columns))


def by_key(table: pa.Table, columns: Sequence[str] = ROW_COLUMNS) -> dict[str, dict[str, Any]]:
    """``columns`` of each row by record key, asserting the keys are unique."""
    out = {r["_hoodie_record_key"]: r for r in table.select(list(columns)).to_pylist()}
    assert len(out) == table.num_rows, "duplicate record keys"
    return out


def outcome_completed(outcome: str) -> bool:
    return outcome == Outcome.COMPLETED.value
