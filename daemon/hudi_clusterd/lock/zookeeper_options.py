"""The keys of Apache Hudi's ZooKeeper lock providers, read with Hudi's names and defaults.

``ZookeeperBasedLockProvider`` (Hudi 0.x and 1.x) locks ``<base_path>/<lock_key>``;
``ZookeeperBasedImplicitBasePathLockProvider`` (Hudi 1.x) locks ``/tmp/<hash>/lock_key``, where ``<hash>`` is the
64-bit XXHash of the table's base path (``s3a://`` read as ``s3://``) in upper-case hex and ``lock_key`` is that
literal text. Both connect with ``hoodie.write.lock.zookeeper.url`` as Curator's whole connect string
(``host:port[,host:port][/chroot]``); ``hoodie.write.lock.zookeeper.port`` is read by neither Hudi nor the daemon.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from hudi_clusterd.domain.keys import Key, KeyReader, at_least
from hudi_clusterd.domain.values import java_int, optional_text
from hudi_clusterd.lock.base_path_id import base_path_id
from hudi_clusterd.lock.table_keys import TABLE_BASE_PATH, TABLE_NAME

log = structlog.get_logger(__name__)

ZOOKEEPER_PROVIDER = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"
IMPLICIT_ZOOKEEPER_PROVIDER = "org.apache.hudi.client.transaction.lock.ZookeeperBasedImplicitBasePathLockProvider"
IMPLICIT_ROOT = "/tmp/"
IMPLICIT_LOCK_KEY = "lock_key"
"""The implicit provider's lock key: this literal text, whatever ``hoodie.write.lock.zookeeper.lock_key`` says."""
DEFAULT_APP_ID = "hudi-clusterd"


def _connect_string(raw: str) -> str:
    url = raw.strip()
    if url:
        from kazoo.hosts import collect_hosts  # kazoo only for a table that has this lock

        try:
            collect_hosts(url)
        except ValueError as e:
            raise ValueError(f"must be a ZooKeeper connect string host:port[,host:port][/chroot], got {url!r} "
                             f"({e})") from None
    return url


def _app_id(raw: str) -> str:
    return raw.strip() or DEFAULT_APP_ID


URL = Key("hoodie.write.lock.zookeeper.url", None, _connect_string, (
    "ZooKeeper lock: the writers' connect string, host:port[,host:port][/chroot], used as is (required)."))
PORT = Key("hoodie.write.lock.zookeeper.port", None, optional_text, (
    f"Ignored by Apache Hudi and by the daemon (a warning says so): put the port in {URL.name}."))
BASE_PATH = Key("hoodie.write.lock.zookeeper.base_path", None, str.strip, (
    "ZookeeperBasedLockProvider: the ZooKeeper path under which the writers lock (required); the lock is "
    "<base_path>/<lock_key>."))
LOCK_KEY = Key("hoodie.write.lock.zookeeper.lock_key", None, optional_text, (
    f"ZookeeperBasedLockProvider: the lock's name under the base path; unset = {TABLE_NAME.name} (from the "
    "daemon's keys, else the table's hoodie.properties), as Hudi infers it."))
SESSION_TIMEOUT = Key("hoodie.write.lock.zookeeper.session_timeout_ms", "60000", at_least(java_int, 1), (
    "ZooKeeper lock: session timeout asked of the server (it caps it); the daemon's lock node disappears this "
    "long after its connection is lost."), "session_timeout_ms")
CONNECTION_TIMEOUT = Key("hoodie.write.lock.zookeeper.connection_timeout_ms", "15000", at_least(java_int, 1), (
    "ZooKeeper lock: how long to wait for a connection when taking the lock before giving up for this round."),
    "connection_timeout_ms")
NUM_RETRIES = Key("hoodie.write.lock.num_retries", "15", at_least(java_int, 0), (
    "ZooKeeper lock: how often a lost connection is retried (bounded exponential backoff, as Hudi's Curator "
    "client)."), "num_retries")
RETRY_WAIT = Key("hoodie.write.lock.wait_time_ms_between_retry", "1000", at_least(java_int, 1), (
    "ZooKeeper lock: first wait between connection retries, in milliseconds."), "retry_wait_ms")
RETRY_MAX_WAIT = Key("hoodie.write.lock.max_wait_time_ms_between_retry", "16000", at_least(java_int, 1), (
    "ZooKeeper lock: longest wait between connection retries, in milliseconds."), "retry_max_wait_ms")
APP_ID = Key("hoodie.write.lock.app_id", DEFAULT_APP_ID, _app_id, (
    "ZooKeeper lock: written into the daemon's lock node as application_id=<value>, as Hudi 1.x writers write "
    "theirs."), "app_id")
_SETTINGS = (SESSION_TIMEOUT, CONNECTION_TIMEOUT, NUM_RETRIES, RETRY_WAIT, RETRY_MAX_WAIT, APP_ID)
ZOOKEEPER_KEYS = (URL, PORT, BASE_PATH, LOCK_KEY, *_SETTINGS)
"""The keys of the ZooKeeper locks, for the reference (with the table's, :mod:`.table_keys`)."""
_BAD_PATH_CHARS = re.compile("[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff]")


