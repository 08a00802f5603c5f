"""Executing one clustering plan: claim it, run its groups, then complete it or roll it back.

1. Claim (`ownership`): the plan gets its inflight state and an owner heartbeat, unless a live executor owns it.
2. Run (`pool`): groups on a thread pool, each one job of the engine, which writes new file groups (markers
   first) following the plan's work order and returns write stats.
3. Complete (`commit`): the conflict check and the commit point, under the table lock. Groups whose input
   ingestion moved are left out; when every group moved, a plan of ours commits empty (see `commit`). Once the
   completed replacecommit exists the clustering is committed: a failed clean-up step (markers, heartbeat, the
   lock's release) is reported and left for the next tick (`cleanup`), never a rollback or a failed outcome.
4. Failure of any group fails the instant: it is rolled back (files from markers, the inflight state) and the
   plan is kept for a retry. An error is taken for a failure only once the timeline shows no completed
   replacecommit of the instant (`commit.committed_on_timeline`).

Everything is read from the tick's `TableSnapshot` except the short re-checks under the lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import structlog

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.fs_view import FileSystemView
from hudi_clusterd.domain.instant import State
from hudi_clusterd.domain.plan import ClusteringPlan, PendingPlan
from hudi_clusterd.domain.planner import scheduled_by_us
from hudi_clusterd.errors import (
    ClusterdError,
    CommitConflictError,
    ExecutionError,
    InstantCollisionError,
    PlanError,
    StorageError,
)
from hudi_clusterd.ops.cleanup import HEARTBEAT, CleanupFailure, Leftovers, remove_leftovers, report
from hudi_clusterd.ops.commit import (
    UNDECIDED_WAIT_S,
    Committed,
    committed_on_timeline,
    complete,
    rollback_clustering,
    withdraw_collided,
)
from hudi_clusterd.ops.events import NoObserver, Observer, Outcome, PlanFinished, PlanStarted
from hudi_clusterd.ops.ownership import Claim, Ownership
from hudi_clusterd.ops.pool import GroupRun, run_groups
from hudi_clusterd.ops.ports import GroupRunner
from hudi_clusterd.ops.recovery import recover
from hudi_clusterd.ops.snapshot import TableSnapshot
from hudi_clusterd.storage import Storage
from hudi_clusterd.storage.requests import difference
from hudi_clusterd.table.hoodie_table import HoodieTable

log = structlog.get_logger(__name__)

LAYOUT_BEFORE_KEY = "hudi-clusterd.layout.files_scanned.before"
LAYOUT_AFTER_KEY = "hudi-clusterd.layout.files_scanned.after"
LAYOUT_COLUMNS_KEY = "hudi-clusterd.layout.columns"
DEFAULT_PARALLELISM = 15  # hoodie.clustering.max.parallelism

FiguresFn = Callable[[Storage, FileSystemView, ClusteringPlan, Sequence[WriteStat]], tuple[float, float] | None]
"""Files-scanned ratio of a plan's partitions before and after (``layout.figures.clustering_figures``)."""


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """The outcome of executing one plan."""

    instant: str
    outcome: Outcome
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


@dataclass(frozen=True, slots=True)
class Executor:
    """What executing plans needs besides the plan: the engine, ownership, and how to report."""

    runner: GroupRunner
    ownership: Ownership
    parallelism: int = DEFAULT_PARALLELISM
    observer: Observer = field(default_factory=NoObserver)
    figures: FiguresFn | None = None
    commit_wait_s: float = UNDECIDED_WAIT_S
    leftovers: Leftovers | None = None
    """Where committed clusterings whose clean-up failed are remembered for the next tick (the daemon's)."""


def group_inputs(snapshot: TableSnapshot, plan: ClusteringPlan) -> list[list[BaseFile]]:
    """Each group's base files with their sizes (a log-only slice has none), from the snapshot's listing; a file
    the listing lacks is looked up on storage, and a missing one fails the plan, naming it."""
    storage = snapshot.table.storage
    out: list[list[BaseFile]] = []
    for group in plan.input_groups:
        with_base = [s for s in group.slices if s.data_file_path]  # a log-only slice has no base file
        listed = snapshot.group_files([(s.group_id, s.file_name) for s in with_base])
        files: list[BaseFile] = []
        for s, bf in zip(with_base, listed, strict=True):
            if bf is None:
                try:
                    rel = storage.rel_from_uri(s.data_file_path)  # refuses paths outside the table
                except StorageError as e:
                    raise ExecutionError(f"clustering plan input {s.data_file_path}: {e}") from e
                info = storage.info(rel)
                parsed = BaseFile.parse(s.partition_path, s.file_name, info.size if info else 0)
                if info is None or parsed is None:
                    raise ExecutionError(f"{storage.full_path(rel)}: input file of clustering plan is missing")
                bf = parsed
            files.append(bf)
        out.append(files)
    return out


