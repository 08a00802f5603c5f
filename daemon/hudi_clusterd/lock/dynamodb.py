"""The DynamoDB lock provider: the lock of Apache Hudi's ``DynamoDBBasedLockProvider`` (and of Hudi 1.x's
``DynamoDBBasedImplicitPartitionKeyLockProvider``), held with the dynamodb-lock-client 1.2.0 protocol
(:mod:`.dynamodb_table`) so that Hudi's writers and the daemon exclude each other.

Taking the lock: read the item (consistently). No item: write ours if there still is none. An item: poll it
every second; every change of its ``recordVersionNumber`` (RVN) restarts the wait, and once the same RVN has
been seen for longer than its ``leaseDuration`` (on this process's monotonic clock), its holder is dead and the
item is overwritten if its RVN is still that one. The provider remembers the RVN it saw from one ``acquire`` to
the next, so a dead holder's item is taken over even when the daemon's timeout is shorter than the lease.
While held, a heartbeat thread gives the item a new RVN every third of the lease (``hoodie.write.lock.wait_time_ms``,
what Hudi's writers write); release deletes the item if it is still ours.

**A lease is not a fence**: nothing stops a paused holder from writing after another took the lock. So the
holder counts its lease from before its last successful write was sent, on a clock that keeps running while the
process is stopped or the machine sleeps (``CLOCK_BOOTTIME``); :meth:`DynamoDBLease.verify` (called right before
every timeline write) fails once that is older than the lease less a safety margin, once a heartbeat found the
item taken, or when the item no longer is ours, and from then on the lease is lost for good. The heartbeat never
renews a lease whose time ran out.

A lost connection or throttling is retried with bounded exponential back-off (`LeaseTerms.retrying`, counted in
:attr:`DynamoDBLockProvider.stats`) until the wait times out, then fails with a ``LockError`` naming the endpoint
and the lock table; a write of ours that may have landed before a failure is deleted again.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock.dynamodb_config import DynamoDBLockConfig, partition_key
from hudi_clusterd.lock.dynamodb_lease import GIVE_BACK_MAX_S, DynamoDBLease, LeaseTerms, counting
from hudi_clusterd.lock.dynamodb_table import ConditionFailed, LockItem, LockTable, Unreachable, make_client
from hudi_clusterd.lock.lease import polling
from hudi_clusterd.lock.provider import LocalMutexes, lease_clock, take_mutex
from hudi_clusterd.lock.usage import LockStats
from hudi_clusterd.storage import Storage

log = structlog.get_logger(__name__)

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 60.0
POLL_S = 1.0
"""The lock client's refresh period: how often a waiter reads a held lock."""


_READY = ("ACTIVE", "UPDATING")


class _Held(Exception):
    """The lock is held (by the owner the message names), or a write of ours was refused or not answered."""


class _NotReady(Exception):
    """The lock table is not ACTIVE yet (its status)."""


def _unreachable(e: BaseException) -> bool:
    return isinstance(e, Unreachable)


@dataclass(frozen=True, slots=True)
class _Seen:
    """The RVN a waiter saw on a held item, and since when (the time the read that first showed it returned)."""

    key: str
    rvn: str
    since: float


