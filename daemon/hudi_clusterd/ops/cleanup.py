"""The clean-up after a clustering's commit point: its markers, its heartbeat and the table lock's release.

Once the completed replacecommit exists the clustering is committed, whatever happens next: readers see it, and
nothing may roll it back. What follows is clean-up. A step of it that fails (the store refuses, throttles past the
retry deadline, does not answer) is logged, reported (`CleanupFailed`, which the daemon's metrics count) and
remembered in `Leftovers`; the daemon's next tick of the table removes the markers and heartbeat again. A process
that stops before then leaves them to the next daemon start or ``hudi-clusterd execute``
(`ops.recovery.clean_completed_leftovers`). A lock whose release failed is freed by its provider's own expiry.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

import structlog

from hudi_clusterd.errors import ClusterdError
from hudi_clusterd.ops.events import CleanupFailed, Observer
from hudi_clusterd.table.heartbeat import heartbeat_path
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.markers import delete_markers

log = structlog.get_logger(__name__)

MARKERS = "markers"
HEARTBEAT = "heartbeat"
LOCK_RELEASE = "lock_release"
STEPS = (MARKERS, HEARTBEAT, LOCK_RELEASE)
"""The steps of the clean-up after the commit point (the ``step`` label of the daemon's counter)."""

__all__ = ["HEARTBEAT", "LOCK_RELEASE", "MARKERS", "STEPS", "CleanupFailure", "Leftovers", "remove_leftovers",
           "report"]


@dataclass(frozen=True, slots=True)
class CleanupFailure:
    """One step of the clean-up after the commit point that failed, and why."""

    step: str
    error: str


def remove_leftovers(table: HoodieTable, instant: str) -> list[CleanupFailure]:
    """Delete the markers and the heartbeat of committed clustering ``instant`` (either may be gone already);
    the steps that failed."""
    failures: list[CleanupFailure] = []
    try:
        delete_markers(table.storage, instant)
    except ClusterdError as e:
        failures.append(CleanupFailure(MARKERS, str(e)))
    try:
        table.storage.delete(heartbeat_path(instant), missing_ok=True)
    except ClusterdError as e:
        failures.append(CleanupFailure(HEARTBEAT, str(e)))
    return failures


def report(observer: Observer, table: HoodieTable, instant: str, failures: Iterable[CleanupFailure]) -> None:
    """Log and report each failed step of a committed clustering's clean-up."""
    for f in failures:
        log.warning("clean-up after the commit point failed; the clustering is committed, the step is tried again "
                    "at the next tick", instant=instant, step=f.step, error=f.error)
        observer.notify(CleanupFailed(table.name, instant, f.step, f.error))


class Leftovers:
    """Committed clusterings of this process whose clean-up failed, by table: tried again at the table's next
    tick (`retry`)."""

    def __init__(self) -> None:
        self._instants: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def add(self, table: HoodieTable, instant: str) -> None:
        with self._lock:
            self._instants.setdefault(table.base_path, set()).add(instant)

    def pending(self, table: HoodieTable) -> list[str]:
        """The instants of ``table`` whose clean-up is still to be done."""
        with self._lock:
            return sorted(self._instants.get(table.base_path, ()))

    def retry(self, table: HoodieTable, observer: Observer) -> list[str]:
        """Remove the markers and heartbeats of ``table``'s committed clusterings whose clean-up failed; returns
        the instants cleaned now (the others are reported again and kept for the next tick)."""
        cleaned: list[str] = []
        for instant in self.pending(table):
            failures = remove_leftovers(table, instant)
            if failures:
                report(observer, table, instant, failures)
                continue
            with self._lock:
                self._instants.get(table.base_path, set()).discard(instant)
            log.info("clean-up of a committed clustering done at a later tick", instant=instant)
            cleaned.append(instant)
        return cleaned
