"""Timeline layouts: where a table's instant files live and how they are named, one object per layout.

* Layout 1 (table version 6, Hudi 0.14/0.15): ``.hoodie/<time>.<action>[.<state>]``; a clustering is pending as
  a ``replacecommit`` whose plan says CLUSTER; completed instants record no completion time.
* Layout 2 (table versions 8 and 9, Hudi 1.x): ``.hoodie/<hoodie.timeline.path>/``; a completed instant is
  ``<requested>_<completion>.<action>``; a clustering is pending as ``clustering`` and completes as
  ``replacecommit``; the archiver's LSM timeline sits in ``history/`` below it, which nothing else writes.

Everything above this module names instants by what they are (`Action.CLUSTERING` for a clustering in any
pending state); the layout turns that into file names, and file names back into instants.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hudi_clusterd.domain.instant import (
    COMPLETED_FILE_ACTION,
    Action,
    Instant,
    State,
    instant_file_name,
    parse_instant_file_name,
)
from hudi_clusterd.errors import TimelineError

META_FOLDER = ".hoodie"
DEFAULT_TIMELINE_PATH = "timeline"
DEFAULT_HISTORY_PATH = "history"

# <requested>[_<completion>].<action>[.<state>]: layout 2's names (InstantFileNameParserV2's shape, digits only)
_V2_NAME_RE = re.compile(r"\A([0-9]+)(?:_([0-9]+))?\.([a-z]+)(?:\.([a-z]+))?\Z")
_INSTANT_TIME_RE = re.compile(r"\A[0-9]{14}(?:[0-9]{3})?\Z")


@dataclass(frozen=True, slots=True)
class TimelineLayout:
    """One timeline layout: its folder (relative to the base path) and its file-name rules."""

    version: int
    folder: str

    @property
    def records_completion_time(self) -> bool:
        """Whether a completed instant's file names its completion time (layout 2)."""
        return self.version >= 2

    @property
    def max_pending_s(self) -> float | None:
        """How long after its requested time a clustering may still start, so that it completes within a day:
        Hudi 1.x's completion-time queries assume no instant of layout 2 lasts longer (an hour is left for the
        execution). None: no limit."""
        return 23 * 3600.0 if self.records_completion_time else None

    @property
    def pending_clustering_action(self) -> Action:
        """The action a pending clustering's files carry on disk."""
        return Action.CLUSTERING if self.version >= 2 else Action.REPLACE_COMMIT

    def path(self, instant: Instant) -> str:
        """The instant state's file, relative to the base path."""
        return f"{self.folder}/{self.file_name(instant)}"

    def file_name(self, instant: Instant) -> str:
        """The file name of one state of ``instant``. Layout 2 needs the completion time of a completed one."""
        if self.version < 2:
            return instant_file_name(instant.time, instant.action, instant.state)
        action = instant.action
        if instant.state is State.COMPLETED:
            if instant.completion_time is None:
                raise TimelineError(f"instant {instant.time}.{action.value}: a completed instant of timeline "
                                    "layout 2 is named by its completion time, which is not known here")
            return f"{instant.time}_{instant.completion_time}.{COMPLETED_FILE_ACTION.get(action, action).value}"
        if action is Action.COMMIT and instant.state is State.INFLIGHT:
            return f"{instant.time}.inflight"
        return f"{instant.time}.{action.value}.{instant.state.value}"

    def completed_prefix_suffix(self, time: str, action: Action) -> tuple[str, str]:
        """The start and end of every possible completed file name of instant ``time``/``action``."""
        file_action = COMPLETED_FILE_ACTION.get(action, action).value
        if self.version < 2:
            return f"{time}.{file_action}", ""
        return f"{time}_", f".{file_action}"

    def parse(self, name: str, transition_ms: int = 0) -> Instant | None:
        """The instant state a file name stands for; None for other files (and names of unknown actions, which
        Hudi's loaders skip too). A malformed instant time raises ``TimelineError`` naming the file."""
        if self.version < 2:
            return parse_instant_file_name(name, transition_ms)
        m = _V2_NAME_RE.match(name)
        if m is None:
            return None
        time, completion, action_s, state_s = m.groups()
        for t in (time, completion):
            if t is not None and not _INSTANT_TIME_RE.match(t):
                raise TimelineError(f"timeline file {name!r}: instant time {t!r} is not 14 or 17 digits")
        if action_s == "inflight" and state_s is None and completion is None:
            return Instant(time, Action.COMMIT, State.INFLIGHT, transition_ms)
        try:
            action = Action(action_s)
        except ValueError:
            return None
        if state_s is None:
            # a completed file without its completion time is a legacy one (an upgraded table): Hudi takes the
            # file's modification time then; it is left unknown here
            return Instant(time, action, State.COMPLETED, transition_ms, completion)
        if completion is not None or state_s not in ("requested", "inflight"):
            return None
        return Instant(time, action, State(state_s), transition_ms)


LAYOUT_1 = TimelineLayout(1, META_FOLDER)


def layout_2(timeline_path: str | None = None) -> TimelineLayout:
    """Layout 2 with its timeline in ``.hoodie/<timeline_path>`` (``hoodie.timeline.path``, default ``timeline``)."""
    path = (timeline_path or DEFAULT_TIMELINE_PATH).strip().strip("/") or DEFAULT_TIMELINE_PATH
    if ".." in path.split("/") or path.startswith("."):
        raise TimelineError(f"hoodie.timeline.path={timeline_path!r}: must be a folder inside .hoodie")
    return TimelineLayout(2, f"{META_FOLDER}/{path}")
