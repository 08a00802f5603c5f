"""ZooKeeper lock helpers for tests: a Curator-like contender written with a plain kazoo client, and the classic way
to expire a ZooKeeper session for real.

:class:`CuratorContender` does what Curator 2.7.1's ``InterProcessMutex`` does (as Apache Hudi's writers use it),
written here from the rule and independently of the daemon's code: it creates an EPHEMERAL_SEQUENTIAL node
``_c_<uuid>-lock-<seq>`` under the lock path (missing parents persistent), sorts *all* children of the lock path
by the text after the last ``lock-`` (the whole name when there is none), holds the lock when its node is first,
and otherwise waits for the node just before it to go.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError


def curator_rule_order(children: list[str]) -> list[str]:
    """Children sorted as Curator sorts them (Java's sort is stable; so is Python's)."""

    def after_last_lock(name: str) -> str:
        i = name.rfind("lock-")
        return name if i == -1 else name[i + len("lock-"):]

    return sorted(children, key=after_last_lock)


class CuratorContender:
    """One Curator-style contender for the lock at ``lock_path``, with its own session."""

    def __init__(self, connect: str, lock_path: str, data: bytes = b"application_id=Unknown") -> None:
        self.connect = connect
        self.lock_path = lock_path
        self.client: Any = KazooClient(hosts=connect, timeout=10.0)
        self.client.start(timeout=10)
        self.client.ensure_path(lock_path)
        created = self.client.create(f"{lock_path}/_c_{uuid.uuid4()}-lock-", data, ephemeral=True, sequence=True)
        self.node: str = created.rsplit("/", 1)[1]

    def children(self) -> list[str]:
        return curator_rule_order(self.client.get_children(self.lock_path))

    def holds(self) -> bool:
        """Whether this contender's node is first by Curator's rule."""
        return self.children()[0] == self.node

    def predecessor(self) -> str | None:
        order = self.children()
        at = order.index(self.node)
        return None if at == 0 else order[at - 1]

    def wait_until_holds(self, timeout_s: float) -> bool:
        """Wait, watching the predecessor as Curator does, until the node is first (False after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            before = self.predecessor()
            if before is None:
                return True
            gone = threading.Event()
            try:
                self.client.get(f"{self.lock_path}/{before}", watch=lambda _event, done=gone: done.set())
            except NoNodeError:
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not gone.wait(remaining):
                return False

    def release(self) -> None:
        """Delete the node and end the session."""
        with contextlib.suppress(NoNodeError):
            self.client.delete(f"{self.lock_path}/{self.node}")
        self.close()

    def close(self) -> None:
        self.client.stop()
        self.client.close()


def expire_session(connect: str, session: tuple[int, bytes]) -> None:
    """Expire a live ZooKeeper session: a second client joins it with its id and password, then closes it; the
    server ends the session and deletes its ephemeral nodes, and the first client is told the session expired."""
    intruder: Any = KazooClient(hosts=connect, client_id=session, timeout=10.0)
    intruder.start(timeout=10)
    intruder.stop()
    intruder.close()


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


class TcpProxy:
    """Forwards connections to ``127.0.0.1:<port>`` on to ``target`` (``host:port``); :meth:`cut` drops every open
    connection while new ones are still accepted, as a network blip does."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        self._guard = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._start(self._accept)

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _start(self, target: Callable[..., None], *args: Any) -> None:
        t = threading.Thread(target=target, args=args, name="test-tcp-proxy", daemon=True)
        self._threads.append(t)
        t.start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            with self._guard:
                self._open += [downstream, upstream]
            self._start(self._pump, downstream, upstream)
            self._start(self._pump, upstream, downstream)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Drop every open connection."""
        with self._guard:
            dropped, self._open = self._open, []
        for s in dropped:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self._listener.close()
        self.cut()
        for t in self._threads:
            t.join(timeout=5)
