"""The service: one worker thread per table over a shared engine.

Each table worker waits on a wake-up event that its timeline watcher sets on new instants (with a periodic full
check as a safety net); a table on storage without file-system events (an object store) is polled instead, and
ticks only when its timeline changed since a quiet tick (`runtime.poll`). A tick reads the current settings once
and keeps its table object between ticks (its timeline cache and footer ranges survive); then `ops.schedule` takes
the tick's one `TableSnapshot` (and schedules, and claims, when due); the first tick recovers what a crashed
executor left; the table's state is reported; and pending plans run oldest first, the one just scheduled last.
Groups of a plan run on the executor's thread pool, each as a job of the shared engine. Events go to the daemon's
observer (metrics and logs, wired by ``runtime.app``), after every tick what it cost (`runtime.usage`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Sequence

import structlog

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.plan import ClusteringPlan, PendingPlan
from hudi_clusterd.domain.planner import scheduled_by_us
from hudi_clusterd.errors import ClusterdError, StorageError, TableBusyError
from hudi_clusterd.lock import LocalMutexes, LockProvider, lock_provider_from_properties
from hudi_clusterd.ops.cleanup import Leftovers
from hudi_clusterd.ops.commit import rollback_clustering
from hudi_clusterd.ops.events import Event, LayoutMeasured, Observer, Outcome, PlanScheduled, TableBusy, TableObserved
from hudi_clusterd.ops.execute import ExecutionResult, Executor, execute
from hudi_clusterd.ops.ownership import Claim, Ownership
from hudi_clusterd.ops.ports import GroupRunner
from hudi_clusterd.ops.recovery import recover
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.ops.snapshot import TableSnapshot
from hudi_clusterd.ordering.figures import clustering_figures, ratio_after
from hudi_clusterd.runtime.poll import TimelinePoll
from hudi_clusterd.runtime.reload import SettingsHolder
from hudi_clusterd.runtime.usage import UsageReport
from hudi_clusterd.runtime.watcher import TimelineWatcher
from hudi_clusterd.settings import Settings, TableSpec
from hudi_clusterd.storage import Storage, open_storage, table_storage_spec
from hudi_clusterd.table.hoodie_table import HoodieTable, timeline_folder

log = structlog.get_logger(__name__)

MAX_ATTEMPTS_PER_PLAN = 3
BUSY_WARN_S = 600.0
"""A table that stays busy with another writer's half-done work (`TableBusyError`) this long is logged as a
warning at every tick: an indexer is still at work, or the writers have stopped and clustering waits for their
next write."""


class _Beating:
    """Forwards events under the worker's configured table name (the ``table`` label of every metric; the
    operations know only the table's own name) and records that the worker is alive (a group that runs for an
    hour still beats)."""

    def __init__(self, worker: TableWorker, observer: Observer) -> None:
        self.worker = worker
        self.observer = observer

    def notify(self, event: Event) -> None:
        self.worker.last_beat = time.monotonic()
        if event.table != self.worker.name:
            event = dataclasses.replace(event, table=self.worker.name)
        self.observer.notify(event)


class TableWorker:
    """The loop of one table."""

    def __init__(self, name: str, daemon: Daemon) -> None:
        self.name = name
        self.daemon = daemon
        self.wake = threading.Event()
        self.stop_event = threading.Event()
        self.busy = False
        self.last_beat = time.monotonic()
        self.table: HoodieTable | None = None
        self._table_key: tuple[object, ...] | None = None
        self._failures: dict[str, int] = {}
        self._foreign: set[str] = set()
        self._thread = threading.Thread(target=self._run, name=f"table-{name}", daemon=True)
        self._watcher: TimelineWatcher | None = None
        self._recovered = False
        self._busy_since: float | None = None
        self._poll = TimelinePoll()
        self._quiet = False
        """Whether the last tick changed nothing and left nothing to do (`runtime.poll`)."""
        self._usage = UsageReport(name)
        self.observer = _Beating(self, daemon.observer)

    @property
    def spec(self) -> TableSpec:
        return self.daemon.settings.current.table(self.name)

    def start(self) -> None:
        spec = self.spec
        settings = self.daemon.settings.current
        if TimelineWatcher.supports(spec.base_path):
            try:
                self._watcher = TimelineWatcher(spec.base_path, self.wake.set, mode=settings.watch_mode.value,
                                                folder=timeline_folder(spec.base_path))
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

    def healthy(self, max_age_s: float) -> bool:
        return self._thread.is_alive() and (self.busy or time.monotonic() - self.last_beat < max_age_s)

    def _run(self) -> None:
        woken = True
        while not self.stop_event.is_set():
            self.poll(woken)
            self.last_beat = time.monotonic()
            woken = self.wake.wait(self.daemon.settings.current.poll_interval_seconds)
            self.wake.clear()

    def poll(self, woken: bool = False) -> bool:
        """One turn of the loop: a tick, unless the table's storage has no file-system events and its timeline is
        as the last, quiet, tick left it (`runtime.poll`; ``woken``: an explicit wake-up, which always ticks).
        True when it ticked."""
        if self.table is None:  # opened first, so that the poll sees the timeline the first tick starts from
            with contextlib.suppress(Exception):  # the tick reports it
                self.open_table(self.daemon.settings.current, self.spec)
        if not self._poll.due(self.table, woken):
            return False
        self._quiet = False
        self.guarded_tick()
        self._poll.ticked(self._quiet)
        return True

    def guarded_tick(self) -> bool:
        """One tick whose errors are logged, not raised: False when it failed. A tick that finds the table busy
        (`TableBusyError`) is deferred, not failed; the first tick after such ticks reports the table free. A tick
        the storage failed (a retryable `StorageError`: no answer, throttled) stops with a warning; any failed tick
        is tried again at the next."""
        try:
            return self._guarded_tick()
        finally:
            self._usage.report(self.table, self.observer)

    def _guarded_tick(self) -> bool:
        with structlog.contextvars.bound_contextvars(table=self.name):
            try:
                self.tick()
            except TableBusyError as e:
                self._deferred(e)
                return True
            except ClusterdError as e:
                if isinstance(e, StorageError) and e.retryable:
                    log.warning("tick stopped: the storage failed; the next tick tries again", error=str(e))
                else:
                    log.error("tick failed", error=str(e), retryable=e.retryable)
                return False
            except Exception:
                log.exception("tick failed unexpectedly")
                return False
            if self._busy_since is not None:
                self._busy_since = None
                self.observer.notify(TableBusy(self.name, 0.0))
            return True

    def _deferred(self, e: TableBusyError) -> None:
        now = time.monotonic()
        if self._busy_since is None:
            self._busy_since = now
        waited = now - self._busy_since
        self.observer.notify(TableBusy(self.name, waited))
        (log.warning if waited >= BUSY_WARN_S else log.info)("tick deferred: the table is busy", reason=str(e),
                                                             busy_s=round(waited))

    @staticmethod
    def table_key(settings: Settings, spec: TableSpec) -> tuple[object, ...]:
        """What the open table depends on: its base path, how it is locked and merged."""
        return spec.base_path, spec.lock_properties, settings.lock_timeout_seconds, settings.lock_stale_seconds, \
            spec.merge_semantics

    def open_table(self, settings: Settings, spec: TableSpec) -> HoodieTable:
        """The table, kept between ticks; opened again when its base path or lock settings change."""
        key = self.table_key(settings, spec)
        if self.table is None or self._table_key != key:
            storage = open_storage(table_storage_spec(spec.base_path, dict(spec.lock_properties)))
            self.table = HoodieTable.open(spec.base_path, storage, lock_provider=self.daemon.lock_provider(
                settings, spec, storage), merge_release=spec.merge_semantics)
            self._table_key = key
        return self.table

    def tick(self) -> None:
        """One pass: snapshot (and schedule when due), recover, report, execute pending plans oldest first."""
        settings = self.daemon.settings.current
        spec = settings.table(self.name)
        table = self.open_table(settings, spec)
        if self.daemon.stopping.is_set():
            return
        self.daemon.leftovers.retry(table, self.observer)  # clean-up a committed clustering left for this tick
        result = schedule(table, spec.policy, claim_with=self.daemon.ownership)
        snapshot = result.snapshot
        if result.pending is not None:
            plan = result.pending.plan
            self.observer.notify(PlanScheduled(self.name, result.pending.time, len(plan.input_groups),
                                               plan.num_slices, plan.input_bytes, result.reason))
        elif result.trigger.fire:
            log.info("nothing to schedule", reason=result.reason)
        if not self._recovered:
            recover(snapshot, self.daemon.ownership)  # plans left inflight by a crashed daemon go back to requested
            self._recovered = True
        self._observe(snapshot, spec, scheduled=1 if result.pending else 0)
        queue: list[tuple[PendingPlan, Claim | None]] = [(p, None) for p in self._runnable(snapshot)]
        if result.pending is not None:
            queue.append((result.pending, result.claim))
        done: list[tuple[ClusteringPlan, Sequence[WriteStat]]] = []
        for pending, claim in queue:
            if self.daemon.stopping.is_set():
                if claim is not None:
                    self.daemon.ownership.release(claim)  # left inflight without an owner: recovered on start
                continue
            outcome = self._execute(snapshot, spec, pending, claim)
            if outcome is not None and outcome.outcome is Outcome.COMPLETED:
                done.append((pending.plan, outcome.write_stats))
        if done and spec.policy.sort_columns:
            ratio = ratio_after(table.storage, snapshot.view, done, spec.policy.sort_columns)
            if ratio is not None:
                self.observer.notify(LayoutMeasured(self.name, spec.policy.sort_columns, ratio))
        self._quiet = not result.trigger.fire and not snapshot.pending and not queue

    def _runnable(self, snapshot: TableSnapshot) -> list[PendingPlan]:
        """The pending plans this daemon executes: those hudi-clusterd scheduled (another writer's plans are left
        to it; they still count for the trigger and keep their file groups out of new plans)."""
        ours = []
        for p in snapshot.pending:
            if scheduled_by_us(p.plan):
                ours.append(p)
            elif p.time not in self._foreign:
                self._foreign.add(p.time)
                log.info("pending clustering scheduled by another writer left to it", instant=p.time)
        return ours

    def _observe(self, snapshot: TableSnapshot, spec: TableSpec, scheduled: int) -> None:
        """Report the table's gauges; a plan ``scheduled`` after ``snapshot`` was read is the newest clustering
        instant, so no commit counts since it."""
        latest = snapshot.latest_files()
        small = sum(1 for f in latest if f.size < spec.policy.small_file_limit)
        self.observer.notify(TableObserved(
            self.name, 0 if scheduled else snapshot.commits_since_clustering, len(snapshot.pending) + scheduled,
            snapshot.oldest_pending_age_s(), len(latest), small, snapshot.compaction_blocked_s()))

    def _execute(self, snapshot: TableSnapshot, spec: TableSpec, pending: PendingPlan, claim: Claim | None
                 ) -> ExecutionResult | None:
        instant = pending.time
        cancel = threading.Event()
        self.busy = True
        self.daemon.register_running(self.name, instant, cancel)
        executor = Executor(self.daemon.runner, self.daemon.ownership, spec.policy.max_parallelism, self.observer,
                            clustering_figures, self.daemon.settings.current.commit_wait_seconds, self.daemon.leftovers)
        try:
            with structlog.contextvars.bound_contextvars(instant=instant):
                result = execute(snapshot, pending, executor, cancel=cancel, claim=claim)
            if result.outcome is Outcome.COMPLETED:
                self._failures.pop(instant, None)
            return result
        except TableBusyError as e:  # not the plan's fault: it runs again once the table is free
            log.info("clustering deferred: the table is busy", instant=instant, reason=str(e))
            return None
        except ClusterdError as e:
            self._failures[instant] = self._failures.get(instant, 0) + 1
            cancelled = self.daemon.stopping.is_set()  # a shutdown cancelled it: not a failure of the plan
            log.error("clustering failed", instant=instant, error=str(e), attempt=self._failures[instant])
            if self._failures[instant] >= MAX_ATTEMPTS_PER_PLAN and not cancelled:
                rollback_clustering(snapshot.table, instant, purge=True)
                log.error("clustering plan dropped after repeated failures", instant=instant,
                          attempts=self._failures.pop(instant))
            return None
        finally:
            self.busy = False
            self.daemon.unregister_running(self.name, instant)


class Daemon:
    """Owns the table workers; ``start()``, ``stop(grace)``, ``join()``."""

    def __init__(self, settings: SettingsHolder[Settings], runner: GroupRunner, observer: Observer,
                 *, forget_table: Callable[[str], None] | None = None) -> None:
        self.settings = settings
        self.runner = runner
        self.observer = observer
        self.ownership = Ownership()
        self.leftovers = Leftovers()  # committed clusterings whose clean-up failed, retried at the next tick
        self.lock_mutexes = LocalMutexes()  # threads of this process queue here for a table's lock
        self.stopping = threading.Event()
        self.workers: dict[str, TableWorker] = {}
        self._running: dict[tuple[str, str], threading.Event] = {}
        self._forget_table = forget_table
        self._lock = threading.Lock()

    def start(self) -> None:
        self.reconcile_tables()

    def lock_provider(self, settings: Settings, spec: TableSpec, storage: Storage) -> LockProvider:
        """The provider of a table's lock: the one its ``hoodie.write.lock.*`` keys name, with the daemon's
        timeout and stale time; every provider of one table shares the daemon's in-process queue for it."""
        return lock_provider_from_properties(dict(spec.lock_properties), storage,
                                             timeout_s=settings.lock_timeout_seconds,
                                             stale_s=settings.lock_stale_seconds, mutexes=self.lock_mutexes)

    def reconcile_tables(self) -> None:
        """Start workers for new tables and stop those of removed tables (after a reload)."""
        wanted = {t.name for t in self.settings.current.tables}
        with self._lock:
            for name in sorted(set(self.workers) - wanted):
                worker = self.workers.pop(name)
                worker.stop()
                threading.Thread(target=worker.join, name=f"stop-{name}", daemon=True).start()
                if self._forget_table is not None:
                    self._forget_table(name)
                log.info("table removed", table=name)
            for name in sorted(wanted - set(self.workers)):
                worker = TableWorker(name, self)
                self.workers[name] = worker
                worker.start()
                log.info("table added", table=name, base_path=worker.spec.base_path)

    def run_once(self) -> list[str]:
        """One tick per table in this thread (``run --once``), without watchers or worker threads.

        A broken table is logged and skipped, so the others are still served; returns the names of the
        tables whose tick failed (a busy table's tick is deferred, not failed)."""
        return [spec.name for spec in self.settings.current.tables
                if not TableWorker(spec.name, self).guarded_tick()]

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

    def healthy(self) -> bool:
        interval = self.settings.current.poll_interval_seconds
        max_age = max(60.0, 3 * interval)
        return all(w.healthy(max_age) for w in list(self.workers.values()))

    def stop(self, grace_s: float) -> bool:
        """Stop scheduling and starting plans; let running plans finish within ``grace_s``; then cancel their
        engine jobs (each worker rolls its cancelled instant back). Returns False when it had to cancel."""
        self.stopping.set()
        for w in list(self.workers.values()):
            w.stop()
        deadline = time.monotonic() + grace_s
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        leftover = self.running()
        if leftover:
            log.warning("grace period over; cancelling running clustering", plans=len(leftover))
            for table, instant in leftover:
                with self._lock:
                    cancel = self._running.get((table, instant))
                if cancel is not None:
                    cancel.set()
                if (worker := self.workers.get(table)) is not None and worker.table is not None:
                    try:
                        self.runner.cancel(worker.table.ref, instant)
                    except ClusterdError as e:
                        log.warning("cancel failed", table=table, instant=instant, error=str(e))
        return not leftover

    def join(self, timeout: float | None = None) -> None:
        """Wait for the workers (and stop their timeline watchers)."""
        for w in list(self.workers.values()):
            w.join(timeout)
