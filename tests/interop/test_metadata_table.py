"""Apache Hudi with its metadata table on (its default) beside the daemon's clustering and rollbacks.

Hudi 0.15 creates the ``files`` partition; Hudi 1.2 (versions 6, 8 and 9) creates ``files``, ``column_stats`` and
``partition_stats`` for a partitioned table. After the daemon clusters, and after it rolls a clustering back:

- the metadata table lists exactly the files on storage (``validate_files``: Hudi's own
  ``validate_metadata_table_files`` reads the metadata table on both sides, so its listing is compared with
  storage here), and Hudi reads exactly the rows written, listing through it;
- on 1.2, ``show_metadata_table_column_stats`` gives each new file its true min and max, and range reads with
  data skipping return exactly what full scans return while reading fewer files;
- Hudi's own compaction of the metadata table runs over the slices holding our log files, then its cleaner and
  archiver, and every read stays exact.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.domain.instant import Action, State
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.ops.execute import execute_pending
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.timeline_store import TimelineStore
from tests.builders import EVENTS_SCHEMA, event_rows, events_by_key, expected_events, make_policy
from tests.harness.apache_hudi import HudiWorker, HudiWorkers, events_writer_options
from tests.harness.daemon_harness import clusterd, clusterings
from tests.harness.hudi_versions import HUDI_0_15, HUDI_1_2_V9
from tests.harness.metadata_checks import (
    ColumnStat,
    column_stats,
    data_skipping_check,
    mdt_compactions,
    metadata_partitions,
    parquet_column_stats,
    validate_files,
)

pytestmark = [pytest.mark.hudi, pytest.mark.integration,
              pytest.mark.usefixtures("spark")]  # clusterd(...) runs in this process, on the session's Spark

# Each release at its defaults: 0.15 writes version 6 with a files partition, 1.2 version 9 with files,
# column_stats and partition_stats. (Version 8, and version 6 written by 1.2, are covered with the metadata table on
# by the other interop tests.)
DEFAULTS = (HUDI_0_15, HUDI_1_2_V9)


@pytest.fixture(scope="module")
def apache_hudi(request: pytest.FixtureRequest, hudi_workers: HudiWorkers) -> HudiWorker:
    """The worker of one release at its defaults (each test parametrizes it); module-scoped, so that each
    release's tests run together."""
    return hudi_workers.for_setup(request.param)


# Hudi 0.15's compaction, cleaner and archiver over our metadata log files also run in every run, in the cleaner
# and archiver test of test_plans_and_table_services.py; this test's 0.15 run is the long run's
COMPACTION_RUNS = [pytest.param(HUDI_0_15, marks=pytest.mark.slow, id=HUDI_0_15.name),
                   pytest.param(HUDI_1_2_V9, id=HUDI_1_2_V9.name)]

# Hudi's defaults, with a metadata compaction every few deltacommits and a cleaner and archiver that soon act
MDT_ON = {"hoodie.metadata.enable": "true", "hoodie.metadata.compact.max.delta.commits": "3"}
SERVICES = {"hoodie.cleaner.commits.retained": "1", "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
            "hoodie.clean.automatic": "true", "hoodie.archive.automatic": "true"}
COLUMNS = ["id", "val", "ts"]
# the daemon sorts by val into small files (small bloom filters), so that a range of val skips files
LAYOUT = {"hoodie.clustering.plan.strategy.sort.columns": "val",
          "hoodie.clustering.plan.strategy.target.file.max.bytes": "3000",
          "hoodie.index.bloom.num_entries": "100", "hoodie.index.bloom.fpp": "0.01"}


def _props(tmp_path: Path) -> str:
    path = tmp_path / "clustering.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in LAYOUT.items()))
    return str(path)


def _name(worker: HudiWorker, what: str) -> str:
    return f"{what}_{worker.setup.name.replace('.', '_').replace('-', '_')}"


def _signless(stat: ColumnStat) -> ColumnStat:
    return replace(stat, min_value="0.0" if stat.min_value == "-0.0" else stat.min_value)


@pytest.fixture(scope="module")
def _originals() -> dict[str, Path]:
    """The table each release wrote (see `_new_table`), by setup name: written on first use, never written to
    again."""
    return {}


def _new_table(worker: HudiWorker, base: Path, originals: dict[str, Path]
               ) -> tuple[dict[str, str], list[list[dict[str, Any]]]]:
    """A table the release wrote in three inserts at its defaults, metadata table on, at ``base``: a copy of the
    one it wrote once for the module (no absolute path in it, its metadata table included; the copy keeps the
    files' modification times), which saves a test three writes through Hudi."""
    options = events_writer_options(worker.setup, MDT_ON)
    batches = [event_rows(b) for b in range(3)]
    original = originals.get(worker.setup.name)
    if original is None:
        original = base.parent / f"original-{worker.setup.name}"
        for batch in batches:
            worker.write(batch, original, {**options, "hoodie.datasource.write.operation": "insert"},
                         schema=EVENTS_SCHEMA)
        originals[worker.setup.name] = original
    shutil.copytree(original, base)
    assert "files" in metadata_partitions(base)
    return options, batches


