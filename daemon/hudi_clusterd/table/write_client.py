"""The driver side of an ingestion write: start an instant, keep its heartbeat, complete or abort it.

Protocol for one copy-on-write commit T (table version 6, timeline layout 1):

1. ``start_commit``, under the table lock: T is a fresh instant time, strictly greater than every instant on
   the timeline; the heartbeat ``.hoodie/.heartbeat/T`` is created and refreshed from then on; then
   ``T.commit.requested`` (empty) and ``T.inflight`` (a JSON workload profile whose extraMetadata names the
   writer) are created.
2. The engine writes base files of instant T, each after its DIRECT marker (``hudi_clusterd.table.markers``).
3. ``complete_commit``: files of failed task attempts (a marker but no write stat) are deleted and every
   write-stat file is checked to exist; then, under the lock, ``T.commit`` (JSON ``HoodieCommitMetadata`` with
   ``extraMetadata.schema``) is created, which is the commit point; markers and heartbeat go last.
4. ``abort`` rolls T back (``hudi_clusterd.table.rollback``). ``rollback_failed_writes`` rolls back other pending
   ingestion commits whose heartbeat has expired, i.e. whose writer died; pending replacecommits are never
   touched (clustering instants belong to the clustering executor).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import structlog

from hudi_clusterd.domain.commit import SCHEMA_KEY, CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.errors import StorageError, TableError, TimelineError
from hudi_clusterd.table.heartbeat import INGESTION_INTERVAL_S, INGESTION_TIMEOUT_S, Heartbeat, heartbeat_expired
from hudi_clusterd.table.hoodie_table import PROPERTIES_FILE, HoodieTable
from hudi_clusterd.table.markers import delete_markers
from hudi_clusterd.table.rollback import RollbackResult, reconcile_markers, rollback_pending

log = structlog.get_logger(__name__)

WRITER_KEY = "hudi_clusterd.writer"
WRITER_NAME = "hudi-clusterd"


@dataclass(slots=True)
class WriteHandle:
    """A started commit: its instant time, the metadata the writer stamped on it, and its heartbeat."""

    table: HoodieTable
    instant_time: str
    action: Action
    operation: str
    extra_metadata: dict[str, str] = field(default_factory=dict)
    heartbeat: Heartbeat | None = None

    @property
    def inflight(self) -> Instant:
        return Instant(self.instant_time, self.action, State.INFLIGHT)

    @property
    def completed(self) -> Instant:
        return Instant(self.instant_time, self.action, State.COMPLETED)


def _workload_profile(table: HoodieTable, operation: str, extra: Mapping[str, str]) -> bytes:
    profile = CommitMetadata(extra_metadata=dict(extra), operation_type=operation)
    return table.timeline_store.serde.encode_commit(profile)


def start_commit(table: HoodieTable, action: Action = Action.COMMIT, extra: Mapping[str, str] | None = None, *,
                 operation: str = Operation.INSERT,
                 heartbeat_interval_s: float = INGESTION_INTERVAL_S) -> WriteHandle:
    """Create a new ingestion instant (requested, then inflight) under the table lock and start its heartbeat."""
    if action is not Action.COMMIT:
        raise TableError(f"start_commit writes copy-on-write ingestion commits only, not {action.value}")
    table.config.check_writable(table.storage.full_path(PROPERTIES_FILE))
    stamped = {WRITER_KEY: WRITER_NAME, **(extra or {})}
    with table.lock():
        instant_time = table.new_instant_time()
        heartbeat = Heartbeat(table.storage, instant_time, interval_s=heartbeat_interval_s)
        heartbeat.start()
        requested = Instant(instant_time, action, State.REQUESTED)
        try:
            table.timeline_store.create(requested, b"")
            table.timeline_store.create(requested.with_state(State.INFLIGHT),
                                        _workload_profile(table, operation, stamped))
        except BaseException:
            heartbeat.stop()
            table.timeline_store.delete(requested)
            raise
    log.info("commit started", base_path=table.base_path, instant=instant_time, operation=operation)
    return WriteHandle(table, instant_time, action, operation, stamped, heartbeat)


def complete_commit(table: HoodieTable, handle: WriteHandle, write_stats: Iterable[WriteStat], operation: str,
                    schema_json: str, extra: Mapping[str, str] | None = None, *,
                    validate: Callable[[], None] | None = None) -> CommitMetadata:
    """Publish the commit: ``T.commit`` with the write stats, ``extraMetadata.schema`` and the writer's extra
    metadata. Fails (and leaves T pending, to be aborted) if T was rolled back meanwhile, or if ``validate``
    (called under the table lock right before the commit point; an upsert's check that the file groups it
    merged into were not rewritten meanwhile) raises."""
    stats = list(write_stats)
    reconcile_markers(table, handle.instant_time, stats)
    by_partition: dict[str, list[WriteStat]] = {}
    for ws in sorted(stats, key=lambda s: (s.partition_path or "", s.path or "")):
        by_partition.setdefault(ws.partition_path or "", []).append(ws)
    meta = CommitMetadata(
        partition_to_write_stats={p: tuple(v) for p, v in by_partition.items()},
        extra_metadata={SCHEMA_KEY: schema_json, **handle.extra_metadata, **(extra or {})},
        operation_type=operation,
    )
    store = table.timeline_store
    with table.lock():
        if not store.exists(handle.inflight):
            raise TimelineError(f"commit {handle.instant_time}: its inflight file is gone (rolled back by another "
                                "process?); the write is lost and must be retried")
        if store.exists(handle.completed):
            raise TimelineError(f"commit {handle.instant_time} is already completed")
        if validate is not None:
            validate()
        store.create(handle.completed, store.serde.encode_commit(meta))
    # Committed: what follows is clean-up, and a failure of it must not make the caller abort the commit.
    try:
        delete_markers(table.storage, handle.instant_time)
    except StorageError as e:
        log.warning("could not delete the markers of a completed commit", instant=handle.instant_time, error=str(e))
    if handle.heartbeat is not None:
        try:
            handle.heartbeat.stop()
        except StorageError as e:
            log.warning("could not delete a heartbeat", instant=handle.instant_time, error=str(e))
    log.info("commit completed", base_path=table.base_path, instant=handle.instant_time, operation=operation,
             files=len(stats), rows=sum(ws.num_writes for ws in stats))
    return meta


def abort(table: HoodieTable, handle: WriteHandle) -> RollbackResult | None:
    """Roll back a started commit that will not complete: its files, markers and instant files go."""
    if handle.heartbeat is not None:
        handle.heartbeat.stop(delete=False)
    result = rollback_pending(table, handle.instant_time, handle.action, delete_requested=True)
    if handle.heartbeat is not None:
        handle.heartbeat.stop()
    return result


def pending_commit_metadata(table: HoodieTable, instant: Instant) -> Mapping[str, str]:
    """The extraMetadata of a pending commit's inflight profile (empty if it has none or is unreadable)."""
    inflight = instant.with_state(State.INFLIGHT)
    if not table.timeline_store.exists(inflight):
        return {}
    try:
        return table.timeline_store.inflight_metadata(inflight).extra_metadata
    except (TimelineError, StorageError):
        return {}


