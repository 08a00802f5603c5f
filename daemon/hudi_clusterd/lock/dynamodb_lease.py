"""A holding of the DynamoDB lock (:class:`DynamoDBLease`), and the terms it is held on (:class:`LeaseTerms`,
given by the provider).

A lease counts from before its last successful write was sent, on the terms' clock (`lease_clock` by default).
:meth:`DynamoDBLease.verify` fails once that is older than the lease less a safety margin, once a heartbeat found
the item taken or deleted, or when a consistent read shows the item is no longer ours; after that the lease is
lost for good and its heartbeat stops. The heartbeat (a new ``recordVersionNumber`` every third of the lease)
never renews a lease whose time ran out, and a renewal whose answer was lost is resolved by reading the item: ours
at the new version means it landed. Release deletes the item only if it is still ours.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import structlog

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock.dynamodb_table import ConditionFailed, LockItem, LockTable, Unreachable
from hudi_clusterd.lock.lease import LeaseBase, Unanswered, polling
from hudi_clusterd.lock.usage import LockStats
from hudi_clusterd.retry import RetryPolicy

log = structlog.get_logger(__name__)

__all__ = ["BACKOFF_FIRST_S", "BACKOFF_MAX_S", "GIVE_BACK_MAX_S", "DynamoDBLease", "LeaseTerms", "counting"]

T = TypeVar("T")
BACKOFF_FIRST_S = 0.1
"""The first pause before a request DynamoDB did not answer is sent again, doubled after each try..."""
BACKOFF_MAX_S = 2.0
"""...up to this."""
GIVE_BACK_MAX_S = 10.0
VERIFY_TRIES_S = 0.3
"""How long a check before a write keeps reading an item DynamoDB does not answer for (three tries)."""


@dataclass(frozen=True, slots=True)
class LeaseTerms:
    """What a lease needs of its provider: the lock table, the lease it writes (``lease_ms``), how long before
    that runs out the holder stops trusting it (``safety_margin_s``), how often it renews it (``heartbeat_s``), how
    long a release keeps trying through lost connections (``give_back_s``), and the clock and sleep of every
    wait."""

    table: LockTable
    lease_ms: int
    safety_margin_s: float
    heartbeat_s: float
    give_back_s: float
    clock: Callable[[], float]
    sleep: Callable[[float], None]

    def retrying(self, deadline_s: float) -> RetryPolicy:
        """The back-off of a request DynamoDB did not answer, for up to ``deadline_s``."""
        return polling(deadline_s, BACKOFF_FIRST_S, BACKOFF_MAX_S, sleep=self.sleep, clock=self.clock)


def counting(stats: LockStats, op: Callable[[], T]) -> Callable[[], T]:
    """``op``, counting each time DynamoDB did not answer it."""

    def counted() -> T:
        try:
            return op()
        except Unreachable:
            stats.add_connection_retry()
            raise

    return counted


def _unreachable(e: BaseException) -> bool:
    return isinstance(e, Unreachable)


class DynamoDBLease(LeaseBase):
    """One holding of the DynamoDB lock; renewed by a heartbeat thread until released or lost."""

    def __init__(self, terms: LeaseTerms, stats: LockStats, key: str, owner: str, rvn: str, sent: float,
                 mutex: threading.Lock) -> None:
        super().__init__(where=f"{terms.table.where} lock {key!r}", stats=stats, mutex=mutex,
                         heartbeat_s=terms.heartbeat_s,
                         heartbeat_retry=RetryPolicy(terms.lease_ms / 1000.0, BACKOFF_FIRST_S,
                                                     max(terms.heartbeat_s, BACKOFF_FIRST_S), 0.0,
                                                     clock=terms.clock))
        self.terms = terms
        self.key = key
        self._owner = owner
        self._rvn = rvn
        self._renewed_at = sent  # when the last write known to have landed was sent
        self._pending: tuple[str, float] | None = None  # a renewal that may have landed: (its RVN, first sent)
        self._last_error: str | None = None

    @property
    def owner(self) -> str:
        """The item's ``ownerName``: host name and a UUID, new for every acquisition."""
        return self._owner

    @property
    def record_version(self) -> str:
        """The item's current ``recordVersionNumber`` as this holder wrote it."""
        return self._rvn

    # --- the protocol's steps --------------------------------------------------------------------------------

    @property
    def _valid_s(self) -> float:
        return self.terms.lease_ms / 1000.0 - self.terms.safety_margin_s

    def _check_ours(self) -> None:
        """Renewed within its lease less the safety margin, and the item still ours (read consistently)."""
        self._check_time()
        item = self._read_for_verify()
        if item is None:
            raise self.lose("another writer deleted its item")
        if item.owner != self._owner:
            raise self.lose(f"{item.owner} holds it now")
        if self._pending is not None and item.rvn == self._pending[0]:
            self._renewed()
        elif item.rvn != self._rvn:
            raise self.lose(f"its recordVersionNumber is {item.rvn}, not ours")
        self._check_time()

    def _renew_once(self) -> bool:
        """A new RVN, unless its time ran out (a pause: it stays lost)."""
        t = self.terms
        sent = t.clock()
        if sent - self._renewed_at > self._valid_s:
            self.lose(self._late(sent))
            return False
        self._pending = self._pending or (str(uuid.uuid4()), sent)
        try:
            t.table.renew(self.key, self._owner, self._rvn, self._pending[0], t.lease_ms)
        except ConditionFailed:
            return self._refused()
        except Unreachable as e:
            self._last_error = str(e)
            raise Unanswered(str(e)) from None
        except LockError as e:
            self.lose(str(e))
            return False
        self._renewed()
        return True

    def _refused(self) -> bool:
        """A renewal's condition failed: an earlier try of ours landed, or another writer has the item."""
        try:
            item = self.terms.table.get(self.key)
        except Unreachable as e:
            self._last_error = str(e)
            raise Unanswered(str(e)) from None
        except LockError as e:
            self.lose(str(e))
            return False
        if item is not None and self._pending is not None and (item.owner, item.rvn) == (
                self._owner, self._pending[0]):
            self._renewed()
            return True
        self.lose("a heartbeat found " + ("its item deleted" if item is None else f"{item.owner} holding it"))
        return False

    def _renewed(self) -> None:
        assert self._pending is not None
        self._rvn, self._renewed_at = self._pending
        self._pending = None
        self._last_error = None

    def _check_time(self) -> None:
        now = self.terms.clock()
        if now - self._renewed_at > self._valid_s:
            raise self.lose(self._late(now))

    def _late(self, now: float) -> str:
        t = self.terms
        why = f"heartbeats failed: {self._last_error}" if self._last_error else "a pause, or no heartbeat"
        return (f"not renewed for {now - self._renewed_at:.1f}s, past its lease of {t.lease_ms / 1000.0:g}s less a "
                f"{t.safety_margin_s:g}s safety margin: {why}")

    def _read_for_verify(self) -> LockItem | None:
        t = self.terms

        def read() -> LockItem | None:
            try:
                return t.table.get(self.key)
            except Unreachable as e:
                self._last_error = str(e)
                raise
            except LockError as e:
                raise self.lose(str(e)) from None

        try:
            return t.retrying(VERIFY_TRIES_S).call(counting(self.stats, read), retry_on=_unreachable)
        except Unreachable:
            raise self.lose(f"it cannot be confirmed: DynamoDB did not answer ({self._last_error})") from None

    def _give_back(self) -> None:
        """Delete the item at the RVN last written, or at a renewal's that may have landed; never raises for
        DynamoDB's sake: an item left behind expires."""
        t = self.terms
        versions = [self._rvn] + ([self._pending[0]] if self._pending else [])

        def delete() -> None:
            for rvn in versions:
                try:
                    t.table.delete(self.key, self._owner, rvn)
                    return
                except ConditionFailed:
                    continue
            log.warning("the DynamoDB table lock had been taken over or deleted by another writer; left to it",
                        lock=self.key, lock_table=t.table.config.table)

        try:
            t.retrying(t.give_back_s).call(counting(self.stats, delete), retry_on=_unreachable)
        except Unreachable as e:
            log.warning("could not release the DynamoDB table lock: unreachable; others take it over once its "
                        "lease runs out", lock=self.key, endpoint=t.table.endpoint, error=str(e))
        except LockError as e:
            log.warning("could not release the DynamoDB table lock", lock=self.key, error=str(e))
