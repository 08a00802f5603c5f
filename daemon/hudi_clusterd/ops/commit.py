"""Completing a clustering: the conflict check and the commit point, or the rollback.

Under the lock, the timeline is listed and the plan's partitions (only those) are listed again. An instant time
another writer took for another action meanwhile withdraws the clustering (`InstantCollisionError`). Files that
have a marker of the instant but no write stat (failed or duplicate task attempts, or a writer of a dead earlier
attempt that outlived its driver) are deleted; if an input file group got a newer slice, was replaced, is claimed
by another plan or is being written by a pending instant (its markers, or the file ids its inflight state declares;
while a live writer's instant is only requested the commit waits for it, and right after a writer completed it
waits to see whether the next one starts, see `complete`), *ingestion wins*: that plan group is left out (its files
deleted, its file groups not replaced). On a table with a metadata table, its deltacommit ``T`` completes first
(`MetadataTable.commit`). Then ``T.replacecommit`` is written (operationType CLUSTER, a write stat per new file,
every kept input group replaced, ``extraMetadata.schema``), which is the commit point: from there on the
clustering is committed, and the lock's release and the markers' deletion are clean-up, whose failures the result
carries (`ops.cleanup`) instead of raising. A caller whose commit ended in an error asks the timeline first
(`committed_on_timeline`): a completed replacecommit there means the clustering is committed all the same.
When every group of a plan of ours moved, the commit replaces nothing and writes nothing: the plan is never
deleted, because Apache Hudi writers list the timeline and then read every pending plan in it, and a plan file that
vanishes in between fails their write (``HoodieIOException``, F12). Another writer's plan whose every group moved
is refused instead (``CommitConflictError``), for that writer to decide. While another writer's compaction or
upgrade of the metadata table is half done (`TableBusyError`), the commit waits for it, outside the lock.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import structlog

from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.conflicts import find_conflicts, requirements
from hudi_clusterd.domain.fs_view import FileSystemView
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import ClusteringPlan
from hudi_clusterd.domain.planner import scheduled_by_us
from hudi_clusterd.errors import (
    ClusterdError,
    CommitConflictError,
    ExecutionError,
    InstantCollisionError,
    TableBusyError,
    TimelineError,
)
from hudi_clusterd.formats.log import SliceMerge
from hudi_clusterd.ops.cleanup import LOCK_RELEASE, MARKERS, CleanupFailure
from hudi_clusterd.ops.pending_writes import ingestion_rhythm, late_writes, other_pending_writes, pending_writes
from hudi_clusterd.table.heartbeat import INGESTION_TIMEOUT_S, heartbeat_expired, heartbeat_path
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.markers import delete_markers, list_markers
from hudi_clusterd.table.rollback import RollbackResult, reconcile_markers, rollback_pending, safe_file_of_instant

log = structlog.get_logger(__name__)

DROPPED_GROUPS_KEY = "hudi-clusterd.groups.dropped"
"""``extraMetadata`` of a clustering committed without some plan groups: their indexes in the plan."""


UNDECIDED_WAIT_S = 60.0
"""How long a commit waits, in all, for writers: pending writes that have not yet said which file groups they
write, the next write of a writer that just completed one, and a writer's half-done work on the metadata table."""
UNDECIDED_POLL_S = 0.25
BUSY_POLL_S = 1.0

def fresh_view(table: HoodieTable, plan: ClusteringPlan) -> FileSystemView:
    """The timeline and the plan's partitions, listed now (call under the table lock)."""
    return table.file_system_view(table.timeline(), partitions=sorted({g.partition_path for g in plan.input_groups}))


@dataclass(frozen=True, slots=True)
class Committed:
    """A committed clustering: its metadata, and the groups left out because ingestion moved their input."""

    metadata: CommitMetadata
    stats: tuple[WriteStat, ...]
    dropped_groups: tuple[int, ...] = ()
    conflicts: tuple[str, ...] = ()
    cleanup_failures: tuple[CleanupFailure, ...] = ()
    """Steps of the clean-up after the commit point that failed (the markers, the lock's release)."""


def committed_on_timeline(table: HoodieTable, instant: str) -> Committed | None:
    """Clustering ``instant`` as its completed replacecommit records it, when that exists (looked up afresh);
    None when it does not. What a commit that ended in an error (an answer lost, a timeout) is settled by."""
    completed = Instant(instant, Action.REPLACE_COMMIT, State.COMPLETED)
    store = table.timeline_store
    if not store.exists(completed):
        return None
    meta = store.commit_metadata(completed)
    dropped = tuple(int(i) for i in meta.extra_metadata.get(DROPPED_GROUPS_KEY, "").split(",") if i.isdigit())
    return Committed(meta, tuple(meta.write_stats()), dropped)


