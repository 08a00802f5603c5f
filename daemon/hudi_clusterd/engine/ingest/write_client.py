"""The driver side of an ingestion write: start an instant, keep its heartbeat, complete or abort it.

Protocol for one copy-on-write commit T (table version 6, timeline layout 1):

1. ``start_commit``, under the table lock: T is a fresh instant time, strictly greater than every instant on
   the timeline; the heartbeat ``.hoodie/.heartbeat/T`` is created and refreshed from then on; then
   ``T.commit.requested`` (empty) and ``T.inflight`` (a JSON workload profile whose extraMetadata names the
   writer) are created.
2. The engine writes base files of instant T, each after its DIRECT marker (``hudi_clusterd.io.markers``).
3. ``complete_commit``: files of failed task attempts (a marker but no write stat) are deleted and every
   write-stat file is checked to exist; then, under the lock, ``T.commit`` (JSON ``HoodieCommitMetadata`` with
   ``extraMetadata.schema``) is created, which is the commit point; markers and heartbeat go last.
4. ``abort`` rolls T back (``hudi_clusterd.io.rollback``). ``rollback_failed_writes`` rolls back other pending
   ingestion commits whose heartbeat has expired, i.e. whose writer died; pending replacecommits are never
   touched (clustering instants belong to the clustering executor).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import structlog

from hudi_clusterd.domain.commit import SCHEMA_KEY, CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.errors import ExecutionError, StorageError, TableError, TimelineError
from hudi_clusterd.io.markers import delete_markers, list_markers
from hudi_clusterd.io.rollback import RollbackResult, rollback_pending, safe_file_of_instant
from hudi_clusterd.io.storage import Storage
from hudi_clusterd.io.table import PROPERTIES_FILE, HoodieTable
from hudi_clusterd.io.timeline_store import HEARTBEAT_FOLDER

log = structlog.get_logger(__name__)

DEFAULT_HEARTBEAT_INTERVAL_S = 60.0  # hoodie.client.heartbeat.interval_in_ms
DEFAULT_HEARTBEAT_TOLERABLE_MISSES = 2  # hoodie.client.heartbeat.tolerable.misses
DEFAULT_HEARTBEAT_TIMEOUT_S = DEFAULT_HEARTBEAT_INTERVAL_S * DEFAULT_HEARTBEAT_TOLERABLE_MISSES
WRITER_KEY = "hudi_clusterd.writer"
WRITER_NAME = "hudi-clusterd"


def heartbeat_path(instant_time: str) -> str:
    return f"{HEARTBEAT_FOLDER}/{instant_time}"


class Heartbeat:
    """``.hoodie/.heartbeat/<instant>``: an empty file whose modification time is the writer's last beat."""

    def __init__(self, storage: Storage, instant_time: str, interval_s: float = DEFAULT_HEARTBEAT_INTERVAL_S) -> None:
        self.storage = storage
        self.instant_time = instant_time
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def path(self) -> str:
        return heartbeat_path(self.instant_time)

    def start(self) -> None:
        self.storage.write_bytes(self.path, b"", overwrite=True)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.instant_time}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.storage.touch(self.path)
            except StorageError as e:
                log.warning("heartbeat refresh failed", instant=self.instant_time, error=str(e))

    def stop(self, *, delete: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if delete:
            self.storage.delete(self.path, missing_ok=True)


def heartbeat_expired(storage: Storage, instant: Instant, timeout_s: float, now_s: float | None = None) -> bool:
    """Whether the writer of a pending instant stopped beating more than ``timeout_s`` ago.

    An instant without a heartbeat file counts from its own state file's time (Hudi would call it expired at
    once, which kills writers that run without heartbeats)."""
    now_s = time.time() if now_s is None else now_s
    info = storage.info(heartbeat_path(instant.time))
    last_ms = info.mtime_ms if info is not None else instant.transition_ms
    return now_s - last_ms / 1000.0 > timeout_s


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


def _workload_profile(operation: str, extra: Mapping[str, str]) -> bytes:
    return CommitMetadata(extra_metadata=dict(extra), operation_type=operation).to_json_bytes()


def start_commit(table: HoodieTable, action: Action = Action.COMMIT, extra: Mapping[str, str] | None = None, *,
                 operation: str = Operation.INSERT,
                 heartbeat_interval_s: float = DEFAULT_HEARTBEAT_INTERVAL_S) -> WriteHandle:
    """Create a new ingestion instant (requested, then inflight) under the table lock and start its heartbeat."""
    if action is not Action.COMMIT:
        raise TableError(f"start_commit writes copy-on-write ingestion commits only, not {action.value}")
    table.config.check_writable(table.storage.full_path(PROPERTIES_FILE))
    stamped = {WRITER_KEY: WRITER_NAME, **(extra or {})}
    with table.lock():
        instant_time = table.new_instant_time()
        heartbeat = Heartbeat(table.storage, instant_time, heartbeat_interval_s)
        heartbeat.start()
        requested = Instant(instant_time, action, State.REQUESTED)
        try:
            table.timeline_store.create(requested, b"")
            table.timeline_store.create(requested.with_state(State.INFLIGHT), _workload_profile(operation, stamped))
        except BaseException:
            heartbeat.stop()
            table.timeline_store.delete(requested)
            raise
    log.info("commit started", base_path=table.base_path, instant=instant_time, operation=operation)
    return WriteHandle(table, instant_time, action, operation, stamped, heartbeat)


def reconcile_markers(table: HoodieTable, instant_time: str, write_stats: Iterable[WriteStat]) -> list[str]:
    """Delete files of instant T that have a marker but no write stat (failed or duplicate task attempts);
    returns their paths. Refuses to complete when a write-stat file is missing."""
    kept = {ws.path for ws in write_stats if ws.path}
    missing = sorted(p for p in kept if not table.storage.exists(p))
    if missing:
        raise ExecutionError(f"commit {instant_time}: {len(missing)} written file(s) are missing, e.g. "
                             f"{table.storage.full_path(missing[0])}; the write cannot be completed")
    removed: list[str] = []
    for marker in list_markers(table.storage, instant_time):
        rel = marker.data_file_path
        if rel in kept or safe_file_of_instant(rel, instant_time) is None:
            continue
        if table.storage.delete(rel, missing_ok=True):
            removed.append(rel)
    if removed:
        log.info("deleted files of failed task attempts", instant=instant_time, files=len(removed))
    return removed


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
        store.create(handle.completed, meta.to_json_bytes())
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
        return CommitMetadata.from_json_bytes(table.timeline_store.read(inflight), inflight.file_name).extra_metadata
    except (TimelineError, StorageError):
        return {}


def rollback_failed_writes(
    table: HoodieTable,
    *,
    heartbeat_timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S,
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
