"""Crash points in this process over any table (`tests/harness/fault_storage.py`): one daemon tick's writes
(schedule with the claim, execute every group on `ArrowGroupRunner`, commit, clean up) on a `FaultyStorage`, the
dead process's heartbeats stopped when it dies, and the recovery that follows (the lock taken over, then
``ops.recovery.recover`` and ``execute_pending``), as ``tests/unit/ops/test_crash_points_inprocess.py`` runs them on
copy-on-write tables and ``tests/unit/ops/test_crash_points_mor.py`` on merge-on-read ones."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hudi_clusterd.domain.policy import ClusteringPolicy
from hudi_clusterd.lock import FileSystemLockProvider, LockOptions
from hudi_clusterd.ops.events import Outcome
from hudi_clusterd.ops.execute import Executor, execute, execute_pending
from hudi_clusterd.ops.ownership import Claim, Ownership
from hudi_clusterd.ops.recovery import recover
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.ops.snapshot import TableSnapshot
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.harness.fault_storage import ArrowGroupRunner, FaultyStorage, SimulatedCrash

STALE_S = 0.05  # the dead process's lock is taken over this long after its last beat
LOCK = LockOptions(timeout_s=10, stale_s=STALE_S)


class TrackingOwnership(Ownership):
    """An `Ownership` that remembers its claims, so that the heartbeat threads of a dead "process" can be stopped
    (a killed process's threads die with it)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.claims: list[Claim] = []

    def claim(self, table: HoodieTable, pending: Any, *, locked: bool = False) -> Claim | None:
        got = super().claim(table, pending, locked=locked)
        if got is not None:
            self.claims.append(got)
        return got

    def die(self) -> None:
        for c in self.claims:
            c.heartbeat.stop(delete=False)


def open_faulty(base: Path, storage: FaultyStorage) -> HoodieTable:
    return HoodieTable.open(str(base), storage=storage, lock_provider=FileSystemLockProvider(storage, LOCK))


def daemon_cycle(base: Path, storage: FaultyStorage, policy: ClusteringPolicy) -> str:
    """One daemon tick's writes on a table that needs clustering: schedule and claim under one lock hold, execute
    every group, commit, clean up. Returns the instant; raises `SimulatedCrash` where the storage dies."""
    table = open_faulty(base, storage)
    ownership = TrackingOwnership()
    try:
        scheduled = schedule(table, policy, force=True, claim_with=ownership)
        assert scheduled.pending is not None and scheduled.claim is not None
        result = execute(scheduled.snapshot, scheduled.pending, Executor(ArrowGroupRunner(storage), ownership, 1),
                         claim=scheduled.claim)
        assert result.outcome is Outcome.COMPLETED, result
        return scheduled.pending.time
    except SimulatedCrash:
        ownership.die()
        raise


def take_over_lock(base: Path) -> None:
    """The next writer takes the dead process's lock over once stale (or finds none); it comes an hour later (its
    clock), so the lock is stale at once."""
    with FileSystemLockProvider(HoodieTable.open(str(base)).storage, LOCK, clock=lambda: time.time() + 3600).held():
        pass


def recover_table(base: Path, storage: FaultyStorage | None = None) -> list[str]:
    """What the next daemon start (or ``hudi-clusterd execute``) does: recovery, then every pending plan. The
    dead executor's heartbeat is as fresh as its process is alive here, so the recovering executor counts a
    heartbeat of another owner as dead at once (``timeout_s=0``), as it would once the dead one's beats stopped."""
    storage = storage or FaultyStorage(str(base))
    table = open_faulty(base, storage)
    ownership = TrackingOwnership(timeout_s=0.0)
    try:
        take_over_lock(base)
        recover(TableSnapshot.load(table), ownership)
        outcomes = []
        for _ in range(5):
            result = execute_pending(table, ArrowGroupRunner(storage), ownership=ownership, parallelism=1)
            if result.outcome is Outcome.SKIPPED:
                break
            outcomes.append(str(result.outcome))
        return outcomes
    except SimulatedCrash:
        ownership.die()
        raise


def copies(source: Path, folder: Path) -> Callable[[], Path]:
    """Factory: at each call a fresh copy of the table ``source`` in ``folder`` (``t1``, ``t2``, ...), one per
    crash point."""
    n = 0

    def _copy() -> Path:
        nonlocal n
        n += 1
        dest = folder / f"t{n}"
        shutil.copytree(source, dest)
        return dest

    return _copy
