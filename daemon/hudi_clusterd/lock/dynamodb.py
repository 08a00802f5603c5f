"""The DynamoDB lock provider and its lease: the lock of Apache Hudi's ``DynamoDBBasedLockProvider`` (and of Hudi
1.x's ``DynamoDBBasedImplicitPartitionKeyLockProvider``), held with the dynamodb-lock-client 1.2.0 protocol
(:mod:`.dynamodb_table` makes its requests); docs/lock.md describes it.

A free item is written if there still is none; a held one is polled, and once its ``recordVersionNumber`` (RVN)
has stayed the same for longer than its ``leaseDuration`` it is overwritten at that RVN. The provider remembers
the RVN it saw from one ``acquire`` to the next. A holder's heartbeat gives the item a new RVN every third of the
lease; release deletes the item if it is still ours. A lease counts from before its last successful write was
sent, on `lease_clock`; ``verify`` fails once that is older than the lease less a safety margin, once a heartbeat
found the item taken, or when the item is no longer ours, and a heartbeat never renews a lease whose time ran out.
Requests DynamoDB did not answer are tried again with back-off (counted in ``stats.connection_retries``).
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import structlog

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock.dynamodb_config import DynamoDBLockConfig, partition_key
from hudi_clusterd.lock.dynamodb_table import ConditionFailed, LockItem, LockTable, Unreachable, make_client
from hudi_clusterd.lock.lease import Held, LeaseBase, Unanswered, keep_trying, polling
from hudi_clusterd.lock.provider import LocalMutexes, lease_clock, take_mutex
from hudi_clusterd.lock.usage import LockStats
from hudi_clusterd.retry import RetryPolicy
from hudi_clusterd.storage import Storage

log = structlog.get_logger(__name__)

__all__ = ["DynamoDBLease", "DynamoDBLockProvider"]

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 60.0
POLL_S = 1.0
"""The lock client's refresh period: how often a waiter reads a held lock."""
BACKOFF_FIRST_S = 0.1
"""The first pause before a request DynamoDB did not answer is sent again, doubled after each try..."""
BACKOFF_MAX_S = 2.0
"""...up to this."""
GIVE_BACK_MAX_S = 10.0
VERIFY_TRIES_S = 0.3
"""How long a check before a write keeps reading an item DynamoDB does not answer for (three tries)."""
_READY = ("ACTIVE", "UPDATING")


def _unreachable(e: BaseException) -> bool:
    return isinstance(e, Unreachable)


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
        self.timeout_s = timeout_s
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
        self._seen: tuple[str, str, float] | None = None  # the key and RVN of a held item, and since when seen

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

    # --- retrying ------------------------------------------------------------------------------------------

    def retrying(self, op: Callable[[], T], within_s: float, *,
                 retry_on: Callable[[BaseException], bool] = _unreachable) -> T:
        """``op()``, tried again with back-off for up to ``within_s`` while ``retry_on`` accepts its error (each
        time DynamoDB did not answer counted); the last error once the time is up."""

        def counted() -> T:
            try:
                return op()
            except Unreachable:
                self.stats.add_connection_retry()
                raise

        return polling(within_s, BACKOFF_FIRST_S, BACKOFF_MAX_S, sleep=self.sleep, clock=self.clock).call(
            counted, retry_on=retry_on)

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
            return self.retrying(attempt, deadline - self.clock())
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
                    raise Held(str(status))

            keep_trying(active, polling(creation_s, min(self.poll_s, 1.0), sleep=self.sleep, clock=self.clock),
                        lambda why: f"{self.table.where}: not ACTIVE {self.config.table_creation_timeout_ms} ms "
                                    f"after it was created (status {why})")
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
                raise Held(item.owner)
            rvn = str(uuid.uuid4())
            sent[rvn] = self.clock()
            try:
                self.table.put(key, owner, rvn, self.config.lease_ms, over=item)
            except ConditionFailed:  # another writer came first (our write did not land): read again
                sent.pop(rvn, None)
                raise Held("another writer") from None
            except Unreachable:  # it may have landed: the next read tells
                self.stats.add_connection_retry()
                raise Held("unknown: a write of ours was not answered") from None
            if item is not None and not item.released:
                self.stats.add_takeover()
                log.warning("took over a DynamoDB table lock whose holder stopped renewing it", lock=key,
                            lock_table=self.config.table, previous_owner=item.owner, lease_ms=item.lease_ms)
            return self._lease(key, owner, rvn, sent[rvn], mutex)

        try:
            return keep_trying(attempt, polling(deadline - self.clock(), self.poll_s, sleep=self.sleep,
                                                clock=self.clock),
                               lambda _: self._timeout_message(key, timeout, seen[0]))
        except BaseException:
            if sent:
                self._abandon(key, owner)
            raise

    def _expired(self, key: str, item: LockItem, seen_at: float) -> bool:
        """Whether ``item`` has kept its RVN for longer than its lease; a new RVN starts the count again."""
        if self._seen is None or self._seen[:2] != (key, item.rvn):
            self._seen = (key, item.rvn, seen_at)  # seen_at: when the read that first showed it returned
            return False
        return item.lease_ms is not None and seen_at - self._seen[2] > item.lease_ms / 1000.0

    def _lease(self, key: str, owner: str, rvn: str, sent: float, mutex: threading.Lock) -> DynamoDBLease:
        self._seen = None
        lease = DynamoDBLease(self, key, owner, rvn, sent, mutex)
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
            self.retrying(delete_ours, self.give_back_s,
                          retry_on=lambda e: isinstance(e, Unreachable | ConditionFailed))
        except (Unreachable, ConditionFailed, LockError) as e:
            log.warning("could not give back a DynamoDB lock item written while acquiring; others take it over once "
                        "its lease runs out", lock=key, endpoint=self.table.endpoint, error=str(e))

    def _timeout_message(self, key: str, timeout: float, item: LockItem | None) -> str:
        holder = "another writer" if item is None else item.owner
        lease = ("its leaseDuration is not a number, so it never expires" if item is not None and
                 item.lease_ms is None else "an item whose recordVersionNumber stays the same for longer than its "
                 "leaseDuration is taken over")
        return (f"{self.table.where}: timed out after {timeout:g}s waiting for the table lock {key!r} held by "
                f"{holder} ({lease})")


