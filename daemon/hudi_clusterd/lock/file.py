"""The file-system lock provider: the lock files of Apache Hudi's ``FileSystemBasedLockProvider``, held with an
owner; docs/lock.md gives the rules.

The daemon creates ``<hoodie.write.lock.filesystem.path>/lock`` (default ``.hoodie/lock``, Hudi's writers') and
``.hoodie/.aux/lock`` (Hudi's utilities, SQL procedures and Flink), in that order, each create-if-absent, as JSON
naming it. A Hudi writer's file is taken over only past the writers' own expiry; another daemon lease's file, kept
fresh by its heartbeat, once older than ``stale_s``. A take-over renames away only the version it judged dead (a
file created meanwhile is put back). Because Hudi's provider may delete a file it does not hold,
:meth:`FileLease.verify` re-reads every file before each timeline write. Only local file systems are supported
(atomic create and rename); other storages are refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from hudi_clusterd.domain.keys import Key, KeyReader, at_least
from hudi_clusterd.domain.values import java_int
from hudi_clusterd.errors import LockError, StorageError
from hudi_clusterd.lock.lease import Held, LeaseBase, Unanswered, keep_trying, polling
from hudi_clusterd.lock.provider import LocalMutexes, take_mutex
from hudi_clusterd.lock.usage import LockStats
from hudi_clusterd.storage import PutMode, Storage, open_storage

log = structlog.get_logger(__name__)

LOCK_NAME = "lock"
LOCK_FILE = ".hoodie/lock"
AUX_LOCK_FILE = ".hoodie/.aux/lock"
AUX_EXPIRE_S = 60.0
"""Hudi's utilities and SQL procedures lock ``.hoodie/.aux/lock`` with ``hoodie.write.lock.filesystem.expire=1``."""
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_STALE_S = 120.0
HOLDER = "hudi-clusterd"


@dataclass(frozen=True, slots=True)
class LockOptions:
    """How the daemon takes a table's lock (the values come checked from the key tables: timeout >= 0, stale > 0).

    ``path`` is Hudi's ``hoodie.write.lock.filesystem.path`` (a folder, absolute path or URI; ``None`` = the
    table's ``.hoodie``), ``expire_minutes`` its ``hoodie.write.lock.filesystem.expire`` as the writers set it."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    stale_s: float = DEFAULT_STALE_S
    path: str | None = None
    expire_minutes: int = 0


def _lock_folder(raw: str) -> str | None:
    text = raw.strip()
    if not text:
        return None
    if text.startswith(("/", "file:")) or "://" in text:
        return text
    raise ValueError(f"must be an absolute path or a URI (a folder holding the lock file), got {raw!r}")


PATH = Key("hoodie.write.lock.filesystem.path", None, _lock_folder, (
    "Folder of the writers' FileSystemBasedLockProvider lock file (absolute path or URI); unset = the table's "
    ".hoodie. The daemon holds <folder>/lock and .hoodie/.aux/lock."))
EXPIRE = Key("hoodie.write.lock.filesystem.expire", "0", at_least(java_int, 0), (
    "Minutes after which the writers treat a lock file nobody refreshed as dead (0 = never, Hudi's default); the "
    "daemon takes over a Hudi writer's lock file only after this."))
FILE_LOCK_KEYS = (PATH, EXPIRE)
"""The keys of the file-system lock, for the reference."""


def file_lock_options(props: Mapping[str, str], *, timeout_s: float = DEFAULT_TIMEOUT_S,
                      stale_s: float = DEFAULT_STALE_S) -> tuple[LockOptions | None, list[str]]:
    """The options the writers' ``hoodie.write.lock.filesystem.*`` keys name, or ``None`` with the problems
    (``<key>: must be ..., got ...``)."""
    reader = KeyReader(props)
    path, expire = reader.get(PATH), reader.get(EXPIRE)
    if reader.problems:
        return None, reader.problems
    return LockOptions(timeout_s, stale_s, path, expire), []


@dataclass(frozen=True, slots=True)
class LockFile:
    """One lock file: where it is, and after how long its writers consider a lock they did not refresh dead."""

    storage: Storage
    rel: str
    writers_expire_s: float  # 0 = Hudi never expires it

    @property
    def full_path(self) -> str:
        return self.storage.full_path(self.rel)


def lock_files(storage: Storage, options: LockOptions) -> tuple[LockFile, ...]:
    """The files to hold, in acquisition order: the writers' lock file, then ``.hoodie/.aux/lock``."""
    main = LockFile(storage, LOCK_FILE, options.expire_minutes * 60.0)
    if options.path:
        folder = open_storage(options.path.rstrip("/"))  # the table's own storage when it is the base path itself
        main = LockFile(storage if folder.full_path() == storage.full_path() else folder, LOCK_NAME,
                        options.expire_minutes * 60.0)
    aux = LockFile(storage, AUX_LOCK_FILE, AUX_EXPIRE_S)
    if posixpath.normpath(main.full_path) == posixpath.normpath(aux.full_path):
        return (LockFile(storage, AUX_LOCK_FILE, min(AUX_EXPIRE_S, main.writers_expire_s or AUX_EXPIRE_S)),)
    return (main, aux)


