"""Reads and writes a table's active timeline (or its metadata table's), in the table's timeline layout.

Each state of an instant is its own write-once file. Creating a state checks that the previous state exists,
and completed files are immutable, so their decoded payloads are cached by name, size and mtime.

The layout (`domain.timeline_layout`) says where the files are and how they are named; the instants' contents
are encoded as that layout's tables expect (`formats.timeline.TimelineSerde`): layout 1 keeps commit metadata as
JSON and plans as 0.14's Avro, layout 2 stores every non-empty file as Avro with Hudi 1.x's schemas. Nothing above
this module knows which.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from hudi_clusterd.domain.commit import CommitMetadata
from hudi_clusterd.domain.compaction import CompactionPlan
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import RequestedReplaceMetadata
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.domain.timeline_layout import LAYOUT_1, META_FOLDER, TimelineLayout
from hudi_clusterd.errors import TimelineError
from hudi_clusterd.formats.avro import decode_compaction_plan, decode_requested_replace
from hudi_clusterd.formats.timeline import serde_of
from hudi_clusterd.storage import FileInfo, Storage

TEMP_FOLDER = f"{META_FOLDER}/.temp"

__all__ = ["META_FOLDER", "TEMP_FOLDER", "TimelineStore"]


class TimelineStore:
    """The instant files of one table."""

    def __init__(self, storage: Storage, before_write: Callable[[], None] = lambda: None,
                 layout: TimelineLayout = LAYOUT_1, completion_time: Callable[[], str] | None = None) -> None:
        self.storage = storage
        self.before_write = before_write
        """Called before every create or delete (the table's lock check)."""
        self.completion_time = completion_time
        """Gives a completion time for a completed instant of layout 2 (called under the table lock)."""
        self._cache: dict[tuple[str, int, int], object] = {}
        self._cache_lock = threading.Lock()
        self._files: dict[str, FileInfo] = {}
        self.listed: tuple[FileInfo, ...] = ()
        """Every file of the last listing of the timeline folder (instant files and others)."""
        self.layout = layout

    @property
    def layout(self) -> TimelineLayout:
        return self._layout

    @layout.setter
    def layout(self, layout: TimelineLayout) -> None:
        """A writer may upgrade the table underneath (layout 1 to 2): its files move, so forget the last listing."""
        self._layout = layout
        self.serde = serde_of(layout)
        self._files = {}
        self.listed = ()

    @property
    def folder(self) -> str:
        return self._layout.folder

    def path(self, instant: Instant) -> str:
        """The file of one instant state, relative to the base path (a completed instant of layout 2 without
        its completion time is looked up in the last listing, then on storage)."""
        return f"{self.folder}/{self.file_name(instant)}"

    def file_name(self, instant: Instant) -> str:
        if instant.completion_time is None and self._layout.names_completion(instant):
            found = self._completed_file(instant)
            if found is None:
                raise TimelineError(f"instant {instant.time}.{instant.action.value} is not completed on the timeline "
                                    f"of {self.storage.base_uri}")
            return found
        return self._layout.file_name(instant)

    def _completed_file(self, instant: Instant, *, fresh: bool = False) -> str | None:
        prefix, suffix = self._layout.completed_prefix_suffix(instant.time, instant.action)
        names = [fi.name for fi in self.list_files()] if fresh or not self._files else list(self._files)
        found = sorted(n for n in names if n.startswith(prefix) and n.endswith(suffix)
                       and (p := self._layout.parse(n)) is not None and p.is_completed)
        if not found and not fresh and self._files:
            return self._completed_file(instant, fresh=True)
        return found[0] if found else None

    def list_files(self) -> list[FileInfo]:
        return [fi for fi in self.storage.list_dir(self.folder) if not fi.is_dir]

    def load(self) -> Timeline:
        """A fresh timeline from a listing of the timeline folder; non-instant files are ignored."""
        states: list[Instant] = []
        files: dict[str, FileInfo] = {}
        listed = self.list_files()
        self.listed = tuple(listed)
        for fi in listed:
            try:
                inst = self._layout.parse(fi.name, fi.mtime_ms)
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
            inst = self._layout.parse(fi.name, fi.mtime_ms)
            if inst is not None:
                out.append(inst)
        return out

    def read(self, instant: Instant) -> bytes:
        return self.storage.read_bytes(self.path(instant))

    def exists(self, instant: Instant) -> bool:
        if instant.completion_time is None and self._layout.names_completion(instant):
            return self._completed_file(instant, fresh=True) is not None
        return self.storage.exists(self.path(instant))

    def _info(self, name: str) -> FileInfo | None:
        return self._files.get(name) or self.storage.info(f"{self.folder}/{name}")

    def _cached(self, name: str, decode: str) -> object | None:
        fi = self._info(name)
        if fi is None:
            return None
        key = (f"{decode}:{self.folder}/{name}", fi.size, fi.mtime_ms)
        with self._cache_lock:
            return self._cache.get(key, _MISSING)

    def _store(self, name: str, decode: str, value: object) -> None:
        fi = self._info(name)
        if fi is None:
            return
        with self._cache_lock:
            if len(self._cache) > 50_000:
                self._cache.clear()
            self._cache[(f"{decode}:{self.folder}/{name}", fi.size, fi.mtime_ms)] = value

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        """Decoded metadata of a completed commit or replacecommit (cached: completed files never change)."""
        if not instant.is_completed:
            raise TimelineError(f"instant {instant} is not completed; it has no commit metadata")
        return self._decode_commit(instant)

    def inflight_metadata(self, instant: Instant) -> CommitMetadata:
        """Decoded workload profile of an inflight commit (empty for an empty file)."""
        return self._decode_commit(instant.with_state(State.INFLIGHT), cache=False)

    def _decode_commit(self, instant: Instant, *, cache: bool = True) -> CommitMetadata:
        name = self.file_name(instant)
        if cache:
            hit = self._cached(name, "commit")
            if isinstance(hit, CommitMetadata):
                return hit
        path = f"{self.folder}/{name}"
        meta = self.serde.decode_commit(self.storage.read_bytes(path), self.storage.full_path(path))
        if cache:
            self._store(name, "commit", meta)
        return meta

    def requested_replace(self, time: str) -> RequestedReplaceMetadata | None:
        """The decoded plan of replace instant ``time`` (``T.clustering.requested``, else
        ``T.replacecommit.requested``); None when absent or empty (a replacecommit that is not clustering)."""
        names = dict.fromkeys(self._layout.file_name(Instant(time, action, State.REQUESTED))
                              for action in (Action.CLUSTERING, Action.REPLACE_COMMIT))
        for name in names:
            hit = self._cached(name, "requested")
            if hit is None:
                continue
            if hit is not _MISSING:
                return hit if isinstance(hit, RequestedReplaceMetadata) else None
            path = f"{self.folder}/{name}"
            meta = decode_requested_replace(self.storage.read_bytes(path), self.storage.full_path(path))
            self._store(name, "requested", meta if meta is not None else _EMPTY)
            return meta
        return None

    def compaction_plan(self, instant: Instant) -> CompactionPlan:
        """The decoded plan of a compaction or log compaction (its requested file)."""
        name = self._layout.file_name(instant.with_state(State.REQUESTED))
        hit = self._cached(name, "compaction")
        if isinstance(hit, CompactionPlan):
            return hit
        path = f"{self.folder}/{name}"
        plan = decode_compaction_plan(self.storage.read_bytes(path), self.storage.full_path(path))
        self._store(name, "compaction", plan)
        return plan

    def create(self, instant: Instant, data: bytes = b"") -> Instant:
        """Create one state file; refuses to overwrite and checks the previous state exists. A completed instant
        of layout 2 gets its completion time here (call under the table lock). Returns the instant created."""
        if instant.state is not State.REQUESTED:
            prev = State.REQUESTED if instant.state is State.INFLIGHT else State.INFLIGHT
            if instant.action is Action.SAVEPOINT and prev is State.REQUESTED:
                prev = State.INFLIGHT
            elif not any(self.exists(p) for p in _pending(instant, prev)):
                raise TimelineError(
                    f"cannot move {instant.time}.{instant.action.value} to "
                    f"{instant.state.name.lower()}: its {prev.name.lower()} file is missing"
                )
        if self._layout.names_completion(instant):
            done = self._completed_file(instant, fresh=True)
            if done is not None:
                raise TimelineError(f"instant {instant.time} is completed already: "
                                    f"{self.storage.full_path(f'{self.folder}/{done}')}")
            if instant.completion_time is None:
                if self.completion_time is None:
                    raise TimelineError(f"no completion time for {instant.time}.{instant.action.value}")
                instant = replace(instant, completion_time=self.completion_time())
        path = f"{self.folder}/{self._layout.file_name(instant)}"
        self.before_write()
        if not self.storage.write_bytes(path, data, overwrite=False):
            raise TimelineError(f"instant file {self.storage.full_path(path)} already exists")
        return instant

    def delete(self, instant: Instant) -> bool:
        self.before_write()
        return self.storage.delete(self.path(instant))

    def delete_all(self, instant: Instant) -> None:
        """Every state file of ``instant``: the completed one first, so that it stops counting at once."""
        if instant.is_completed:
            self.delete(instant)
        for state in (State.INFLIGHT, State.REQUESTED):
            self.delete(instant.with_state(state))


def _pending(instant: Instant, state: State) -> list[Instant]:
    """The instants whose state ``state`` may precede ``instant``: a completed replacecommit was pending as a
    clustering or as a replacecommit (which layout 1 names alike)."""
    if instant.action is Action.REPLACE_COMMIT and instant.is_completed:
        return [Instant(instant.time, Action.CLUSTERING, state), Instant(instant.time, Action.REPLACE_COMMIT, state)]
    return [Instant(instant.time, instant.action, state)]


class _Missing:
    pass


_MISSING = _Missing()
_EMPTY = _Missing()