def complete(table: HoodieTable, instant: str, plan: ClusteringPlan, stats_by_group: Sequence[Sequence[WriteStat]],
             extra: Mapping[str, str], *, undecided_wait_s: float = UNDECIDED_WAIT_S,
             merged: SliceMerge | None = None) -> Committed:
    """Commit clustering ``instant`` (see the module docstring). ``merged``: how the groups' slices with log
    files were merged; a write that completed after its instants were read and touched a planned file group
    (its blocks were not merged) is a conflict too.

    A group whose input moved (a conflict) is left out: its files are deleted and its file groups are not
    replaced, while the other groups commit. When every group moved, a plan of ours still commits, replacing and
    writing nothing (its requested file stays: Hudi writers may be reading it); another writer's plan is refused
    (``CommitConflictError``) and rolled back by the caller with its plan kept.

    Three moments stop the commit, which waits them out, outside the lock, up to ``undecided_wait_s`` in all. The
    first two would fail a writer's own commit on the conflict (a failed micro-batch):

    - a live writer's instant is only requested: it may be looking its records up in our input file groups, and
      has not declared which it writes;
    - no write is pending, but one completed moments ago (within `IngestionRhythm.settled_at_ms`): the writer's
      next write may already hold its instant time without having written its requested state. Apache Hudi's
      writer counts every replacecommit completed after its instant time as a concurrent write, so a clustering
      committed then fails it as soon as it updates a record the clustering moved. The commit waits for the next
      write to declare its file groups (and commits while it runs) or for the writers to fall idle.

    The third: the metadata table is busy (`TableBusyError`: a compaction or an upgrade is pending), which only a
    writer that died during it leaves behind under the lock; its next write finishes it. Still busy at the
    deadline, the commit raises `TableBusyError`, having written nothing."""
    if not any(stats_by_group):
        raise ExecutionError(f"clustering {instant} produced no files; refusing to replace its input")
    deadline = time.monotonic() + undecided_wait_s
    while True:
        attempt = _try_complete(table, instant, plan, stats_by_group, extra,
                                may_wait=time.monotonic() < deadline, merged=merged)
        if isinstance(attempt, Committed):
            return attempt
        if attempt.busy:
            log.info("the metadata table is busy; waiting before committing", instant=instant, reason=attempt.busy)
            _wait_while_busy(table, deadline)
        elif attempt.undecided:
            log.info("waiting for pending writes to declare their file groups before committing", instant=instant,
                     writes=list(attempt.undecided))
            _wait_while_requested(table, attempt.undecided, deadline)
        else:
            log.info("a write completed moments ago; waiting for the next one to start, or for the writers to fall "
                     "idle, before committing", instant=instant,
                     idle_in_s=round(max(0.0, attempt.settled_at_ms / 1000.0 - time.time()), 2))
            _wait_for_next_write(table, attempt, deadline)


@dataclass(frozen=True, slots=True)
class _Wait:
    """Why an attempt to commit wrote nothing: the table is ``busy`` (why), ``undecided`` requested writes, or
    (without those) the writers may start their next write until ``settled_at_ms``; ``pending`` are the write
    instants pending then."""

    busy: str = ""
    undecided: tuple[str, ...] = ()
    settled_at_ms: int = 0
    pending: frozenset[str] = frozenset()


def _wait_while_busy(table: HoodieTable, deadline: float) -> None:
    """Until the table is no longer busy (`HoodieTable.check_clusterable`), or ``deadline``; without the lock."""
    while time.monotonic() < deadline:
        try:
            table.check_clusterable()
            return
        except TableBusyError:
            time.sleep(BUSY_POLL_S)


def _wait_while_requested(table: HoodieTable, times: Sequence[str], deadline: float) -> None:
    """Until none of the instants ``times`` is still only requested by a live writer, or ``deadline``; reads the
    timeline and heartbeats, without the lock."""
    waiting = set(times)
    while time.monotonic() < deadline:
        if not any(i.time in waiting and i.state is State.REQUESTED
                   and not heartbeat_expired(table.storage, i, INGESTION_TIMEOUT_S)
                   for i in table.timeline().writes().pending()):
            return
        time.sleep(UNDECIDED_POLL_S)


def _wait_for_next_write(table: HoodieTable, wait: _Wait, deadline: float) -> None:
    """Until a write instant not pending before shows up, ``wait.settled_at_ms`` passes, or ``deadline``; reads
    the timeline without the lock."""
    while time.monotonic() < deadline and time.time() * 1000.0 < wait.settled_at_ms:
        if any(i.time not in wait.pending for i in other_pending_writes(table.timeline())):
            return
        time.sleep(UNDECIDED_POLL_S)


