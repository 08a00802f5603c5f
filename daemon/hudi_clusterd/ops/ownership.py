"""Who executes a pending clustering plan: claiming it, keeping its heartbeat, telling live owners from dead ones.

A plan is claimed under the table lock by creating its (empty) ``T.replacecommit.inflight`` and a heartbeat
``.hoodie/.heartbeat/T`` naming its owner (``host:pid:token``). An inflight plan whose owner is alive (a fresh
heartbeat; on this host, a running process; in this process, an instant this `Ownership` is running) is left
alone, so two executors never run one plan. One left by a dead owner is rolled back (its files deleted, the
requested plan kept) and claimed afresh.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from dataclasses import dataclass

import structlog

from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import PendingPlan
from hudi_clusterd.domain.planner import scheduled_by_us
from hudi_clusterd.errors import ClusterdError, PlanError
from hudi_clusterd.table.heartbeat import (
    CLUSTERING_INTERVAL_S,
    CLUSTERING_TIMEOUT_S,
    Heartbeat,
    heartbeat_age,
    heartbeat_owner,
    process_owner,
)
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.rollback import rollback_pending

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Claim:
    """A plan this process is executing, and the heartbeat that says so."""

    table: HoodieTable
    pending: PendingPlan
    heartbeat: Heartbeat

    @property
    def instant(self) -> str:
        return self.pending.time


class Ownership:
    """The claims of one executor (a daemon, or one command run)."""

    def __init__(self, *, interval_s: float = CLUSTERING_INTERVAL_S, timeout_s: float = CLUSTERING_TIMEOUT_S
                 ) -> None:
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.token = uuid.uuid4().hex[:12]
        self.owner = process_owner(self.token)
        self._running: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def is_running(self, table: HoodieTable, instant: str) -> bool:
        with self._lock:
            return (table.base_path, instant) in self._running

    def owner_alive(self, table: HoodieTable, instant: str) -> bool:
        """Whether an inflight plan's executor is alive: a fresh heartbeat whose process, on this host, still
        exists; for a heartbeat of this very `Ownership`, whether it is running the plan now."""
        age = heartbeat_age(table.storage, instant)
        if age is None or age > self.timeout_s:
            return False
        owner = heartbeat_owner(table.storage, instant)
        if owner is None:
            return True  # fresh but not ours to read: assume a live writer of another kind
        host, pid, token = _parse_owner(owner)
        if host != socket.gethostname() or pid is None:
            return True
        if pid == os.getpid():
            return self.is_running(table, instant) if token == self.token else True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def claim(self, table: HoodieTable, pending: PendingPlan, *, locked: bool = False) -> Claim | None:
        """Take ``pending`` for execution; None when another live executor owns it. ``locked``: the caller holds
        the table lock already. The state is re-checked on storage (no listing).

        A plan another writer scheduled (not `scheduled_by_us`) is claimed only while it is requested: once
        inflight it is that writer's to finish or roll back (Apache Hudi writes no heartbeat for clustering, so
        a missing heartbeat does not mean its executor is dead). A claim whose heartbeat cannot be written deletes
        its inflight file again and raises: the plan stays requested for the next tick."""
        if not locked:
            with table.lock():
                return self.claim(table, pending, locked=True)
        instant = pending.time
        store = table.timeline_store
        if store.exists(Instant(instant, Action.REPLACE_COMMIT, State.COMPLETED)):
            raise PlanError(f"clustering {instant} is already completed")
        requested = Instant(instant, Action.CLUSTERING, State.REQUESTED)
        if not store.exists(requested):
            raise PlanError(f"no clustering plan {instant} on the timeline of {table.base_path} (rolled back or "
                            "purged meanwhile)")
        if store.exists(requested.with_state(State.INFLIGHT)):
            if not scheduled_by_us(pending.plan):
                raise PlanError(f"clustering {instant} was scheduled by another writer and is inflight: it is that "
                                "writer's to finish or roll back (Apache Hudi writes no heartbeat for clustering); "
                                f"to take it over, roll it back first: hudi-clusterd rollback --instant {instant} "
                                "--force")
            if self.owner_alive(table, instant):
                return None
            result = rollback_pending(table, instant, Action.CLUSTERING, take_lock=False)
            if result is not None:
                log.warning("rolled back abandoned clustering", instant=instant,
                            deleted_files=len(result.deleted_files))
        inflight = store.create(requested.with_state(State.INFLIGHT), b"")
        heartbeat = Heartbeat(table.storage, instant, interval_s=self.interval_s, owner=self.owner)
        try:
            heartbeat.start()
        except ClusterdError:
            store.delete(inflight)  # not claimed after all: the plan stays requested for the next tick
            raise
        with self._lock:
            self._running.add((table.base_path, instant))
        return Claim(table, pending, heartbeat)

    def release(self, claim: Claim, *, delete_heartbeat: bool = True) -> None:
        """Stop the claim's heartbeat (deleting its file unless told not to) and forget it; a second release of
        the same claim does nothing."""
        with self._lock:
            key = (claim.table.base_path, claim.instant)
            if key not in self._running:
                return
            self._running.discard(key)
        claim.heartbeat.stop(delete=delete_heartbeat)


def _parse_owner(owner: str) -> tuple[str, int | None, str]:
    """``host:pid[:token]`` → (host, pid or None, token or "")."""
    parts = owner.split(":")
    if len(parts) >= 3 and parts[-2].isdigit():
        return ":".join(parts[:-2]), int(parts[-2]), parts[-1]
    if len(parts) >= 2 and parts[-1].isdigit():
        return ":".join(parts[:-1]), int(parts[-1]), ""
    return owner, None, ""

