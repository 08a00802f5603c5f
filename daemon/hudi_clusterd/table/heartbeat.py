"""Heartbeats of running instants: ``.hoodie/.heartbeat/<instant>``, whose modification time is the last beat.

Hudi's writers keep one per ingestion instant (refreshed every ``hoodie.client.heartbeat.interval_in_ms``, dead
after ``tolerable.misses`` intervals) and read only its mtime. The daemon writes the same file for its own
ingestion commits and clustering instants; the content names the owner (``host:pid:token``), so that a process
can tell its own running instants from those a dead process left behind.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid

import structlog

from hudi_clusterd.domain.instant import Instant
from hudi_clusterd.errors import StorageError
from hudi_clusterd.storage import Storage

log = structlog.get_logger(__name__)

HEARTBEAT_FOLDER = ".hoodie/.heartbeat"
INGESTION_INTERVAL_S = 60.0  # hoodie.client.heartbeat.interval_in_ms
INGESTION_TOLERABLE_MISSES = 2  # hoodie.client.heartbeat.tolerable.misses
INGESTION_TIMEOUT_S = INGESTION_INTERVAL_S * INGESTION_TOLERABLE_MISSES
CLUSTERING_INTERVAL_S = 5.0
CLUSTERING_TIMEOUT_S = 30.0


def heartbeat_path(instant_time: str) -> str:
    return f"{HEARTBEAT_FOLDER}/{instant_time}"


def process_owner(token: str | None = None) -> str:
    """``host:pid:token`` naming this process (and, with ``token``, one owner object in it)."""
    return f"{socket.gethostname()}:{os.getpid()}:{token or uuid.uuid4().hex[:12]}"


class Heartbeat:
    """Writes the heartbeat file of one instant, then refreshes its mtime every ``interval_s`` until stopped."""

    def __init__(self, storage: Storage, instant_time: str, *, interval_s: float, owner: str | None = None) -> None:
        self.storage = storage
        self.instant_time = instant_time
        self.interval_s = interval_s
        self.owner = owner or process_owner()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def path(self) -> str:
        return heartbeat_path(self.instant_time)

    def start(self) -> None:
        content = json.dumps({"owner": self.owner, "token": uuid.uuid4().hex}).encode()
        self.storage.write_bytes(self.path, content, overwrite=True)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.instant_time}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.storage.touch(self.path)
            except StorageError as e:
                log.warning("heartbeat refresh failed", instant=self.instant_time, error=str(e))

    def stop(self, *, delete: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if delete:
            self.storage.delete(self.path, missing_ok=True)


def heartbeat_age(storage: Storage, instant_time: str, now_s: float | None = None) -> float | None:
    """Seconds since the instant's last beat; None when it has no heartbeat file."""
    info = storage.info(heartbeat_path(instant_time))
    if info is None:
        return None
    return (time.time() if now_s is None else now_s) - info.mtime_ms / 1000.0


def heartbeat_owner(storage: Storage, instant_time: str) -> str | None:
    """The owner a heartbeat names; None when it has no file, no owner, or unreadable content (Hudi's)."""
    try:
        owner = json.loads(storage.read_bytes(heartbeat_path(instant_time))).get("owner")
    except (StorageError, ValueError, AttributeError):
        return None
    return owner if isinstance(owner, str) else None


def heartbeat_expired(storage: Storage, instant: Instant, timeout_s: float, now_s: float | None = None) -> bool:
    """Whether the writer of a pending instant stopped beating more than ``timeout_s`` ago.

    An instant without a heartbeat file counts from its own state file's time (Hudi would call it expired at
    once, which kills writers that run without heartbeats)."""
    now_s = time.time() if now_s is None else now_s
    age = heartbeat_age(storage, instant.time, now_s)
    if age is None:
        age = now_s - instant.transition_ms / 1000.0
    return age > timeout_s
