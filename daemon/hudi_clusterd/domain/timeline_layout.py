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
        return parse_instant_file_name(name, transition_ms, with_completion=self.records_completion_time)


LAYOUT_1 = TimelineLayout(1, META_FOLDER)


def layout_2(timeline_path: str | None = None) -> TimelineLayout:
    """Layout 2 with its timeline in ``.hoodie/<timeline_path>`` (``hoodie.timeline.path``, default ``timeline``)."""
    path = (timeline_path or DEFAULT_TIMELINE_PATH).strip().strip("/") or DEFAULT_TIMELINE_PATH
    if ".." in path.split("/") or path.startswith("."):
        raise TimelineError(f"hoodie.timeline.path={timeline_path!r}: must be a folder inside .hoodie")
    return TimelineLayout(2, f"{META_FOLDER}/{path}")
