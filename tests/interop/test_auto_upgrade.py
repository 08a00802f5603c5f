"""Apache Hudi 1.2 upgrades a version-6 table to version 9 underneath a plan of the daemon's (issue #20, point 6).

A Hudi 1.1+ writer with its defaults (``hoodie.write.auto.upgrade=true``, write version 9) upgrades a version-6
table on its first write: every instant file moves into ``.hoodie/timeline/``, completed commits are rewritten in
Avro with completion times, and a pending clustering ``replacecommit`` becomes a ``clustering``. The daemon reads
``hoodie.properties`` again before every step, so a plan it holds follows the table: one only requested is then
executed in layout 2, and one inflight (claimed, its groups written) commits in layout 2. Nothing is lost, and
Hudi and hudi-rs read exactly the rows written.

The table starts as Hudi 1.2 writes version 6 (``HUDI_1_2_V6``); the upgrading writer is the same worker with the
version-9 setup's options. Both share the session's Hudi 1.2 worker.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.domain.instant import State
from hudi_clusterd.ops.execute import Executor, execute
from hudi_clusterd.ops.ownership import Ownership
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.ops.snapshot import TableSnapshot
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import EVENTS_SCHEMA, event_rows, events_by_key, expected_events, make_policy
from tests.harness.apache_hudi import HudiWorker, HudiWorkers, events_writer_options
from tests.harness.daemon_harness import clusterd, clusterings, completed_file, instant_names, table_version
from tests.harness.hudi_rs_checks import hudi_rs_rows
from tests.harness.hudi_versions import HUDI_1_2_V6, HUDI_1_2_V9

pytestmark = [pytest.mark.hudi, pytest.mark.integration, pytest.mark.spark,
              pytest.mark.usefixtures("spark")]  # clusterd(...) runs in this process, on the session's Spark


@pytest.fixture(scope="module")
def _v6_original(hudi_workers: HudiWorkers, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The version-6 table Hudi 1.2 wrote in three inserts, once for the module (never written to again)."""
    base = tmp_path_factory.mktemp("v6-original") / "events"
    options = {**events_writer_options(HUDI_1_2_V6), "hoodie.datasource.write.operation": "insert"}
    worker = hudi_workers.for_setup(HUDI_1_2_V6)
    for b in range(3):
        worker.write(event_rows(b), base, options, schema=EVENTS_SCHEMA)
    assert table_version(base) == 6
    return base


def _v6_table(original: Path, base: Path) -> list[list[dict[str, Any]]]:
    """A copy of the module's version-6 table at ``base`` (a table holds no absolute path until a plan names its
    files; the copy keeps the files' modification times) and the batches it holds."""
    shutil.copytree(original, base)
    return [event_rows(b) for b in range(3)]


def _upgrade_by_writing(worker: HudiWorker, base: Path, batches: list[list[dict[str, Any]]]) -> None:
    """An insert by a Hudi 1.2 writer at its defaults (version 9, auto-upgrade on): the table becomes version 9."""
    batch = event_rows(len(batches))
    worker.write(batch, base, {**events_writer_options(HUDI_1_2_V9), "hoodie.datasource.write.operation": "insert"},
                 schema=EVENTS_SCHEMA)
    batches.append(batch)
    assert table_version(base) == 9
    assert not [p.name for p in (base / ".hoodie").iterdir() if p.is_file() and p.name[:1].isdigit()]


def _rows_exact(worker: HudiWorker, base: Path, batches: list[list[dict[str, Any]]]) -> None:
    expected = expected_events(batches)
    assert events_by_key(worker.read(base)) == expected
    theirs = {r["id"]: (r["part"], r["val"], r["ts"]) for r in hudi_rs_rows(base, ["id", "part", "val", "ts"], "id")}
    assert theirs == expected


@pytest.fixture
def hudi_1_2(hudi_workers: HudiWorkers) -> HudiWorker:
    return hudi_workers.for_setup(HUDI_1_2_V6)


def test_a_requested_plan_is_moved_by_the_upgrade_and_executed_in_layout_2(hudi_1_2: HudiWorker, _v6_original: Path,
                                                                           tmp_path: Path) -> None:
    # Given a version-6 table and a plan the daemon scheduled (requested, not started)
    base = tmp_path / "events"
    batches = _v6_table(_v6_original, base)
    out = clusterd("schedule", "--base-path", str(base), "--force")
    assert "scheduled clustering " in out, out
    t = out.split("scheduled clustering ", 1)[1].split(":", 1)[0]
    assert (base / ".hoodie" / f"{t}.replacecommit.requested").is_file()
    # When a Hudi 1.2 writer at its defaults writes, upgrading the table to version 9
    _upgrade_by_writing(hudi_1_2.for_setup(HUDI_1_2_V9), base, batches)
    # Then the plan is a pending clustering of layout 2, and the daemon executes it there
    assert f"{t}.clustering.requested" in instant_names(base)
    clusterd("execute", "--base-path", str(base), "--instant", t)
    done = completed_file(base, t, "replacecommit")
    assert done.path.parent.name == "timeline" and done.completion is not None and done.completion > t
    assert clusterings(base) == [t]
    _rows_exact(hudi_1_2, base, batches)


def test_an_inflight_plan_commits_in_layout_2_after_the_upgrade(hudi_1_2: HudiWorker, _v6_original: Path,
                                                                 spark: Any, tmp_path: Path) -> None:
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner

    # Given a version-6 table and a plan the daemon scheduled and claimed (inflight, its heartbeat beating)
    base = tmp_path / "events"
    batches = _v6_table(_v6_original, base)
    table = HoodieTable.open(str(base))
    ownership = Ownership()
    scheduled = schedule(table, make_policy(), force=True, claim_with=ownership)
    assert scheduled.pending is not None and scheduled.claim is not None
    t = scheduled.pending.time
    assert (base / ".hoodie" / f"{t}.replacecommit.inflight").is_file()
    snapshot = TableSnapshot.load(table)
    pending = snapshot.pending_plan(t)
    assert pending is not None and pending.instant.state is State.INFLIGHT
    # When a Hudi 1.2 writer at its defaults writes while the plan is inflight, upgrading the table to version 9
    _upgrade_by_writing(hudi_1_2.for_setup(HUDI_1_2_V9), base, batches)
    assert f"{t}.clustering.inflight" in instant_names(base)
    # and the daemon runs the plan's groups and commits
    runner = SparkGroupRunner(spark, owns_session=False)
    result = execute(snapshot, pending, Executor(runner, ownership, parallelism=2, commit_wait_s=0),
                     claim=scheduled.claim)
    # Then the clustering completes in layout 2, and every row reads exactly once
    assert result.outcome == "completed", result.message
    done = completed_file(base, t, "replacecommit")
    assert done.path.parent.name == "timeline" and done.completion is not None
    assert clusterings(base) == [t]
    _rows_exact(hudi_1_2, base, batches)
