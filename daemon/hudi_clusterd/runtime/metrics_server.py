"""The HTTP endpoint of the daemon: ``/metrics`` (Prometheus exposition of a `Metrics` registry) and ``/healthz``."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from hudi_clusterd.runtime.metrics import Metrics

log = structlog.get_logger(__name__)


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
