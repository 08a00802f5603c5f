"""A table's instant times: new ones (strictly after every time on the timeline, the clock skew waited out where
the layout asks for it), their age, and checks that writers and the daemon read time in one zone.

Time comes from an injected `Clock`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, tzinfo

from hudi_clusterd.domain.instant import (
    MAX_AHEAD_S,
    Action,
    Instant,
    State,
    next_instant_time,
    parse_instant_time,
    zone_skew_s,
)
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.domain.timeline_layout import TimelineLayout
from hudi_clusterd.errors import TimelineError
from hudi_clusterd.storage import FileInfo, Storage
from hudi_clusterd.table.clock import Clock
from hudi_clusterd.table.timeline_store import TEMP_FOLDER


def timeline_tz(config: TableConfig) -> tzinfo:
    """The zone instant times are read in: UTC when ``hoodie.table.timeline.timezone=UTC``, else this host's
    local zone (Hudi's LOCAL is the writer JVM's default zone, which must therefore match the daemon's)."""
    return UTC if config.timeline_timezone_utc else (datetime.now().astimezone().tzinfo or UTC)


def zone_name(config: TableConfig) -> str:
    return "UTC" if config.timeline_timezone_utc else f"LOCAL = {datetime.now().astimezone().tzname()}"


def new_instant_time(clock: Clock, config: TableConfig, layout: TimelineLayout, timeline: Timeline, base_path: str,
                     now: datetime | None = None, *, skew_wait: bool = True) -> str:
    """A fresh instant time, strictly greater than every instant on ``timeline`` (see
    `HoodieTable.new_instant_time`). The clock skew the layout asks for is waited out after reading the clock,
    unless ``now`` is given or ``skew_wait`` is False."""
    if now is None:
        now = clock.now(timeline_tz(config))
        if skew_wait and layout.clock_skew_wait_s:
            clock.sleep(layout.clock_skew_wait_s)
    last = timeline.last_time()
    if last is not None:
        ahead = (parse_instant_time(last, now.tzinfo or UTC) - now).total_seconds()
        if ahead > MAX_AHEAD_S:
            raise TimelineError(
                f"{base_path}: the newest instant {last} is {ahead:.0f}s ahead of this host's clock read in "
                f"the table's time zone ({zone_name(config)}); a new instant would be ahead of wall-clock time. "
                "Check the clocks, and that every writer and the daemon read time in one zone (set "
                "hoodie.table.timeline.timezone=UTC on the writers that create the table, or the same TZ)")
    return next_instant_time(now, last)


def instant_time_taken(storage: Storage, layout: TimelineLayout, time: str) -> str | None:
    """A file showing that another writer uses instant time ``time`` for another action (ingestion commits,
    cleans and rollbacks take their times without the table lock), or None. Stats a few names; no listing."""
    names = [path for action, state in (
        (Action.COMMIT, State.REQUESTED), (Action.COMMIT, State.INFLIGHT), (Action.DELTA_COMMIT, State.REQUESTED),
        (Action.CLEAN, State.REQUESTED), (Action.ROLLBACK, State.REQUESTED), (Action.COMMIT, State.COMPLETED))
        if (path := layout.known_path(Instant(time, action, state))) is not None]
    names += [f"{TEMP_FOLDER}/{time}"]
    return next((storage.full_path(n) for n in names if storage.exists(n)), None)


def check_writer_zones(config: TableConfig, layout: TimelineLayout, storage: Storage, listed: Iterable[FileInfo],
                       newest: int = 10) -> None:
    """Refuse (``TimelineError``) when the newest requested instants were named in another time zone than
    this host reads the timeline in: their times then sit a whole number of quarter hours away from when their
    files were written, and instants of the daemon would interleave wrongly with the writers'."""
    requested = []
    for fi in listed:
        inst = layout.parse(fi.name, fi.mtime_ms) if fi.name.endswith(".requested") else None
        if inst is not None:
            requested.append(inst)
    tz = timeline_tz(config)
    for inst in sorted(requested, key=lambda i: i.time)[-newest:]:
        skew = zone_skew_s(inst.time, inst.transition_ms, tz)
        if skew is not None:
            raise TimelineError(
                f"{storage.full_path(layout.path(inst))}: instant {inst.time} was named in "
                f"a time zone {abs(skew) / 3600:.2f}h {'behind' if skew > 0 else 'ahead of'} the one this host "
                f"reads the timeline in ({zone_name(config)}); the daemon's instants would be ordered wrongly "
                "against the writers'. Run the daemon in the writers' time zone (TZ), or use "
                "hoodie.table.timeline.timezone=UTC for the table")


def instant_age_seconds(clock: Clock, config: TableConfig, time: str, now: datetime | None = None) -> float:
    """How long ago an instant time was, read in the table's timeline time zone (LOCAL or UTC)."""
    tz = timeline_tz(config)
    now = now or clock.now(tz)
    return max(0.0, (now - parse_instant_time(time, tz)).total_seconds())
