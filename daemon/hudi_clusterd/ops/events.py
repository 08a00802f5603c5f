"""What table operations report as they go: typed events, and the observers that receive them.

Operations never call metrics or print: they hand events to an `Observer`. The daemon's Prometheus metrics
and logs (``hudi_clusterd.runtime``) and the one-shot commands' progress lines (``hudi_clusterd.commands``) are
observers of the same events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol


class Outcome(StrEnum):
    """How the execution of one plan ended."""

    COMPLETED = "completed"  # committed
    FAILED = "failed"  # a group failed; rolled back, the plan kept for a retry
    ROLLED_BACK = "rolled_back"  # cancelled (shutdown) and rolled back
    CONFLICT = "conflict"  # ingestion moved every group: nothing replaced (our plan commits empty; another
    # writer's plan is rolled back and kept)
    SKIPPED = "skipped"  # nothing to run, or another live executor owns the plan


@dataclass(frozen=True, slots=True)
class PlanScheduled:
    table: str
    instant: str
    groups: int
    slices: int
    input_bytes: int
    reason: str


@dataclass(frozen=True, slots=True)
class PlanStarted:
    table: str
    instant: str
    groups: int
    slices: int
    input_bytes: int


@dataclass(frozen=True, slots=True)
class GroupStarted:
    table: str
    instant: str
    group: int  # 0-based
    groups: int
    partition: str
    slices: int


@dataclass(frozen=True, slots=True)
class GroupFinished:
    table: str
    instant: str
    group: int
    groups: int
    files: int
    bytes: int
    seconds: float
    ok: bool = True


@dataclass(frozen=True, slots=True)
class PlanFinished:
    table: str
    instant: str
    outcome: Outcome
    seconds: float
    files_replaced: int = 0
    bytes_replaced: int = 0
    files_written: int = 0
    bytes_written: int = 0
    message: str = ""
    layout_before: float | None = None
    layout_after: float | None = None
    requests: dict[str, int] = field(default_factory=dict)
    """Requests the daemon's process made to the table's object store meanwhile, by kind (none off object
    stores)."""
    lock_held_s: float = 0.0
    """How long the table lock was held meanwhile, over every holding."""


@dataclass(frozen=True, slots=True)
class TableObserved:
    """The state of a table as one tick saw it."""

    table: str
    commits_since_clustering: int
    pending_plans: int
    oldest_pending_age_s: float | None
    files: int
    small_files: int
    compaction_blocked_s: float = 0.0
    """How long a pending clustering may have kept Hudi from scheduling compaction (a version-6 merge-on-read table)."""


@dataclass(frozen=True, slots=True)
class TableBusy:
    """A tick found the table busy with another writer's half-done work, for ``seconds`` so far; 0 when a tick
    after such ticks found it free."""

    table: str
    seconds: float


@dataclass(frozen=True, slots=True)
class LayoutMeasured:
    """The files-scanned ratio of a table's latest snapshot on its sort columns."""

    table: str
    columns: tuple[str, ...]
    ratio: float


@dataclass(frozen=True, slots=True)
class TableUsage:
    """What one tick of a table cost, since the previous report: requests to its object store by kind, how long
    each holding of its lock lasted, and what its lock provider counted."""

    table: str
    requests: dict[str, int]
    lock_holds: tuple[float, ...]
    lock_connection_retries: int
    lock_takeovers: int
    leases_lost: int


@dataclass(frozen=True, slots=True)
class CleanupFailed:
    """A step of the clean-up after a clustering's commit point failed (``step``: ``markers``, ``heartbeat`` or
    ``lock_release``); the clustering stays committed, and the step is tried again at the table's next tick."""

    table: str
    instant: str
    step: str
    error: str


Event = (PlanScheduled | PlanStarted | GroupStarted | GroupFinished | PlanFinished | TableObserved | TableBusy
         | LayoutMeasured | TableUsage | CleanupFailed)


class Observer(Protocol):
    """Receives events; called from the thread doing the work (group events from pool threads)."""

    def notify(self, event: Event) -> None: ...


class NoObserver:
    """Drops every event."""

    def notify(self, event: Event) -> None:
        return None


class Broadcast:
    """Passes each event to several observers, in order."""

    def __init__(self, observers: Iterable[Observer]) -> None:
        self.observers = tuple(observers)

    def notify(self, event: Event) -> None:
        for observer in self.observers:
            observer.notify(event)
