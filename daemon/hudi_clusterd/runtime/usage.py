"""What each tick of a table cost, as a `TableUsage` event: the requests its storage made and what its lock did
since the previous report (the counters live on the table's storage and lock provider for the life of the open
table; this turns them into deltas, starting afresh when the table is opened again)."""

from __future__ import annotations

from hudi_clusterd.ops.events import Observer, TableUsage
from hudi_clusterd.storage.requests import difference
from hudi_clusterd.table.hoodie_table import HoodieTable


class UsageReport:
    """Deltas of one table's counters between two calls of `since_last`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._table: HoodieTable | None = None
        self._requests: dict[str, int] = {}
        self._lock = (0, 0, 0)

    def since_last(self, table: HoodieTable | None) -> TableUsage | None:
        """The usage since the previous call (None when there is nothing to report)."""
        if table is None:
            return None
        if table is not self._table:  # opened again: its counters start from zero
            self._table, self._requests, self._lock = table, {}, (0, 0, 0)
        counts = table.storage.requests
        now = counts.snapshot() if counts is not None else {}
        requests = difference(now, self._requests)
        stats = table.lock_provider.stats
        lock = (stats.connection_retries, stats.takeovers, stats.leases_lost)
        holds = tuple(table.lock_usage.drain())
        retries, takeovers, lost = (a - b for a, b in zip(lock, self._lock, strict=True))
        self._requests, self._lock = now, lock
        if not (requests or holds or retries or takeovers or lost):
            return None
        return TableUsage(self.name, requests, holds, retries, takeovers, lost)

    def report(self, table: HoodieTable | None, observer: Observer) -> None:
        usage = self.since_last(table)
        if usage is not None:
            observer.notify(usage)
