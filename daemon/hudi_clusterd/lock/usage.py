"""How a table handle used its lock: how long each holding lasted (for the hold-time histogram and the line each
clustering logs) and how often a provider had to retry a lost connection to its lock service."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

__all__ = ["LockStats", "LockUsage", "LockUsageTotals"]

_RECENT = 1024
"""Holdings kept for `LockUsage.drain` between two readers (older ones are dropped from it, never from the
totals)."""


@dataclass(frozen=True, slots=True)
class LockUsageTotals:
    holds: int = 0
    held_s: float = 0.0
    longest_s: float = 0.0

    def since(self, before: LockUsageTotals) -> LockUsageTotals:
        """What happened between ``before`` and this reading (``longest_s`` is this reading's)."""
        return LockUsageTotals(self.holds - before.holds, self.held_s - before.held_s, self.longest_s)


class LockUsage:
    """Thread-safe totals and recent holdings of one table handle's lock."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._totals = LockUsageTotals()
        self._recent: deque[float] = deque(maxlen=_RECENT)

    def record(self, seconds: float) -> None:
        with self._guard:
            t = self._totals
            self._totals = LockUsageTotals(t.holds + 1, t.held_s + seconds, max(t.longest_s, seconds))
            self._recent.append(seconds)

    def totals(self) -> LockUsageTotals:
        with self._guard:
            return self._totals

    def drain(self) -> list[float]:
        """The holdings recorded since the last drain, oldest first."""
        with self._guard:
            out = list(self._recent)
            self._recent.clear()
            return out


class LockStats:
    """What one lock provider counted, thread-safe: requests to its lock service retried after a lost connection
    or throttling, locks taken over from a dead holder, and leases lost while held."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self.connection_retries = 0
        self.takeovers = 0
        self.leases_lost = 0

    def add_connection_retry(self) -> None:
        with self._guard:
            self.connection_retries += 1

    def add_takeover(self) -> None:
        with self._guard:
            self.takeovers += 1

    def add_lease_lost(self) -> None:
        with self._guard:
            self.leases_lost += 1
