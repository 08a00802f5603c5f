"""A holding of the DynamoDB lock (:class:`DynamoDBLease`), with what the provider and its leases share: the
clock, the back-off and the counters.

A lease counts from before its last successful write was sent, on `lease_clock`. :meth:`DynamoDBLease.verify`
fails once that is older than the lease less a safety margin, once a heartbeat found the item taken or deleted, or
when a consistent read shows the item is no longer ours; after that the lease is lost for good and its heartbeat
stops. The heartbeat (a new ``recordVersionNumber`` every third of the lease) never renews a lease whose time ran
out, and a renewal whose answer was lost is resolved by reading the item: ours at the new version means it
landed. Release deletes the item only if it is still ours.
"""

from __future__ import annotations

import threading
import uuid
from types import TracebackType
from typing import TYPE_CHECKING

import structlog

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock.dynamodb_table import ConditionFailed, LockItem, Unreachable

if TYPE_CHECKING:
    from hudi_clusterd.lock.dynamodb import DynamoDBLockProvider

log = structlog.get_logger(__name__)

BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 2.0
GIVE_BACK_MAX_S = 10.0




class Backoff:
    """Bounded exponential back-off: 0.1 s, doubling, at most ``cap_s``."""

    def __init__(self, cap_s: float = BACKOFF_MAX_S) -> None:
        self.cap_s = cap_s
        self.attempts = 0

    def next(self) -> float:
        self.attempts += 1
        return float(min(BACKOFF_FIRST_S * 2.0 ** (self.attempts - 1), self.cap_s))

    def reset(self) -> None:
        self.attempts = 0




