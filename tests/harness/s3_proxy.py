"""A counting proxy in front of the S3 server: every request of every client that goes through it (the daemon's
object-store client, Hadoop's S3A connector in Apache Hudi's JVM) is counted by kind, the same way for all, so a
benchmark can compare the requests two systems make for the same work.

Kinds: ``LIST`` (a GET of the bucket: ListObjects), ``GET``, ``HEAD``, ``PUT`` (also the parts of a multipart
upload), ``COPY`` (a PUT with ``x-amz-copy-source``), ``DELETE`` (also a POST of ``?delete``), ``POST`` (the
other POSTs: starting and completing multipart uploads); and ``precondition_failed``, the answers with status 412.
Bodies pass through unchanged and the ``Host`` header is forwarded as the client sent it, so AWS signatures (which
cover it) stay valid.

Faults in answers: ``proxy.lose_answers(method, key_pattern, nth=..., times=..., how=...)`` makes the proxy forward
the chosen requests (those of ``method`` whose key the pattern finds, and whose body ``body_matches`` when given:
the ``nth`` such request and the ``times - 1`` after it; with ``once_each``, a request identical to one already
chosen, as a client's retry of it is, is passed through), let the server answer, and then not pass the answer on:
``how="close"`` closes the client's connection without a word (a reset, a timeout: the client cannot tell whether
the request was carried out), ``how="500"`` answers ``500 InternalError`` instead of the server's answer. Both are
what S3 does to a request it carried out. ``proxy.delay_answers(method, key_pattern, seconds, ...)`` passes the
chosen answers on that much later (a slow store). The rule (an :class:`AnswerFault`) records each answer it kept
from the client: the key and the server's status.
"""

from __future__ import annotations

import hashlib
import http.client
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

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


def request_key(path: str) -> str:
    """The object key of a path-style request (``/<bucket>/<key>?...``), unquoted; empty for the bucket itself."""
    parts = urlsplit(path).path.lstrip("/").split("/", 1)
    return unquote(parts[1]) if len(parts) == 2 else ""


_INTERNAL_ERROR = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code><Message>We encountered '
                   b"an internal error. Please try again.</Message></Error>")


@dataclass
class AnswerFault:
    """A rule of the proxy: the answers of chosen requests are kept from the client, or held back ``late_s``, after
    the server gave them (see the module docstring). ``hits`` lists (key, the server's status) of each answer kept,
    in order."""

    method: str
    key: re.Pattern[str]
    nth: int = 1
    times: int = 1
    how: Literal["close", "500", "late"] = "close"
    body_matches: Callable[[bytes], bool] | None = None
    late_s: float = 0.0
    once_each: bool = False
    matched: int = 0
    hits: list[tuple[str, int]] = field(default_factory=list)
    _taken: int = 0  # requests chosen so far (their answers may still be on their way)
    _chosen: set[tuple[str, str, str]] = field(default_factory=set)  # with once_each: those chosen

    @property
    def fired(self) -> int:
        """How many answers were kept from the client (or held back)."""
        return len(self.hits)

    def _choose(self, method: str, key: str, body: bytes) -> bool:
        if method != self.method or not self.key.search(key):
            return False
        if self.body_matches is not None and not self.body_matches(body):
            return False
        self.matched += 1
        request = (method, key, hashlib.sha256(body).hexdigest())
        if self.once_each and request in self._chosen:
            return False
        if self.matched >= self.nth and self._taken < self.times:
            self._taken += 1
            self._chosen.add(request)
            return True
        return False


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
        rule = self.server.chosen(self.command, request_key(self.path), body or b"")
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            self.server.drop_connection()
            self.send_error(502, "upstream S3 server unreachable")
            return
        self.server.count(request_kind(self.command, self.path, self.headers), response.status)
        if rule is not None:
            self.server.record_hit(rule, request_key(self.path), response.status)
            if rule.how != "late":
                self._lose_answer(rule)
                return
            time.sleep(rule.late_s)
        self.send_response_only(response.status, response.reason)
        for k, v in response.getheaders():
            if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length":
                self.send_header(k, v)
        # a HEAD's answer has no body but the length of the object it describes
        length = response.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", length or str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _lose_answer(self, rule: AnswerFault) -> None:
        """The server answered; the client gets no answer (its connection closed) or a 500 in its place."""
        self.close_connection = True
        if rule.how == "500":
            self.send_response_only(500, "Internal Server Error")
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(_INTERNAL_ERROR)))
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(_INTERNAL_ERROR)

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
        self.rules: list[AnswerFault] = []
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

    def chosen(self, method: str, key: str, body: bytes) -> AnswerFault | None:
        """The first rule that chooses this request (every rule that matches counts it), or None."""
        with self._guard:
            choices = [rule for rule in self.rules if rule._choose(method, key, body)]
        return choices[0] if choices else None

    def record_hit(self, rule: AnswerFault, key: str, status: int) -> None:
        with self._guard:
            rule.hits.append((key, status))

    def count(self, kind: str, status: int) -> None:
        with self._guard:
            self.counts[kind] += 1
            if status == 412:
                self.counts["precondition_failed"] += 1


class CountingS3Proxy:
    """``with CountingS3Proxy(server.endpoint) as proxy``: clients given ``proxy.endpoint`` reach the server,
    ``proxy.snapshot()`` / ``proxy.measure()`` read the counts, and ``proxy.lose_answers(...)`` keeps the answers of
    chosen requests from their client."""

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

    def lose_answers(self, method: str, key_pattern: str, *, nth: int = 1, times: int = 1,
                     how: Literal["close", "500"] = "close", body_matches: Callable[[bytes], bool] | None = None,
                     once_each: bool = False) -> AnswerFault:
        """From now on, the answers of the ``nth`` request of ``method`` whose key ``key_pattern`` finds (a regular
        expression, searched; a request to the bucket itself, such as a ``POST ?delete``, has the key "") and
        whose body ``body_matches`` (when given), and of the ``times - 1`` such requests after it, are kept from the
        client once the server gave them (``how``: see the module docstring). With ``once_each`` a request
        identical to one chosen before (method, key and body) is answered: each write loses its first answer only,
        and the client's retry of it gets one."""
        return self._add(AnswerFault(method.upper(), re.compile(key_pattern), nth, times, how, body_matches,
                                     once_each=once_each))

    def delay_answers(self, method: str, key_pattern: str, seconds: float, *, nth: int = 1, times: int = 1,
                      body_matches: Callable[[bytes], bool] | None = None) -> AnswerFault:
        """As :meth:`lose_answers`, but the chosen answers reach the client ``seconds`` late."""
        return self._add(AnswerFault(method.upper(), re.compile(key_pattern), nth, times, "late", body_matches,
                                     seconds))

    def _add(self, rule: AnswerFault) -> AnswerFault:
        if rule.nth < 1 or rule.times < 1 or rule.late_s < 0:
            raise ValueError(f"nth and times are at least 1, a delay at least 0: {rule}")
        with self._server._guard:
            self._server.rules.append(rule)
        return rule

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