class DynamoDBLease(LeaseBase):
    """One holding of the DynamoDB lock; renewed by a heartbeat thread until released or lost."""

    def __init__(self, provider: DynamoDBLockProvider, key: str, owner: str, rvn: str, sent: float,
                 mutex: threading.Lock) -> None:
        p = provider
        super().__init__(where=f"{p.table.where} lock {key!r}", stats=p.stats, mutex=mutex,
                         heartbeat_s=p.heartbeat_interval_s,
                         heartbeat_retry=RetryPolicy(p.config.lease_s, BACKOFF_FIRST_S,
                                                     max(p.heartbeat_interval_s, BACKOFF_FIRST_S), 0.0, clock=p.clock))
        self.provider = provider
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

    def _check_ours(self) -> None:
        """Renewed within its lease less the safety margin, and the item still ours (read consistently)."""
        self._check_time()
        try:
            item = self.provider.retrying(self._read, VERIFY_TRIES_S)
        except Unreachable:
            raise self.lose(f"it cannot be confirmed: DynamoDB did not answer ({self._last_error})") from None
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
        p = self.provider
        sent = p.clock()
        if (late := self._late(sent)) is not None:
            self.lose(late)
            return False
        self._pending = self._pending or (str(uuid.uuid4()), sent)
        try:
            try:
                p.table.renew(self.key, self._owner, self._rvn, self._pending[0], p.config.lease_ms)
            except ConditionFailed:  # an earlier try of ours landed, or another writer has the item
                item = self._read()
                if item is None or (item.owner, item.rvn) != (self._owner, self._pending[0]):
                    self.lose("a heartbeat found " + ("its item deleted" if item is None else
                                                      f"{item.owner} holding it"))
                    return False
        except Unreachable as e:
            self._last_error = str(e)
            raise Unanswered(str(e)) from None
        except LockError as e:
            self.lose(str(e))
            return False
        self._renewed()
        return True

    def _read(self) -> LockItem | None:
        """The item, read consistently; a refusal loses the lease."""
        try:
            return self.provider.table.get(self.key)
        except Unreachable as e:
            self._last_error = str(e)
            raise
        except LockError as e:
            raise self.lose(str(e)) from None

    def _renewed(self) -> None:
        assert self._pending is not None
        self._rvn, self._renewed_at = self._pending
        self._pending = None
        self._last_error = None

    def _check_time(self) -> None:
        if (late := self._late(self.provider.clock())) is not None:
            raise self.lose(late)

    def _late(self, now: float) -> str | None:
        """Why the lease's time ran out at ``now`` (None while it has not)."""
        p = self.provider
        if now - self._renewed_at <= p.config.lease_s - p.safety_margin_s:
            return None
        why = f"heartbeats failed: {self._last_error}" if self._last_error else "a pause, or no heartbeat"
        return (f"not renewed for {now - self._renewed_at:.1f}s, past its lease of {p.config.lease_s:g}s less a "
                f"{p.safety_margin_s:g}s safety margin: {why}")

    def _give_back(self) -> None:
        """Delete the item at the RVN last written, or at a renewal's that may have landed; never raises for
        DynamoDB's sake: an item left behind expires."""
        p = self.provider
        versions = [self._rvn] + ([self._pending[0]] if self._pending else [])

        def delete() -> None:
            for rvn in versions:
                try:
                    p.table.delete(self.key, self._owner, rvn)
                    return
                except ConditionFailed:
                    continue
            log.warning("the DynamoDB table lock had been taken over or deleted by another writer; left to it",
                        lock=self.key, lock_table=p.config.table)

        try:
            p.retrying(delete, p.give_back_s)
        except (Unreachable, LockError) as e:
            log.warning("could not release the DynamoDB table lock; others take it over once its lease runs out",
                        lock=self.key, endpoint=p.table.endpoint, error=str(e))
