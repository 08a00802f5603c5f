"""Timeline instants: actions, states, instant times, and the one parser of instant file names.

An instant is one step of a table's history, stored as one file per state; the highest state present wins.
Where those files live and how they are named is the timeline layout's (``domain/timeline_layout.py``): layout 1
(table version 6) names them ``<time>.<action>[.<state>]`` in ``.hoodie/``; layout 2 (versions 8 and 9) adds the
completion time to a completed instant's name. `instant_file_name` gives layout 1's names;
`parse_instant_file_name` reads both layouts' names, of a data table or of its metadata table (`InstantTimes`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from enum import Enum

from hudi_clusterd.errors import TimelineError

INSTANT_TIME_FORMAT = "%Y%m%d%H%M%S%f"  # formatted then cut to milliseconds: yyyyMMddHHmmssSSS
INSTANT_TIME_LENGTH = 17
# ASCII digits only, and no trailing newline (``$`` would allow one): Java's regexes, which Hudi uses, agree.
_INSTANT_TIME_RE = re.compile(r"\A[0-9]{14}(?:[0-9]{3})?\Z")
_ANY_TIME_RE = re.compile(r"\A[0-9]{14,20}\Z")


@dataclass(frozen=True, slots=True)
class InstantTimes:
    """The instant times one timeline holds."""

    pattern: re.Pattern[str]
    expected: str
    """What a valid time looks like, for error messages."""

    def valid(self, time: str) -> bool:
        return self.pattern.match(time) is not None


DATA_TIMES = InstantTimes(_INSTANT_TIME_RE, "14 or 17 digits")
"""A data table's instant times: 17 digits (``yyyyMMddHHmmssSSS``), or 14 on older tables."""
METADATA_TIMES = InstantTimes(_ANY_TIME_RE, "14 to 20 digits")
"""A metadata table's: the data table's, plus its own (17 zeros and a counter for the partitions'
initialisation on Hudi 1.x; version 6's suffixed times, a data instant and three more digits)."""


class Action(str, Enum):
    """Instant actions, with their on-disk spelling."""

    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    REPLACE_COMMIT = "replacecommit"
    CLEAN = "clean"
    ROLLBACK = "rollback"
    SAVEPOINT = "savepoint"
    COMPACTION = "compaction"
    LOG_COMPACTION = "logcompaction"
    RESTORE = "restore"
    INDEXING = "indexing"
    SCHEMA_COMMIT = "schemacommit"
    CLUSTERING = "clustering"
    """A clustering while it is pending; it completes as a ``replacecommit``. Layout 1 stores the pending states
    as ``replacecommit`` files (a replacecommit whose plan says CLUSTER), layout 2 as ``clustering`` files."""

    @property
    def is_replace(self) -> bool:
        """replacecommit, or a clustering (which completes as one)."""
        return self in (Action.REPLACE_COMMIT, Action.CLUSTERING)


class State(str, Enum):
    """Instant states, ordered REQUESTED < INFLIGHT < COMPLETED; the value is the file-name suffix."""

    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = ""

    @property
    def rank(self) -> int:
        return _STATE_RANK[self]


_STATE_RANK = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}

# Completed compaction and log compaction are written as commit / deltacommit files, a completed clustering as a
# replacecommit file.
COMPLETED_FILE_ACTION = {Action.COMPACTION: Action.COMMIT, Action.LOG_COMPACTION: Action.DELTA_COMMIT,
                         Action.CLUSTERING: Action.REPLACE_COMMIT}

# <time>[_<completion>].<action>[.<state>]: the completion time is layout 2's
_FILE_NAME_RE = re.compile(r"\A([0-9]+)(?:_([0-9]+))?\.([a-z]+)(?:\.([a-z]+))?\Z")


@dataclass(frozen=True, slots=True, order=False)
class Instant:
    """One instant in one state. ``time`` is the 17-digit (or legacy 14-digit) instant time, the time it was
    requested at; ``completion_time`` is the time it completed at, where the timeline layout records one (layout 2
    names it in the completed file), else None."""

    time: str
    action: Action
    state: State
    # Modification time of the state file in epoch milliseconds; Hudi's "state transition time". 0 if unknown.
    transition_ms: int = 0
    completion_time: str | None = None

    def __post_init__(self) -> None:
        # the widest rule (a metadata table's times); a timeline's parser applies its own (`InstantTimes`)
        if not _ANY_TIME_RE.match(self.time):
            raise TimelineError(f"invalid instant time {self.time!r}: expected 14 to 20 digits")
        if self.completion_time is not None and not _ANY_TIME_RE.match(self.completion_time):
            raise TimelineError(f"instant {self.time}: invalid completion time {self.completion_time!r}")

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_pending(self) -> bool:
        return self.state is not State.COMPLETED

    def with_state(self, state: State, transition_ms: int = 0) -> Instant:
        """This instant in ``state``; a clustering becomes a replacecommit when completed, as Hudi models it."""
        action = COMPLETED_FILE_ACTION[self.action] if (
            state is State.COMPLETED and self.action is Action.CLUSTERING) else self.action
        return Instant(self.time, action, state, transition_ms,
                       self.completion_time if state is State.COMPLETED else None)

    @property
    def newest_time(self) -> str:
        """The later of the requested and completion times (a new instant must be greater than both)."""
        return max(self.time, self.completion_time or "")

    def sort_key(self) -> tuple[str, int, str]:
        return (self.time, self.state.rank, self.action.value)

    def __str__(self) -> str:
        suffix = f".{self.state.value}" if self.state.value else ""
        return f"{self.time}.{self.action.value}{suffix}"