def _try_complete(table: HoodieTable, instant: str, plan: ClusteringPlan,
                  stats_by_group: Sequence[Sequence[WriteStat]], extra: Mapping[str, str], *, may_wait: bool,
                  merged: SliceMerge | None = None) -> Committed | _Wait:
    """One attempt of `complete`: the commit under the lock, then the markers' clean-up; or (when ``may_wait``)
    why it waits, having written nothing. Past the commit point a failure of the lock's release or of the
    markers' deletion is a `CleanupFailure` of the result, never an error."""
    attempt: Committed | _Wait | None = None
    try:
        with table.lock():
            attempt = _commit_locked(table, instant, plan, stats_by_group, extra, may_wait=may_wait, merged=merged)
    except Exception as e:
        if not isinstance(attempt, Committed):
            raise
        attempt = replace(attempt, cleanup_failures=(CleanupFailure(LOCK_RELEASE, str(e)),))
    if isinstance(attempt, _Wait):
        return attempt
    try:
        delete_markers(table.storage, instant)
    except ClusterdError as e:
        attempt = replace(attempt, cleanup_failures=(*attempt.cleanup_failures, CleanupFailure(MARKERS, str(e))))
    if attempt.dropped_groups and len(attempt.dropped_groups) < len(plan.input_groups):
        log.warning("clustering committed without the groups ingestion moved", instant=instant,
                    dropped_groups=len(attempt.dropped_groups),
                    kept_groups=len(plan.input_groups) - len(attempt.dropped_groups),
                    conflicts=list(attempt.conflicts[:5]))
    return attempt


def _commit_locked(table: HoodieTable, instant: str, plan: ClusteringPlan,
                   stats_by_group: Sequence[Sequence[WriteStat]], extra: Mapping[str, str], *, may_wait: bool,
                   merged: SliceMerge | None = None) -> Committed | _Wait:
    """`_try_complete`'s part under the lock, up to and including the commit point."""
    # a writer may have upgraded the table (moving its timeline) or changed it since the plan ran
    try:
        table.check_clusterable()
    except TableBusyError as e:
        if not may_wait:
            raise
        return _Wait(busy=str(e))
    view = fresh_view(table, plan)
    inflight = Instant(instant, Action.CLUSTERING, State.INFLIGHT)
    found = view.timeline.find(instant, Action.CLUSTERING)
    if found is None or found.state is not State.INFLIGHT:
        raise TimelineError(f"clustering {instant} is no longer inflight (rolled back by another process?); "
                            "its files are rolled back")
    others = sorted({i.action.value for i in view.timeline if i.time == instant and not i.action.is_replace})
    if others:
        raise InstantCollisionError(f"clustering {instant}: another writer took the same instant time for "
                                    f"{', '.join(others)}; the clustering is withdrawn, deleting only its own "
                                    "files")
    groups = set(plan.group_ids())
    writes = pending_writes(table, view.timeline, groups, instant)
    if may_wait and writes.undecided:
        return _Wait(undecided=writes.undecided)
    if may_wait and not writes.in_progress:
        rhythm = ingestion_rhythm(table.timeline_store.listed_states())
        if rhythm is not None and rhythm.settled_at_ms() > time.time() * 1000.0:
            return _Wait(settled_at_ms=rhythm.settled_at_ms(),
                         pending=frozenset(i.time for i in other_pending_writes(view.timeline)))
    late = late_writes(table, view.timeline, groups, merged) if merged is not None else None
    conflicts = find_conflicts(requirements(plan), view, own_instant=instant, pending_writes=writes.writing,
                               late_writes=late)
    moved = {c.group for c in conflicts}
    dropped = tuple(i for i, g in enumerate(plan.input_groups) if moved.intersection(g.group_ids()))
    described = [str(c) for c in conflicts]
    if len(dropped) == len(plan.input_groups) and not scheduled_by_us(plan):
        raise CommitConflictError(f"clustering {instant} conflicts with ingestion: " + "; ".join(described[:5])
                                  + (f"; and {len(described) - 5} more" if len(described) > 5 else ""))
    kept = [i for i in range(len(plan.input_groups)) if i not in dropped]
    stats = [ws for i in kept for ws in stats_by_group[i]]
    # files of failed task attempts (a marker, no stat), and every file of a dropped group, go here
    reconcile_markers(table, instant, stats)
    by_partition: dict[str, list[WriteStat]] = {}
    for ws in stats:
        by_partition.setdefault(ws.partition_path or "", []).append(ws)
    replaced: dict[str, list[str]] = {}
    for i in kept:
        for gid in plan.input_groups[i].group_ids():
            replaced.setdefault(gid[0], []).append(gid[1])
    metadata: dict[str, str] = {}
    schema = table.latest_schema(view.timeline)
    if schema:
        metadata["schema"] = schema
    metadata.update(extra)
    if dropped:
        metadata[DROPPED_GROUPS_KEY] = ",".join(str(i) for i in dropped)
    meta = CommitMetadata(
        {p: tuple(v) for p, v in by_partition.items()},
        metadata,
        Operation.CLUSTER,
        partition_to_replace_file_ids={p: tuple(v) for p, v in replaced.items()},
    )
    mdt = table.metadata_table()
    if mdt is not None and stats:
        # the metadata table's deltacommit completes right before the data commit, under the same lock
        mdt.commit(instant, meta, _latest_files_with(view, by_partition),
                   (i.time for i in view.timeline.completed()))
    store = table.timeline_store
    store.create(inflight.with_state(State.COMPLETED), store.serde.encode_commit(meta))
    return Committed(meta, tuple(stats), dropped, tuple(described))  # the commit point: committed


