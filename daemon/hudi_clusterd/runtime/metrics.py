"""Prometheus metrics of the daemon, and the observer that feeds them from table-operation events (served over
HTTP by ``runtime.metrics_server``).

Every metric lives in a registry owned by one ``Metrics`` instance (never the global default registry),
so tests and several daemons in one process never share state. Names follow
``hudi_clusterd_<noun>_<unit|total>``. Labels are bounded: ``table`` (the configured table name), ``outcome``
and ``step`` (fixed vocabularies), never instant ids or paths.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final, get_args

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from hudi_clusterd.ops.cleanup import STEPS as CLEANUP_STEPS
from hudi_clusterd.ops.events import (
    CleanupFailed,
    Event,
    GroupFinished,
    GroupStarted,
    LayoutMeasured,
    Outcome,
    PlanFinished,
    PlanScheduled,
    TableBusy,
    TableObserved,
    TableUsage,
)
from hudi_clusterd.runtime.reload import ReloadOutcome

log = structlog.get_logger(__name__)

PLAN_OUTCOMES: Final[tuple[str, ...]] = tuple(o.value for o in Outcome if o is not Outcome.SKIPPED)
"""How a clustering plan ended: committed, its job failed, it was rolled back, or a concurrent write won."""
RELOAD_OUTCOMES: Final[tuple[ReloadOutcome, ...]] = get_args(ReloadOutcome)

PREFIX: Final = "hudi_clusterd"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 9464

# A commit holds the table lock for well under a second; a slow lock service or store shows as seconds.
LOCK_HOLD_BUCKETS: Final[tuple[float, ...]] = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

# Clustering runs from seconds (a tiny table) to hours (a large backlog).
DURATION_BUCKETS: Final[tuple[float, ...]] = (
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0, 14400.0,
)  # fmt: skip


class Metrics:
    """Every metric the daemon exports, in a per-instance ``CollectorRegistry``.

    Methods are thread-safe (prometheus_client metrics are) and cheap; the daemon calls them from its loops.
    Per-table children appear on the first call naming a table; ``forget_table`` removes them when a table
    leaves the configuration.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._tables: set[str] = set()
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry

        t, to = ("table",), ("table", "outcome")
        # Per table.
        self.commits_since_clustering = _gauge(
            reg,
            "commits_since_last_clustering",
            t,
            "Completed commits on the timeline after the latest clustering (completed or pending).",
        )
        self.pending_plans = _gauge(reg, "pending_plans", t, "Clustering plans requested or inflight on the timeline.")
        self.oldest_pending_plan_age = _gauge(
            reg,
            "oldest_pending_plan_age_seconds",
            t,
            "Age of the oldest pending clustering plan (0 when there is none).",
        )
        self.compaction_blocked = _gauge(reg, "pending_clustering_blocks_compaction_seconds", t, (
            "On a merge-on-read table of version 6: the age of the oldest pending clustering, which keeps Apache "
            "Hudi writers in single-writer mode with EAGER cleaning from scheduling compaction (0 otherwise)."))
        self.plans_scheduled = _counter(
            reg, "plans_scheduled_total", t, "Clustering plans written as requested replacecommits."
        )
        self.plans_finished = _counter(
            reg,
            "plans_finished_total",
            to,
            "Clustering plans that ended, by outcome (completed, failed, rolled_back, conflict).",
        )
        self.clustering_duration = Histogram(
            f"{PREFIX}_clustering_duration_seconds",
            "Wall time from starting a plan's execution to its outcome.",
            to,
            buckets=DURATION_BUCKETS,
            registry=reg,
        )
        self.rewritten_bytes = _counter(
            reg,
            "rewritten_bytes_total",
            t,
            "Bytes of base files rewritten (read and replaced) by completed clustering.",
        )
        self.rewritten_files = _counter(
            reg, "rewritten_files_total", t, "Base files rewritten (replaced) by completed clustering."
        )
        self.snapshot_files = _gauge(reg, "snapshot_files", t, "Base files in the latest snapshot.")
        self.snapshot_small_files = _gauge(
            reg, "snapshot_small_files", t, "Base files in the latest snapshot below the small-file limit."
        )
        self.files_scanned_ratio = _gauge(
            reg,
            "layout_files_scanned_ratio",
            t,
            "Estimated fraction of files a typical filter on the sort columns must read (lower is better).",
        )
        self.table_busy = _gauge(
            reg,
            "table_busy_seconds",
            t,
            "How long the table has been busy with another writer's half-done work (0 when it is not).",
        )
        self.last_success = _gauge(
            reg,
            "last_successful_clustering_timestamp_seconds",
            t,
            "Unix time of the last clustering that completed.",
        )
        self.storage_requests = _counter(
            reg,
            "storage_requests_total",
            ("table", "kind"),
            "Requests the daemon's process made to the table's object store, by kind (LIST, GET, HEAD, PUT, POST, "
            "DELETE, COPY) and precondition_failed (conditional writes the store refused).",
        )
        self.lock_hold = Histogram(
            f"{PREFIX}_lock_hold_seconds",
            "How long each holding of the table lock lasted.",
            t,
            buckets=LOCK_HOLD_BUCKETS,
            registry=reg,
        )
        self.lock_connection_retries = _counter(
            reg, "lock_connection_retries_total", t,
            "Requests to the table's lock service (DynamoDB, ZooKeeper, the storage lock's store) retried after a "
            "lost connection or throttling.",
        )  # fmt: skip
        self.lock_takeovers = _counter(
            reg, "lock_takeovers_total", t, "Table locks taken over from a holder whose lease had run out."
        )
        self.leases_lost = _counter(
            reg, "lock_leases_lost_total", t,
            "Leases of the table lock lost while held (nothing more was written under them; the work is checked "
            "again and committed under a new lease, or rolled back).",
        )  # fmt: skip
        self.cleanup_failures = _counter(
            reg, "cleanup_failures_total", ("table", "step"),
            "Clean-up steps after a clustering's commit point that failed (markers, heartbeat, lock_release): the "
            "clustering stays committed; markers and heartbeat are removed again at the next tick.",
        )  # fmt: skip
        # Per process.
        self.config_reloads = _counter(
            reg,
            "config_reloads_total",
            ("outcome",),
            "Configuration reloads (file change or SIGHUP), by outcome (success, failure).",
        )
        self.groups_running = _gauge(reg, "groups_running", (), "Clustering groups executing now.")
        self.plans_queued = _gauge(
            reg, "plans_queued", (), "Clustering plans pending (requested or inflight) over all tables."
        )
        for outcome in RELOAD_OUTCOMES:
            self.config_reloads.labels(outcome=outcome)

    # -- per table -------------------------------------------------------------------------------------

    def set_commits_since_clustering(self, table: str, commits: int) -> None:
        """Completed commits after the latest completed clustering of ``table``."""
        self._touch(table)
        self.commits_since_clustering.labels(table=table).set(commits)

    def set_pending_plans(self, table: str, count: int, oldest_age_seconds: float | None) -> None:
        """Pending plans of ``table`` and the age of the oldest (``None`` or 0 when there is none)."""
        self._touch(table)
        self.pending_plans.labels(table=table).set(count)
        self.oldest_pending_plan_age.labels(table=table).set((oldest_age_seconds or 0.0) if count else 0.0)

    def set_compaction_blocked(self, table: str, seconds: float) -> None:
        """How long a pending clustering may have kept Hudi from scheduling compaction on ``table``."""
        self._touch(table)
        self.compaction_blocked.labels(table=table).set(seconds)

    def plan_scheduled(self, table: str) -> None:
        """A requested clustering plan was written for ``table``."""
        self._touch(table)
        self.plans_scheduled.labels(table=table).inc()

    def plan_finished(
        self,
        table: str,
        outcome: str,
        duration_s: float,
        bytes_rewritten: int = 0,
        files_rewritten: int = 0,
    ) -> None:
        """A plan of ``table`` ended after ``duration_s`` seconds of execution.

        Bytes and files rewritten count only for ``completed``, which also stamps the last-success time.
        """
        if outcome not in PLAN_OUTCOMES:
            raise ValueError(f"plan outcome must be one of {', '.join(PLAN_OUTCOMES)}, got {outcome!r}")
        self._touch(table)
        self.plans_finished.labels(table=table, outcome=outcome).inc()
        self.clustering_duration.labels(table=table, outcome=outcome).observe(max(duration_s, 0.0))
        if outcome == "completed":
            self.rewritten_bytes.labels(table=table).inc(max(bytes_rewritten, 0))
            self.rewritten_files.labels(table=table).inc(max(files_rewritten, 0))
            self.last_success.labels(table=table).set(self._clock())

    def set_snapshot(self, table: str, files: int, small_files: int) -> None:
        """Base files and small base files in the latest snapshot of ``table``."""
        self._touch(table)
        self.snapshot_files.labels(table=table).set(files)
        self.snapshot_small_files.labels(table=table).set(small_files)

    def set_files_scanned_ratio(self, table: str, ratio: float) -> None:
        """The layout quality estimate of ``table``: fraction of files a filter must scan (0..1)."""
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"files-scanned ratio of table {table!r} must be within [0, 1], got {ratio}")
        self._touch(table)
        self.files_scanned_ratio.labels(table=table).set(ratio)

    def set_table_busy(self, table: str, seconds: float) -> None:
        """How long ``table`` has been busy with another writer's half-done work (0 when it is not)."""
        self._touch(table)
        self.table_busy.labels(table=table).set(max(seconds, 0.0))

    def record_usage(self, table: str, requests: dict[str, int], lock_holds: tuple[float, ...],
                     connection_retries: int, takeovers: int, leases_lost: int) -> None:
        """What a tick of ``table`` cost (`ops.events.TableUsage`)."""
        self._touch(table)
        for kind, n in requests.items():
            self.storage_requests.labels(table=table, kind=kind).inc(n)
        for seconds in lock_holds:
            self.lock_hold.labels(table=table).observe(max(seconds, 0.0))
        self.lock_connection_retries.labels(table=table).inc(connection_retries)
        self.lock_takeovers.labels(table=table).inc(takeovers)
        self.leases_lost.labels(table=table).inc(leases_lost)

    def cleanup_failed(self, table: str, step: str) -> None:
        """A step of the clean-up after a commit point of ``table`` failed (`ops.cleanup.STEPS`)."""
        if step not in CLEANUP_STEPS:
            raise ValueError(f"clean-up step must be one of {', '.join(CLEANUP_STEPS)}, got {step!r}")
        self._touch(table)
        self.cleanup_failures.labels(table=table, step=step).inc()

    def forget_table(self, table: str) -> None:
        """Remove every series labelled with ``table`` (it left the configuration)."""
        with self._lock:
            self._tables.discard(table)
        for metric in self._per_table():
            metric.remove(table)  # a no-op for a child never created
        for outcome in PLAN_OUTCOMES:
            self.plans_finished.remove(table, outcome)
            self.clustering_duration.remove(table, outcome)
        for step in CLEANUP_STEPS:
            self.cleanup_failures.remove(table, step)
        for (name, kind) in [k for k in self._request_series() if k[0] == table]:
            self.storage_requests.remove(name, kind)

    @property
    def tables(self) -> frozenset[str]:
        """Tables that currently have series."""
        with self._lock:
            return frozenset(self._tables)

    # -- per process -----------------------------------------------------------------------------------

    def config_reload(self, outcome: ReloadOutcome) -> None:
        """Count one configuration reload by outcome."""
        if outcome not in RELOAD_OUTCOMES:
            raise ValueError(f"reload outcome must be one of {', '.join(RELOAD_OUTCOMES)}, got {outcome!r}")
        self.config_reloads.labels(outcome=outcome).inc()

    def group_started(self) -> None:
        """One more clustering group is executing."""
        self.groups_running.inc()

    def group_finished(self) -> None:
        """One clustering group stopped executing (whatever its outcome)."""
        self.groups_running.dec()

    def set_plans_queued(self, count: int) -> None:
        """Plans waiting for an executor slot."""
        self.plans_queued.set(count)

    # -- internals -------------------------------------------------------------------------------------

    def _per_table(self) -> tuple[Gauge | Counter | Histogram, ...]:
        return (
            self.commits_since_clustering, self.pending_plans, self.oldest_pending_plan_age, self.compaction_blocked,
            self.plans_scheduled, self.rewritten_bytes, self.rewritten_files, self.snapshot_files,
            self.snapshot_small_files, self.files_scanned_ratio, self.table_busy, self.last_success,
            self.lock_hold, self.lock_connection_retries, self.lock_takeovers, self.leases_lost,
        )  # fmt: skip

    def _request_series(self) -> list[tuple[str, str]]:
        return [(s.labels["table"], s.labels["kind"]) for metric in self.storage_requests.collect()
                for s in metric.samples if s.name.endswith("_total")]

    def _touch(self, table: str) -> None:
        """On a table's first use, create its counters at zero so that rate() and increase() see them."""
        with self._lock:
            if table in self._tables:
                return
            self._tables.add(table)
        self.plans_scheduled.labels(table=table)
        self.rewritten_bytes.labels(table=table)
        self.rewritten_files.labels(table=table)
        for counter in (self.lock_connection_retries, self.lock_takeovers, self.leases_lost):
            counter.labels(table=table)
        for outcome in PLAN_OUTCOMES:
            self.plans_finished.labels(table=table, outcome=outcome)
        for step in CLEANUP_STEPS:
            self.cleanup_failures.labels(table=table, step=step)


