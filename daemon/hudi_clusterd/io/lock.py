"""The table lock: a lock file that other processes honour, with an owner and a heartbeat.

The file is ``.hoodie/lock``, the path Hudi's ``FileSystemBasedLockProvider`` uses, so a Hudi writer configured
with that provider and this daemon exclude each other. It is created atomically (create-if-absent) and holds
JSON naming its owner. While held, a heartbeat thread refreshes its modification time; a lock whose mtime is
older than ``stale_seconds`` belongs to a dead process and is taken over: first renamed away atomically (only
one contender can win the rename), then created afresh.

Storage without atomic create (S3, GCS, ABFS) cannot host this lock; ``TableLock`` refuses it with a clear
error rather than risk two writers committing at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import structlog

from hudi_clusterd.errors import LockError, StorageError
from hudi_clusterd.io.storage import Storage

log = structlog.get_logger(__name__)

LOCK_FILE = ".hoodie/lock"
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_STALE_S = 120.0

# One in-process mutex per lock file, so threads of one process queue up instead of spinning on the file.
_PROCESS_LOCKS: dict[str, threading.Lock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


def _process_lock(key: str) -> threading.Lock:
    with _PROCESS_LOCKS_GUARD:
        return _PROCESS_LOCKS.setdefault(key, threading.Lock())


class TableLock:
    """Exclusive, cross-process lock on one table."""

    def __init__(
        self,
        storage: Storage,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        stale_s: float = DEFAULT_STALE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not storage.supports_atomic_create:
            raise LockError(
                f"{storage.base_uri}: this storage ({storage.fs.type_name}) has no atomic create, so the table "
                "lock cannot be a file there; keep the table on a file system with atomic create (local, HDFS) "
                "or run a single writer"
            )
        self.storage = storage
        self.timeout_s = timeout_s
        self.stale_s = stale_s
        self.clock = clock
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._mutex = _process_lock(storage.full_path(LOCK_FILE))
        self._stop_heartbeat = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def _content(self) -> bytes:
        now = datetime.now(UTC).isoformat()
        return json.dumps({
            "lockCreateTime": now,
            "lockThreadName": threading.current_thread().name,
            "lockStacksInfo": [],
            "owner": self.owner,
            "holder": "hudi-clusterd",
        }).encode()

    def _try_create(self) -> bool:
        return self.storage.write_bytes(LOCK_FILE, self._content(), overwrite=False)

    def _take_over_if_stale(self) -> None:
        info = self.storage.info(LOCK_FILE)
        if info is None:
            return
        age = self.clock() - info.mtime_ms / 1000.0
        if age <= self.stale_s:
            return
        grave = f".hoodie/.lock.stale.{uuid.uuid4().hex}"
        try:
            self.storage.rename(LOCK_FILE, grave)
        except StorageError:
            return  # another contender moved it first
        log.warning("took over a stale table lock", base_path=self.storage.base_uri, age_s=round(age, 1))
        self.storage.delete(grave)

    def acquire(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        if not self._mutex.acquire(timeout=max(self.timeout_s, 0.0)):
            raise LockError(f"{self.storage.full_path(LOCK_FILE)}: timed out after {self.timeout_s:.0f}s "
                            "waiting for another thread of this process")
        try:
            self.storage.makedirs(".hoodie")
            delay = 0.02
            while not self._try_create():
                self._take_over_if_stale()
                if time.monotonic() >= deadline:
                    raise LockError(self._timeout_message())
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
        except BaseException:
            self._mutex.release()
            raise
        self._stop_heartbeat.clear()
        self._heartbeat = threading.Thread(target=self._beat, name="table-lock-heartbeat", daemon=True)
        self._heartbeat.start()

    def _timeout_message(self) -> str:
        holder = "unknown"
        with contextlib.suppress(StorageError, ValueError, AttributeError):
            holder = json.loads(self.storage.read_bytes(LOCK_FILE)).get("owner", "a Hudi writer")
        return (f"{self.storage.full_path(LOCK_FILE)}: timed out after {self.timeout_s:.0f}s waiting for the "
                f"table lock held by {holder}")

    def _beat(self) -> None:
        interval = max(self.stale_s / 4.0, 0.05)
        while not self._stop_heartbeat.wait(interval):
            try:
                self.storage.touch(LOCK_FILE)
            except StorageError as e:
                log.warning("table lock heartbeat failed", error=str(e))

    def _still_ours(self) -> bool:
        try:
            return bool(json.loads(self.storage.read_bytes(LOCK_FILE)).get("owner") == self.owner)
        except (StorageError, ValueError, AttributeError):
            return False

    def release(self) -> None:
        self._stop_heartbeat.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        try:
            if self._still_ours():
                self.storage.delete(LOCK_FILE)
            else:
                log.error("table lock was taken over while held", base_path=self.storage.base_uri)
        finally:
            self._mutex.release()

    @contextmanager
    def held(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()
