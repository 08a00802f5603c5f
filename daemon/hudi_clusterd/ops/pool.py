"""The group pool: a plan's groups run on ``min(groups, hoodie.clustering.max.parallelism)`` threads.

Each group is one job of the engine. A failed group fails the instant: the groups not yet started are skipped,
the running ones are cancelled through the engine, and the error (`GroupResults.check`) names up to three failed
groups.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.plan import ClusteringPlan
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.formats.log import SliceMerge
from hudi_clusterd.ops.events import GroupFinished, GroupStarted, Observer
from hudi_clusterd.ops.ports import GroupRunner
from hudi_clusterd.table.table_ref import TableRef


@dataclass(frozen=True, slots=True)
class GroupRun:
    """One plan's groups to run: on which engine and table, how many at once, who hears of them, and the event
    (set by a shutdown) that keeps groups from starting."""

    runner: GroupRunner
    table: TableRef
    instant: str
    plan: ClusteringPlan
    inputs: Sequence[Sequence[BaseFile]]
    """``inputs[i]``: the base files of group ``i``, with their sizes."""
    parallelism: int
    observer: Observer
    cancel: threading.Event
    merge: SliceMerge | None = None
    """How slices with log files are merged (None: a copy-on-write table)."""


@dataclass(frozen=True, slots=True)
class GroupResults:
    """What the groups of one plan wrote, in plan order (nothing for a group that failed or never started),
    and the errors of the groups that failed."""

    instant: str
    by_group: list[list[WriteStat]]
    errors: list[str]

    @property
    def written(self) -> list[WriteStat]:
        """The write stats of every group that finished, also when another failed (what to clean up if the
        instant is gone by then)."""
        return [ws for group in self.by_group for ws in group]

    def check(self) -> None:
        """Raise ``ExecutionError`` naming up to three failed groups, when any failed."""
        if self.errors:
            raise ExecutionError(f"clustering {self.instant} failed: " + "; ".join(self.errors[:3]))


def run_groups(run: GroupRun) -> GroupResults:
    """Run every group of the plan. ``run.cancel`` keeps groups from starting; a failed group does the same for
    the others and cancels the running ones."""
    table, instant, plan, observer, runner = run.table, run.instant, run.plan, run.observer, run.runner
    n = len(plan.input_groups)
    failed = threading.Event()
    stats: list[list[WriteStat]] = [[] for _ in range(n)]
    errors: list[str] = []
    caller_context = structlog.contextvars.get_contextvars()  # pool threads do not inherit contextvars

    def one(index: int) -> list[WriteStat]:
        group = plan.input_groups[index]
        if run.cancel.is_set() or failed.is_set():
            raise ExecutionError("cancelled before start")
        with structlog.contextvars.bound_contextvars(**{**caller_context, "instant": instant, "group": index}):
            observer.notify(GroupStarted(table.name, instant, index, n, group.partition_path, len(group.slices)))
            started = time.monotonic()
            out: list[WriteStat] = []
            ok = False
            try:
                out = runner.run_group(table, instant, plan, index, run.inputs[index], run.merge)
                ok = True
                return out
            finally:
                observer.notify(GroupFinished(
                    table.name, instant, index, n, len(out), sum(s.file_size_in_bytes for s in out),
                    round(time.monotonic() - started, 2), ok=ok))

    workers = max(1, min(n, run.parallelism))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"cluster-{instant}") as pool:
        futures: dict[Future[list[WriteStat]], int] = {pool.submit(one, i): i for i in range(n)}
        for fut in futures:
            try:
                stats[futures[fut]] = fut.result()
            except Exception as e:  # a failed group fails the instant; the others are cancelled
                errors.append(f"group {futures[fut]}: {e}")
                if not failed.is_set():
                    failed.set()
                    runner.cancel(table, instant)
    return GroupResults(instant, stats, errors)