def _exact(worker: HudiWorker, base: Path, name: str, batches: list[list[dict[str, Any]]], *,
           skips: bool = True) -> None:
    """The metadata table lists what storage holds; Hudi reads every row once; data skipping is exact (and, with
    ``skips``, on a table with column statistics and our sorted files, reads fewer files than a full scan)."""
    validate_files(worker, base, name).assert_clean()
    assert events_by_key(worker.read(base)) == expected_events(batches)
    skipping = data_skipping_check(worker, base, "val >= 90", columns=COLUMNS)
    skipping.assert_exact()
    if skips and "column_stats" in metadata_partitions(base):
        assert skipping.files_scanned < skipping.files_total, skipping


@pytest.mark.parametrize("apache_hudi", COMPACTION_RUNS, indirect=True, scope="module")
def test_hudi_validates_reads_compacts_and_cleans_after_our_clustering(apache_hudi: HudiWorker,
                                                                       _originals: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    # Given a table Hudi writes at its defaults, metadata table on
    base = tmp_path / "mdt"
    name = _name(apache_hudi, "mdt")
    options, batches = _new_table(apache_hudi, base, _originals)
    # When the daemon clusters it
    clusterd("cluster", "--force", "--base-path", str(base), "--props", _props(tmp_path))
    [t] = clusterings(base)
    # Then the metadata table lists the new files, Hudi reads exactly, and on 1.2 data skipping uses their stats
    _exact(apache_hudi, base, name, batches)
    new_files = sorted(p.name for p in base.rglob(f"*_{t}.parquet"))
    assert len(new_files) > 2, new_files
    if "column_stats" in metadata_partitions(base):
        theirs = column_stats(apache_hudi, base, name, files=new_files, columns=COLUMNS)
        # (a zero minimum reads as -0.0 through parquet-mr, as Hudi stores its own files' statistics)
        assert [_signless(c) for c in theirs] == [_signless(c) for c in parquet_column_stats(base, new_files, COLUMNS)]
    # When Hudi upserts into our file groups, compacting its metadata table over our log files, then cleans and
    # archives
    for b in range(3):
        update = [{**r, "val": r["val"] + 100.0 * (b + 1), "ts": 10 + b} for r in batches[0][b * 5:(b + 1) * 5]]
        apache_hudi.write(update, base, {**options, **SERVICES}, schema=EVENTS_SCHEMA)
        batches.append(update)
    assert any(c > t for c in mdt_compactions(base)), mdt_compactions(base)
    # Then every read stays exact, and the cleaner deleted the files our clustering replaced
    _exact(apache_hudi, base, name, batches)
    assert not [p for p in base.rglob("*.parquet") if p.name.rsplit("_", 1)[-1] < f"{t}.parquet"
                and ".hoodie" not in p.parts], "the cleaner left replaced files"


@pytest.mark.parametrize("apache_hudi", DEFAULTS, indirect=True, scope="module", ids=[s.name for s in DEFAULTS])
def test_our_rollback_of_a_clustering_whose_metadata_deltacommit_completed(
        apache_hudi: HudiWorker, spark: Any, _originals: dict[str, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner

    # Given a table Hudi writes at its defaults, and a clustering of ours that fails right after its metadata
    # deltacommit completed (the data replacecommit is not written)
    base = tmp_path / "mdt"
    name = _name(apache_hudi, "rb")
    _options, batches = _new_table(apache_hudi, base, _originals)
    table = HoodieTable.open(str(base))
    scheduled = schedule(table, make_policy(**LAYOUT), force=True)
    assert scheduled.instant is not None
    t = scheduled.instant
    create = TimelineStore.create

    def failing(self: TimelineStore, instant: Any, data: bytes = b"") -> Any:
        if instant.time == t and instant.state is State.COMPLETED and instant.action.is_replace:
            raise OSError("injected: the host died before the replacecommit")
        return create(self, instant, data)

    monkeypatch.setattr(TimelineStore, "create", failing)
    runner = SparkGroupRunner(spark, owns_session=False)
    with pytest.raises(ExecutionError, match="injected"):
        execute_pending(table, runner, t, parallelism=1)  # it rolls the attempt back, then reports the failure
    monkeypatch.undo()
    mdt_timeline = base / ".hoodie" / "metadata" / ".hoodie"
    assert not list(mdt_timeline.rglob(f"{t}*deltacommit*")), "the metadata deltacommit was not rolled back"
    # Then the metadata table lists what storage holds, and Hudi reads every row exactly once
    assert not clusterings(base)
    _exact(apache_hudi, base, name, batches, skips=False)  # (the ingested files all span val's whole range)
    # and the plan, still requested, clusters on the next run
    clusterd("execute", "--base-path", str(base), "--instant", t, "--props", _props(tmp_path))
    assert clusterings(base) == [t]
    assert table.timeline().find(t, Action.CLUSTERING) is not None
    _exact(apache_hudi, base, name, batches)
