"""Timeline layouts: where a table's instant files live and how they are named, one object per layout.

* Layout 1 (table version 6, Hudi 0.14/0.15): ``.hoodie/<time>.<action>[.<state>]``; a clustering is pending as
  a ``replacecommit`` whose plan says CLUSTER; completed instants record no completion time.
* Layout 2 (table versions 8 and 9, Hudi 1.x): ``.hoodie/<hoodie.timeline.path>/``; a completed instant is
  ``<requested>_<completion>.<action>``; a clustering is pending as ``clustering`` and completes as
  ``replacecommit``; the archiver's LSM timeline sits in ``history/`` below it, which nothing else writes.

Everything above this module names instants by what they are (`Action.CLUSTERING` for a clustering in any
pending state); the layout turns that into file names, and file names back into instants. What differs between
the layouts is asked of the layout object (`TimelineLayout.clock_skew_wait_s`, `max_pending_s`,
`archive_folder`...), never by comparing layout versions elsewhere. A metadata table's timeline is the same
layout with the metadata table's instant times (`for_metadata`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from hudi_clusterd.domain.instant import (
    COMPLETED_FILE_ACTION,
    DATA_TIMES,
    METADATA_TIMES,
    Action,
    Instant,
    InstantTimes,
    State,
    instant_file_name,
    parse_instant_file_name,
)
from hudi_clusterd.domain.slicing import BY_NAME, ByCompletionTime, LogSlicing
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.errors import TimelineError

META_FOLDER = ".hoodie"
DEFAULT_TIMELINE_PATH = "timeline"
DEFAULT_HISTORY_PATH = "history"
CLOCK_SKEW_WAIT_S = 0.2
"""Hudi 1.x writers wait out ``hoodie.time.generator.max_expected_clock_skew_ms`` (200 ms by default) after taking
a time under the lock, so that a time taken after theirs, on another host, is greater; so does the daemon on
tables of timeline layout 2, whose readers order instants by completion time."""


@dataclass(frozen=True, slots=True)
class TimelineLayout:
    """One timeline layout: its folder (relative to the base path), its file-name rules and the instant times
    its timeline holds."""

    version: int
    folder: str
    times: InstantTimes = DATA_TIMES

    def for_metadata(self) -> TimelineLayout:
        """This layout holding a metadata table's instant times (its folder relative to the metadata table)."""
        return replace(self, times=METADATA_TIMES)

    @property
    def records_completion_time(self) -> bool:
        """Whether a completed instant's file names its completion time (layout 2)."""
        return self.version >= 2

    @property
    def clock_skew_wait_s(self) -> float:
        """How long a writer waits after taking an instant time under the lock (`CLOCK_SKEW_WAIT_S` on layout 2,
        whose readers order instants by completion time; none on layout 1)."""
        return CLOCK_SKEW_WAIT_S if self.records_completion_time else 0.0

    def archive_folder(self, history_path: str | None) -> str:
        """The archived timeline's folder, relative to the base path (``hoodie.timeline.history.path`` below the
        timeline folder on layout 2)."""
        if self.records_completion_time:
            return f"{self.folder}/{history_path or DEFAULT_HISTORY_PATH}"
        return f"{META_FOLDER}/archived"

    def names_completion(self, instant: Instant) -> bool:
        """Whether the file name of this instant state holds its completion time (a completed instant on
        layout 2): without it, the name is found by listing the timeline."""
        return instant.is_completed and self.records_completion_time

    def known_path(self, instant: Instant) -> str | None:
        """The instant state's file when its name is known without a listing, else None."""
        if instant.completion_time is None and self.names_completion(instant):
            return None
        return self.path(instant)

    def completion_times(self, instants: Iterable[Instant]) -> Mapping[str, str] | None:
        """The completion time of each completed instant by requested time, where the layout records them;
        None on a layout that does not."""
        if not self.records_completion_time:
            return None
        return {i.time: i.completion_time for i in instants if i.is_completed and i.completion_time}

    def log_slicing(self, timeline: Timeline) -> LogSlicing:
        """How a log file joins a file slice on this layout (`domain.slicing`): by the base instant in its name
        on layout 1 (table version 6); by its deltacommit's completion time on layout 2 (versions 8 and 9)."""
        completion = self.completion_times(timeline.instants)
        if completion is None:
            return BY_NAME
        first = timeline.writes().first
        return ByCompletionTime(completion, first.time if first else None)

    @property
    def max_pending_s(self) -> float | None:
        """How long after its requested time a clustering may still start, so that it completes within a day:
        Hudi 1.x's completion-time queries assume no instant of layout 2 lasts longer (an hour is left for the
        execution). None: no limit."""
        return 23 * 3600.0 if self.records_completion_time else None

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
        return parse_instant_file_name(name, transition_ms, with_completion=self.records_completion_time,
                                       times=self.times)


LAYOUT_1 = TimelineLayout(1, META_FOLDER)


def layout_2(timeline_path: str | None = None) -> TimelineLayout:
    """Layout 2 with its timeline in ``.hoodie/<timeline_path>`` (``hoodie.timeline.path``, default ``timeline``)."""
    path = (timeline_path or DEFAULT_TIMELINE_PATH).strip().strip("/") or DEFAULT_TIMELINE_PATH
    if ".." in path.split("/") or path.startswith("."):
        raise TimelineError(f"hoodie.timeline.path={timeline_path!r}: must be a folder inside .hoodie")
    return TimelineLayout(2, f"{META_FOLDER}/{path}")
