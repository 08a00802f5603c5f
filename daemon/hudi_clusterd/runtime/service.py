"""The long-running service: one worker thread per table, a shared engine, metrics, reload and shutdown.

Each table worker waits on a wake-up event that its timeline watcher sets on new instants (with a periodic full
check as a safety net). A tick reads the current settings once, refreshes the table's gauges, schedules a plan
when enough commits have accumulated, then executes pending plans oldest first. Groups of a plan run on the
executor's thread pool, each as a job of the one shared SparkSession.

Stop order (``Daemon.stop``): stop scheduling and starting plans; let running plans finish within the grace
period; then cancel their Spark jobs (the executor rolls the cancelled instant back, or the next start does);
stop the watchers, the metrics server, and finally the SparkSession.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import structlog

from hudi_clusterd.errors import ClusterdError
from hudi_clusterd.ops.execute import Engine, ExecutionResult, execute, recover_abandoned
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.runtime.metrics import Metrics
from hudi_clusterd.runtime.reload import SettingsHolder
from hudi_clusterd.runtime.watcher import TimelineWatcher
from hudi_clusterd.settings import Settings, TableSpec

log = structlog.get_logger(__name__)

MAX_ATTEMPTS_PER_PLAN = 3


class TableWorker:
    """The loop of one table."""

    def __init__(self, name: str, daemon: Daemon) -> None:
        self.name = name
        self.daemon = daemon
        self.wake = threading.Event()
        self.stop_event = threading.Event()
        self.busy = False
        self.last_beat = time.monotonic()
        self.current_instant: str | None = None
        self._failures: dict[str, int] = {}
        self._thread = threading.Thread(target=self._run, name=f"table-{name}", daemon=True)
        self._watcher: TimelineWatcher | None = None
        self._started_recovery = False

    @property
    def spec(self) -> TableSpec:
        return self.daemon.settings.current.table(self.name)

    def start(self) -> None:
        spec = self.spec
        settings = self.daemon.settings.current
        if TimelineWatcher.supports(spec.base_path):
            try:
                self._watcher = TimelineWatcher(spec.base_path, self.wake.set, mode=settings.watch_mode.value)
                self._watcher.start()
            except ClusterdError as e:
                log.warning("timeline watcher not started; polling only", table=self.name, error=str(e))
                self._watcher = None
        self._thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.wake.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def healthy(self, max_age_s: float) -> bool:
        return self.is_alive() and (self.busy or time.monotonic() - self.last_beat < max_age_s)

    def _run(self) -> None:
        with structlog.contextvars.bound_contextvars(table=self.name):
            while not self.stop_event.is_set():
                try:
                    self.tick()
                except ClusterdError as e:
                    log.error("tick failed", error=str(e), retryable=e.retryable)
                except Exception:
                    log.exception("tick failed unexpectedly")
                self.last_beat = time.monotonic()
                self.wake.wait(self.daemon.settings.current.poll_interval_seconds)
                self.wake.clear()

    def tick(self) -> None:
        """One pass: refresh gauges, schedule when due, execute pending plans oldest first."""
        from hudi_clusterd.io.table import HoodieTable

        settings: Settings = self.daemon.settings.current
        spec = settings.table(self.name)
        metrics = self.daemon.metrics
        table = HoodieTable.open(spec.base_path, lock_timeout_s=settings.lock_timeout_seconds,
                                 lock_stale_s=settings.lock_stale_seconds)
        if not self._started_recovery:
            recover_abandoned(table)  # plans left inflight by a crashed daemon go back to requested
            self._started_recovery = True
        self._refresh_gauges(table, spec)
        if self.daemon.stopping.is_set():
            return
        result = schedule(table, spec.policy)
        if result.instant is not None:
            metrics.plan_scheduled(self.name)
            log.info("scheduled clustering", instant=result.instant, reason=result.reason)
        elif result.trigger.fire:
            log.info("nothing to schedule", reason=result.reason)
        for pending in table.pending_clustering_plans():
            if self.daemon.stopping.is_set():
                return
            self._execute(table, spec, pending.instant.time)
        self._refresh_gauges(table, spec)

    def _refresh_gauges(self, table: Any, spec: TableSpec) -> None:
        metrics = self.daemon.metrics
        timeline = table.timeline()
        metrics.set_commits_since_clustering(self.name, table.commits_since_last_clustering(timeline))
        plans = table.pending_clustering_plans(timeline)
        ages = [table.instant_age_seconds(p.instant.time) for p in plans]
        metrics.set_pending_plans(self.name, len(plans), max(ages) if ages else None)
        self.daemon.pending_by_table[self.name] = len(plans)
        view = table.file_system_view(timeline)
        latest = view.latest_file_slices()
        metrics.set_snapshot(self.name, len(latest), sum(1 for s in latest if s.size < spec.policy.small_file_limit))
        self.daemon.update_queue_gauge()

    def _execute(self, table: Any, spec: TableSpec, instant: str) -> None:
        metrics = self.daemon.metrics
        cancel = threading.Event()
        self.busy = True
        self.current_instant = instant
        self.daemon.register_running(self.name, instant, cancel)

        def progress(event: str, info: Mapping[str, Any]) -> None:
            self.last_beat = time.monotonic()
            if event == "group_started":
                metrics.group_started()
            elif event == "group_finished":
                metrics.group_finished()
            log.info(event.replace("_", " "), **{**dict(info), "instant": instant})

        started = time.monotonic()
        outcome = "failed"
        result: ExecutionResult | None = None
        try:
            with structlog.contextvars.bound_contextvars(instant=instant):
                result = execute(table, spec.policy, self.daemon.engine.runner, instant, progress=progress,
                                 cancel=cancel, layout=self.daemon.engine.layout)
            outcome = result.outcome
        except ClusterdError as e:
            self._failures[instant] = self._failures.get(instant, 0) + 1
            # ``cancel`` is also set by the executor itself when one group fails (to stop the others), so only
            # the daemon stopping means "cancelled, not failed"
            cancelled = self.daemon.stopping.is_set()
            outcome = "rolled_back" if cancelled else "failed"
            log.error("clustering failed", instant=instant, error=str(e), attempt=self._failures[instant])
            if self._failures[instant] >= MAX_ATTEMPTS_PER_PLAN and not cancelled:
                from hudi_clusterd.ops.execute import rollback_clustering

                rollback_clustering(table, instant, purge=True)
                log.error("clustering plan dropped after repeated failures", instant=instant,
                          attempts=self._failures.pop(instant))
        finally:
            self.busy = False
            self.current_instant = None
            self.daemon.unregister_running(self.name, instant)
        if outcome == "skipped":
            return
        bytes_rewritten = result.bytes_replaced if result else 0
        files_rewritten = result.files_replaced if result else 0
        metrics.plan_finished(self.name, _metric_outcome(outcome), time.monotonic() - started, bytes_rewritten,
                              files_rewritten)
        if result is not None and result.outcome == "completed":
            self._failures.pop(instant, None)
            log.info("clustering completed", instant=instant, files_in=result.files_replaced,
                     files_out=result.files_written, seconds=round(result.duration_s, 1),
                     files_scanned_before=result.layout_before, files_scanned_after=result.layout_after)
            self._refresh_layout(table, spec)

    def _refresh_layout(self, table: Any, spec: TableSpec) -> None:
        measure = self.daemon.engine.snapshot_layout
        if measure is None or not spec.policy.sort_columns:
            return
        ratio = measure(table, spec.policy.sort_columns)
        if ratio is not None:
            self.daemon.metrics.set_files_scanned_ratio(self.name, ratio)


def _metric_outcome(outcome: str) -> Any:
    return outcome if outcome in ("completed", "failed", "rolled_back", "conflict") else "failed"


class Daemon:
    """Owns the table workers; ``start()``, ``stop(grace)``, ``join()``."""

    def __init__(self, settings: SettingsHolder[Settings], metrics: Metrics, engine: Engine) -> None:
        self.settings = settings
        self.metrics = metrics
        self.engine = engine
        self.stopping = threading.Event()
        self.workers: dict[str, TableWorker] = {}
        self._running: dict[tuple[str, str], threading.Event] = {}
        self.pending_by_table: dict[str, int] = {}
        self._lock = threading.Lock()
        self.grace_expired = False

    def start(self) -> None:
        self.reconcile_tables()

    def reconcile_tables(self) -> None:
        """Start workers for new tables and stop those of removed tables (after a reload)."""
        wanted = {t.name for t in self.settings.current.tables}
        with self._lock:
            for name in sorted(set(self.workers) - wanted):
                worker = self.workers.pop(name)
                worker.stop()
                threading.Thread(target=worker.join, name=f"stop-{name}", daemon=True).start()
                self.metrics.forget_table(name)
                self.pending_by_table.pop(name, None)
                log.info("table removed", table=name)
            for name in sorted(wanted - set(self.workers)):
                worker = TableWorker(name, self)
                self.workers[name] = worker
                worker.start()
                log.info("table added", table=name, base_path=worker.spec.base_path)

    def run_once(self) -> list[str]:
        """One tick per table in this thread (``run --once``), without watchers or worker threads.

        A broken table is logged and skipped, so the others are still served; returns the names of the
        tables whose tick failed."""
        failed: list[str] = []
        for spec in self.settings.current.tables:
            worker = TableWorker(spec.name, self)
            with structlog.contextvars.bound_contextvars(table=spec.name):
                try:
                    worker.tick()
                except ClusterdError as e:
                    log.error("tick failed", error=str(e), retryable=e.retryable)
                    failed.append(spec.name)
                except Exception:
                    log.exception("tick failed unexpectedly")
                    failed.append(spec.name)
        return failed

    def wake_all(self) -> None:
        for w in list(self.workers.values()):
            w.wake.set()

    def register_running(self, table: str, instant: str, cancel: threading.Event) -> None:
        with self._lock:
            self._running[(table, instant)] = cancel

    def unregister_running(self, table: str, instant: str) -> None:
        with self._lock:
            self._running.pop((table, instant), None)

    def running(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._running)

    def update_queue_gauge(self) -> None:
        """Plans waiting or running, over every table."""
        self.metrics.set_plans_queued(sum(self.pending_by_table.values()))

    def healthy(self) -> bool:
        interval = self.settings.current.poll_interval_seconds
        max_age = max(60.0, 3 * interval)
        workers = list(self.workers.values())
        return all(w.healthy(max_age) for w in workers)

    def stop(self, grace_s: float) -> bool:
        """Stop gracefully; returns False when running plans had to be cancelled after ``grace_s``."""
        self.stopping.set()
        for w in list(self.workers.values()):
            w.stop()
        deadline = time.monotonic() + grace_s
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        leftover = self.running()
        if leftover:
            self.grace_expired = True
            log.warning("grace period over; cancelling running clustering", plans=len(leftover))
            for (table, instant) in leftover:
                with self._lock:
                    cancel = self._running.get((table, instant))
                if cancel is not None:
                    cancel.set()
                worker = self.workers.get(table)
                if worker is not None:
                    try:
                        from hudi_clusterd.io.table import HoodieTable

                        self.engine.runner.cancel(HoodieTable.open(worker.spec.base_path), instant)
                    except ClusterdError as e:
                        log.warning("cancel failed", table=table, instant=instant, error=str(e))
        return not leftover

    def join(self, timeout: float | None = None) -> None:
        for w in list(self.workers.values()):
            w.join(timeout)