class DynamoDBLockProvider:
    """Takes one table's DynamoDB lock (see the module docstring).

    ``storage`` is the table's, read only to infer the partition key when the config does not give it.
    ``mutexes``: as for every provider, threads of this process queue on it. ``clock`` (seconds, monotonic) and
    ``sleep`` measure and wait every lease and poll; ``poll_s`` is the waiters' read period,
    ``heartbeat_interval_s`` (default: a third of the lease) the holder's, ``safety_margin_s`` (default: a fifth
    of the lease) how long before its lease runs out a holder stops trusting it. ``client`` replaces the boto3
    client built from the config."""

    def __init__(self, config: DynamoDBLockConfig, storage: Storage | None = None, *,
                 timeout_s: float = DEFAULT_TIMEOUT_S, mutexes: LocalMutexes | None = None,
                 clock: Callable[[], float] = lease_clock, sleep: Callable[[float], None] = time.sleep,
                 poll_s: float = POLL_S, heartbeat_interval_s: float | None = None,
                 safety_margin_s: float | None = None, client: Any | None = None) -> None:
        self.config = config
        self.storage = storage
        self._timeout_s = timeout_s
        self.clock = clock
        self.sleep = sleep
        self.poll_s = poll_s
        self.heartbeat_interval_s = config.lease_s / 3 if heartbeat_interval_s is None else heartbeat_interval_s
        self.safety_margin_s = config.lease_s / 5 if safety_margin_s is None else safety_margin_s
        self.give_back_s = min(config.lease_s, GIVE_BACK_MAX_S)
        """How long a release keeps trying to delete the item through lost connections (past the lease, others
        take it over anyway)."""
        if timeout_s < 0 or poll_s <= 0 or self.heartbeat_interval_s <= 0 or not (
                0 <= self.safety_margin_s < config.lease_s):
            raise LockError(f"DynamoDB lock options out of range: timeout {timeout_s}s (>= 0), poll {poll_s}s (> 0), "
                            f"heartbeat {self.heartbeat_interval_s}s (> 0), safety margin {self.safety_margin_s}s "
                            f"(>= 0, below the lease of {config.lease_s}s)")
        call_timeout_s = max(1.0, min(10.0, config.lease_s / 6))
        self.table = LockTable(config, client if client is not None else make_client(config, call_timeout_s))
        self.stats = LockStats()
        self._mutexes = mutexes or LocalMutexes()
        self._guard = threading.Lock()
        self._key: str | None = None
        self._table_ready = False
        self._seen: _Seen | None = None
        self.terms = LeaseTerms(self.table, config.lease_ms, self.safety_margin_s, self.heartbeat_interval_s,
                                self.give_back_s, clock, sleep)

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    @property
    def partition_key(self) -> str:
        """The lock item's key (inferred on first use; ``LockError`` when it cannot be)."""
        with self._guard:
            if self._key is None:
                self._key = partition_key(self.config, self.storage)
            return self._key

    def __repr__(self) -> str:
        return f"DynamoDBLockProvider({self.table.where}, key {self._key!r})"

    def acquire(self, timeout_s: float | None = None) -> DynamoDBLease:
        """Take the lock, waiting up to ``timeout_s`` (default :attr:`timeout_s`) while another holds it."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        deadline = self.clock() + timeout
        key = self.partition_key
        mutex = self._mutexes.for_key(f"dynamodb:{self.table.endpoint}:{self.config.table}:{key}")
        take_mutex(mutex, timeout, f"{self.table.where} lock {key!r}")
        try:
            self._ensure_table(deadline)
            return self._take(key, timeout, deadline, mutex)
        except BaseException:
            mutex.release()
            raise

    # --- waiting and retrying ------------------------------------------------------------------------------

    def _retry(self, op: Callable[[], T], deadline: float, doing: str) -> T:
        """``op()``, tried again (counted) while DynamoDB does not answer, until ``deadline``; then `LockError`."""
        tries = 0

        def attempt() -> T:
            nonlocal tries
            tries += 1
            try:
                return op()
            except Unreachable as e:
                if tries == 1 or tries % 10 == 0:
                    log.warning("DynamoDB lock table unreachable; retrying", doing=doing, endpoint=self.table.endpoint,
                                lock_table=self.config.table, attempt=tries, error=str(e))
                raise

        try:
            return self.terms.retrying(deadline - self.clock()).call(counting(self.stats, attempt),
                                                                     retry_on=_unreachable)
        except Unreachable as e:
            raise LockError(f"{self.table.where}: timed out {doing}: DynamoDB did not answer ({tries} tries; last "
                            f"error {e})") from None

    def _ensure_table(self, deadline: float) -> None:
        """Create the lock table when it is missing (as Hudi creates it) and wait until it is ACTIVE."""
        if self._table_ready:
            return
        creation_s = self.config.table_creation_timeout_ms / 1000.0
        status = self._retry(self.table.status, deadline, "reading the lock table")
        if status not in _READY:
            deadline = max(deadline, self.clock() + creation_s)

            def active() -> None:
                nonlocal status
                if status is None and self._retry(self.table.create, deadline, "creating the lock table"):
                    log.info("created the DynamoDB lock table", lock_table=self.config.table,
                             region=self.config.region, endpoint=self.table.endpoint,
                             billing_mode=self.config.billing_mode)
                status = self._retry(self.table.status, deadline, "reading the lock table")
                if status not in _READY:
                    raise _NotReady(str(status))

            try:
                polling(creation_s, min(self.poll_s, 1.0), sleep=self.sleep, clock=self.clock).call(
                    active, retry_on=lambda e: isinstance(e, _NotReady))
            except _NotReady as e:
                raise LockError(f"{self.table.where}: not ACTIVE {self.config.table_creation_timeout_ms} ms after "
                                f"it was created (status {e})") from None
        self._table_ready = True

    # --- taking --------------------------------------------------------------------------------------------

    def _take(self, key: str, timeout: float, deadline: float, mutex: threading.Lock) -> DynamoDBLease:
        owner = f"{socket.gethostname()}{uuid.uuid4()}"
        sent: dict[str, float] = {}  # our writes that may have landed: their RVN -> when they were sent
        seen: list[LockItem | None] = [None]

        def attempt() -> DynamoDBLease:
            item = seen[0] = self._retry(lambda: self.table.get(key), deadline, f"waiting for the lock {key!r}")
            seen_at = self.clock()
            if item is not None and item.owner == owner and sent:  # a write whose answer was lost landed
                return self._lease(key, owner, item.rvn, sent.get(item.rvn, min(sent.values())), mutex)
            if not (item is None or item.released or self._expired(key, item, seen_at)):
                raise _Held(item.owner)
            rvn = str(uuid.uuid4())
            sent[rvn] = self.clock()
            try:
                self.table.put(key, owner, rvn, self.config.lease_ms, over=item)
            except ConditionFailed:  # another writer came first (our write did not land): read again
                sent.pop(rvn, None)
                raise _Held("another writer") from None
            except Unreachable:  # it may have landed: the next read tells
                self.stats.add_connection_retry()
                raise _Held("unknown: a write of ours was not answered") from None
            if item is not None and not item.released:
                self.stats.add_takeover()
                log.warning("took over a DynamoDB table lock whose holder stopped renewing it", lock=key,
                            lock_table=self.config.table, previous_owner=item.owner, lease_ms=item.lease_ms)
            return self._lease(key, owner, rvn, sent[rvn], mutex)

        try:
            try:
                return polling(deadline - self.clock(), self.poll_s, sleep=self.sleep, clock=self.clock).call(
                    attempt, retry_on=lambda e: isinstance(e, _Held))
            except _Held:
                raise LockError(self._timeout_message(key, timeout, seen[0])) from None
        except BaseException:
            if sent:
                self._abandon(key, owner)
            raise

    def _expired(self, key: str, item: LockItem, seen_at: float) -> bool:
        """Whether ``item`` has kept its RVN for longer than its lease; a new RVN starts the count again."""
        seen = self._seen
        if seen is None or (seen.key, seen.rvn) != (key, item.rvn):
            self._seen = _Seen(key, item.rvn, seen_at)
            return False
        return item.lease_ms is not None and seen_at - seen.since > item.lease_ms / 1000.0

    def _lease(self, key: str, owner: str, rvn: str, sent: float, mutex: threading.Lock) -> DynamoDBLease:
        self._seen = None
        lease = DynamoDBLease(self.terms, self.stats, key, owner, rvn, sent, mutex)
        lease.start()
        log.debug("took the DynamoDB table lock", lock=key, lock_table=self.config.table, owner=owner)
        return lease

    def _abandon(self, key: str, owner: str) -> None:
        """Delete an item a failed acquisition may have written (best effort: else it expires after its lease)."""

        def delete_ours() -> None:
            item = self.table.get(key)
            if item is not None and item.owner == owner:
                self.table.delete(key, owner, item.rvn)

        try:
            self.terms.retrying(self.give_back_s).call(
                counting(self.stats, delete_ours), retry_on=lambda e: isinstance(e, Unreachable | ConditionFailed))
        except (Unreachable, ConditionFailed) as e:
            log.warning("could not give back a DynamoDB lock item written while acquiring: unreachable; others "
                        "take it over once its lease runs out", lock=key, endpoint=self.table.endpoint, error=str(e))
        except LockError as e:
            log.warning("could not give back a DynamoDB lock item written while acquiring", lock=key, error=str(e))

    def _timeout_message(self, key: str, timeout: float, item: LockItem | None) -> str:
        holder = "another writer" if item is None else item.owner
        lease = ("its leaseDuration is not a number, so it never expires" if item is not None and
                 item.lease_ms is None else "an item whose recordVersionNumber stays the same for longer than its "
                 "leaseDuration is taken over")
        return (f"{self.table.where}: timed out after {timeout:g}s waiting for the table lock {key!r} held by "
                f"{holder} ({lease})")


__all__ = ["DynamoDBLease", "DynamoDBLockProvider"]
