"""Timeline instants of table version 6 (timeline layout 1): actions, states, file names, instant times.

An instant is one step of a table's history, stored as one or more files in ``.hoodie/`` named
``<time>.<action>[.<state>]``. Layout 1 writes a new file per state, so the requested, inflight and completed
files of one instant sit side by side; the highest state present wins.
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

    @property
    def is_write(self) -> bool:
        """Actions that produce data files: commit, deltacommit, replacecommit (and compaction once completed)."""
        return self in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION,
                        Action.LOG_COMPACTION)


class State(str, Enum):
    """Instant states, ordered REQUESTED < INFLIGHT < COMPLETED; the value is the file-name suffix."""

    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = ""

    @property
    def rank(self) -> int:
        return _STATE_RANK[self]


_STATE_RANK = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}

# Completed compaction and log compaction are written as commit / deltacommit files.
_COMPLETED_FILE_ACTION = {Action.COMPACTION: Action.COMMIT, Action.LOG_COMPACTION: Action.DELTA_COMMIT}

_FILE_NAME_RE = re.compile(r"\A([0-9]+)\.([a-z]+)(?:\.([a-z]+))?\Z")


@dataclass(frozen=True, slots=True, order=False)
class Instant:
    """One instant in one state. ``time`` is the 17-digit (or legacy 14-digit) instant time."""

    time: str
    action: Action
    state: State
    # Modification time of the state file in epoch milliseconds; Hudi's "state transition time". 0 if unknown.
    transition_ms: int = 0

    def __post_init__(self) -> None:
        if not _INSTANT_TIME_RE.match(self.time):
            raise TimelineError(f"invalid instant time {self.time!r}: expected 14 or 17 digits")

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_pending(self) -> bool:
        return self.state is not State.COMPLETED

    @property
    def file_name(self) -> str:
        """The file this state is stored in, as Hudi names it."""
        return instant_file_name(self.time, self.action, self.state)

    def with_state(self, state: State, transition_ms: int = 0) -> Instant:
        return Instant(self.time, self.action, state, transition_ms)

    def sort_key(self) -> tuple[str, int, str]:
        return (self.time, self.state.rank, self.action.value)

    def __str__(self) -> str:
        suffix = f".{self.state.value}" if self.state.value else ""
        return f"{self.time}.{self.action.value}{suffix}"


def instant_file_name(time: str, action: Action, state: State) -> str:
    """File name of an instant state in timeline layout 1."""
    if action is Action.COMMIT and state is State.INFLIGHT:
        return f"{time}.inflight"  # the legacy name Hudi keeps for inflight commits
    if state is State.COMPLETED:
        if action is Action.SAVEPOINT or action in _COMPLETED_FILE_ACTION:
            return f"{time}.{_COMPLETED_FILE_ACTION.get(action, action).value}"
        return f"{time}.{action.value}"
    if action is Action.SAVEPOINT and state is State.REQUESTED:
        raise TimelineError(f"savepoint {time} has no requested state")
    return f"{time}.{action.value}.{state.value}"


def parse_instant_file_name(name: str, transition_ms: int = 0) -> Instant | None:
    """Parse a timeline file name; returns None for names that are not instant files (``hoodie.properties``,
    ``*.tmp``, folders, lock files). A name that looks like an instant but has an unknown action also gives None,
    as Hudi's loader skips it; a malformed instant time raises ``TimelineError``."""
    m = _FILE_NAME_RE.match(name)
    if m is None:
        return None
    time, action_s, state_s = m.group(1), m.group(2), m.group(3)
    if not _INSTANT_TIME_RE.match(time):
        raise TimelineError(f"timeline file {name!r}: instant time {time!r} is not 14 or 17 digits")
    if action_s == "inflight" and state_s is None:
        return Instant(time, Action.COMMIT, State.INFLIGHT, transition_ms)
    try:
        action = Action(action_s)
    except ValueError:
        return None
    if state_s is None:
        state = State.COMPLETED
    elif state_s in ("requested", "inflight"):
        state = State(state_s)
    else:
        return None
    return Instant(time, action, state, transition_ms)


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