def rollback_failed_writes(
    table: HoodieTable,
    *,
    heartbeat_timeout_s: float = INGESTION_TIMEOUT_S,
    select: Callable[[Instant, Mapping[str, str]], bool] | None = None,
    ignore_heartbeat: bool = False,
) -> list[RollbackResult]:
    """Roll back pending ingestion commits (action ``commit``) whose writer is gone.

    An instant qualifies when its heartbeat expired (or, with ``ignore_heartbeat``, always) and ``select``
    accepts it given its inflight extraMetadata. Replacecommits (clustering, insert_overwrite) are never rolled
    back here. Each rollback re-checks the instant under the table lock."""
    results: list[RollbackResult] = []
    for inst in table.timeline().of_actions([Action.COMMIT]).pending():
        if select is not None and not select(inst, pending_commit_metadata(table, inst)):
            continue
        if not ignore_heartbeat and not heartbeat_expired(table.storage, inst, heartbeat_timeout_s):
            continue
        with table.lock():
            fresh = table.timeline().find(inst.time, Action.COMMIT)
            if fresh is None or fresh.is_completed:
                continue
            if not ignore_heartbeat and not heartbeat_expired(table.storage, fresh, heartbeat_timeout_s):
                continue
            result = rollback_pending(table, inst.time, Action.COMMIT, delete_requested=True, take_lock=False)
        if result is not None:
            log.warning("rolled back a failed write", base_path=table.base_path, instant=inst.time,
                        files=len(result.deleted_files))
            results.append(result)
    return results
