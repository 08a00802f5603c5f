"""Apache Hudi's storage-based table lock (``StorageBasedLockProvider``, Hudi 1.0.2+), held through the storage's
conditional writes on a storage that creates atomically and compares and swaps; docs/lock.md gives the protocol,
the lock file and its JSON are `storage_lock_format`'s.

- **Acquire.** Read the file's version, then its content (so that a write in between fails the overwrite). No
  file: create it; a file nobody holds: overwrite it on the version read. A lost race is tried again every second
  until the timeout. A file naming this acquisition's owner is its own write whose answer was lost: held.
- **Renew.** The heartbeat rewrites it every renew interval on the version last written; a failed condition on a
  file that still names this lease is its own landed write, adopted; any other file loses the lease.
- **Release.** ``expired: true`` with the same ``validUntil``, on the version last written; never deleted. An
  acquisition that fails after a write of its own expires that write.
- **Every write changes the bytes**: a new owner per lease, ``validUntil`` growing by 1 ms at least.

`Storage.put` settles most writes whose answer was lost by reading back; the rest are recognised by the owner.

A lease is not a fence: ``verify`` fails once a renewal found another writer's file, the file no longer names
this lease, the heartbeat died, or the last successful write started more than `lease_limit_s` ago (on
`lease_clock`); the heartbeat checks that age before it writes, so a resumed process never renews a lapsed lease.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import structlog

from hudi_clusterd.errors import LockError, PreconditionFailed, StorageError
from hudi_clusterd.lock.lease import Held, LeaseBase, Unanswered, keep_trying, polling
from hudi_clusterd.lock.provider import LocalMutexes, lease_clock, take_mutex
from hudi_clusterd.lock.storage_lock_format import (
    CLOCK_DRIFT_S,
    DEFAULT_RENEW_S,
    DEFAULT_VALIDITY_S,
    LOCK_FILE,
    LockData,
)
from hudi_clusterd.lock.usage import LockStats
from hudi_clusterd.retry import RetryPolicy
from hudi_clusterd.storage import FileInfo, PutMode, Storage

log = structlog.get_logger(__name__)

__all__ = ["DEFAULT_TIMEOUT_S", "RELEASE_RETRY", "StorageLease", "StorageLockProvider"]

DEFAULT_TIMEOUT_S = 60.0
RETRY_INTERVAL_S = 1.0
"""Between two attempts to take a held lock (Hudi's ``tryLock(time)``)."""
RELEASE_RETRY = RetryPolicy(deadline_s=7.0, first_s=1.0, cap_s=4.0, jitter_s=0.0)
"""A release the storage did not take is tried again after 1, 2 and 4 s (Hudi's, for a throttled release)."""


def _iso(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds")


class StorageLockProvider:
    """Hudi's storage-based lock on one table (see the module docstring).

    ``validity_s`` and ``renew_interval_s`` are the writers' ``hoodie.write.lock.storage.*`` times (Hudi's
    constraints are checked where the keys are read; here only that they leave a margin). ``clock`` (seconds
    since the epoch) is the wall clock ``validUntil`` is read and written with; ``elapsed`` measures the age of a
    lease's last write. ``mutexes``: threads of this process queue on the mutex of the lock file there.
    ``release_retry``: how a release the storage did not take is tried again."""

    def __init__(self, storage: Storage, *, validity_s: float = DEFAULT_VALIDITY_S,
                 renew_interval_s: float = DEFAULT_RENEW_S, timeout_s: float = DEFAULT_TIMEOUT_S,
                 clock: Callable[[], float] = time.time, elapsed: Callable[[], float] = lease_clock,
                 retry_interval_s: float = RETRY_INTERVAL_S, release_retry: RetryPolicy = RELEASE_RETRY,
                 mutexes: LocalMutexes | None = None) -> None:
        self.storage = storage
        self.full_path = storage.full_path(LOCK_FILE)
        if renew_interval_s <= 0 or validity_s - CLOCK_DRIFT_S - renew_interval_s <= 0 or timeout_s < 0:
            raise LockError(f"{self.full_path}: storage lock times out of range: the validity ({validity_s:g}s) must "
                            f"exceed the renew interval ({renew_interval_s:g}s, > 0) plus {CLOCK_DRIFT_S:g}s, and the "
                            f"timeout ({timeout_s:g}s) must be >= 0")
        self.validity_s = validity_s
        self.renew_interval_s = renew_interval_s
        self.timeout_s = timeout_s
        self.clock = clock
        self.elapsed = elapsed
        self.retry_interval_s = retry_interval_s
        self.release_retry = release_retry
        self.stats = LockStats()
        self.mutex = (mutexes or LocalMutexes()).for_key(self.full_path)

    @property
    def lease_limit_s(self) -> float:
        """How long after its last successful write started a lease still verifies: the validity less the drift
        allowance and one renew interval (room for a write that a passing check lets through, and for skew)."""
        return self.validity_s - CLOCK_DRIFT_S - self.renew_interval_s

    def now_ms(self) -> int:
        return round(self.clock() * 1000)

    def check_supported(self) -> None:
        """Refuse (`LockError`, naming the storage) a storage without atomic create and compare-and-swap: a table
        there can be opened and read, but not locked this way."""
        caps = self.storage.capabilities
        if not (caps.atomic_create and caps.conditional_update):
            raise LockError(
                f"{self.full_path}: this storage ({self.storage.spec.scheme}) cannot create a file atomically and "
                "compare and swap it, so Hudi's StorageBasedLockProvider cannot be held there (Hudi supports it on "
                "S3, GCS and Azure only); use FileSystemBasedLockProvider on a local or mounted file system, or a "
                "lock service (ZookeeperBasedLockProvider, DynamoDBBasedLockProvider)")

    def read(self) -> tuple[LockData, str] | None:
        """The lock file's content and the version it was read at (version first: see the module docstring); None
        when there is no lock file. `LockError` for a file that is not a lock, `StorageError` when unreadable."""
        info = self.storage.info(LOCK_FILE)
        if info is None:
            return None
        version = self.version_of(info)
        return LockData.parse(self.storage.read_bytes(LOCK_FILE), self.full_path), version

    def version_of(self, info: FileInfo | None) -> str:
        """The version of the lock file ``info`` describes; `LockError` when the storage gave none."""
        if info is None or info.is_dir or info.version is None:
            raise LockError(f"{self.full_path}: {'a folder' if info is not None and info.is_dir else 'no version'} "
                            f"where the lock file should be; this storage ({self.storage.spec.scheme}) cannot hold "
                            "Hudi's StorageBasedLockProvider")
        return info.version

    def acquire(self, timeout_s: float | None = None) -> StorageLease:
        """Take the lock, trying every ``retry_interval_s`` for up to ``timeout_s`` (default `timeout_s`)."""
        self.check_supported()
        timeout = self.timeout_s if timeout_s is None else timeout_s
        waiting = polling(timeout, self.retry_interval_s)
        take_mutex(self.mutex, timeout, self.full_path)
        owner = str(uuid.uuid4())
        sent: list[float] = []  # when each write of ours that may have landed was sent
        try:
            lease = keep_trying(lambda: self._attempt(owner, sent), waiting,
                                lambda why: f"{self.full_path}: timed out after {timeout:g}s waiting for the table "
                                            f"lock ({why})")
        except BaseException:
            try:
                if sent:
                    self._abandon(owner)
            finally:
                self.mutex.release()
            raise
        lease.start()
        log.debug("took the table lock", lock=self.full_path, owner=owner, valid_until=_iso(lease.valid_until_ms))
        return lease

    def _attempt(self, owner: str, sent: list[float]) -> StorageLease:
        """One try: the lease, or `Held` saying why there is none."""
        started = self.elapsed()
        try:
            found = self.read()
        except StorageError as e:
            self.stats.add_connection_retry()
            log.warning("table lock could not be read; tried again", lock=self.full_path, error=str(e))
            raise Held(f"the lock file could not be read: {e}") from None
        now_ms = self.now_ms()
        if found is not None and found[0].owner == owner and found[0].held_at(now_ms) and sent:
            log.info("table lock write landed, its answer lost: held", lock=self.full_path, owner=owner)
            return StorageLease(self, found[0], found[1], min(sent))
        if found is not None and found[0].owner != owner and found[0].held_at(now_ms):
            raise Held(f"held by {found[0].owner} until {_iso(found[0].valid_until_ms)}")
        data = LockData(False, now_ms + int(self.validity_s * 1000), owner)
        sent.append(started)
        try:
            if found is None:
                written = self.storage.put(LOCK_FILE, data.to_json(), mode=PutMode.CREATE)
                if written is None:
                    raise Held("another writer created the lock file first")
            else:
                written = self.storage.put(LOCK_FILE, data.to_json(), if_match=found[1])
        except PreconditionFailed:
            raise Held("another writer took it first") from None
        except StorageError as e:
            self.stats.add_connection_retry()
            log.warning("table lock could not be written; tried again", lock=self.full_path, error=str(e))
            raise Held(f"the lock file could not be written: {e}") from None
        if found is not None and not found[0].expired and found[0].owner != owner:
            self.stats.add_takeover()
            log.warning("took over a table lock whose holder stopped renewing it", lock=self.full_path,
                        previous_owner=found[0].owner, valid_until=_iso(found[0].valid_until_ms))
        return StorageLease(self, data, self.version_of(written), started)

    def _abandon(self, owner: str) -> None:
        """Expire a write of ours that a failed acquisition may have landed (else it runs out on its own)."""
        try:
            found = self.read()
            if found is not None and found[0].owner == owner and not found[0].expired:
                body = LockData(True, found[0].valid_until_ms, owner).to_json()
                self.storage.put(LOCK_FILE, body, if_match=found[1])
        except (StorageError, LockError) as e:
            log.warning("could not expire a table lock written while acquiring; it runs out on its own",
                        lock=self.full_path, owner=owner, error=str(e))


class StorageLease(LeaseBase):
    """One holding of the storage lock, kept by a heartbeat thread until released or lost."""

    def __init__(self, provider: StorageLockProvider, data: LockData, version: str, sent_at: float) -> None:
        super().__init__(where=provider.full_path, stats=provider.stats, mutex=provider.mutex,
                         heartbeat_s=provider.renew_interval_s)
        self.provider = provider
        self._data = data
        self._version = version
        self._sent_at = sent_at  # provider.elapsed() right before the last write known to have landed was sent
        self._unsettled: float | None = None  # when the first write since then whose outcome is unknown was sent

    @property
    def owner(self) -> str:
        return self._data.owner

    @property
    def valid_until_ms(self) -> int:
        """``validUntil`` of the lease's last write."""
        return self._data.valid_until_ms

    @property
    def version(self) -> str:
        """The lock file's version after the lease's last write."""
        return self._version

    # --- the protocol's steps --------------------------------------------------------------------------------

    def _adopt(self) -> bool:
        """Whether the lock file holds a write of this lease whose answer was lost (it names this lease and is not
        expired); if so, the lease goes on from that write."""
        found = self.provider.read()
        if found is None or found[0].owner != self.owner or found[0].expired:
            return False
        if found[1] != self._version:
            log.info("table lock write landed, its answer lost", lock=self.where, owner=self.owner)
            self._data, self._version = found
            self._sent_at = self._unsettled if self._unsettled is not None else self._sent_at
            self._unsettled = None
        return True

    def _write(self, data: LockData, started: float) -> None:
        """Write ``data`` over the lease's version, or over a landed write of its own found there instead;
        `PreconditionFailed` when another writer has the file, `Unanswered` when the storage did not answer."""
        p = self.provider
        try:
            try:
                written = p.storage.put(LOCK_FILE, data.to_json(), if_match=self._version)
            except PreconditionFailed:
                if not self._adopt():
                    raise
                written = p.storage.put(LOCK_FILE, data.to_json(), if_match=self._version)
        except PreconditionFailed:
            raise
        except StorageError as e:
            self._unsettled = started if self._unsettled is None else self._unsettled
            raise Unanswered(str(e)) from None
        self._data, self._version, self._sent_at, self._unsettled = data, p.version_of(written), started, None

    def _renew_once(self) -> bool:
        """Renewed, unless its last successful write started over `StorageLockProvider.lease_limit_s` ago."""
        p = self.provider
        started = p.elapsed()
        age = started - self._sent_at
        if age > p.lease_limit_s:
            self.lose(f"its last successful write started {age:.1f}s ago and a lease lasts {p.validity_s:g}s")
            return False
        data = LockData(False, max(p.now_ms() + int(p.validity_s * 1000), self._data.valid_until_ms + 1),
                        self.owner)
        try:
            self._write(data, started)
        except PreconditionFailed:
            self.lose("another writer changed or removed the lock file", taken=True)
            return False
        except LockError as e:  # the file is no lock any more
            self.lose(str(e), taken=True)
            return False
        return True

    def _check_ours(self) -> None:
        p = self.provider
        age = p.elapsed() - self._sent_at
        if age > p.lease_limit_s:
            self.lose(f"no write of it succeeded in the {age:.1f}s since the last one started, and a lease lasts "
                      f"{p.validity_s:g}s")
            return
        try:
            if self._adopt():
                return
            found = p.read()
        except LockError as e:
            self.lose(str(e), taken=True)
            return
        except StorageError as e:
            raise LockError(f"{p.full_path}: the table lock could not be checked before a write: {e}") from e
        self.lose("the lock file was deleted" if found is None else
                  f"the lock file now names {found[0].owner}" if found[0].owner != self.owner else
                  "the lock file says it expired", taken=True)

    def _give_back(self) -> None:
        """Mark the lock expired with the same ``validUntil``."""
        p = self.provider

        def expire() -> None:
            try:
                self._write(LockData(True, self._data.valid_until_ms, self.owner), p.elapsed())
            except Unanswered:
                p.stats.add_connection_retry()
                raise

        try:
            p.release_retry.call(expire, retry_on=lambda e: isinstance(e, Unanswered))
        except PreconditionFailed:
            log.warning("table lock was taken by another writer before its release; left to it", lock=self.where,
                        owner=self.owner)
        except (Unanswered, LockError) as e:
            log.error("table lock could not be released; other writers wait until it runs out", lock=self.where,
                      valid_until=_iso(self._data.valid_until_ms), error=str(e))
