"""The ZooKeeper lock provider: the mutex of Apache Hudi's ``ZookeeperBasedLockProvider`` (Curator's
``InterProcessMutex``), held with kazoo; docs/lock.md describes it.

Curator's mutex is a queue of EPHEMERAL_SEQUENTIAL nodes ``_c_<uuid>-lock-<seq>`` under the lock path, sorted by
the text after the last ``lock-``: the first holds the lock, every other one watches the node before it. The
daemon joins that queue with nodes of the same shape and creates nothing else there (kazoo's own ``Lock`` names
its nodes differently and would exclude no Hudi writer). Each acquisition has its own client and session, ended
by the release (which removes the node even when deleting it failed). The session is the lease: once the
connection is suspended or lost the lease is lost for good; otherwise ``verify`` checks the node with one
``exists`` call. A dead holder's node is removed by the server, so the provider counts no take-overs.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import structlog
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.retry import KazooRetry

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock.lease import LeaseBase
from hudi_clusterd.lock.provider import LocalMutexes, take_mutex
from hudi_clusterd.lock.table_keys import table_name
from hudi_clusterd.lock.usage import LockStats
from hudi_clusterd.lock.zookeeper_options import LOCK_KEY, ZooKeeperOptions, path_problem
from hudi_clusterd.storage import Storage

log = structlog.get_logger(__name__)

LOCK_NAME = "lock-"
"""Curator's node name of ``InterProcessMutex``: contenders sort by the text after its last occurrence."""
PROTECTED_PREFIX = "_c_"


def _kazoo_logger() -> logging.Logger:
    """Kazoo's logger, showing its errors only: its warning per failed connection attempt is counted as a
    connection retry instead, and a connection that never comes is one error naming the server."""
    logger = logging.getLogger("kazoo.client.clusterd")
    logger.setLevel(logging.ERROR)
    return logger


def curator_sort_key(child: str) -> str:
    """Curator's ``StandardLockInternalsDriver.fixForSorting``: the text after the last ``lock-``, else the name."""
    at = child.rfind(LOCK_NAME)
    return child if at < 0 else child[at + len(LOCK_NAME):]


def curator_order(children: Iterable[str]) -> list[str]:
    """Children of a lock path in Curator's order (a stable sort, as Java's): the first one holds the lock."""
    return sorted(children, key=curator_sort_key)


