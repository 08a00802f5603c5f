"""Prometheus metrics of the daemon, the HTTP exporter serving them, and the loop's liveness heartbeat.

Every metric lives in a registry owned by one ``Metrics`` instance (never the global default registry),
so tests and several daemons in one process never share state. Names follow
``hudi_clusterd_<noun>_<unit|total>``. Labels are bounded: ``table`` (the configured table name) and
``outcome`` (a fixed vocabulary), never instant ids or paths.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final, Literal, get_args

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder

from hudi_clusterd.runtime.reload import ReloadOutcome

log = structlog.get_logger(__name__)

PlanOutcome = Literal["completed", "failed", "rolled_back", "conflict"]
"""How a clustering plan ended: committed, its job failed, it was rolled back, or a concurrent write won."""

PLAN_OUTCOMES: Final[tuple[PlanOutcome, ...]] = get_args(PlanOutcome)
RELOAD_OUTCOMES: Final[tuple[ReloadOutcome, ...]] = get_args(ReloadOutcome)

PREFIX: Final = "hudi_clusterd"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 9464

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
        self.last_success = _gauge(
            reg,
            "last_successful_clustering_timestamp_seconds",
            t,
            "Unix time of the last clustering that completed.",
        )
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

    def plan_scheduled(self, table: str) -> None:
        """A requested clustering plan was written for ``table``."""
        self._touch(table)
        self.plans_scheduled.labels(table=table).inc()

    def plan_finished(
        self,
        table: str,
        outcome: PlanOutcome,
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

    def forget_table(self, table: str) -> None:
        """Remove every series labelled with ``table`` (it left the configuration)."""
        with self._lock:
            self._tables.discard(table)
        for metric in self._per_table():
            metric.remove(table)  # a no-op for a child never created
        for outcome in PLAN_OUTCOMES:
            self.plans_finished.remove(table, outcome)
            self.clustering_duration.remove(table, outcome)

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

    def _per_table(self) -> tuple[Gauge | Counter, ...]:
        return (
            self.commits_since_clustering, self.pending_plans, self.oldest_pending_plan_age,
            self.plans_scheduled, self.rewritten_bytes, self.rewritten_files, self.snapshot_files,
            self.snapshot_small_files, self.files_scanned_ratio, self.last_success,
        )  # fmt: skip

    def _touch(self, table: str) -> None:
        """On a table's first use, create its counters at zero so that rate() and increase() see them."""
        with self._lock:
            if table in self._tables:
                return
            self._tables.add(table)
        self.plans_scheduled.labels(table=table)
        self.rewritten_bytes.labels(table=table)
        self.rewritten_files.labels(table=table)
        for outcome in PLAN_OUTCOMES:
            self.plans_finished.labels(table=table, outcome=outcome)


def _gauge(reg: CollectorRegistry, suffix: str, labels: tuple[str, ...], doc: str) -> Gauge:
    return Gauge(f"{PREFIX}_{suffix}", doc, labels, registry=reg)


def _counter(reg: CollectorRegistry, suffix: str, labels: tuple[str, ...], doc: str) -> Counter:
    return Counter(f"{PREFIX}_{suffix}", doc, labels, registry=reg)


class Heartbeat:
    """Liveness of the scheduling loop: it calls ``beat()`` every tick; healthy while the last beat is fresh.

    Construction counts as a beat, so start-up gets ``max_age_seconds`` before the first tick must happen.
    """

    def __init__(self, max_age_seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if max_age_seconds <= 0:
            raise ValueError(f"heartbeat max age must be > 0 seconds, got {max_age_seconds}")
        self.max_age_seconds = max_age_seconds
        self._clock = clock
        self._last = clock()

    def beat(self) -> None:
        """Record that the loop is alive now."""
        self._last = self._clock()

    def age(self) -> float:
        """Seconds since the last beat."""
        return self._clock() - self._last

    def healthy(self) -> bool:
        """True while the last beat is younger than ``max_age_seconds``."""
        return self.age() < self.max_age_seconds


class MetricsServer:
    """A small threaded HTTP server: ``/metrics`` (Prometheus exposition) and ``/healthz`` (200 or 503).

    Binds ``host`` (the daemon's default is ``DEFAULT_HOST``, loopback only; an IPv6 literal works too);
    ``port=0`` picks a free port, readable from ``.port`` after
    ``start()``. ``stop()`` shuts the server down and joins its thread.
    """

    def __init__(self, host: str, port: int, metrics: Metrics, health: Callable[[], bool]) -> None:
        self._metrics = metrics
        self._health = health
        self._host = host
        self._requested_port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the ephemeral one when constructed with 0); only valid once started."""
        if self._server is None:
            raise RuntimeError("MetricsServer.port read before start()")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Base URL of the running server, e.g. ``http://127.0.0.1:9464``."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        """Bind and serve in a daemon thread. Raises ``OSError`` when the address cannot be bound."""
        if self._server is not None:
            raise RuntimeError("MetricsServer already started")
        handler = _handler_class(self._metrics.registry, self._health)
        server_class = _IPv6Server if ":" in self._host else ThreadingHTTPServer
        server = server_class((self._host, self._requested_port), handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="metrics-http", daemon=True
        )
        self._thread.start()
        log.info("metrics server listening", address=self.url)

    def stop(self) -> None:
        """Stop serving, close the socket and join the thread. Safe to call twice or before start()."""
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()
        self._server = self._thread = None

    def __enter__(self) -> MetricsServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def _handler_class(registry: CollectorRegistry, health: Callable[[], bool]) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        server_version = "hudi-clusterd"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
                self._reply(HTTPStatus.OK, encoder(registry), content_type)
            elif path == "/healthz":
                try:
                    ok = health()
                except Exception:
                    log.exception("health check raised")
                    ok = False
                if ok:
                    self._reply(HTTPStatus.OK, b"ok\n", "text/plain; charset=utf-8")
                else:
                    self._reply(HTTPStatus.SERVICE_UNAVAILABLE, b"stuck\n", "text/plain; charset=utf-8")
            else:
                self._reply(HTTPStatus.NOT_FOUND, b"not found: try /metrics or /healthz\n", "text/plain")

        def _reply(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("metrics http request", client=self.client_address[0], request=format % args)

    return _Handler


__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DURATION_BUCKETS",
    "PLAN_OUTCOMES",
    "RELOAD_OUTCOMES",
    "Heartbeat",
    "Metrics",
    "MetricsServer",
    "PlanOutcome",
    "ReloadOutcome",
]