def instant_file_name(time: str, action: Action, state: State) -> str:
    """File name of an instant state in timeline layout 1 (a clustering's pending states are replacecommits)."""
    if action is Action.CLUSTERING:
        action = Action.REPLACE_COMMIT
    if action is Action.COMMIT and state is State.INFLIGHT:
        return f"{time}.inflight"  # the legacy name Hudi keeps for inflight commits
    if state is State.COMPLETED:
        return f"{time}.{COMPLETED_FILE_ACTION.get(action, action).value}"
    if action is Action.SAVEPOINT and state is State.REQUESTED:
        raise TimelineError(f"savepoint {time} has no requested state")
    return f"{time}.{action.value}.{state.value}"


def parse_instant_file_name(name: str, transition_ms: int = 0, *, with_completion: bool = False,
                            times: InstantTimes = DATA_TIMES) -> Instant | None:
    """Parse a timeline file name; returns None for names that are not instant files (``hoodie.properties``,
    ``*.tmp``, folders, lock files). A name that looks like an instant but has an unknown action also gives None,
    as Hudi's loader skips it, and so does a completed compaction's name (it completes as a commit); an instant
    time ``times`` does not allow raises ``TimelineError``. ``with_completion``: completed names may carry their
    completion time (``<time>_<completion>.<action>``, timeline layout 2)."""
    m = _FILE_NAME_RE.match(name)
    if m is None:
        return None
    time, completion, action_s, state_s = m.groups()
    if completion is not None and (not with_completion or state_s is not None):
        return None
    for t in (time, completion):
        if t is not None and not times.valid(t):
            raise TimelineError(f"timeline file {name!r}: instant time {t!r} is not {times.expected}")
    if action_s == "inflight" and state_s is None and completion is None:
        return Instant(time, Action.COMMIT, State.INFLIGHT, transition_ms)
    try:
        action = Action(action_s)
    except ValueError:
        return None
    if state_s is None:
        if action in COMPLETED_FILE_ACTION:
            return None  # pending states only: a completed compaction or clustering has another action's name
        # (a completed name of layout 2 without its completion time is a legacy one, of an upgraded table: Hudi
        # takes the file's modification time then; it is left unknown here)
        return Instant(time, action, State.COMPLETED, transition_ms, completion)
    if state_s not in ("requested", "inflight"):
        return None
    return Instant(time, action, State(state_s), transition_ms)


def format_instant_time(moment: datetime) -> str:
    """``yyyyMMddHHmmssSSS`` of an aware or naive datetime (as given, no conversion)."""
    return moment.strftime(INSTANT_TIME_FORMAT)[:INSTANT_TIME_LENGTH]


def parse_instant_time(time: str, tz: tzinfo = UTC) -> datetime:
    """The moment an instant time names, in the table's timeline time zone; 14-digit times get ``999`` ms."""
    if not _INSTANT_TIME_RE.match(time):
        raise TimelineError(f"invalid instant time {time!r}: expected 14 or 17 digits")
    if len(time) == 14:
        time += "999"
    try:
        base = datetime.strptime(time[:14], "%Y%m%d%H%M%S").replace(tzinfo=tz)
    except ValueError as e:  # well-formed digits, impossible date (e.g. month 00 or 99)
        raise TimelineError(f"invalid instant time {time!r}: not a date ({e})") from e
    return base + timedelta(milliseconds=int(time[14:]))


def next_instant_time(now: datetime, after: str | None) -> str:
    """An instant time for ``now`` that is strictly greater than ``after`` (the newest instant on the timeline).

    Must be called under the table lock so that no other writer takes the same or a smaller time meanwhile."""
    candidate = format_instant_time(now)
    if after is None or candidate > _pad(after):
        return candidate
    later = parse_instant_time(_pad(after), now.tzinfo or UTC) + timedelta(milliseconds=1)
    return format_instant_time(later)


def _pad(time: str) -> str:
    return time + "999" if len(time) == 14 else time


MAX_AHEAD_S = 5.0
"""How far ahead of this host's clock the newest instant on a timeline may be before a new instant is refused."""
ZONE_SKEW_MIN_S = 14 * 60.0
ZONE_SKEW_MAX_S = 26 * 3600.0
_ZONE_STEP_S = 15 * 60.0
_ZONE_SLACK_S = 3 * 60.0


def zone_skew_s(time: str, written_ms: int, tz: tzinfo) -> float | None:
    """When a requested instant's file was written ``written_ms`` (epoch ms) while its time ``time``, read in
    ``tz``, names a moment a whole number of quarter hours away (between 14 minutes and 26 hours): the offset in
    seconds between the writer's time zone and ``tz`` (positive: the writer's clock reads earlier). None otherwise.

    A writer creates an instant's requested file right after taking the instant time, so the two agree within
    seconds when both sides read time in the same zone."""
    skew = written_ms / 1000.0 - parse_instant_time(time, tz).timestamp()
    size = abs(skew)
    if not ZONE_SKEW_MIN_S <= size <= ZONE_SKEW_MAX_S:
        return None
    off = size % _ZONE_STEP_S
    return skew if min(off, _ZONE_STEP_S - off) <= _ZONE_SLACK_S else None