class FileSystemLockProvider:
    """Exclusive, cross-process lock on one table held in Hudi's lock files (see the module docstring).

    ``mutexes`` is where threads of this process queue for the lock: providers of one table built with the same
    :class:`~hudi_clusterd.lock.provider.LocalMutexes` share a mutex; without it the provider has its own (other
    handles of the table are then still excluded, by the lock files). ``clock`` (seconds since the epoch) ages
    the lock files of others."""

    def __init__(self, storage: Storage, options: LockOptions | None = None, *,
                 clock: Callable[[], float] = time.time, mutexes: LocalMutexes | None = None) -> None:
        self.options = options or LockOptions()
        self.files = lock_files(storage, self.options)
        self.storage = storage
        self.clock = clock
        self.stats = LockStats()
        self._mutex = (mutexes or LocalMutexes()).for_key(self.files[0].full_path)

    def check_supported(self) -> None:
        """Refuse (`LockError`, naming the file) lock files on a storage without an atomic create-if-absent, or
        without an atomic rename (object stores: a dead holder's file is taken over by renaming it away, and
        Hudi's own provider refuses object stores, where its create is a check and then a write): a table there
        can be opened and read, but not locked this way."""
        for f in self.files:
            if not f.storage.supports_atomic_create:
                raise LockError(
                    f"{f.full_path}: this storage ({f.storage.spec.scheme}) has no atomic create-if-absent here, "
                    "so the table lock cannot be a file there; keep the table (and "
                    "hoodie.write.lock.filesystem.path) on a local or mounted file system, or run a single writer")
            if not f.storage.capabilities.atomic_rename:
                raise LockError(
                    f"{f.full_path}: this storage ({f.storage.spec.scheme}) is an object store, where Hudi's "
                    "FileSystemBasedLockProvider is not safe (Hudi refuses it there); lock the table with "
                    "StorageBasedLockProvider, DynamoDBBasedLockProvider or ZookeeperBasedLockProvider")

    @property
    def timeout_s(self) -> float:
        return self.options.timeout_s

    @property
    def heartbeat_interval_s(self) -> float:
        """A quarter of the shortest time after which anyone would call our files dead."""
        limits = [self.options.stale_s] + [f.writers_expire_s for f in self.files if f.writers_expire_s > 0]
        return max(min(limits) / 4.0, 0.05)

    def acquire(self, timeout_s: float | None = None) -> FileLease:
        """Create every lock file, waiting up to ``timeout_s`` (default :attr:`timeout_s`) for their holders."""
        self.check_supported()
        timeout = self.timeout_s if timeout_s is None else timeout_s
        waiting = polling(timeout, 0.02, 0.5)
        take_mutex(self._mutex, timeout, self.files[0].full_path)
        lease = FileLease(self, self._mutex)
        try:
            keep_trying(lease.try_create_all, waiting, lambda _: self._timeout_message(timeout))
        except BaseException:
            lease.release()
            raise
        lease.start()
        return lease

    held = acquire
    """``with provider.held() as lease:`` holds the lock for the block (a lease releases on leaving it)."""

    def take_over_if_dead(self, f: LockFile) -> bool:
        """Move away a lock file whose holder is dead: ours unrefreshed for ``stale_s``, Hudi's past its expiry.
        Only the version judged is moved: a file created after it (another contender took the dead one over and a
        live holder created it anew) is put back. True when it moved the file."""
        info = f.storage.info(f.rel)
        if info is None:
            return False
        age = self.clock() - info.mtime_ms / 1000.0
        ours = _read_lock(f).get("holder") == HOLDER
        limit = self.options.stale_s if ours else f.writers_expire_s
        if limit <= 0 or age <= limit:
            return False
        folder, name = posixpath.split(f.rel)
        grave = posixpath.join(folder, f".{name}.dead.{uuid.uuid4().hex}")
        try:
            f.storage.rename(f.rel, grave)
        except StorageError:
            return False  # another contender moved it first
        moved = f.storage.info(grave)
        if moved is None or (moved.version, moved.mtime_ms, moved.size) != (info.version, info.mtime_ms, info.size):
            self._put_back(f, grave)
            return False
        log.warning("took over a dead table lock", lock=f.full_path, age_s=round(age, 3),
                    holder=HOLDER if ours else "an Apache Hudi writer")
        f.storage.delete(grave, missing_ok=True)
        if not ours:  # Hadoop's local file system keeps a checksum beside the file it created
            f.storage.delete(posixpath.join(folder, f".{name}.crc"), missing_ok=True)
        return True

    def _put_back(self, f: LockFile, grave: str) -> None:
        """A lock file created after the one judged dead was moved away with it: create it again (unless yet
        another one is there) and drop the moved one."""
        try:
            restored = f.storage.put(f.rel, f.storage.read_bytes(grave), mode=PutMode.CREATE) is not None
            log.warning("a table lock file created after the dead one was judged was moved; put back", lock=f.full_path,
                        restored=restored)
        finally:
            f.storage.delete(grave, missing_ok=True)

    def _timeout_message(self, timeout_s: float) -> str:
        blocking = next((f for f in self.files if f.storage.exists(f.rel)), self.files[0])
        content = _read_lock(blocking)
        holder = content.get("owner") if content.get("holder") == HOLDER else "an Apache Hudi writer"
        hint = ("" if content.get("holder") == HOLDER or blocking.writers_expire_s > 0 else
                "; Hudi's lock files never expire (hoodie.write.lock.filesystem.expire=0): if no writer runs, "
                "a crashed one left it behind and it must be deleted by hand")
        return (f"{blocking.full_path}: timed out after {timeout_s:.0f}s waiting for the table lock held by "
                f"{holder or 'unknown'}{hint}")