@dataclass(frozen=True, slots=True)
class ZooKeeperOptions:
    """Where the writers' ZooKeeper lock is and how to reach it (the defaults are the keys').

    ``lock_key`` ``None`` means the table's ``hoodie.table.name`` (read from ``hoodie.properties`` when first
    needed), as Hudi infers it."""

    connect: str
    base_path: str
    lock_key: str | None
    session_timeout_ms: int = SESSION_TIMEOUT.parse(SESSION_TIMEOUT.default or "")
    connection_timeout_ms: int = CONNECTION_TIMEOUT.parse(CONNECTION_TIMEOUT.default or "")
    num_retries: int = NUM_RETRIES.parse(NUM_RETRIES.default or "")
    retry_wait_ms: int = RETRY_WAIT.parse(RETRY_WAIT.default or "")
    retry_max_wait_ms: int = RETRY_MAX_WAIT.parse(RETRY_MAX_WAIT.default or "")
    app_id: str = DEFAULT_APP_ID
    timeout_s: float = 60.0

    def lock_path(self, lock_key: str) -> str:
        """Hudi's lock path: ``base_path + "/" + lock_key``."""
        return f"{self.base_path}/{lock_key}"

    @property
    def node_data(self) -> bytes:
        """The data of the daemon's lock node, as Hudi 1.x writes its own (Hudi never reads it)."""
        return f"application_id={self.app_id}".encode()

    @property
    def connection_timeout_s(self) -> float:
        return self.connection_timeout_ms / 1000.0


def implicit_base_path(table_base_path: str) -> str:
    """The ZooKeeper base path ``ZookeeperBasedImplicitBasePathLockProvider`` derives from a table's base path."""
    return IMPLICIT_ROOT + base_path_id(table_base_path)


def path_problem(path: str) -> str | None:
    """Why ``path`` is not a ZooKeeper node path Curator accepts (``None`` when it is)."""
    if not path.startswith("/"):
        return "must start with /"
    if path != "/" and path.endswith("/"):
        return "must not end with /"
    if path != "/" and any(part in ("", ".", "..") for part in path[1:].split("/")):
        return "must not have an empty, . or .. part"
    if _BAD_PATH_CHARS.search(path):
        return "must not hold control or reserved characters"
    return None


def _read(props: Mapping[str, str], implicit: bool) -> tuple[KeyReader, dict[str, Any]]:
    reader = KeyReader(props)
    url = reader.parsed(URL)
    values: dict[str, Any] = {"connect": url or ""}
    if url == "":
        reader.problems.append(f"{URL.name}: must be set (the ZooKeeper connect string host:port[,host:port], "
                               "as the table's writers set it)")
    if not implicit:
        base, lock_key = reader.get(BASE_PATH), reader.get(LOCK_KEY) or reader.get(TABLE_NAME)
        if not base:
            reader.problems.append(f"{BASE_PATH.name}: must be set (the ZooKeeper path under which the writers "
                                   "lock, e.g. /hudi/locks)")
        elif (why := path_problem(base if lock_key is None else f"{base}/{lock_key}")) is not None:
            shown = (f"{base!r}" if lock_key is None else
                     f"{base!r} with lock key {lock_key!r} (lock path {base}/{lock_key})")
            reader.problems.append(f"{BASE_PATH.name}: {why} (a ZooKeeper path), got {shown}")
        values["base_path"], values["lock_key"] = base, lock_key
    values.update(reader.get_all(_SETTINGS))
    return reader, values


def zookeeper_problems(props: Mapping[str, str], *, implicit: bool = False) -> list[str]:
    """What is wrong with the writers' ZooKeeper lock keys (``<key>: must be ..., got ...``), one line each."""
    return _read(props, implicit)[0].problems


def zookeeper_options(props: Mapping[str, str], *, implicit: bool = False, table_base_uri: str = "",
                      timeout_s: float = 60.0) -> tuple[ZooKeeperOptions | None, list[str]]:
    """The options the writers' keys name, or ``None`` with the problems.

    ``implicit`` reads them as ``ZookeeperBasedImplicitBasePathLockProvider`` does, hashing
    ``hoodie.base.path`` when set, else ``table_base_uri`` (the daemon's base path of the table)."""
    reader, values = _read(props, implicit)
    if reader.problems:
        return None, reader.problems
    if (port := reader.get(PORT)) is not None:
        log.warning("hoodie.write.lock.zookeeper.port is ignored by Apache Hudi and by the daemon: "
                    "hoodie.write.lock.zookeeper.url is the whole connect string (host:port)",
                    port=port, url=values["connect"])
    if implicit:
        table_path = reader.get(TABLE_BASE_PATH) or table_base_uri
        values["base_path"], values["lock_key"] = implicit_base_path(table_path), IMPLICIT_LOCK_KEY
        ignored = [name for name, value in ((BASE_PATH.name, reader.get(BASE_PATH)),
                                            (LOCK_KEY.name, reader.get(LOCK_KEY))) if value]
        if ignored:
            log.warning("keys ignored by the implicit ZooKeeper lock provider (Apache Hudi ignores them too)",
                        keys=ignored)
        log.info("ZooKeeper lock path derived from the table's base path", base_path=table_path,
                 lock_path=f"{values['base_path']}/{IMPLICIT_LOCK_KEY}")
    return ZooKeeperOptions(**values, timeout_s=timeout_s), []


__all__ = [
    "APP_ID", "BASE_PATH", "CONNECTION_TIMEOUT", "IMPLICIT_LOCK_KEY", "IMPLICIT_ZOOKEEPER_PROVIDER",
    "LOCK_KEY", "NUM_RETRIES", "PORT", "RETRY_MAX_WAIT", "RETRY_WAIT", "SESSION_TIMEOUT",
    "URL", "ZOOKEEPER_KEYS", "ZOOKEEPER_PROVIDER", "ZooKeeperOptions",
    "implicit_base_path", "path_problem", "zookeeper_options", "zookeeper_problems",
]
