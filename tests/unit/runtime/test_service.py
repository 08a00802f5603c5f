"""The daemon: repeated failures drop a plan; a broken table does not stop the others; a busy one waits; a
storage that fails stops the tick's planning and the next tick plans."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.instant import Action, State
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.ops.events import Event, TableBusy, TableObserved
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.runtime import service
from hudi_clusterd.runtime.reload import SettingsHolder
from hudi_clusterd.runtime.service import MAX_ATTEMPTS_PER_PLAN, Daemon, TableWorker
from hudi_clusterd.settings import settings_from_properties
from hudi_clusterd.storage import Storage, StorageSpec, open_storage
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import make_policy, small_table
from tests.harness.fault_injection import Fault, Rule, inject
from tests.support import add_metadata_table


class _BrokenRunner:
    """A group runner whose every group fails, as on a damaged input file."""

    def run_group(self, table: Any, instant: str, plan: Any, index: int, files: Any,
                  merge: Any = None) -> list[WriteStat]:
        raise ExecutionError(f"group {index}: /t/p1/x.parquet: 0 bytes, not a Parquet file")

    def cancel(self, table: Any, instant: str) -> None:
        return None

    def close(self) -> None:
        return None


class _Recorded:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def notify(self, event: Event) -> None:
        self.events.append(event)


def _daemon(tables: dict[str, Path], max_commits: str = "1000", observer: _Recorded | None = None,
            **more: str) -> Daemon:
    props = {"clusterd.tables": ",".join(tables), "clusterd.metrics.address": "off",
             "hoodie.clustering.async.max.commits": max_commits, **more}
    props.update({f"clusterd.table.{n}.base.path": str(b) for n, b in tables.items()})
    return Daemon(SettingsHolder(settings_from_properties(props, source="test")[0]), _BrokenRunner(),
                  observer or _Recorded())


def test_table_worker_failing_groups_drop_plan_after_max_attempts(tmp_path: Path) -> None:
    gen = small_table(tmp_path)
    instant = schedule(gen.table, make_policy(), force=True).instant
    assert instant is not None
    worker = TableWorker("t", _daemon({"t": gen.base}))
    for attempt in range(1, MAX_ATTEMPTS_PER_PLAN + 1):
        worker.tick()  # logged, not raised
        states = [i.state for i in gen.table.timeline() if i.time == instant]
        assert states == ([State.REQUESTED] if attempt < MAX_ATTEMPTS_PER_PLAN else []), attempt


def test_daemon_run_once_broken_table_is_logged_and_others_still_ticked(tmp_path: Path) -> None:
    broken, healthy = small_table(tmp_path / "a"), small_table(tmp_path / "b")
    (broken.base / ".hoodie" / "hoodie.properties").write_bytes(b"hoodie.table.version=99\n")
    recorded = _Recorded()
    daemon = _daemon({"a": broken.base, "b": healthy.base}, max_commits="4", observer=recorded)
    with capture_logs() as logs:
        failed = daemon.run_once()
    assert failed == ["a"]
    assert [e["event"] for e in logs if e["log_level"] == "error" and e["event"] == "tick failed"] == ["tick failed"]
    observed = [e for e in recorded.events if isinstance(e, TableObserved)]
    assert [e.table for e in observed] == ["b"]  # b was ticked: planned, tried, reported
    assert observed[0].pending_plans == 1


def test_the_tick_that_schedules_a_plan_reports_no_commits_since_clustering(tmp_path: Path) -> None:
    # Given a table with 4 commits and a trigger at 4, and one with 3 (not yet due)
    due, waiting = small_table(tmp_path / "a"), small_table(tmp_path / "b", commits=3)
    recorded = _Recorded()
    daemon = _daemon({"a": due.base, "b": waiting.base}, max_commits="4", observer=recorded)
    # When each table is ticked once (a's plan is scheduled; its groups then fail)
    daemon.run_once()
    # Then a's gauge counts from the plan just saved (the newest clustering instant), b's from the start
    observed = {e.table: e for e in recorded.events if isinstance(e, TableObserved)}
    assert (observed["a"].commits_since_clustering, observed["a"].pending_plans) == (0, 1)
    assert (observed["b"].commits_since_clustering, observed["b"].pending_plans) == (3, 0)


def _busy(base: Path, kind: str) -> tuple[str, Callable[[], None]]:
    """Make the metadata table of the table at ``base`` busy with another writer's half-done work of ``kind``;
    what the refusal names, and how that writer finishes the work."""
    timeline = base / ".hoodie" / "metadata" / ".hoodie"
    if kind == "compaction":
        pending = timeline / "20260101000000000001.compaction.requested"
        pending.write_bytes(b"")
        return "compaction 20260101000000000001 is pending", pending.unlink
    props = base / ".hoodie" / "hoodie.properties" if kind == "indexing" else timeline / "hoodie.properties"
    before = props.read_text()
    props.write_text(before + ("hoodie.table.metadata.partitions.inflight=column_stats\n" if kind == "indexing"
                               else "hoodie.table.version=8\n"))

    def finish() -> None:
        props.write_text(before)

    return ("partitions.inflight=column_stats" if kind == "indexing" else "hoodie.table.version=8 differs"), finish


@pytest.mark.parametrize("kind", ["compaction", "indexing", "upgrade"])
def test_a_tick_that_finds_the_metadata_table_busy_is_deferred_not_failed(tmp_path: Path, kind: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    gen = small_table(tmp_path)
    add_metadata_table(gen.base)
    instant = schedule(HoodieTable.open(str(gen.base)), make_policy(), force=True).instant
    assert instant is not None
    # Given a writer's compaction, partitions or upgrade of the metadata table half done
    named, finish = _busy(gen.base, kind)
    recorded = _Recorded()
    daemon = _daemon({"t": gen.base}, max_commits="4", observer=recorded)
    # When the table is ticked more often than a failing plan may fail
    with capture_logs() as logs:
        for _ in range(MAX_ATTEMPTS_PER_PLAN + 1):
            assert daemon.run_once() == []
    # Then every tick was deferred, logged at info, naming the work; no error, and the plan stays
    assert [(e["event"], e["log_level"]) for e in logs] == [("tick deferred: the table is busy", "info")] * (
        MAX_ATTEMPTS_PER_PLAN + 1)
    assert all(named in e["reason"] for e in logs), logs[0]["reason"]
    assert [i.state for i in gen.table.timeline() if i.time == instant] == [State.REQUESTED]
    assert [type(e) for e in recorded.events] == [TableBusy] * (MAX_ATTEMPTS_PER_PLAN + 1)
    # A daemon's worker reports for how long; past BUSY_WARN_S it logs a warning (an indexer at work, or its
    # writers stopped)
    worker = TableWorker("t", daemon)
    monkeypatch.setattr(service, "BUSY_WARN_S", 0.05)
    recorded.events.clear()
    with capture_logs() as logs:
        assert worker.guarded_tick()
        time.sleep(0.1)
        assert worker.guarded_tick()
    assert [e["log_level"] for e in logs] == ["info", "warning"]
    busy = [e for e in recorded.events if isinstance(e, TableBusy)]
    assert busy[0].seconds == 0 and busy[1].seconds >= 0.1
    # Once the writer has finished, the next tick reports the table free and runs the plan (whose groups fail
    # in this runner)
    finish()
    recorded.events.clear()
    with capture_logs() as logs:
        assert worker.guarded_tick()
    assert "clustering failed" in [e["event"] for e in logs]
    assert [e for e in recorded.events if isinstance(e, TableBusy)] == [TableBusy("t", 0.0)]


def _plans(base: Path) -> list[str]:
    return [i.time for i in HoodieTable.open(str(base)).timeline()
            if i.action in (Action.CLUSTERING, Action.REPLACE_COMMIT)]


STOPPED = ("warning", "tick stopped: the storage failed; the next tick tries again")


@pytest.mark.parametrize(("fault", "logged"), [(Fault.TIMEOUT_BEFORE, STOPPED), (Fault.THROTTLED, STOPPED),
                                               (Fault.REFUSED, ("error", "tick failed"))])
def test_a_footer_the_storage_did_not_answer_stops_the_tick_and_the_next_tick_plans(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: Fault, logged: tuple[str, str]) -> None:
    # Given a table due for clustering by a sort column, whose storage fails to answer one read of a base file
    gen = small_table(tmp_path)
    rules = [Rule(fault, r"\.parquet$", op="read")]
    fired: list[list[tuple[Fault, str, str]]] = []

    def faulty(spec: StorageSpec) -> Storage:
        storage = open_storage(spec)
        fired.append(inject(storage, *rules).fired)
        return storage

    monkeypatch.setattr(service, "open_storage", faulty)
    worker = TableWorker("t", _daemon({"t": gen.base}, max_commits="4", **{
        "hoodie.clustering.plan.strategy.sort.columns": "x"}))
    # When the table is ticked
    with capture_logs() as logs:
        assert not worker.guarded_tick()
    # Then the footer read failed, no plan was written, and the tick said so in one line: a warning, or an error
    # when the storage refused this process (its configuration must change)
    assert [(f, op) for f, op, _ in fired[0]] == [(fault, "read")]
    assert _plans(gen.base) == []
    assert [(e["log_level"], e["event"]) for e in logs if e["log_level"] in ("warning", "error")] == [logged]
    assert "injected" in logs[-1]["error"]
    # And the next tick plans (its groups then fail in this runner)
    with capture_logs() as logs:
        worker.guarded_tick()
    assert "clustering plan saved" in [e["event"] for e in logs] and len(set(_plans(gen.base))) == 1


def test_a_damaged_base_file_is_planned_around(tmp_path: Path) -> None:
    # Given a table due for clustering by a sort column, one of whose small files is damaged
    gen = small_table(tmp_path)
    damaged = sorted((gen.base / "p1").glob("*.parquet"))[0]
    damaged.write_bytes(b"\x00not parquet" * 10)
    # When it is scheduled, the plan is made, with one warning naming the file
    with capture_logs() as logs:
        result = schedule(HoodieTable.open(str(gen.base)), make_policy(**{"sort.columns": "x"}), force=True)
    assert result.plan is not None and result.instant is not None
    warned = [e for e in logs if e["log_level"] == "warning"]
    assert [(e["event"], e["file"]) for e in warned] == [
        ("damaged parquet footer; planned without its column range", f"p1/{damaged.name}")]
