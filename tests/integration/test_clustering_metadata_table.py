"""Clustering a table that has a metadata table, on a real local SparkSession: the metadata table lists exactly the
files on storage afterwards, carries the new files' column statistics, and hudi-rs reads the table through it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from hudi_clusterd.domain.policy import ClusteringPolicy
from hudi_clusterd.formats.metadata import column_stats as cs
from hudi_clusterd.formats.metadata import records as rec
from hudi_clusterd.ops.execute import ExecutionResult, execute_pending
from hudi_clusterd.ops.ports import GroupRunner
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.ordering.figures import clustering_figures
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import make_policy
from tests.harness.hudi_rs_checks import hudi_rs_rows, without_file_name
from tests.harness.metadata_checks import committed_base_files

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def runner(spark: Any) -> GroupRunner:
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner

    return SparkGroupRunner(spark, owns_session=False)


def run(table: HoodieTable, pol: ClusteringPolicy, runner: GroupRunner) -> ExecutionResult:
    scheduled = schedule(table, pol, force=True)
    assert scheduled.instant is not None, scheduled.reason
    return execute_pending(table, runner, scheduled.instant, parallelism=pol.max_parallelism,
                           figures=clustering_figures)


def without_record_index(base: Path) -> None:
    """Drop record_index from the golden table's metadata partitions (the daemon refuses it)."""
    props = base / ".hoodie" / "hoodie.properties"
    lines = []
    for line in props.read_text(encoding="iso-8859-1").splitlines():
        if line.startswith("hoodie.table.metadata.partitions="):
            parts = [p for p in line.split("=", 1)[1].split(",") if p != "record_index"]
            line = "hoodie.table.metadata.partitions=" + ",".join(parts)
        lines.append(line)
    props.write_text("\n".join(lines) + "\n", encoding="iso-8859-1")


def mdt_files(table: HoodieTable) -> dict[str, dict[str, int]]:
    mdt = table.metadata_table()
    assert mdt is not None
    return {p: f for p, f in mdt.live_files(i.time for i in table.timeline().completed()).items() if f}


@pytest.mark.parametrize(("name", "columns"), [("v9_txns_simple_meta", "amount,txn_ts"),
                                               ("v9_txns_nonpart_meta", "account_id")])
def test_clustering_keeps_the_metadata_table_true(golden_copy: Any, runner: GroupRunner, name: str,
                                                  columns: str) -> None:
    # Given a table Apache Hudi 1.x wrote with its metadata table (files, column_stats, partition_stats...)
    base = golden_copy(name)
    without_record_index(base)
    table = HoodieTable.open(str(base))
    assert mdt_files(table) == committed_base_files(table)
    before = hudi_rs_rows(base)
    # When we cluster it
    result = run(table, make_policy(**{"sort.columns": columns, "hoodie.layout.optimize.strategy": "z-order"}),
                 runner)
    assert result.outcome == "completed"
    t = result.instant
    table = HoodieTable.open(str(base))
    # Then one metadata deltacommit with the clustering's instant time completed before the replacecommit
    timeline = base / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    mdt_done = [p.name for p in timeline.iterdir() if p.name.startswith(f"{t}_") and p.name.endswith(".deltacommit")]
    data_done = [p.name for p in (base / ".hoodie" / "timeline").iterdir()
                 if p.name.startswith(f"{t}_") and p.name.endswith(".replacecommit")]
    assert len(mdt_done) == 1 and len(data_done) == 1
    assert mdt_done[0].split("_")[1] < data_done[0].split("_")[1]
    # and the files partition lists exactly what is on storage (the new files with their sizes)
    assert mdt_files(table) == committed_base_files(table)
    # and hudi-rs, which lists files through the metadata table, reads the same rows
    assert without_file_name(hudi_rs_rows(base)) == without_file_name(before)
    # and every new file has its true column statistics (from its footer), every indexed column
    mdt = table.metadata_table()
    assert mdt is not None
    done = [i.time for i in table.timeline().completed()]
    stats = mdt.read(rec.COLUMN_STATS, done, return_record_name=True)
    new_files = [bf for bf in table.list_base_files() if bf.instant_time == t]
    assert new_files
    ranges = [cs.range_from_record(r) for r in stats.values()]
    for bf in new_files:
        got = {cr.column: cr for cr in ranges if cr.file_path == bf.file_name}
        assert {"txn_id", "txn_ts", "_hoodie_record_key"} <= set(got), sorted(got)
        column = pq.read_table(base / bf.relative_path, columns=["txn_ts"]).column("txn_ts").to_pylist()
        assert (got["txn_ts"].min_value, got["txn_ts"].max_value) == (min(column), max(column))
        assert got["txn_ts"].value_count == len(column)
    # and partition statistics of every touched partition exist, covering the new files' ranges
    parts = mdt.read(rec.PARTITION_STATS, done, return_record_name=True) \
        if rec.PARTITION_STATS in mdt.partitions else {}
    for bf in new_files if parts else []:
        key = cs.partition_stats_key("txn_ts", bf.partition_path or ".")
        assert key in parts, bf.partition_path
        ps = cs.range_from_record(parts[key])
        column = pq.read_table(base / bf.relative_path, columns=["txn_ts"]).column("txn_ts").to_pylist()
        assert ps.min_value <= min(column) and ps.max_value >= max(column)
