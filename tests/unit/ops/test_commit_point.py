"""The commit point is a line: once a clustering's completed replacecommit exists it is committed, whatever fails
after it. Markers that cannot be deleted, a lock whose release fails, an error from the very write that made the
commit: the outcome is COMPLETED, never a rollback or a failure; the failed clean-up is logged, counted
(``hudi_clusterd_cleanup_failures_total``) and done at the next tick."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hudi_clusterd.errors import LockError, StorageError
from hudi_clusterd.lock import FileSystemLockProvider, LockOptions
from hudi_clusterd.ops.cleanup import Leftovers
from hudi_clusterd.ops.events import Broadcast, CleanupFailed, Event, Outcome, PlanFinished
from hudi_clusterd.ops.execute import Executor, execute
from hudi_clusterd.ops.ownership import Ownership
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.runtime.metrics import Metrics, MetricsObserver
from hudi_clusterd.runtime.reload import SettingsHolder
from hudi_clusterd.runtime.service import Daemon, TableWorker
from hudi_clusterd.settings import settings_from_properties
from hudi_clusterd.storage import PutMode
from hudi_clusterd.storage.base import FileInfo
from hudi_clusterd.storage.local import LocalStorage
from hudi_clusterd.table.heartbeat import heartbeat_path
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import TableGen, make_policy
from tests.harness.crash_harness import COLUMNS, check_recovered, completed_replace_file, hoodie_names, marker_files
from tests.harness.fault_injection import Fault, Rule, inject
from tests.harness.fault_storage import ArrowGroupRunner
from tests.harness.hudi_rs_checks import hudi_rs_rows

COMPLETED = r"^\.hoodie/(timeline/)?\d+(_\d+)?\.replacecommit$"
POLICY = make_policy(**{"hoodie.clustering.plan.strategy.sort.columns": "x", "hoodie.clustering.max.parallelism": "1"})
LOCK = LockOptions(timeout_s=10, stale_s=5)


class Recorded:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def notify(self, event: Event) -> None:
        self.events.append(event)

    def outcomes(self) -> list[tuple[str, Outcome]]:
        return [(e.instant, e.outcome) for e in self.events if isinstance(e, PlanFinished)]

    def cleanup_failed(self) -> list[tuple[str, str]]:
        return [(e.instant, e.step) for e in self.events if isinstance(e, CleanupFailed)]


@pytest.fixture(params=[6, 9], ids=["v6", "v9"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """Four commits over two partitions, and their rows."""
    base = tmp_path / "t"
    gen = TableGen(base, table_version=request.param)
    for i in range(4):
        gen.commit({"p1": [float(i), i + 0.25], "p2": [i + 0.5]},
                   extra_columns=lambda _p, n: {"v": pa.array([1] * n, pa.int64())})
    return base, hudi_rs_rows(base, COLUMNS, "id")


def cleanups(metrics: Metrics, step: str) -> float | None:
    return metrics.registry.get_sample_value("hudi_clusterd_cleanup_failures_total", {"table": "t", "step": step})


def test_markers_that_cannot_be_deleted_after_the_commit_point_leave_it_committed_counted_and_cleaned_next_tick(
        table: tuple[Path, list[dict[str, Any]]]) -> None:
    base, expected = table
    # Given a daemon whose storage refuses the deletion of a clustering's marker folder, once
    metrics, recorded = Metrics(), Recorded()
    props = {"clusterd.tables": "t", "clusterd.table.t.base.path": str(base), "clusterd.metrics.address": "off",
             "clusterd.commit.wait.seconds": "0", "hoodie.clustering.async.max.commits": "4",
             "hoodie.clustering.plan.strategy.sort.columns": "x"}
    daemon = Daemon(SettingsHolder(settings_from_properties(props, source="test")[0]), ArrowGroupRunner(),
                    Broadcast([MetricsObserver(metrics), recorded]))
    worker = TableWorker("t", daemon)
    storage = worker.open_table(daemon.settings.current, worker.spec).storage
    faults = inject(storage, Rule(Fault.REFUSED, r"^\.hoodie/\.temp/\d+$", "delete_dir"))
    daemon.runner = ArrowGroupRunner(storage)

    # When it ticks: schedules, executes and commits a clustering, then fails to delete its markers
    assert worker.guarded_tick()

    # Then the clustering is committed and reported so, its markers left, the failure counted and remembered
    [(instant, outcome)] = recorded.outcomes()
    assert outcome is Outcome.COMPLETED
    assert [op for _, op, _ in faults.fired] == ["delete_dir"]
    assert completed_replace_file(base, instant) is not None
    assert marker_files(base, instant), "the refused deletion left the markers"
    assert not (base / heartbeat_path(instant)).exists()  # the rest of the clean-up went on
    assert recorded.cleanup_failed() == [(instant, "markers")]
    assert cleanups(metrics, "markers") == 1
    assert cleanups(metrics, "heartbeat") == cleanups(metrics, "lock_release") == 0
    assert metrics.registry.get_sample_value("hudi_clusterd_plans_finished_total",
                                             {"table": "t", "outcome": "completed"}) == 1
    assert daemon.leftovers.pending(worker.table) == [instant]  # type: ignore[arg-type]

    # When it ticks again
    assert worker.guarded_tick()

    # Then the leftovers are gone, nothing more failed, the clustering was never rolled back or reported failed
    assert not marker_files(base, instant)
    assert daemon.leftovers.pending(worker.table) == []  # type: ignore[arg-type]
    assert cleanups(metrics, "markers") == 1
    assert recorded.outcomes() == [(instant, Outcome.COMPLETED)]
    assert not [n for n in hoodie_names(base) if "rollback" in n]
    check_recovered(base, expected, "after the next tick")


class ReleaseFailsAfterCommit:
    """The table's file lock, whose release fails once after the clustering's commit point (the lock file is
    given back first, as a release whose answer was lost would)."""

    def __init__(self, inner: FileSystemLockProvider, base: Path) -> None:
        self.inner = inner
        self.base = base
        self.fired = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @contextmanager
    def acquire(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        with self.inner.acquire(*args, **kwargs) as lease:
            yield lease
        if not self.fired and any(completed_replace_file(self.base, t) for t in _clusterings(self.base)):
            self.fired = True
            raise LockError(f"{self.base}/.hoodie/lock: release not answered (injected)")


def _clusterings(base: Path) -> set[str]:
    return {n.split(".")[0].split("_")[0] for n in hoodie_names(base) if "replacecommit" in n}


def test_a_lock_release_failing_after_the_commit_point_leaves_the_clustering_committed(
        table: tuple[Path, list[dict[str, Any]]]) -> None:
    base, expected = table
    storage = LocalStorage(str(base))
    lock = ReleaseFailsAfterCommit(FileSystemLockProvider(storage, LOCK), base)
    hoodie = HoodieTable.open(str(base), storage=storage, lock_provider=lock)  # type: ignore[arg-type]
    ownership, recorded, leftovers = Ownership(), Recorded(), Leftovers()
    scheduled = schedule(hoodie, POLICY, force=True, claim_with=ownership)
    assert scheduled.pending is not None and scheduled.claim is not None
    result = execute(scheduled.snapshot, scheduled.pending,
                     Executor(ArrowGroupRunner(storage), ownership, 1, recorded, commit_wait_s=0.0,
                              leftovers=leftovers), claim=scheduled.claim)
    instant = scheduled.pending.time
    assert lock.fired
    assert result.outcome is Outcome.COMPLETED, result
    assert recorded.outcomes() == [(instant, Outcome.COMPLETED)]
    assert recorded.cleanup_failed() == [(instant, "lock_release")]
    # the markers and heartbeat went all the same; a lock is not "tried again" (its provider's expiry frees it)
    assert not marker_files(base, instant) and not (base / heartbeat_path(instant)).exists()
    assert leftovers.pending(hoodie) == [instant]
    assert leftovers.retry(hoodie, recorded) == [instant]
    check_recovered(base, expected, "lock release failed after the commit point")


class LandsThenFails(LocalStorage):
    """Writes the completed replacecommit, then fails the call with an error that says nothing of what was done
    (not one the storage settles by reading back)."""

    failed = False

    def _put(self, rel: str, data: bytes, *, mode: PutMode, if_match: str | None) -> FileInfo | None:
        written = super()._put(rel, data, mode=mode, if_match=if_match)
        if not self.failed and re.search(COMPLETED, rel):
            self.failed = True
            raise StorageError(f"put {self.full_path(rel)}: connection reset by peer")
        return written


def test_an_error_from_the_write_that_made_the_commit_is_settled_by_the_timeline_not_rolled_back(
        table: tuple[Path, list[dict[str, Any]]]) -> None:
    base, expected = table
    storage = LandsThenFails(str(base))
    hoodie = HoodieTable.open(str(base), storage=storage, lock_provider=FileSystemLockProvider(storage, LOCK))
    ownership, recorded = Ownership(), Recorded()
    scheduled = schedule(hoodie, POLICY, force=True, claim_with=ownership)
    assert scheduled.pending is not None and scheduled.claim is not None
    result = execute(scheduled.snapshot, scheduled.pending,
                     Executor(ArrowGroupRunner(storage), ownership, 1, recorded, commit_wait_s=0.0),
                     claim=scheduled.claim)
    instant = scheduled.pending.time
    assert storage.failed
    assert result.outcome is Outcome.COMPLETED, result
    assert (result.files_written, result.files_replaced) == (4, 8)  # as the completed replacecommit records them
    assert recorded.outcomes() == [(instant, Outcome.COMPLETED)]
    assert not recorded.cleanup_failed()
    assert not [n for n in hoodie_names(base) if "rollback" in n]
    check_recovered(base, expected, "an error from the commit's own write")
