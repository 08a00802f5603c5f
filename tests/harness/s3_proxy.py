"""A counting proxy in front of the S3 server: every request of every client that goes through it (the daemon's
object-store client, Hadoop's S3A connector in Apache Hudi's JVM) is counted by kind, the same way for all, so a
benchmark can compare the requests two systems make for the same work.

Kinds: ``LIST`` (a GET of the bucket: ListObjects), ``GET``, ``HEAD``, ``PUT`` (also the parts of a multipart
upload), ``COPY`` (a PUT with ``x-amz-copy-source``), ``DELETE`` (also a POST of ``?delete``), ``POST`` (the
other POSTs: starting and completing multipart uploads); and ``precondition_failed``, the answers with status 412.
Bodies pass through unchanged and the ``Host`` header is forwarded as the client sent it, so AWS signatures (which
cover it) stay valid.
"""

from __future__ import annotations

import http.client
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                         "upgrade"})


def request_kind(method: str, path: str, headers: http.client.HTTPMessage) -> str:
    """The kind of one S3 request (path-style addressing: ``/<bucket>[/<key>]``)."""
    parts = urlsplit(path)
    has_key = "/" in parts.path.strip("/")
    query = parse_qs(parts.query, keep_blank_values=True)
    if method == "GET":
        return "GET" if has_key else "LIST"
    if method == "PUT":
        return "COPY" if headers.get("x-amz-copy-source") else "PUT"
    if method == "POST":
        return "DELETE" if "delete" in query else "POST"
    return method  # HEAD, DELETE


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return None

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = self._read_chunked()
        upstream = self.server.connection()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            self.server.drop_connection()
            self.send_error(502, "upstream S3 server unreachable")
            return
        self.server.count(request_kind(self.command, self.path, self.headers), response.status)
        self.send_response_only(response.status, response.reason)
        for k, v in response.getheaders():
            if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _read_chunked(self) -> bytes:
        out = bytearray()
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += self.rfile.read(size)
            self.rfile.readline()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        target = urlsplit(upstream)
        self.target = (target.hostname or "127.0.0.1", target.port or 80)
        self.counts: Counter[str] = Counter()
        self._guard = threading.Lock()
        self._local = threading.local()

    def connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(*self.target, timeout=120)
            self._local.conn = conn
        return conn

    def drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def count(self, kind: str, status: int) -> None:
        with self._guard:
            self.counts[kind] += 1
            if status == 412:
                self.counts["precondition_failed"] += 1


class CountingS3Proxy:
    """``with CountingS3Proxy(server.endpoint) as proxy``: clients given ``proxy.endpoint`` reach the server, and
    ``proxy.snapshot()`` / ``proxy.measure()`` read the counts."""

    def __init__(self, upstream: str) -> None:
        self._server = _ProxyServer(upstream)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-proxy", daemon=True)

    def __enter__(self) -> CountingS3Proxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def snapshot(self) -> dict[str, int]:
        with self._server._guard:
            return dict(self._server.counts)

    @contextmanager
    def measure(self) -> Iterator[dict[str, int]]:
        """Counts of the requests made inside the block (filled in when it ends)."""
        before = self.snapshot()
        delta: dict[str, int] = {}
        try:
            yield delta
        finally:
            after = self.snapshot()
            delta.update({k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)})