class DynamoDBLease:
    """One holding of the DynamoDB lock; renewed by a heartbeat thread until released or lost."""

    def __init__(self, provider: DynamoDBLockProvider, key: str, owner: str, rvn: str, sent: float,
                 mutex: threading.Lock) -> None:
        self.provider = provider
        self.key = key
        self._owner = owner
        self._rvn = rvn
        self._renewed_at = sent  # when the last write known to have landed was sent
        self._pending: tuple[str, float] | None = None  # a renewal that may have landed: (its RVN, first sent)
        self._lost: str | None = None
        self._last_error: str | None = None
        self._released = False
        self._mutex: threading.Lock | None = mutex
        self._io = threading.Lock()  # one request about the item at a time, and the state with it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def owner(self) -> str:
        """The item's ``ownerName``: host name and a UUID, new for every acquisition."""
        return self._owner

    @property
    def record_version(self) -> str:
        """The item's current ``recordVersionNumber`` as this holder wrote it."""
        return self._rvn

    def start_heartbeat(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="dynamodb-lock-heartbeat", daemon=True)
        self._thread.start()

    # --- holding -------------------------------------------------------------------------------------------

    def verify(self) -> None:
        """Raise ``LockError`` unless the lease is still good: renewed within its lease less the safety margin,
        and the item still ours (read consistently). Once it fails, it fails for good."""
        with self._io:
            self._check_time()
            item = self._read_for_verify()
            if item is None:
                raise self._lose("another writer deleted its item")
            if item.owner != self._owner:
                raise self._lose(f"{item.owner} holds it now")
            if self._pending is not None and item.rvn == self._pending[0]:
                self._renewed()
            elif item.rvn != self._rvn:
                raise self._lose(f"its recordVersionNumber is {item.rvn}, not ours")
            self._check_time()

    def heartbeat(self) -> bool:
        """Renew the lease once (new RVN); False when it was not renewed (lost, released, or unreachable)."""
        p = self.provider
        with self._io:
            if self._released or self._lost is not None:
                return False
            sent = p.clock()
            if sent - self._renewed_at > self._valid_s:  # its time ran out (a pause): it stays lost
                self._lose(self._late(sent))
                return False
            self._pending = self._pending or (str(uuid.uuid4()), sent)
            try:
                p.table.renew(self.key, self._owner, self._rvn, self._pending[0], p.config.lease_ms)
            except ConditionFailed:
                return self._refused()
            except Unreachable as e:
                self._last_error = str(e)
                return False
            except LockError as e:
                self._lose(str(e))
                return False
            self._renewed()
            return True

    @property
    def _valid_s(self) -> float:
        return self.provider.config.lease_s - self.provider.safety_margin_s

    def _beat(self) -> None:
        p = self.provider
        backoff = Backoff(cap_s=max(p.heartbeat_interval_s, BACKOFF_FIRST_S))
        delay = p.heartbeat_interval_s
        while not self._stop.wait(delay):
            try:
                renewed = self.heartbeat()
            except Exception as e:  # a fault of ours: stop trusting the lease rather than let it lapse unseen
                with self._io:
                    self._lose(f"its heartbeat failed: {type(e).__name__}: {e}")
                return
            if renewed:
                backoff.reset()
                delay = p.heartbeat_interval_s
                continue
            if self._lost is not None or self._released:
                return
            p.stats.add_connection_retry()
            delay = backoff.next()
            log.warning("DynamoDB table lock heartbeat failed; retrying", lock=self.key,
                        endpoint=p.table.endpoint, error=self._last_error, retry_in_s=delay)

    def _refused(self) -> bool:
        """A renewal's condition failed: an earlier try of ours landed, or another writer has the item."""
        try:
            item = self.provider.table.get(self.key)
        except Unreachable as e:
            self._last_error = str(e)
            return False
        except LockError as e:
            self._lose(str(e))
            return False
        if item is not None and self._pending is not None and (item.owner, item.rvn) == (
                self._owner, self._pending[0]):
            self._renewed()
            return True
        self._lose("a heartbeat found " + ("its item deleted" if item is None else f"{item.owner} holding it"))
        return False

    def _renewed(self) -> None:
        assert self._pending is not None
        self._rvn, self._renewed_at = self._pending
        self._pending = None
        self._last_error = None

    def _check_time(self) -> None:
        if self._released:
            raise LockError(f"{self.provider.table.where}: the table lock {self.key!r} is not held (released)")
        if self._lost is not None:
            raise self._lose(self._lost)
        now = self.provider.clock()
        if now - self._renewed_at > self._valid_s:
            raise self._lose(self._late(now))

    def _late(self, now: float) -> str:
        p = self.provider
        why = f"heartbeats failed: {self._last_error}" if self._last_error else "a pause, or no heartbeat"
        return (f"not renewed for {now - self._renewed_at:.1f}s, past its lease of {p.config.lease_s:g}s less a "
                f"{p.safety_margin_s:g}s safety margin: {why}")

    def _read_for_verify(self) -> LockItem | None:
        p = self.provider
        backoff = Backoff()
        for attempt in range(3):
            try:
                return p.table.get(self.key)
            except Unreachable as e:
                self._last_error = str(e)
                p.stats.add_connection_retry()
                if attempt < 2:
                    p.sleep(backoff.next())
            except LockError as e:
                raise self._lose(str(e)) from None
        raise self._lose(f"it cannot be confirmed: DynamoDB did not answer ({self._last_error})")

    def _lose(self, reason: str) -> LockError:
        """Mark the lease lost for good (the first reason stays) and return the error to raise."""
        if self._lost is None:
            self._lost = reason
            self.provider.stats.add_lease_lost()
            log.error("DynamoDB table lock lost while held", lock=self.key, lock_table=self.provider.config.table,
                      reason=reason)
        return LockError(f"{self.provider.table.where}: the table lock {self.key!r} was lost while held "
                         f"({self._lost}); nothing more is written under it")

    # --- releasing -----------------------------------------------------------------------------------------

    def release(self) -> None:
        """Stop the heartbeat and delete the item if it is still ours (one taken over is left to its new holder);
        a second call does nothing. Never raises for DynamoDB's sake: an item left behind expires."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._io:
            if self._released:
                return
            self._released = True
            mutex, self._mutex = self._mutex, None
            try:
                self._give_back()
            finally:
                if mutex is not None:
                    mutex.release()

    def _give_back(self) -> None:
        p = self.provider
        versions = [self._rvn] + ([self._pending[0]] if self._pending else [])
        backoff = Backoff()
        until = p.clock() + p.give_back_s
        while True:
            try:
                for rvn in versions:
                    try:
                        p.table.delete(self.key, self._owner, rvn)
                        return
                    except ConditionFailed:
                        continue
                log.warning("the DynamoDB table lock had been taken over or deleted by another writer; left to it",
                            lock=self.key, lock_table=p.config.table)
                return
            except Unreachable as e:
                self._last_error = str(e)
                p.stats.add_connection_retry()
                delay = backoff.next()
                if p.clock() + delay > until:
                    log.warning("could not release the DynamoDB table lock: unreachable; others take it over once "
                                "its lease runs out", lock=self.key, endpoint=p.table.endpoint, error=str(e))
                    return
                p.sleep(delay)
            except LockError as e:
                log.warning("could not release the DynamoDB table lock", lock=self.key, error=str(e))
                return

    def __enter__(self) -> DynamoDBLease:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


__all__ = ["BACKOFF_FIRST_S", "GIVE_BACK_MAX_S", "Backoff", "DynamoDBLease"]
