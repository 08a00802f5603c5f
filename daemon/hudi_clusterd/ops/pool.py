"""The group pool: a plan's groups run on ``min(groups, hoodie.clustering.max.parallelism)`` threads.

Each group is one job of the engine. A failed group fails the instant: the groups not yet started are skipped,
the running ones are cancelled through the engine, and the error names up to three failed groups.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import structlog

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.plan import ClusteringPlan
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.ops.events import GroupFinished, GroupStarted, Observer
from hudi_clusterd.ops.ports import GroupRunner
from hudi_clusterd.table.hoodie_table import HoodieTable


def run_groups(runner: GroupRunner, table: HoodieTable, instant: str, plan: ClusteringPlan,
               inputs: Sequence[Sequence[BaseFile]], parallelism: int, observer: Observer,
               cancel: threading.Event, written: list[WriteStat] | None = None) -> list[list[WriteStat]]:
    """Run every group of ``plan`` (``inputs[i]``: the base files of group ``i``); returns each group's write
    stats, in plan order.
    ``cancel`` (set by a shutdown) keeps groups from starting; a failed group does the same for the others and
    cancels the running ones. ``written`` receives the stats of every group that finished, also when another
    group fails (what to clean up if the instant is gone by then)."""
    n = len(plan.input_groups)
    failed = threading.Event()
    stats: list[list[WriteStat]] = [[] for _ in range(n)]
    errors: list[str] = []
    caller_context = structlog.contextvars.get_contextvars()  # pool threads do not inherit contextvars

    def one(index: int) -> list[WriteStat]:
        group = plan.input_groups[index]
        if cancel.is_set() or failed.is_set():
            raise ExecutionError("cancelled before start")
        with structlog.contextvars.bound_contextvars(**{**caller_context, "instant": instant, "group": index}):
            observer.notify(GroupStarted(table.name, instant, index, n, group.partition_path, len(group.slices)))
            started = time.monotonic()
            out: list[WriteStat] = []
            ok = False
            try:
                out = runner.run_group(table, instant, plan, index, inputs[index])
                ok = True
                return out
            finally:
                observer.notify(GroupFinished(
                    table.name, instant, index, n, len(out), sum(s.file_size_in_bytes for s in out),
                    round(time.monotonic() - started, 2), ok=ok))

    workers = max(1, min(n, parallelism))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"cluster-{instant}") as pool:
        futures: dict[Future[list[WriteStat]], int] = {pool.submit(one, i): i for i in range(n)}
        for fut in futures:
            try:
                result = fut.result()
                stats[futures[fut]] = result
                if written is not None:
                    written.extend(result)
            except Exception as e:  # a failed group fails the instant; the others are cancelled
                errors.append(f"group {futures[fut]}: {e}")
                if not failed.is_set():
                    failed.set()
                    runner.cancel(table, instant)
    if errors:
        raise ExecutionError(f"clustering {instant} failed: " + "; ".join(errors[:3]))
    return stats
