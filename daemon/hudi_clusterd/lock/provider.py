"""The seam every table lock implements: a :class:`LockProvider` hands out :class:`Lease` objects, whose holder
calls :meth:`Lease.verify` right before every timeline and metadata-table write and :meth:`Lease.release` once
done (``with provider.acquire() as lease:``). Threads of one process that take the same lock queue on one
in-process mutex (:class:`LocalMutexes`, one per daemon, shared by every provider of a table built from it).
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from hudi_clusterd.errors import LockError

if TYPE_CHECKING:
    from hudi_clusterd.lock.usage import LockStats

__all__ = ["Lease", "LocalMutexes", "LockProvider", "lease_clock", "take_mutex"]


class Lease(Protocol):
    """One holding of a table's lock."""

    @property
    def owner(self) -> str:
        """Who holds it, as written where other writers see it."""
        ...

    def verify(self) -> None:
        """Raise ``LockError`` unless the lock is still held by this lease (call before a timeline write)."""
        ...

    def release(self) -> None:
        """Give the lock back; a lock another writer took meanwhile is left to it."""
        ...

    def __enter__(self) -> Lease: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...


class LockProvider(Protocol):
    """Takes one table's lock, excluding every other writer of the table (other processes, hosts and handles)."""

    @property
    def stats(self) -> LockStats:
        """What this provider counted: connection retries, take-overs of a dead holder's lock, leases lost."""
        ...

    @property
    def timeout_s(self) -> float:
        """How long :meth:`acquire` waits by default."""
        ...

    def acquire(self, timeout_s: float | None = None) -> Lease:
        """Wait up to ``timeout_s`` (default :attr:`timeout_s`) for the lock; ``LockError`` when it stays held."""
        ...


class LocalMutexes:
    """One in-process mutex per lock (keyed by where the lock lives), shared by the providers built with it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._mutexes: dict[str, threading.Lock] = {}

    def for_key(self, key: str) -> threading.Lock:
        with self._guard:
            return self._mutexes.setdefault(key, threading.Lock())


def take_mutex(mutex: threading.Lock, timeout_s: float, where: str) -> None:
    """Queue for a lock's in-process ``mutex`` up to ``timeout_s``; `LockError` naming ``where`` when another
    thread of this process keeps it."""
    if not mutex.acquire(timeout=max(timeout_s, 0.0)):
        raise LockError(f"{where}: timed out after {timeout_s:g}s waiting for another thread of this process")


def lease_clock() -> float:
    """Seconds on a clock that never goes back and keeps running while the process is stopped or the host sleeps
    (Linux's ``CLOCK_BOOTTIME``, else the monotonic clock): what a lease's age is measured on, so that a holder
    paused past its lease finds it over when it resumes."""
    boottime: int | None = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(boottime) if boottime is not None else time.monotonic()