def execute(snapshot: TableSnapshot, pending: PendingPlan, executor: Executor, *,
            cancel: threading.Event | None = None, claim: Claim | None = None) -> ExecutionResult:
    """Execute ``pending`` (claimed here unless ``claim`` is given); see the module docstring."""
    table = snapshot.table
    instant = pending.time
    if claim is None:
        table.check_clusterable()
        stale = _too_old_to_start(table, pending)
        if stale is not None:
            return stale
        claim = executor.ownership.claim(table, pending)
        if claim is None:
            return ExecutionResult(instant, Outcome.SKIPPED, message="another live executor is running this plan")
    plan = pending.plan
    cancel = cancel or threading.Event()
    observer = executor.observer
    started = time.monotonic()
    counts = table.storage.requests
    requests_before = counts.snapshot() if counts is not None else {}
    lock_before = table.lock_usage.totals()

    def finished(result: ExecutionResult) -> ExecutionResult:
        requests = difference(counts.snapshot(), requests_before) if counts is not None else {}
        observer.notify(PlanFinished(table.name, instant, result.outcome, round(result.duration_s, 3),
                                     result.files_replaced, result.bytes_replaced, result.files_written,
                                     result.bytes_written, result.message, result.layout_before,
                                     result.layout_after, requests,
                                     round(table.lock_usage.totals().since(lock_before).held_s, 3)))
        return result

    written: list[WriteStat] = []
    try:
        observer.notify(PlanStarted(table.name, instant, len(plan.input_groups), plan.num_slices, plan.input_bytes))
        inputs = group_inputs(snapshot, plan)
        # the instants whose log blocks the merge applies: those completed now (a write completing later that
        # touched a planned file group makes it a conflict at the commit)
        merge = table.slice_merge(table.timeline(), instant) if plan.reads_log_files else None
        ran = run_groups(GroupRun(executor.runner, table.ref, instant, plan, inputs, executor.parallelism, observer,
                                  cancel, merge))
        written = ran.written
        ran.check()
        by_group = ran.by_group
        every = [ws for group in by_group for ws in group]
        figures = executor.figures(table.storage, snapshot.view, plan, every) if executor.figures else None
        extra: dict[str, str] = {}
        if figures is not None:
            extra = {LAYOUT_COLUMNS_KEY: ",".join(plan.strategy.work_order.sort_columns),
                     LAYOUT_BEFORE_KEY: f"{figures[0]:.4f}", LAYOUT_AFTER_KEY: f"{figures[1]:.4f}"}
        mdt = table.metadata_table()
        if mdt is not None:  # the new files' column statistics, read now rather than under the commit's lock
            mdt.prepare(table.latest_schema(), every)
        committed = complete(table, instant, plan, by_group, extra, undecided_wait_s=executor.commit_wait_s,
                             merged=merge)
        return finished(_committed_result(table, claim, executor, plan, committed, figures,
                                          time.monotonic() - started))
    except InstantCollisionError as e:
        _release(executor.ownership, claim, delete_heartbeat=False)  # the heartbeat file is the other writer's too
        withdraw_collided(table, instant, written)
        finished(ExecutionResult(instant, Outcome.FAILED, duration_s=time.monotonic() - started, message=str(e)))
        raise
    except CommitConflictError as e:
        _release(executor.ownership, claim)
        # only another writer's plan gets here (ours commits empty); it stays for that writer to decide
        rollback_clustering(table, instant, purge=False, written=written)
        log.warning("clustering lost to ingestion; plan kept", instant=instant, reason=str(e))
        return finished(ExecutionResult(instant, Outcome.CONFLICT, duration_s=time.monotonic() - started,
                                        message=str(e)))
    except Exception as e:
        # an error may come after the commit point, or from a write that landed unseen: the timeline decides
        try:
            done = committed_on_timeline(table, instant)
        except ClusterdError as unknown:
            # unreadable now: the rollback reads the timeline again under the lock, and refuses a completed instant
            log.warning("could not read whether the failed clustering committed", instant=instant,
                        error=str(unknown))
            done = None
        if done is not None:
            log.warning("the commit ended in an error, but its completed replacecommit is on the timeline: the "
                        "clustering is committed", instant=instant, error=str(e))
            return finished(_committed_result(table, claim, executor, plan, done, None, time.monotonic() - started,
                                              leftovers=True))
        log.error("clustering failed; rolling back", instant=instant, error=str(e))
        _release(executor.ownership, claim)
        rollback_clustering(table, instant, purge=False, written=written)
        outcome = Outcome.ROLLED_BACK if cancel.is_set() else Outcome.FAILED  # cancelled by a shutdown
        finished(ExecutionResult(instant, outcome, duration_s=time.monotonic() - started, message=str(e)))
        if isinstance(e, ClusterdError):
            raise
        raise ExecutionError(f"clustering {instant} failed: {type(e).__name__}: {e}") from e
    finally:
        _release(executor.ownership, claim)