class FileLease(LeaseBase):
    """One holding of the lock files: names its owner in them and keeps them fresh with a heartbeat thread."""

    def __init__(self, provider: FileSystemLockProvider, mutex: threading.Lock) -> None:
        super().__init__(where=provider.files[0].full_path, stats=provider.stats, mutex=mutex,
                         heartbeat_s=provider.heartbeat_interval_s)
        self.provider = provider
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._files: list[LockFile] = []
        self._took_over = False

    @property
    def owner(self) -> str:
        return self._owner

    # --- acquiring (driven by FileSystemLockProvider.acquire) ------------------------------------------------

    def _content(self) -> bytes:
        return json.dumps({
            "lockCreateTime": datetime.now(UTC).isoformat(),
            "lockThreadName": threading.current_thread().name,
            "lockStacksInfo": [],
            "owner": self.owner,
            "holder": HOLDER,
        }).encode()

    def try_create_all(self) -> None:
        """Create every lock file in order; on a file held by someone else, give back the ones created, take that
        one over if its holder is dead, and raise `Held`."""
        for f in self.provider.files:
            if folder := posixpath.dirname(f.rel):
                f.storage.makedirs(folder)
            if f.storage.write_bytes(f.rel, self._content(), overwrite=False):
                self._files.append(f)
                continue
            self._give_back()
            if self.provider.take_over_if_dead(f) and not self._took_over:
                self._took_over = True  # one take-over of the lock, whatever number of its files it moved
                self.stats.add_takeover()
            raise Held(f.full_path)

    # --- the protocol's steps --------------------------------------------------------------------------------

    def _renew_once(self) -> bool:
        """Refresh every file's modification time, once each still names this holder."""
        self._check_ours()
        if self.lost is not None:
            return False
        for f in self._files:
            try:
                f.storage.touch(f.rel)
            except StorageError as e:
                raise Unanswered(str(e)) from None
        return True

    def _check_ours(self) -> None:
        if (f := next((f for f in self._files if _read_lock(f).get("owner") != self.owner), None)) is not None:
            self.lose(f"{f.full_path} no longer names this process: another writer deleted or took it")

    def _give_back(self) -> None:
        """Delete the lock files held that still name this holder; leave the others to whoever has them now."""
        while self._files:
            f = self._files.pop()
            try:
                if _read_lock(f).get("owner") == self.owner:
                    f.storage.delete(f.rel, missing_ok=True)
                else:
                    log.error("table lock was taken or deleted by another writer while held", lock=f.full_path)
            except StorageError as e:
                log.warning("could not delete a table lock file", lock=f.full_path, error=str(e))


def _read_lock(f: LockFile) -> dict[str, object]:
    with contextlib.suppress(StorageError, ValueError, UnicodeDecodeError):
        data = json.loads(f.storage.read_bytes(f.rel))
        if isinstance(data, dict):
            return data
    return {}


__all__ = ["AUX_LOCK_FILE", "DEFAULT_STALE_S", "DEFAULT_TIMEOUT_S", "LOCK_FILE", "FileLease", "FileSystemLockProvider",
           "LockFile", "LockOptions", "file_lock_options", "lock_files"]
