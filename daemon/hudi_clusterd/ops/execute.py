"""Executing a clustering plan: claim it, run its groups, then complete it or roll it back.

1. Claim, under the table lock: a requested plan gets its (empty) ``T.replacecommit.inflight`` and an owner
   heartbeat ``.hoodie/.heartbeat/T``. A plan left inflight by a dead executor (heartbeat stale, or its process
   gone on this host) is rolled back first (its written files deleted, the requested plan kept) and re-claimed;
   one inflight under a live owner is left alone, so two daemons never execute the same plan.
2. Run: groups go to a thread pool of ``min(groups, hoodie.clustering.max.parallelism)`` threads; each group
   is one job of the shared engine, which writes new file groups (markers first) and returns write stats.
3. Complete: delete files that have a marker of this instant but no write stat (failed or duplicate task
   attempts, or a writer of a dead earlier attempt that outlived its driver); then, under the lock, re-check
   that no commit completed, and no pending ingestion is writing, on the plan's file groups since it was
   planned; on a conflict ingestion wins (roll back, drop the plan). Otherwise
   write ``T.replacecommit`` (operationType CLUSTER, stats for every new file, every input group replaced,
   ``extraMetadata.schema``), then remove markers and heartbeat.
4. Failure of any group fails the instant: roll back (files from markers, the inflight file) and keep the
   requested plan for a retry, or purge it.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.file_group import FileGroupId
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import ClusteringGroup, ClusteringPlan
from hudi_clusterd.domain.policy import ClusteringPolicy
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.engine.ingest.write_client import reconcile_markers
from hudi_clusterd.errors import ClusterdError, CommitConflictError, ExecutionError, PlanError, StorageError
from hudi_clusterd.io.markers import delete_markers, list_markers
from hudi_clusterd.io.rollback import RollbackResult, rollback_pending
from hudi_clusterd.io.table import HoodieTable, PendingPlan
from hudi_clusterd.io.timeline_store import HEARTBEAT_FOLDER, META_FOLDER, TEMP_FOLDER

log = structlog.get_logger(__name__)

HEARTBEAT_INTERVAL_S = 5.0
HEARTBEAT_TIMEOUT_S = 30.0
LAYOUT_BEFORE_KEY = "hudi-clusterd.layout.files_scanned.before"
LAYOUT_AFTER_KEY = "hudi-clusterd.layout.files_scanned.after"
LAYOUT_COLUMNS_KEY = "hudi-clusterd.layout.columns"


class GroupRunner(Protocol):
    """Rewrites one clustering group into new file groups; the engine implements it."""

    def run_group(self, table: HoodieTable, instant: str, plan: ClusteringPlan, index: int,
                  policy: ClusteringPolicy) -> list[WriteStat]: ...

    def cancel(self, table: HoodieTable, instant: str) -> None:
        """Cancel every running job of this instant (best effort)."""


LayoutFn = Callable[[HoodieTable, ClusteringPlan, list[WriteStat]], tuple[float, float] | None]


@dataclass(frozen=True, slots=True)
class Engine:
    """What scheduling and execution need from the engine: a group runner, layout measurement, a close hook."""

    runner: GroupRunner
    layout: LayoutFn | None
    snapshot_layout: Callable[[HoodieTable, tuple[str, ...]], float | None] | None
    close: Callable[[], None]


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """The outcome of one ``execute`` call."""

    instant: str
    outcome: str  # completed | failed | rolled_back | conflict | skipped
    groups: int = 0
    files_written: int = 0
    bytes_written: int = 0
    files_replaced: int = 0
    bytes_replaced: int = 0
    duration_s: float = 0.0
    message: str = ""
    layout_before: float | None = None
    layout_after: float | None = None
    write_stats: tuple[WriteStat, ...] = field(default_factory=tuple)


ProgressFn = Callable[[str, Mapping[str, Any]], None]


def _no_progress(event: str, info: Mapping[str, Any]) -> None:
    return None


# --- ownership of an inflight plan --------------------------------------------------------------------------


# Instants this process is executing right now (an inflight plan "owned" by this pid but absent here was left
# behind by an earlier attempt in this same process, and is as dead as one of a crashed process).
_RUNNING: set[tuple[str, str]] = set()
_RUNNING_LOCK = threading.Lock()


def _owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def heartbeat_rel(instant: str) -> str:
    return f"{HEARTBEAT_FOLDER}/{instant}"


class OwnerHeartbeat:
    """``.hoodie/.heartbeat/T`` naming its owner (host:pid), its mtime refreshed while the plan runs."""

    def __init__(self, table: HoodieTable, instant: str, interval_s: float = HEARTBEAT_INTERVAL_S) -> None:
        self.table = table
        self.instant = instant
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        content = json.dumps({"owner": _owner_id(), "token": uuid.uuid4().hex}).encode()
        self.table.storage.write_bytes(heartbeat_rel(self.instant), content, overwrite=True)
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.instant}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.table.storage.touch(heartbeat_rel(self.instant))
            except StorageError as e:
                log.warning("clustering heartbeat refresh failed", instant=self.instant, error=str(e))

    def stop(self, delete: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if delete:
            self.table.storage.delete(heartbeat_rel(self.instant))


def owner_alive(table: HoodieTable, instant: str, timeout_s: float = HEARTBEAT_TIMEOUT_S) -> bool:
    """Whether an inflight plan's executor is still alive: a fresh heartbeat whose process, when it runs on
    this host, still exists."""
    info = table.storage.info(heartbeat_rel(instant))
    if info is None or time.time() - info.mtime_ms / 1000.0 > timeout_s:
        return False
    try:
        owner = json.loads(table.storage.read_bytes(heartbeat_rel(instant))).get("owner", "")
    except (StorageError, ValueError, AttributeError):
        return True  # fresh but unreadable: assume a live writer of another kind
    host, _, pid = str(owner).rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        if int(pid) == os.getpid():
            with _RUNNING_LOCK:
                return (table.base_path, instant) in _RUNNING
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    return True


def clean_completed_leftovers(table: HoodieTable, timeline: Timeline) -> list[str]:
    """Remove the markers and heartbeat of completed clustering instants whose executor died between the commit
    point and its clean-up (readers never look at them, but they would stay forever and look pending). Returns
    the instant times cleaned."""
    leftovers = {e.name for e in table.storage.list_dir(TEMP_FOLDER) if e.is_dir}
    leftovers |= {e.name for e in table.storage.list_dir(HEARTBEAT_FOLDER) if not e.is_dir}
    completed = {i.time for i in timeline.of_actions([Action.REPLACE_COMMIT]).completed()
                 if i.time in leftovers and table.is_clustering_instant(i)}
    cleaned: list[str] = []
    for instant in sorted(completed):
        if owner_alive(table, instant):
            continue  # its executor is finishing the clean-up itself
        delete_markers(table.storage, instant)
        table.storage.delete(heartbeat_rel(instant))
        log.warning("removed markers and heartbeat left by a completed clustering", instant=instant)
        cleaned.append(instant)
    return cleaned


STALE_TEMP_S = 3600.0
"""Age after which a temporary file of an interrupted atomic write in the timeline folders is removed."""


def clean_stale_temp_files(table: HoodieTable, older_than_s: float = STALE_TEMP_S) -> list[str]:
    """Remove the temporary files of atomic timeline, lock and heartbeat writes whose writer was killed before
    renaming them (``.<name>.<uuid>.tmp``, over an hour old). Readers ignore them; they would only pile up."""
    removed = []
    for folder in (META_FOLDER, HEARTBEAT_FOLDER):
        for rel in table.storage.stale_temp_files(folder, older_than_s):
            if table.storage.delete(rel):
                removed.append(rel)
    if removed:
        log.info("removed temporary files of interrupted writes", files=removed)
    return removed


def recover_abandoned(table: HoodieTable, timeline: Timeline | None = None) -> list[RollbackResult]:
    """Roll back clustering left inflight by executors that died (their plans stay requested for a retry), and
    clean up after completed ones that died before removing their markers and heartbeat, and after atomic
    writes interrupted before their rename."""
    out: list[RollbackResult] = []
    timeline = timeline or table.timeline()  # listed once, for the leftovers and the pending plans
    clean_completed_leftovers(table, timeline)
    clean_stale_temp_files(table)
    for p in table.pending_clustering_plans(timeline):
        if p.instant.state is State.INFLIGHT and not owner_alive(table, p.instant.time):
            with table.lock():
                fresh = table.timeline().find(p.instant.time, Action.REPLACE_COMMIT)
                if fresh is None or fresh.state is not State.INFLIGHT or owner_alive(table, p.instant.time):
                    continue
                result = rollback_pending(table, p.instant.time, Action.REPLACE_COMMIT, take_lock=False)
                table.storage.delete(heartbeat_rel(p.instant.time))
            if result is not None:
                log.warning("rolled back abandoned clustering", instant=p.instant.time,
                            deleted_files=len(result.deleted_files))
                out.append(result)
    return out


def claim(table: HoodieTable, instant: str) -> tuple[ClusteringPlan, OwnerHeartbeat] | None:
    """Take a plan for execution under the table lock; None when another live executor owns it."""
    with table.lock():
        timeline = table.timeline()
        inst = timeline.find(instant, Action.REPLACE_COMMIT)
        if inst is None:
            raise PlanError(f"no clustering plan {instant} on the timeline of {table.base_path}")
        if inst.is_completed:
            raise PlanError(f"clustering {instant} is already completed")
        meta = table.timeline_store.requested_replace(instant)
        if meta is None or not meta.is_clustering or meta.clustering_plan is None:
            raise PlanError(f"replacecommit {instant} is not a clustering plan (operationType "
                            f"{meta.operation_type if meta else 'missing'})")
        if inst.state is State.INFLIGHT:
            if owner_alive(table, instant):
                return None
            # the same recovery as `recover_abandoned`, reached first when the plan is picked before it runs
            result = rollback_pending(table, instant, Action.REPLACE_COMMIT, take_lock=False)
            if result is not None:
                log.warning("rolled back abandoned clustering", instant=instant,
                            deleted_files=len(result.deleted_files))
        table.timeline_store.create(Instant(instant, Action.REPLACE_COMMIT, State.INFLIGHT), b"")
        heartbeat = OwnerHeartbeat(table, instant)
        heartbeat.start()
        with _RUNNING_LOCK:
            _RUNNING.add((table.base_path, instant))
        return meta.clustering_plan, heartbeat


# --- conflicts ----------------------------------------------------------------------------------------------


def _slice_base_instant(file_name: str) -> str:
    return file_name.rsplit("_", 1)[-1].split(".", 1)[0]


def find_conflicts(table: HoodieTable, instant: str, plan: ClusteringPlan) -> list[str]:
    """Reasons the plan can no longer be committed (empty when it can): a file group got a newer committed
    slice or was replaced, or a pending ingestion instant is writing to it. Call under the table lock."""
    timeline = table.timeline()
    view = table.file_system_view(timeline)
    claimed: dict[FileGroupId, str] = {}
    for group in plan.input_groups:
        for s in group.slices:
            claimed[s.group_id] = _slice_base_instant(s.file_name)
    latest = {sl.group_id: sl.base_instant for sl in view.latest_file_slices()}
    problems: list[str] = []
    for gid, base in claimed.items():
        now = latest.get(gid)
        if now is None:
            problems.append(f"file group {gid[1]} ({gid[0] or 'root'}) was replaced or removed")
        elif now != base:
            problems.append(f"file group {gid[1]} ({gid[0] or 'root'}) has a newer slice {now} (plan read {base})")
    for inst in timeline.writes().pending():
        if inst.time == instant or inst.action is Action.REPLACE_COMMIT:
            continue
        for marker in list_markers(table.storage, inst.time):
            file_id = marker.data_file_name.split("_", 1)[0]
            if (marker.partition_path, file_id) in claimed:
                problems.append(f"pending {inst} is writing file group {file_id}")
                break
    return problems


# --- execution ----------------------------------------------------------------------------------------------


def oldest_pending(table: HoodieTable) -> PendingPlan | None:
    plans = table.pending_clustering_plans()
    return plans[0] if plans else None


def _run_groups(runner: GroupRunner, table: HoodieTable, instant: str, plan: ClusteringPlan,
                policy: ClusteringPolicy, progress: ProgressFn, cancel: threading.Event) -> list[WriteStat]:
    n = len(plan.input_groups)
    workers = max(1, min(n, policy.max_parallelism))
    stats: list[WriteStat] = []
    errors: list[str] = []
    done = 0
    lock = threading.Lock()

    caller_context = structlog.contextvars.get_contextvars()  # pool threads do not inherit contextvars

    def one(index: int) -> list[WriteStat]:
        group: ClusteringGroup = plan.input_groups[index]
        if cancel.is_set():
            raise ExecutionError("cancelled before start")
        with structlog.contextvars.bound_contextvars(**{**caller_context, "instant": instant, "group": index}):
            progress("group_started", {"group": index, "groups": n, "partition": group.partition_path,
                                       "slices": len(group.slices)})
            t0 = time.monotonic()
            out = runner.run_group(table, instant, plan, index, policy)
            progress("group_finished", {"group": index, "groups": n, "files": len(out),
                                        "bytes": sum(s.file_size_in_bytes for s in out),
                                        "seconds": round(time.monotonic() - t0, 2)})
            return out

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"cluster-{instant}") as pool:
        futures: dict[Future[list[WriteStat]], int] = {pool.submit(one, i): i for i in range(n)}
        for fut in futures:
            try:
                result = fut.result()
                with lock:
                    stats.extend(result)
                    done += 1
            except Exception as e:  # a failed group fails the instant; the others are cancelled
                errors.append(f"group {futures[fut]}: {e}")
                if not cancel.is_set():
                    cancel.set()
                    runner.cancel(table, instant)
    if errors:
        raise ExecutionError(f"clustering {instant} failed: " + "; ".join(errors[:3]))
    return stats


def _schema(table: HoodieTable) -> str | None:
    return table.latest_schema()


def complete(table: HoodieTable, instant: str, plan: ClusteringPlan, stats: list[WriteStat],
             extra: Mapping[str, str]) -> None:
    """Write the completed replacecommit under the lock, after the conflict check."""
    if not stats:
        raise ExecutionError(f"clustering {instant} produced no files; refusing to replace its input")
    reconcile_markers(table, instant, stats)  # files of failed or duplicate task attempts: a marker, no stat
    with table.lock():
        conflicts = find_conflicts(table, instant, plan)
        if conflicts:
            raise CommitConflictError(f"clustering {instant} conflicts with ingestion: " + "; ".join(conflicts[:5]))
        by_partition: dict[str, list[WriteStat]] = {}
        for ws in stats:
            by_partition.setdefault(ws.partition_path or "", []).append(ws)
        replaced: dict[str, list[str]] = {}
        for group in plan.input_groups:
            for s in group.slices:
                replaced.setdefault(s.partition_path, []).append(s.file_id)
        metadata: dict[str, str] = {}
        schema = _schema(table)
        if schema:
            metadata["schema"] = schema
        metadata.update(extra)
        meta = CommitMetadata(
            {p: tuple(v) for p, v in by_partition.items()},
            metadata,
            Operation.CLUSTER,
            partition_to_replace_file_ids={p: tuple(v) for p, v in replaced.items()},
        )
        table.timeline_store.create(Instant(instant, Action.REPLACE_COMMIT, State.COMPLETED), meta.to_json_bytes())
    delete_markers(table.storage, instant)


def rollback_clustering(table: HoodieTable, instant: str, *, purge: bool = False) -> RollbackResult | None:
    """Roll back a pending clustering: its files and inflight state; with ``purge`` its plan too."""
    result = rollback_pending(table, instant, Action.REPLACE_COMMIT, delete_requested=purge)
    table.storage.delete(heartbeat_rel(instant))
    return result


def execute(
    table: HoodieTable,
    policy: ClusteringPolicy,
    runner: GroupRunner,
    instant: str | None = None,
    *,
    progress: ProgressFn = _no_progress,
    cancel: threading.Event | None = None,
    layout: LayoutFn | None = None,
) -> ExecutionResult:
    """Execute one clustering plan (the oldest pending one by default); see the module docstring."""
    recover_abandoned(table)
    if instant is None:
        oldest = oldest_pending(table)
        if oldest is None:
            return ExecutionResult("", "skipped", message="no pending clustering plan")
        instant = oldest.instant.time
    claimed = claim(table, instant)
    if claimed is None:
        return ExecutionResult(instant, "skipped", message="another live executor is running this plan")
    plan, heartbeat = claimed
    cancel = cancel or threading.Event()
    started = time.monotonic()
    try:
        progress("plan_started", {"instant": instant, "groups": len(plan.input_groups), "slices": plan.num_slices,
                                  "input_bytes": plan.input_bytes})
        stats = _run_groups(runner, table, instant, plan, policy, progress, cancel)
        figures = layout(table, plan, stats) if layout is not None else None
        extra: dict[str, str] = {}
        if figures is not None:
            extra = {LAYOUT_COLUMNS_KEY: ",".join(plan.strategy.sort_columns),
                     LAYOUT_BEFORE_KEY: f"{figures[0]:.4f}", LAYOUT_AFTER_KEY: f"{figures[1]:.4f}"}
        complete(table, instant, plan, stats, extra)
        replaced_bytes = plan.input_bytes
        result = ExecutionResult(
            instant, "completed", len(plan.input_groups), len(stats), sum(s.file_size_in_bytes for s in stats),
            plan.num_slices, replaced_bytes, time.monotonic() - started,
            f"{plan.num_slices} files into {len(stats)}",
            figures[0] if figures else None, figures[1] if figures else None, tuple(stats),
        )
        progress("plan_completed", {"instant": instant, "files_written": len(stats),
                                    "seconds": round(result.duration_s, 1)})
        return result
    except CommitConflictError as e:
        heartbeat.stop()
        rollback_clustering(table, instant, purge=True)
        log.warning("clustering lost to ingestion; plan dropped", instant=instant, reason=str(e))
        return ExecutionResult(instant, "conflict", duration_s=time.monotonic() - started, message=str(e))
    except (ClusterdError, Exception) as e:
        log.error("clustering failed; rolling back", instant=instant, error=str(e))
        heartbeat.stop()
        rollback_clustering(table, instant, purge=False)
        if isinstance(e, ClusterdError):
            raise
        raise ExecutionError(f"clustering {instant} failed: {type(e).__name__}: {e}") from e
    finally:
        heartbeat.stop()
        with _RUNNING_LOCK:
            _RUNNING.discard((table.base_path, instant))
