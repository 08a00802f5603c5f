"""What every lease of the table lock shares: the heartbeat thread, the loss state and its counter, the hand-back.
Each provider's lease supplies its protocol's steps only (`LeaseBase._renew_once`, `LeaseBase._check_ours`,
`LeaseBase._give_back`), one at a time (``io``). A renewal the lock service did not answer raises `Unanswered`:
counted and tried again under ``heartbeat_retry``, then at the next beat. A lost lease stays lost (its first
reason kept, counted once), and so does one whose heartbeat died of a defect. `polling` is the retry policy of
every wait of the lock package, and `keep_trying` its acquire loops' end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from types import TracebackType
from typing import Self, TypeVar

import structlog

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock.usage import LockStats
from hudi_clusterd.retry import NO_RETRY, RetryPolicy

log = structlog.get_logger(__name__)

__all__ = ["Held", "LeaseBase", "Unanswered", "keep_trying", "polling"]

T = TypeVar("T")


class Unanswered(Exception):
    """A request to the lock service that it did not answer (a lost connection, a timeout, throttling): worth
    the same request again."""


class Held(Exception):
    """One attempt to take the lock did not: held by whom, or why (tried again until the wait ends)."""


def keep_trying(attempt: Callable[[], T], policy: RetryPolicy, timed_out: Callable[[str], str]) -> T:
    """``attempt()``, made again under ``policy`` while it raises `Held`; then `LockError` with the message
    ``timed_out`` makes of the last `Held`'s."""
    try:
        return policy.call(attempt, retry_on=lambda e: isinstance(e, Held))
    except Held as e:
        raise LockError(timed_out(str(e))) from None


def polling(deadline_s: float, first_s: float, cap_s: float | None = None, *,
            sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic) -> RetryPolicy:
    """The retry policy of a wait of the lock package: pauses from ``first_s`` doubling up to ``cap_s`` (default:
    ``first_s``, a steady poll), no jitter, each pause cut where it would pass the deadline (the last attempt is
    made at the deadline)."""
    start = clock()

    def pause(seconds: float) -> None:
        sleep(max(0.0, min(seconds, start + deadline_s - clock())))

    return RetryPolicy(deadline_s=max(deadline_s, 0.0), first_s=first_s,
                       cap_s=first_s if cap_s is None else cap_s, jitter_s=0.0, sleep=pause, clock=clock)


class LeaseBase(ABC):
    """One holding of a table's lock (see the module docstring). ``where`` names the lock in messages, ``stats``
    are the provider's counters, ``mutex`` the in-process mutex held with the lease (released with it),
    ``heartbeat_s`` how often the heartbeat renews the lock (None: no heartbeat, the lock service keeps the lease),
    ``heartbeat_retry`` how an unanswered renewal is tried again before the next beat."""

    def __init__(self, *, where: str, stats: LockStats, mutex: threading.Lock | None,
                 heartbeat_s: float | None = None, heartbeat_retry: RetryPolicy = NO_RETRY) -> None:
        self.where = where
        self.stats = stats
        self.taken = False  # another writer has the lock now: the release leaves it alone
        self.io = threading.Lock()  # one protocol step at a time
        self._mutex = mutex
        self._heartbeat_s = heartbeat_s
        self._heartbeat_retry = heartbeat_retry
        self._held = False
        self._lost: str | None = None
        self._released = False
        self._state = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the provider's protocol steps -------------------------------------------------------------------------

    @property
    @abstractmethod
    def owner(self) -> str:
        """Who holds it, as written where other writers see it."""

    def _renew_once(self) -> bool:
        """Renew the lock once (under ``io``): True when renewed, False when lost (after `lose`); `Unanswered`
        when the lock service did not answer. Only leases with a heartbeat are renewed."""
        raise NotImplementedError

    @abstractmethod
    def _check_ours(self) -> None:
        """Check with the lock service that the lock is still this lease's (under ``io``); `lose` when not."""

    @abstractmethod
    def _give_back(self) -> None:
        """Give back what the lease holds, once (under ``io``; also after a failed take; never once another writer
        took the lock); never raises for the lock service's sake."""

    # --- holding ---------------------------------------------------------------------------------------------

    @property
    def lost(self) -> str | None:
        """Why the lease was lost, None while it holds."""
        return self._lost

    @property
    def released(self) -> bool:
        return self._released

    def start(self) -> None:
        """The lock is taken: count a loss from now on, and renew it until released or lost."""
        self._held = True
        if self._heartbeat_s is not None:
            self._thread = threading.Thread(target=self._beat, name="table-lock-heartbeat", daemon=True)
            self._thread.start()

    def lose(self, reason: str, *, taken: bool = False) -> LockError:
        """Mark the lease lost for good (the first reason stays; counted and logged once) and return the error
        that says so; ``taken``: another writer has the lock now, and the release leaves it alone."""
        self.taken = self.taken or taken
        with self._state:
            first = self._lost is None
            if first:
                self._lost = reason
        if first and self._held:
            self.stats.add_lease_lost()
            log.error("table lock lost while held", lock=self.where, owner=self.owner, reason=reason)
        return self._lost_error()

    def _lost_error(self) -> LockError:
        return LockError(f"{self.where}: the table lock was lost while held ({self._lost}); nothing more is "
                         "written under it")

    def verify(self) -> None:
        """Raise ``LockError`` unless the lease still holds the lock (call right before every timeline write)."""
        with self.io:
            if self._released or not self._held:
                raise LockError(f"{self.where}: the table lock is not held")
            if self._lost is None and self._thread is not None and not self._thread.is_alive():
                self.lose("its heartbeat thread died")
            if self._lost is None:
                self._check_ours()
            if self._lost is not None:
                raise self._lost_error()

    def renew(self) -> bool:
        """One renewal (the heartbeat's): True when renewed; False when lost, released, or unanswered (counted)."""
        with contextlib.suppress(Unanswered):
            return self._renew_step()
        return False

    def _renew_step(self) -> bool:
        with self.io:
            if self._released or self._lost is not None:
                return False
            try:
                return self._renew_once()
            except Unanswered as e:
                self.stats.add_connection_retry()
                log.warning("table lock renewal unanswered; tried again", lock=self.where, error=str(e))
                raise

    def _beat(self) -> None:
        assert self._heartbeat_s is not None

        def pause(seconds: float) -> None:
            self._stop.wait(seconds)

        policy = dataclasses.replace(self._heartbeat_retry, sleep=pause)
        try:
            while not self._stop.wait(self._heartbeat_s):
                with contextlib.suppress(Unanswered):  # tried again at the next beat
                    policy.call(self._renew_step,
                                retry_on=lambda e: isinstance(e, Unanswered) and not self._stop.is_set())
                if self._lost is not None or self._released:
                    return
        except Exception as e:  # a defect: the lease must not outlive its heartbeat
            self.lose(f"its heartbeat thread died: {e!r}")
            log.exception("table lock heartbeat died", lock=self.where)

    # --- releasing -------------------------------------------------------------------------------------------

    def release(self) -> None:
        """Stop the heartbeat and give the lock back (a lock another writer took meanwhile is left to it); a
        second call does nothing."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self.io:
            if self._released:
                return
            self._released = True
            mutex, self._mutex = self._mutex, None
            try:
                if not self.taken:
                    self._give_back()
                else:
                    log.warning("table lock was taken by another writer while held; left to it", lock=self.where,
                                owner=self.owner)
            finally:
                if mutex is not None:
                    mutex.release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