class _CountingRetry:
    """Kazoo's connection retry policy, counting each connection cycle after the first into ``stats``.

    kazoo's connection loop copies its policy once per start and calls it with one full pass over the hosts;
    every further pass is a retry after a failed or dropped connection."""

    def __init__(self, inner: Any, stats: LockStats) -> None:
        self._inner = inner
        self._stats = stats

    def copy(self) -> _CountingRetry:
        return _CountingRetry(self._inner.copy(), self._stats)

    def reset(self) -> None:
        self._inner.reset()

    def __call__(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        passes = 0

        def counted(*a: Any, **kw: Any) -> Any:
            nonlocal passes
            passes += 1
            if passes > 1:
                self._stats.add_connection_retry()
            return func(*a, **kw)

        return self._inner(counted, *args, **kwargs)


class ZooKeeperLockProvider:
    """Exclusive lock on one table shared with Hudi's ZooKeeper lock providers (see the module docstring).

    ``storage`` is the table's, read once for ``hoodie.table.name`` when the options name no lock key.
    ``mutexes`` is where threads of this process queue for the lock (see
    :class:`~hudi_clusterd.lock.provider.LocalMutexes`); without it the provider has its own, and one provider
    used from several threads still takes the lock for one of them at a time."""

    def __init__(self, options: ZooKeeperOptions, storage: Storage | None = None, *,
                 mutexes: LocalMutexes | None = None) -> None:
        self.options = options
        self.storage = storage
        self.stats = LockStats()
        self._lock_key = options.lock_key
        table = "" if storage is None else storage.full_path()
        self._mutex = (mutexes or LocalMutexes()).for_key(f"zookeeper://{options.connect}|{options.base_path}|"
                                                          f"{options.lock_key or table}")

    @property
    def timeout_s(self) -> float:
        return self.options.timeout_s

    @property
    def lock_path(self) -> str:
        """``<base_path>/<lock_key>``, the lock key read from the table when the options name none."""
        if self._lock_key is None:
            self._lock_key = table_name(None, self.storage, instead_of=LOCK_KEY.name)
        return self.options.lock_path(self._lock_key)

    def describe(self) -> str:
        """Where the lock is, as messages name it."""
        return f"ZooKeeper {self.options.connect} {self.lock_path}"

    def acquire(self, timeout_s: float | None = None) -> ZooKeeperLease:
        """Join the lock's queue and wait up to ``timeout_s`` (default :attr:`timeout_s`) to be first; connecting
        takes up to ``connection_timeout_ms`` more. ``LockError`` on a timeout or a lost connection, leaving no
        node behind."""
        timeout = max(self.timeout_s if timeout_s is None else timeout_s, 0.0)
        deadline = time.monotonic() + timeout
        lock_path = self.lock_path
        if (why := path_problem(lock_path)) is not None:
            raise LockError(f"ZooKeeper lock path {lock_path!r} {why}; check hoodie.write.lock.zookeeper.base_path "
                            "and lock_key")
        take_mutex(self._mutex, timeout, self.describe())
        client: Any = None
        try:
            client = self._start_client()
            lease = ZooKeeperLease(self, client, lock_path, self._mutex)
        except BaseException:
            if client is not None:
                _stop(client)
            self._mutex.release()
            raise
        lease.take(deadline, timeout)
        return lease

    def _start_client(self) -> Any:
        o = self.options
        retry = KazooRetry(max_tries=o.num_retries + 1, delay=o.retry_wait_ms / 1000.0, backoff=2,
                           max_delay=o.retry_max_wait_ms / 1000.0)
        client = KazooClient(hosts=o.connect, timeout=o.session_timeout_ms / 1000.0, connection_retry=retry,
                             logger=_kazoo_logger())
        connection = getattr(client, "_connection", None)
        if connection is not None and hasattr(connection, "retry_sleeper"):
            connection.retry_sleeper = _CountingRetry(connection.retry_sleeper, self.stats)
        try:
            client.start(timeout=o.connection_timeout_s)
        except Exception as e:  # kazoo stopped the client already on a time-out
            _stop(client)
            reason = "no connection" if isinstance(e, client.handler.timeout_exception) else f"{e!r}"
            raise LockError(f"ZooKeeper {o.connect}: {reason} within {o.connection_timeout_s:g}s "
                            "(hoodie.write.lock.zookeeper.connection_timeout_ms); is ZooKeeper running there?"
                            ) from None
        return client


class ZooKeeperLease(LeaseBase):
    """One holding of the lock: an ephemeral-sequential node of its own ZooKeeper session (no heartbeat: the
    session is the lease)."""

    def __init__(self, provider: ZooKeeperLockProvider, client: Any, lock_path: str, mutex: threading.Lock) -> None:
        super().__init__(where=f"ZooKeeper {provider.options.connect} {lock_path}", stats=provider.stats,
                         mutex=mutex)
        self.provider = provider
        self.lock_path = lock_path
        self.node: str | None = None
        self._client = client
        self._session: tuple[int, bytes] = tuple(client.client_id)
        self._session_id = self._session[0]
        self._prefix = f"{PROTECTED_PREFIX}{uuid.uuid4()}-{LOCK_NAME}"
        self._wake = threading.Event()
        client.add_listener(self._on_state)

    @property
    def owner(self) -> str:
        """The lock node's name (``_c_<uuid>-lock-<seq>``), as other contenders list it."""
        return self.node or self._prefix

    @property
    def session(self) -> tuple[int, bytes]:
        """The ZooKeeper session ``(id, password)`` owning the node (the password is the session's secret: it is
        never logged)."""
        return self._session

    @property
    def connection_state(self) -> str:
        """kazoo's state of the lease's connection: ``CONNECTED``, ``SUSPENDED`` or ``LOST``."""
        return str(self._client.state)

    # --- acquiring (driven by ZooKeeperLockProvider.acquire) -------------------------------------------------

    def take(self, deadline: float, timeout_s: float) -> None:
        """Create the node and wait until it is first in Curator's order; on any failure give everything back."""
        try:
            self._client.ensure_path(self.lock_path)
            created = self._client.create(f"{self.lock_path}/{self._prefix}", self.provider.options.node_data,
                                          ephemeral=True, sequence=True)
            self.node = created.rsplit("/", 1)[1]
            while True:
                self._wake.clear()  # before the check: a state change from here on ends the wait below
                if self.lost is not None:
                    raise LockError(f"{self.where}: {self.lost} while waiting for the lock")
                order = curator_order(self._client.get_children(self.lock_path))
                if self.node not in order:
                    raise LockError(f"{self.where}: the lock node {self.node} vanished while waiting")
                at = order.index(self.node)
                if at == 0:
                    self.start()
                    log.debug("table lock taken", lock=self.where, node=self.node)
                    return
                predecessor = order[at - 1]
                try:
                    data, _ = self._client.get(f"{self.lock_path}/{predecessor}", watch=self._on_watch)
                except NoNodeError:
                    continue  # gone meanwhile: look again
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._wake.wait(remaining):
                    holder = _text(data) if at == 1 else f"{at - 1} more contenders queued before us"
                    raise LockError(f"{self.where}: timed out after {timeout_s:g}s waiting for the table lock "
                                    f"held by node {order[0]} ({holder})")
        except KazooException as e:
            self.release()
            raise LockError(f"{self.where}: taking the lock failed ({e.__class__.__name__}: {e})") from None
        except BaseException:
            self.release()
            raise

    def _on_watch(self, _event: Any) -> None:
        self._wake.set()

    def _on_state(self, state: str) -> bool:
        if state in (KazooState.SUSPENDED, KazooState.LOST) and not self.released:
            self.lose(f"the ZooKeeper connection was {'suspended' if state == KazooState.SUSPENDED else 'lost'}")
        self._wake.set()
        return False  # keep listening

    # --- the protocol's steps --------------------------------------------------------------------------------

    def _check_ours(self) -> None:
        """The connection never faltered since the lock was taken (see `_on_state`) and the node is still there,
        owned by this session: one ``exists`` call."""
        try:
            stat = self._client.exists_async(f"{self.lock_path}/{self.node}").get(
                timeout=self.provider.options.connection_timeout_s)
        except Exception as e:  # kazoo errors and the handler's time-out alike
            self.lose(f"checking the lock node failed ({e.__class__.__name__})")
        else:
            if stat is None:
                self.lose(f"the lock node {self.node} is gone")
            elif stat.ephemeralOwner != self._session_id:
                self.lose(f"the lock node {self.node} belongs to another session")

    def _give_back(self) -> None:
        """Delete the node while the session lives, then end the session (which removes the node anyway)."""
        client = self._client
        client.remove_listener(self._on_state)
        try:
            if (self.node is not None and client.state == KazooState.CONNECTED
                    and client.client_id is not None and client.client_id[0] == self._session_id):
                try:
                    client.delete_async(f"{self.lock_path}/{self.node}").get(
                        timeout=self.provider.options.connection_timeout_s)
                except NoNodeError:
                    pass
                except Exception as e:  # ending the session below removes the node anyway
                    log.warning("could not delete the lock node", lock=self.where, node=self.node,
                                error=e.__class__.__name__)
        finally:
            _stop(client)


def _stop(client: Any) -> None:
    """End the client's session and its threads, whatever state it is in."""
    for step in (client.stop, client.close):
        try:
            step()
        except Exception as e:
            log.warning("stopping the ZooKeeper client failed", step=step.__name__, error=e.__class__.__name__)


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")[:80] or "no data"


__all__ = ["LOCK_NAME", "ZooKeeperLease", "ZooKeeperLockProvider", "curator_order",
           "curator_sort_key"]
