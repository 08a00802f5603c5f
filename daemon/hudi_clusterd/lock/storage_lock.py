"""Apache Hudi's storage-based table lock (``StorageBasedLockProvider``, Hudi 1.0.2+), held through the storage's
conditional writes, on any storage that creates atomically and compares and swaps (`Capabilities`).

The lock file and its JSON are `storage_lock_format`'s. The protocol, Hudi's:

- **Acquire.** Read the lock file's version, then its content (in that order: a write between the two changes the
  version, so the write below fails rather than replace a lock judged on older content). No file: create it
  (``PutMode.CREATE``). A file nobody holds (``expired``, or the wall clock past ``validUntil`` + 500 ms):
  overwrite it on the version read (``if_match``). Both write ``validUntil = now + validity`` and a new owner (a
  random UUID per lease). A lost race (the create finds a file, the overwrite fails its condition) means another
  writer took the lock; the attempt is repeated every second until the timeout.
- **Renew.** A heartbeat thread rewrites the file every renew interval with a later ``validUntil``, on the version
  it last wrote. A failed condition means another writer changed the file: the lease is lost, renewals stop. A
  storage that cannot be reached is tried again at the next renewal (``stats.connection_retries``).
- **Release.** Stop the heartbeat, then write ``expired: true`` with the same ``validUntil`` on the version last
  written (a lock another writer took meanwhile is left to it). The file is never deleted.
- **Every write changes the bytes** (an S3 ETag is an MD5 of them; an ``if_match`` must never succeed against
  someone else's identical write): owners differ between leases, and within one lease ``validUntil`` only grows
  (by 1 ms at least when the wall clock stood still or went back) until the release flips ``expired``.

A lease is not a fence: storage cannot refuse a write from a holder whose lease ran out (a paused process, a
partition). So `StorageLease.verify`, called before every timeline write, fails from the moment a renewal found
another writer's file, the file no longer names this lease, the heartbeat thread died, or the last successful write
*started* longer ago than the validity less the drift allowance and one renew interval (`lease_limit_s`, measured on
a clock that counts while the process is stopped). The heartbeat checks that age too before it writes, so a process
resumed after a pause never renews a lease whose time ran out (its conditional write would succeed if nobody had
taken the lock yet).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from types import TracebackType

import structlog

from hudi_clusterd.errors import LockError, PreconditionFailed, StorageError
from hudi_clusterd.lock.provider import LocalMutexes, lease_clock
from hudi_clusterd.lock.storage_lock_format import (
    CLOCK_DRIFT_S,
    DEFAULT_RENEW_S,
    DEFAULT_VALIDITY_S,
    LOCK_FILE,
    LockData,
)
from hudi_clusterd.lock.usage import LockStats
from hudi_clusterd.storage import FileInfo, PutMode, Storage

log = structlog.get_logger(__name__)

__all__ = ["DEFAULT_TIMEOUT_S", "StorageLease", "StorageLockProvider"]

DEFAULT_TIMEOUT_S = 60.0
RETRY_INTERVAL_S = 1.0
"""Between two attempts to take a held lock (Hudi's ``tryLock(time)``)."""
RELEASE_RETRY_DELAYS_S = (1.0, 2.0, 4.0)
"""Waits before the release is tried again when the storage cannot be reached (Hudi's, for a throttled release)."""


def _iso(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds")




class StorageLockProvider:
    """Hudi's storage-based lock on one table (see the module docstring).

    ``validity_s`` and ``renew_interval_s`` are the writers' ``hoodie.write.lock.storage.*`` times (checked against
    Hudi's constraints where the keys are read, not here). ``clock`` (seconds since the epoch) is the wall clock
    ``validUntil`` is read and written with; ``elapsed`` measures the age of a lease's last write. ``mutexes``:
    threads of this process queue on the mutex of the lock file there instead of polling the file."""

    def __init__(self, storage: Storage, *, validity_s: float = DEFAULT_VALIDITY_S,
                 renew_interval_s: float = DEFAULT_RENEW_S, timeout_s: float = DEFAULT_TIMEOUT_S,
                 clock: Callable[[], float] = time.time, elapsed: Callable[[], float] = lease_clock,
                 retry_interval_s: float = RETRY_INTERVAL_S,
                 release_retry_delays_s: tuple[float, ...] = RELEASE_RETRY_DELAYS_S,
                 mutexes: LocalMutexes | None = None) -> None:
        self.storage = storage
        self.full_path = storage.full_path(LOCK_FILE)
        if renew_interval_s <= 0 or validity_s - CLOCK_DRIFT_S - renew_interval_s <= 0 or timeout_s < 0:
            raise LockError(f"{self.full_path}: storage lock times out of range: the validity ({validity_s:g}s) must "
                            f"exceed the renew interval ({renew_interval_s:g}s, > 0) plus {CLOCK_DRIFT_S:g}s, and the "
                            f"timeout ({timeout_s:g}s) must be >= 0")
        self.validity_s = validity_s
        self.renew_interval_s = renew_interval_s
        self._timeout_s = timeout_s
        self.clock = clock
        self.elapsed = elapsed
        self.retry_interval_s = retry_interval_s
        self.release_retry_delays_s = release_retry_delays_s
        self.stats = LockStats()
        self._mutex = (mutexes or LocalMutexes()).for_key(self.full_path)

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

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
        deadline = time.monotonic() + timeout
        if not self._mutex.acquire(timeout=max(timeout, 0.0)):
            raise LockError(f"{self.full_path}: timed out after {timeout:g}s waiting for another thread of this "
                            "process")
        owner = str(uuid.uuid4())
        try:
            while isinstance(attempt := self._attempt(owner), str):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise LockError(f"{self.full_path}: timed out after {timeout:g}s waiting for the table lock "
                                    f"({attempt})")
                time.sleep(min(self.retry_interval_s, remaining))
        except BaseException:
            self._mutex.release()
            raise
        attempt.start_heartbeat(self._mutex)
        log.debug("took the table lock", lock=self.full_path, owner=owner, valid_until=_iso(attempt.valid_until_ms))
        return attempt

    @contextmanager
    def held(self, timeout_s: float | None = None) -> Iterator[StorageLease]:
        """Hold the lock for the ``with`` block."""
        with self.acquire(timeout_s) as lease:
            yield lease

    def _attempt(self, owner: str) -> StorageLease | str:
        """One try: the lease, or why there is none."""
        started = self.elapsed()
        try:
            found = self.read()
        except StorageError as e:
            self.stats.add_connection_retry()
            log.warning("table lock could not be read; tried again", lock=self.full_path, error=str(e))
            return f"the lock file could not be read: {e}"
        now_ms = self.now_ms()
        data = LockData(False, now_ms + int(self.validity_s * 1000), owner)
        try:
            if found is None:
                written = self.storage.put(LOCK_FILE, data.to_json(), mode=PutMode.CREATE)
                if written is None:
                    return "another writer created the lock file first"
            else:
                current, version = found
                if current.held_at(now_ms):
                    return f"held by {current.owner} until {_iso(current.valid_until_ms)}"
                written = self.storage.put(LOCK_FILE, data.to_json(), if_match=version)
        except PreconditionFailed:
            return "another writer took it first"
        except StorageError as e:
            self.stats.add_connection_retry()
            log.warning("table lock could not be written; tried again", lock=self.full_path, error=str(e))
            return f"the lock file could not be written: {e}"
        return StorageLease(self, owner, data, self.version_of(written), started)


class StorageLease:
    """One holding of the storage lock, kept by a heartbeat thread until released or lost."""

    def __init__(self, provider: StorageLockProvider, owner: str, data: LockData, version: str,
                 sent_at: float) -> None:
        self.provider = provider
        self.owner = owner
        self._data = data
        self._version = version
        self._sent_at = sent_at  # provider.elapsed() right before the last successful write was sent
        self._lost: str | None = None
        self._taken = False  # another writer wrote the file: the release leaves it alone
        self._released = False
        self._writing = threading.Lock()  # one write of the lease at a time
        self._state = threading.Lock()
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._mutex: threading.Lock | None = None

    @property
    def valid_until_ms(self) -> int:
        """``validUntil`` of the lease's last write."""
        return self._data.valid_until_ms

    @property
    def version(self) -> str:
        """The lock file's version after the lease's last write."""
        return self._version

    def start_heartbeat(self, mutex: threading.Lock) -> None:
        """The lock is held: renew it until released (``mutex`` is released with it)."""
        self._mutex = mutex
        self._heartbeat = threading.Thread(target=self._beat, name="table-lock-heartbeat", daemon=True)
        self._heartbeat.start()

    # --- holding ---------------------------------------------------------------------------------------------

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self.provider.renew_interval_s):
                if not self.renew() and self._lost is not None:
                    return
        except Exception as e:  # a defect: the lease must not outlive its heartbeat
            self._lose(f"its heartbeat thread died: {e!r}")
            log.exception("table lock heartbeat died", lock=self.provider.full_path)

    def renew(self) -> bool:
        """One renewal (the heartbeat's): True when written. Refused once the lease is lost, released, or its last
        write started over `StorageLockProvider.lease_limit_s` ago."""
        p = self.provider
        with self._writing:
            if self._lost is not None or self._released:
                return False
            started = p.elapsed()
            age = started - self._sent_at
            if age > p.lease_limit_s:
                self._lose(f"its last successful write started {age:.1f}s ago and a lease lasts {p.validity_s:g}s")
                return False
            data = LockData(False, max(p.now_ms() + int(p.validity_s * 1000), self._data.valid_until_ms + 1),
                            self.owner)
            try:
                written = p.storage.put(LOCK_FILE, data.to_json(), if_match=self._version)
            except PreconditionFailed:
                self._taken = True
                self._lose("another writer changed or removed the lock file")
                return False
            except StorageError as e:
                p.stats.add_connection_retry()
                log.warning("table lock renewal failed; tried again at the next one", lock=p.full_path, error=str(e))
                return False
            self._data, self._version, self._sent_at = data, p.version_of(written), started
            return True

    def _lose(self, reason: str) -> None:
        with self._state:
            if self._lost is not None:
                return
            self._lost = reason
        log.error("table lock lost while held", lock=self.provider.full_path, owner=self.owner, reason=reason)

    def verify(self) -> None:
        """Raise ``LockError`` unless the lease still holds the lock (call right before a timeline write)."""
        p = self.provider
        if self._released:
            raise LockError(f"{p.full_path}: the table lock is not held (released)")
        if self._lost is None:
            age = p.elapsed() - self._sent_at
            if age > p.lease_limit_s:
                self._lose(f"no write of it succeeded in the {age:.1f}s since the last one started, and a lease "
                           f"lasts {p.validity_s:g}s")
            elif self._heartbeat is not None and not self._heartbeat.is_alive():
                self._lose("its heartbeat thread died")
            else:
                self._check_file()
        if self._lost is not None:
            raise LockError(f"{p.full_path}: the table lock was lost while held ({self._lost}); nothing more is "
                            "written under it")

    def _check_file(self) -> None:
        p = self.provider
        try:
            found = p.read()
        except LockError as e:
            self._taken = True
            self._lose(str(e))
            return
        except StorageError as e:
            raise LockError(f"{p.full_path}: the table lock could not be checked before a write: {e}") from e
        if found is None or found[0].owner != self.owner or found[0].expired:
            self._taken = True
            self._lose("the lock file was deleted" if found is None else
                       f"the lock file now names {found[0].owner}" if found[0].owner != self.owner else
                       "the lock file says it expired")

    # --- releasing -------------------------------------------------------------------------------------------

    def release(self) -> None:
        """Stop the heartbeat and mark the lock expired (unless another writer took it); a second call does
        nothing."""
        self._stop.set()
        heartbeat = self._heartbeat
        if heartbeat is not None and heartbeat is not threading.current_thread():
            heartbeat.join()
        with self._writing:
            if self._released:
                return
            self._released = True
            try:
                if not self._taken:
                    self._expire()
            finally:
                mutex, self._mutex = self._mutex, None
                if mutex is not None:
                    mutex.release()

    def _expire(self) -> None:
        p = self.provider
        body = LockData(True, self._data.valid_until_ms, self.owner).to_json()
        error: StorageError | None = None
        for delay in (0.0, *p.release_retry_delays_s):
            time.sleep(delay)
            try:
                p.storage.put(LOCK_FILE, body, if_match=self._version)
                return
            except PreconditionFailed:
                log.warning("table lock was taken by another writer before its release; left to it",
                            lock=p.full_path, owner=self.owner)
                return
            except StorageError as e:
                p.stats.add_connection_retry()
                error = e
        log.error("table lock could not be released; other writers wait until it runs out", lock=p.full_path,
                  valid_until=_iso(self._data.valid_until_ms), error=str(error))

    def __enter__(self) -> StorageLease:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
