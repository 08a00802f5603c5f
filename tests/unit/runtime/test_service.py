"""The daemon: repeated failures drop a plan; a broken table does not stop the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.instant import State
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.ops.events import Event, TableObserved
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.runtime.reload import SettingsHolder
from hudi_clusterd.runtime.service import MAX_ATTEMPTS_PER_PLAN, Daemon, TableWorker
from hudi_clusterd.settings import settings_from_properties
from tests.builders import make_policy, small_table


class _BrokenRunner:
    """A group runner whose every group fails, as on a damaged input file."""

    def run_group(self, table: Any, instant: str, plan: Any, index: int, files: Any) -> list[WriteStat]:
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


def _daemon(tables: dict[str, Path], max_commits: str = "1000", observer: _Recorded | None = None) -> Daemon:
    props = {"clusterd.tables": ",".join(tables), "clusterd.metrics.address": "off",
             "hoodie.clustering.async.max.commits": max_commits}
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