def _latest_files_with(view: FileSystemView, written: Mapping[str, Sequence[WriteStat]]) -> dict[str, list[str]]:
    """Per partition the commit writes, the relative paths of its latest file slices' files before the commit
    (base and log files) and of the commit's new files: what Hudi 1.x recomputes partition statistics over (the
    groups a clustering replaces included, as Hudi 1.2 does)."""
    out: dict[str, list[str]] = {}
    for partition, stats in written.items():
        files = {ws.path for ws in stats if ws.path}
        base_of = {bf.group_id: bf for bf in view.latest_base_files(partition)}
        files.update(bf.relative_path for bf in base_of.values())
        for sl in view.latest_file_slices(partition):
            # a pending compaction's slice merges with the one before it, as Hudi's latest merged slices do
            base = base_of.get(sl.group_id)
            since = base.instant_time if base is not None else ""
            group = view.file_group(sl.group_id)
            files.update(lf.relative_path for s in (group.slices if group else ()) if s.base_instant >= since
                         for lf in s.log_files)
        out[partition] = sorted(files)
    return out


def withdraw_collided(table: HoodieTable, instant: str, written: Sequence[WriteStat]) -> None:
    """Undo a clustering whose instant time another writer also uses: delete exactly the files it wrote and its
    own instant files; the shared marker and heartbeat folders stay with the other writer."""
    discard_files(table, instant, written, markers=False)
    with table.lock():
        for state in (State.INFLIGHT, State.REQUESTED):
            table.timeline_store.delete(Instant(instant, Action.CLUSTERING, state))
    log.error("clustering withdrawn: its instant time is used by another writer", instant=instant,
              files=len(written))


def rollback_clustering(table: HoodieTable, instant: str, *, purge: bool = False,
                        written: Sequence[WriteStat] = ()) -> RollbackResult | None:
    """Roll back a pending clustering: its files and inflight state; with ``purge`` its plan too.

    When the instant is no longer on the timeline (another writer rolled it back under us, e.g. Apache Hudi with
    ``hoodie.clustering.rollback.pending.replacecommit.on.conflict``), the files it wrote after that writer read
    its markers would stay behind and become visible once archival passes the instant: the files ``written``
    names and those its remaining markers name are deleted instead (only base files of this very instant)."""
    result = rollback_pending(table, instant, Action.CLUSTERING, delete_requested=purge)
    table.storage.delete(heartbeat_path(instant))
    if result is None:
        discard_files(table, instant, written)
    return result


def discard_files(table: HoodieTable, instant: str, written: Sequence[WriteStat], *, markers: bool = True
                  ) -> list[str]:
    """Delete the base files of ``instant`` that ``written`` (and, with ``markers``, its markers) name, then its
    markers. Without ``markers`` the marker folder is left alone: another writer of the same time shares it."""
    paths = {ws.path for ws in written if ws.path}
    if markers:
        paths |= {m.data_file_path for m in list_markers(table.storage, instant)}
    deleted = [rel for rel in sorted(paths)
               if safe_file_of_instant(rel, instant) is not None and table.storage.delete(rel, missing_ok=True)]
    if markers:
        delete_markers(table.storage, instant)
    if deleted:
        log.warning("clustering was rolled back by another writer; deleted the files it wrote", instant=instant,
                    files=len(deleted))
    return deleted