def _committed_result(table: HoodieTable, claim: Claim, executor: Executor, plan: ClusteringPlan,
                      committed: Committed, figures: tuple[float, float] | None, duration_s: float, *,
                      leftovers: bool = False) -> ExecutionResult:
    """The result of a committed clustering, after its clean-up: the claim released (its heartbeat deleted) and,
    with ``leftovers``, its markers deleted too. A step of the clean-up that failed is reported and left for the
    next tick (`ops.cleanup`); the outcome stays what the timeline says."""
    failures = list(committed.cleanup_failures)
    if leftovers:
        failures += remove_leftovers(table, claim.instant)
    failures += _release(executor.ownership, claim)
    if failures:
        report(executor.observer, table, claim.instant, failures)
        if executor.leftovers is not None:
            executor.leftovers.add(table, claim.instant)
    instant = claim.instant
    if len(committed.dropped_groups) == len(plan.input_groups):  # every group moved: nothing replaced
        message = f"clustering {instant} conflicts with ingestion in every group: " + "; ".join(
            committed.conflicts[:5])
        log.warning("clustering lost to ingestion; committed empty", instant=instant, reason=message)
        return ExecutionResult(instant, Outcome.CONFLICT, duration_s=duration_s, message=message)
    stats = committed.stats
    kept = [g for i, g in enumerate(plan.input_groups) if i not in committed.dropped_groups]
    files_in = sum(len(g.slices) for g in kept)
    message = f"{files_in} files into {len(stats)}"
    if committed.dropped_groups:
        message += (f"; {len(committed.dropped_groups)} of {len(plan.input_groups)} groups left out, their input "
                    f"moved" + (f": {committed.conflicts[0]}" if committed.conflicts else ""))
    return ExecutionResult(
        instant, Outcome.COMPLETED, len(kept), len(stats), sum(s.file_size_in_bytes for s in stats),
        files_in, sum(g.input_bytes for g in kept), duration_s, message,
        figures[0] if figures else None, figures[1] if figures else None, stats,
    )


def _release(ownership: Ownership, claim: Claim, *, delete_heartbeat: bool = True) -> list[CleanupFailure]:
    """Release ``claim``; a heartbeat that could not be deleted is returned (left for the next tick's clean-up,
    or for the rollback that follows a failure), never raised."""
    try:
        ownership.release(claim, delete_heartbeat=delete_heartbeat)
    except ClusterdError as e:
        return [CleanupFailure(HEARTBEAT, str(e))]
    return []


def _too_old_to_start(table: HoodieTable, pending: PendingPlan) -> ExecutionResult | None:
    """A plan requested so long ago that it could not complete within the time the table's layout allows an
    instant (`HoodieTable.max_pending_s`): ours is purged (the next scheduling plans afresh), another writer's
    is left to it. None when the plan may start."""
    limit = table.max_pending_s
    age = table.instant_age_seconds(pending.time)
    if limit is None or age <= limit:
        return None
    hours = f"{age / 3600:.1f} h"
    if not scheduled_by_us(pending.plan):
        log.warning("clustering plan of another writer too old to execute; left to it", instant=pending.time,
                    age_h=round(age / 3600, 1))
        return ExecutionResult(pending.time, Outcome.SKIPPED, message=(
            f"plan {pending.time} was requested {hours} ago; it would complete more than a day after it, which "
            "the table's readers do not allow; left to the writer that scheduled it"))
    rollback_clustering(table, pending.time, purge=True)
    log.warning("purged a clustering plan too old to execute", instant=pending.time, age_h=round(age / 3600, 1))
    return ExecutionResult(pending.time, Outcome.SKIPPED, message=(
        f"plan {pending.time} was requested {hours} ago and would complete more than a day after it, which the "
        "table's readers do not allow; it was purged and the next scheduling plans again"))


def execute_pending(table: HoodieTable, runner: GroupRunner, instant: str | None = None, *,
                    ownership: Ownership | None = None, parallelism: int = DEFAULT_PARALLELISM,
                    observer: Observer | None = None, figures: FiguresFn | None = None,
                    cancel: threading.Event | None = None, commit_wait_s: float = UNDECIDED_WAIT_S
                    ) -> ExecutionResult:
    """What ``hudi-clusterd execute`` does: one snapshot, recovery of what dead executors left, then the plan
    ``instant`` (the oldest pending plan by default); its commit waits up to ``commit_wait_s`` for writers."""
    ownership = ownership or Ownership()
    table.check_clusterable()
    snapshot = TableSnapshot.load(table)
    recover(snapshot, ownership)
    if instant is None:
        runnable = [p for p in snapshot.pending if scheduled_by_us(p.plan) or p.instant.state is State.REQUESTED]
        if not runnable:
            return ExecutionResult("", Outcome.SKIPPED, message="no pending clustering plan")
        pending = runnable[0]
    else:
        found = snapshot.pending_plan(instant)
        if found is None:
            raise PlanError(f"no pending clustering plan {instant} on the timeline of {table.base_path}")
        pending = found
    executor = Executor(runner, ownership, parallelism, observer or NoObserver(), figures, commit_wait_s)
    return execute(snapshot, pending, executor, cancel=cancel)
