"""Reads and writes the active timeline in ``.hoodie/`` (timeline layout 1).

Each state of an instant is its own write-once file. Creating a state checks that the previous state exists,
and completed files are immutable, so their decoded payloads are cached by name, size and mtime.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from hudi_clusterd.domain.commit import CommitMetadata
from hudi_clusterd.domain.instant import Action, Instant, State, parse_instant_file_name
from hudi_clusterd.domain.plan import RequestedReplaceMetadata
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.errors import TimelineError
from hudi_clusterd.io.avro import decode_requested_replace
from hudi_clusterd.io.storage import FileInfo, Storage

META_FOLDER = ".hoodie"
TEMP_FOLDER = ".hoodie/.temp"


def meta_path(name: str) -> str:
    return f"{META_FOLDER}/{name}"


class TimelineStore:
    """The instant files of one table."""

    def __init__(self, storage: Storage, before_write: Callable[[], None] = lambda: None) -> None:
        self.storage = storage
        self.before_write = before_write
        """Called before every create or delete (the table's lock check)."""
        self._cache: dict[tuple[str, int, int], object] = {}
        self._cache_lock = threading.Lock()
        self._files: dict[str, FileInfo] = {}
        self.listed: tuple[FileInfo, ...] = ()
        """Every file of the last listing of ``.hoodie/`` (instant files and others)."""

    def list_files(self) -> list[FileInfo]:
        return [fi for fi in self.storage.list_dir(META_FOLDER) if not fi.is_dir]

    def load(self) -> Timeline:
        """A fresh timeline from a listing of ``.hoodie/``; non-instant files are ignored."""
        states: list[Instant] = []
        files: dict[str, FileInfo] = {}
        listed = self.list_files()
        self.listed = tuple(listed)
        for fi in listed:
            try:
                inst = parse_instant_file_name(fi.name, fi.mtime_ms)
            except TimelineError as e:
                raise TimelineError(f"{self.storage.full_path(fi.path)}: {e}") from e
            if inst is not None:
                states.append(inst)
                files[fi.name] = fi
        self._files = files
        return Timeline.from_states(states)

    def listed_states(self) -> list[Instant]:
        """Every state file of the last listing as an instant (requested, inflight and completed side by side),
        with its modification time: what `load` collapses to one instant per time."""
        out: list[Instant] = []
        for fi in self.listed:
            inst = parse_instant_file_name(fi.name, fi.mtime_ms)
            if inst is not None:
                out.append(inst)
        return out

    def _file_name(self, instant: Instant) -> str:
        return instant.file_name

    def read(self, instant: Instant) -> bytes:
        return self.storage.read_bytes(meta_path(self._file_name(instant)))

    def exists(self, instant: Instant) -> bool:
        return self.storage.exists(meta_path(self._file_name(instant)))

    def _cached(self, instant: Instant, decode: str) -> object | None:
        fi = self._files.get(instant.file_name) or self.storage.info(meta_path(instant.file_name))
        if fi is None:
            return None
        key = (f"{decode}:{instant.file_name}", fi.size, fi.mtime_ms)
        with self._cache_lock:
            return self._cache.get(key, _MISSING)

    def _store(self, instant: Instant, decode: str, value: object) -> None:
        fi = self._files.get(instant.file_name) or self.storage.info(meta_path(instant.file_name))
        if fi is None:
            return
        with self._cache_lock:
            if len(self._cache) > 50_000:
                self._cache.clear()
            self._cache[(f"{decode}:{instant.file_name}", fi.size, fi.mtime_ms)] = value

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        """Decoded JSON of a completed commit or replacecommit (cached: completed files never change)."""
        if not instant.is_completed:
            raise TimelineError(f"instant {instant} is not completed; it has no commit metadata")
        hit = self._cached(instant, "commit")
        if isinstance(hit, CommitMetadata):
            return hit
        path = meta_path(instant.file_name)
        meta = CommitMetadata.from_json_bytes(self.storage.read_bytes(path), self.storage.full_path(path))
        self._store(instant, "commit", meta)
        return meta

    def requested_replace(self, time: str) -> RequestedReplaceMetadata | None:
        """The decoded ``<time>.replacecommit.requested``; None when absent or empty (not clustering)."""
        inst = Instant(time, Action.REPLACE_COMMIT, State.REQUESTED)
        hit = self._cached(inst, "requested")
        if hit is None:
            return None
        if hit is not _MISSING:
            return hit if isinstance(hit, RequestedReplaceMetadata) else None
        path = meta_path(inst.file_name)
        meta = decode_requested_replace(self.storage.read_bytes(path), self.storage.full_path(path))
        self._store(inst, "requested", meta if meta is not None else _EMPTY)
        return meta

    def create(self, instant: Instant, data: bytes = b"") -> None:
        """Create one state file; refuses to overwrite and checks the previous state exists."""
        if instant.state is not State.REQUESTED:
            prev = State.REQUESTED if instant.state is State.INFLIGHT else State.INFLIGHT
            if instant.action is Action.SAVEPOINT and prev is State.REQUESTED:
                prev = State.INFLIGHT
            elif not self.exists(instant.with_state(prev)):
                raise TimelineError(
                    f"cannot move {instant.time}.{instant.action.value} to "
                    f"{instant.state.name.lower()}: its {prev.name.lower()} file is missing"
                )
        path = meta_path(instant.file_name)
        self.before_write()
        if not self.storage.write_bytes(path, data, overwrite=False):
            raise TimelineError(f"instant file {self.storage.full_path(path)} already exists")

    def delete(self, instant: Instant) -> bool:
        self.before_write()
        return self.storage.delete(meta_path(instant.file_name))


class _Missing:
    pass


_MISSING = _Missing()
_EMPTY = _Missing()
