"""What other writers' pending write instants are doing to a clustering's file groups, and the rhythm of their
writes: what a commit (`ops.commit.complete`) checks, and waits for, before its commit point."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

import structlog

from hudi_clusterd.domain.commit import CommitMetadata
from hudi_clusterd.domain.file_group import FileGroupId
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.errors import MetadataDecodeError, StorageError
from hudi_clusterd.formats.log import SliceMerge
from hudi_clusterd.table.heartbeat import INGESTION_TIMEOUT_S, heartbeat_expired
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.markers import list_markers

log = structlog.get_logger(__name__)

INGESTION_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT})
RHYTHM_PAIRS = 5
"""How many recent (completion, next requested instant) pairs measure the writers' usual pause between writes."""
SETTLE_FACTOR = 3.0
SETTLE_CAP_S = 30.0


@dataclass(frozen=True, slots=True)
class PendingWrites:
    """What pending write instants (other than clustering) are doing to a plan's file groups.

    ``writing``: group → the instant writing it, by its markers or by the file ids its inflight state declares
    (Apache Hudi saves its workload profile there after looking its records up, before it writes any file).
    ``undecided``: instants still only requested whose writer is alive: they may be looking their records up in
    the file groups as they are now, and their file groups are not known yet.
    ``in_progress``: inflight instants whose writer is alive (it has declared its file groups)."""

    writing: dict[FileGroupId, str]
    undecided: tuple[str, ...] = ()
    in_progress: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class IngestionRhythm:
    """When the newest ingestion write (commit or deltacommit) completed, and the writers' usual pause between a
    write's completion and the next write's requested state: the median of the recent pauses (by the files'
    modification times), so that a lull in the writes (no new data, a writer stopped for a while) does not count
    as the usual pause."""

    last_completed_ms: int
    pause_ms: int

    def settled_at_ms(self) -> int:
        """After this (epoch ms) without a new write, the writers are taken to be idle: ``SETTLE_FACTOR`` times
        their usual pause after the last completion, at most ``SETTLE_CAP_S``."""
        return self.last_completed_ms + int(min(SETTLE_CAP_S * 1000.0, SETTLE_FACTOR * self.pause_ms))


def ingestion_rhythm(states: Iterable[Instant], pairs: int = RHYTHM_PAIRS) -> IngestionRhythm | None:
    """The rhythm of the ingestion writes among ``states`` (every state file, as `TimelineStore.listed_states`
    gives them); None without a completed write. A write that completed with no write requested after it yet
    adds no pause."""
    requested: list[int] = []
    completed: list[int] = []
    for inst in states:
        if inst.action in INGESTION_ACTIONS and inst.transition_ms > 0:
            if inst.state is State.REQUESTED:
                requested.append(inst.transition_ms)
            elif inst.state is State.COMPLETED:
                completed.append(inst.transition_ms)
    if not completed:
        return None
    requested.sort()
    completed.sort()
    pauses = []
    for done in completed[-(pairs + 1):]:
        nxt = bisect.bisect_left(requested, done)
        if nxt < len(requested):
            pauses.append(requested[nxt] - done)
    pauses.sort()
    return IngestionRhythm(completed[-1], pauses[len(pauses) // 2] if pauses else 0)


def declared_file_ids(profile: CommitMetadata) -> list[FileGroupId]:
    """The (partition, file id) pairs an inflight commit's workload profile names (inserts into new file groups
    name none)."""
    return [(partition, ws.file_id) for partition, stats in profile.partition_to_write_stats.items()
            for ws in stats if ws.file_id]


def pending_writes(table: HoodieTable, timeline: Timeline, groups: set[FileGroupId], own_instant: str
                   ) -> PendingWrites:
    """What pending write instants (other than clustering) are doing to ``groups`` (see `PendingWrites`)."""
    out: dict[FileGroupId, str] = {}
    undecided: list[str] = []
    in_progress: list[str] = []
    for inst in timeline.writes().pending():
        if inst.time == own_instant or inst.action.is_replace:
            continue
        for marker in list_markers(table.storage, inst.time):
            # a base file's name starts with its file id; a log file's with a dot and its file id
            gid = (marker.partition_path, marker.data_file_name.lstrip(".").split("_", 1)[0])
            if gid in groups:
                out.setdefault(gid, inst.time)
        if inst.state is State.INFLIGHT:
            try:
                declared = declared_file_ids(table.timeline_store.inflight_metadata(inst))
            except StorageError:  # completed or rolled back meanwhile: the next listing tells
                declared = []
            except MetadataDecodeError as e:  # not Hudi's workload profile: nothing declared
                log.debug("unreadable workload profile", instant=inst.time, error=str(e))
                declared = []
            for gid in declared:
                if gid in groups:
                    out.setdefault(gid, inst.time)
            if not heartbeat_expired(table.storage, inst, INGESTION_TIMEOUT_S):
                in_progress.append(inst.time)
        elif not heartbeat_expired(table.storage, inst, INGESTION_TIMEOUT_S):
            undecided.append(inst.time)
    return PendingWrites(out, tuple(undecided), tuple(in_progress))


def other_pending_writes(timeline: Timeline) -> list[Instant]:
    """Pending write instants other than clustering (and other replacecommits)."""
    return [i for i in timeline.writes().pending() if not i.action.is_replace]


def late_writes(table: HoodieTable, timeline: Timeline, groups: set[FileGroupId], merged: SliceMerge
                ) -> dict[FileGroupId, str]:
    """``groups`` a completed write (commit or deltacommit) touched whose blocks the clustering's merge did not
    apply (it completed after the merge's instants were read): group → that write's instant."""
    out: dict[FileGroupId, str] = {}
    for inst in timeline.of_actions(INGESTION_ACTIONS).completed():
        if inst.time in merged:
            continue
        for ws in table.timeline_store.commit_metadata(inst).write_stats():
            gid = (ws.partition_path or "", ws.file_id)
            if ws.file_id and gid in groups:
                out.setdefault(gid, inst.time)
    return out