def _gauge(reg: CollectorRegistry, suffix: str, labels: tuple[str, ...], doc: str) -> Gauge:
    return Gauge(f"{PREFIX}_{suffix}", doc, labels, registry=reg)


def _counter(reg: CollectorRegistry, suffix: str, labels: tuple[str, ...], doc: str) -> Counter:
    return Counter(f"{PREFIX}_{suffix}", doc, labels, registry=reg)


class MetricsObserver:
    """Turns the events of table operations into metric updates (an ``ops.events.Observer``)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._pending: dict[str, int] = {}
        self._lock = threading.Lock()

    def notify(self, event: Event) -> None:
        m = self.metrics
        if isinstance(event, PlanScheduled):
            m.plan_scheduled(event.table)
        elif isinstance(event, GroupStarted):
            m.group_started()
        elif isinstance(event, GroupFinished):
            m.group_finished()
        elif isinstance(event, PlanFinished):
            if event.outcome is not Outcome.SKIPPED:
                m.plan_finished(event.table, event.outcome.value, event.seconds, event.bytes_replaced,
                                event.files_replaced)
        elif isinstance(event, TableObserved):
            m.set_commits_since_clustering(event.table, event.commits_since_clustering)
            m.set_pending_plans(event.table, event.pending_plans, event.oldest_pending_age_s)
            m.set_compaction_blocked(event.table, event.compaction_blocked_s)
            m.set_snapshot(event.table, event.files, event.small_files)
            with self._lock:
                self._pending[event.table] = event.pending_plans
                m.set_plans_queued(sum(self._pending.values()))
        elif isinstance(event, TableBusy):
            m.set_table_busy(event.table, event.seconds)
        elif isinstance(event, LayoutMeasured):
            m.set_files_scanned_ratio(event.table, event.ratio)
        elif isinstance(event, CleanupFailed):
            m.cleanup_failed(event.table, event.step)
        elif isinstance(event, TableUsage):
            m.record_usage(event.table, event.requests, event.lock_holds, event.lock_connection_retries,
                           event.lock_takeovers, event.leases_lost)

    def forget_table(self, table: str) -> None:
        """A table left the configuration: drop its series and its share of the queue."""
        self.metrics.forget_table(table)
        with self._lock:
            self._pending.pop(table, None)
            self.metrics.set_plans_queued(sum(self._pending.values()))


__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DURATION_BUCKETS",
    "PLAN_OUTCOMES",
    "RELOAD_OUTCOMES",
    "Metrics",
    "MetricsObserver",
    "ReloadOutcome",
]
