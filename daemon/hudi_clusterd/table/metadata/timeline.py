"""The metadata table's own timeline: its instant files, named by the table version's layout.

Its instant times follow the data table's, plus the metadata table's own: 17 zeros and a counter for the
partitions' initialisation (Hudi 1.x), and version 6's suffixed times (a data instant and three more digits, e.g.
compaction ``T001`` and rollback ``T006``). Hence a parser of its own: the data table's timeline accepts none of
those.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from hudi_clusterd.errors import TimelineError
from hudi_clusterd.storage import Storage

DELTA_COMMIT = "deltacommit"
COMMIT = "commit"  # a completed compaction
COMPACTION = "compaction"
LOG_COMPACTION = "logcompaction"
ROLLBACK = "rollback"
CLEAN = "clean"

_COMPLETES_AS = {COMPACTION: COMMIT, LOG_COMPACTION: DELTA_COMMIT}
_NAME = re.compile(r"\A([0-9]{14,20})(?:_([0-9]{14,20}))?\.([a-z]+)(?:\.(requested|inflight))?\Z")


class MdtState(str, Enum):
    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = "completed"


@dataclass(frozen=True, slots=True)
class MdtInstant:
    time: str
    action: str
    state: MdtState
    completion_time: str | None = None

    @property
    def is_completed(self) -> bool:
        return self.state is MdtState.COMPLETED


@dataclass(frozen=True, slots=True)
class MdtTimeline:
    """The newest state of every instant of the metadata table, ordered by requested time."""

    instants: tuple[MdtInstant, ...]

    def find(self, time: str, action: str) -> MdtInstant | None:
        return next((i for i in self.instants if i.time == time and i.action == action), None)

    def of(self, *actions: str) -> list[MdtInstant]:
        return [i for i in self.instants if i.action in actions]

    def pending_compactions(self) -> list[MdtInstant]:
        """Compactions and log compactions scheduled and not completed."""
        return [i for i in self.instants if i.action in (COMPACTION, LOG_COMPACTION) and not i.is_completed]

    def last_time(self) -> str | None:
        times = [t for i in self.instants for t in (i.time, i.completion_time) if t]
        return max(times) if times else None


class MdtTimelineStore:
    """Reads and writes the metadata table's instant files (``.hoodie/`` of the metadata table, or its
    ``hoodie.timeline.path`` folder on layout 2)."""

    def __init__(self, storage: Storage, folder: str, layout: int, before_write: Callable[[], None]) -> None:
        self.storage = storage
        self.folder = folder
        self.layout = layout
        self.before_write = before_write

    def parse(self, name: str) -> MdtInstant | None:
        m = _NAME.match(name)
        if m is None:
            return None
        time, completion, action, state = m.groups()
        if action == "inflight" and state is None and completion is None:
            return MdtInstant(time, COMMIT, MdtState.INFLIGHT)
        if action not in (DELTA_COMMIT, COMMIT, COMPACTION, LOG_COMPACTION, ROLLBACK, CLEAN, "restore",
                          "indexing", "savepoint", "replacecommit", "clustering"):
            return None
        if state is None:
            if action in (COMPACTION, LOG_COMPACTION):
                return None  # a pending compaction has a state; a completed one is a commit
            return MdtInstant(time, action, MdtState.COMPLETED, completion)
        return MdtInstant(time, action, MdtState(state))

    def load(self) -> MdtTimeline:
        newest: dict[tuple[str, str], MdtInstant] = {}
        order = {MdtState.REQUESTED: 0, MdtState.INFLIGHT: 1, MdtState.COMPLETED: 2}
        for fi in self.storage.list_dir(self.folder):
            if fi.is_dir:
                continue
            inst = self.parse(fi.name)
            if inst is None:
                continue
            # a compaction completes as a commit, a log compaction as a deltacommit
            key = (inst.time, _COMPLETES_AS.get(inst.action, inst.action))
            if key not in newest or order[inst.state] > order[newest[key].state]:
                newest[key] = inst
        return MdtTimeline(tuple(sorted(newest.values(), key=lambda i: (i.time, i.action))))

    def file_name(self, time: str, action: str, state: MdtState, completion_time: str | None = None) -> str:
        if state is MdtState.COMPLETED:
            if self.layout >= 2:
                if completion_time is None:
                    raise TimelineError(f"metadata table instant {time}.{action}: no completion time")
                return f"{time}_{completion_time}.{action}"
            return f"{time}.{action}"
        return f"{time}.{action}.{state.value}"

    def path(self, time: str, action: str, state: MdtState, completion_time: str | None = None) -> str:
        return f"{self.folder}/{self.file_name(time, action, state, completion_time)}"

    def create(self, time: str, action: str, state: MdtState, data: bytes = b"",
               completion_time: str | None = None) -> None:
        path = self.path(time, action, state, completion_time)
        self.before_write()
        if not self.storage.write_bytes(path, data, overwrite=False):
            raise TimelineError(f"metadata table instant file {self.storage.full_path(path)} already exists")

    def read(self, inst: MdtInstant) -> bytes:
        return self.storage.read_bytes(self.path(inst.time, inst.action, inst.state, inst.completion_time))

    def exists(self, time: str, action: str, state: MdtState) -> bool:
        if state is MdtState.COMPLETED and self.layout >= 2:
            found = self.load().find(time, action)
            return found is not None and found.is_completed
        return self.storage.exists(self.path(time, action, state))

    def delete_state(self, inst: MdtInstant, state: MdtState) -> None:
        self.before_write()
        self.storage.delete(self.path(inst.time, inst.action, state, inst.completion_time), missing_ok=True)

    def delete_all(self, inst: MdtInstant) -> None:
        """Every state file of ``inst``: the completed one first, so that it stops counting at once."""
        if inst.is_completed:
            self.delete_state(inst, MdtState.COMPLETED)
        for state in (MdtState.INFLIGHT, MdtState.REQUESTED):
            self.delete_state(inst, state)
