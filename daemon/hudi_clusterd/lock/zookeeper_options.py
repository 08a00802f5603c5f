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

import structlog

from hudi_clusterd.domain.values import java_int
from hudi_clusterd.lock.base_path_id import base_path_id

log = structlog.get_logger(__name__)

ZOOKEEPER_PROVIDER = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"
IMPLICIT_ZOOKEEPER_PROVIDER = "org.apache.hudi.client.transaction.lock.ZookeeperBasedImplicitBasePathLockProvider"

URL_KEY = "hoodie.write.lock.zookeeper.url"
PORT_KEY = "hoodie.write.lock.zookeeper.port"
BASE_PATH_KEY = "hoodie.write.lock.zookeeper.base_path"
LOCK_KEY_KEY = "hoodie.write.lock.zookeeper.lock_key"
SESSION_TIMEOUT_KEY = "hoodie.write.lock.zookeeper.session_timeout_ms"
CONNECTION_TIMEOUT_KEY = "hoodie.write.lock.zookeeper.connection_timeout_ms"
NUM_RETRIES_KEY = "hoodie.write.lock.num_retries"
RETRY_WAIT_KEY = "hoodie.write.lock.wait_time_ms_between_retry"
RETRY_MAX_WAIT_KEY = "hoodie.write.lock.max_wait_time_ms_between_retry"
APP_ID_KEY = "hoodie.write.lock.app_id"
TABLE_NAME_KEY = "hoodie.table.name"
TABLE_BASE_PATH_KEY = "hoodie.base.path"

IMPLICIT_ROOT = "/tmp/"
IMPLICIT_LOCK_KEY = "lock_key"
"""The implicit provider's lock key: this literal text, whatever ``hoodie.write.lock.zookeeper.lock_key`` says."""
DEFAULT_APP_ID = "hudi-clusterd"

_INT_KEYS = {  # key -> (Hudi's default, least value allowed)
    SESSION_TIMEOUT_KEY: (60_000, 1),
    CONNECTION_TIMEOUT_KEY: (15_000, 1),
    NUM_RETRIES_KEY: (15, 0),
    RETRY_WAIT_KEY: (1_000, 1),
    RETRY_MAX_WAIT_KEY: (16_000, 1),
}
_BAD_PATH_CHARS = re.compile("[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff]")


@dataclass(frozen=True, slots=True)
class ZooKeeperOptions:
    """Where the writers' ZooKeeper lock is and how to reach it.

    ``lock_key`` ``None`` means the table's ``hoodie.table.name`` (read from ``hoodie.properties`` when first
    needed), as Hudi infers it."""

    connect: str
    base_path: str
    lock_key: str | None
    session_timeout_ms: int = 60_000
    connection_timeout_ms: int = 15_000
    num_retries: int = 15
    retry_wait_ms: int = 1_000
    retry_max_wait_ms: int = 16_000
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


def _read(props: Mapping[str, str], implicit: bool) -> tuple[dict[str, object], list[str]]:
    problems: list[str] = []
    values: dict[str, object] = {}
    url = props.get(URL_KEY, "").strip()
    if not url:
        problems.append(f"{URL_KEY}: must be set (the ZooKeeper connect string host:port[,host:port], "
                        "as the table's writers set it)")
    else:
        try:
            from kazoo.hosts import collect_hosts  # kazoo, only for a table that uses it

            collect_hosts(url)
        except ValueError as e:
            problems.append(f"{URL_KEY}: must be a ZooKeeper connect string host:port[,host:port][/chroot], "
                            f"got {url!r} ({e})")
    values["connect"] = url
    if not implicit:
        base = props.get(BASE_PATH_KEY, "").strip()
        lock_key = props.get(LOCK_KEY_KEY, "").strip() or props.get(TABLE_NAME_KEY, "").strip() or None
        if not base:
            problems.append(f"{BASE_PATH_KEY}: must be set (the ZooKeeper path under which the writers lock, "
                            "e.g. /hudi/locks)")
        elif (why := path_problem(base if lock_key is None else f"{base}/{lock_key}")) is not None:
            shown = (f"{base!r}" if lock_key is None else
                     f"{base!r} with lock key {lock_key!r} (lock path {base}/{lock_key})")
            problems.append(f"{BASE_PATH_KEY}: {why} (a ZooKeeper path), got {shown}")
        values["base_path"], values["lock_key"] = base, lock_key
    for key, (default, least) in _INT_KEYS.items():
        raw = props.get(key)
        try:
            value = default if raw is None else java_int(raw)
        except ValueError as e:
            problems.append(f"{key}: {e}")
            continue
        if value < least:
            problems.append(f"{key}: must be >= {least}, got {value}")
        values[key] = value
    values["app_id"] = props.get(APP_ID_KEY, "").strip() or DEFAULT_APP_ID
    return values, problems


def zookeeper_problems(props: Mapping[str, str], *, implicit: bool = False) -> list[str]:
    """What is wrong with the writers' ZooKeeper lock keys (``<key>: must be ..., got ...``), one line each."""
    return _read(props, implicit)[1]


def zookeeper_options(props: Mapping[str, str], *, implicit: bool = False, table_base_uri: str = "",
                      timeout_s: float = 60.0) -> tuple[ZooKeeperOptions | None, list[str]]:
    """The options the writers' keys name, or ``None`` with the problems.

    ``implicit`` reads them as ``ZookeeperBasedImplicitBasePathLockProvider`` does, hashing
    ``hoodie.base.path`` when set, else ``table_base_uri`` (the daemon's base path of the table)."""
    values, problems = _read(props, implicit)
    if problems:
        return None, problems
    if props.get(PORT_KEY, "").strip():
        log.warning("hoodie.write.lock.zookeeper.port is ignored by Apache Hudi and by the daemon: "
                    "hoodie.write.lock.zookeeper.url is the whole connect string (host:port)",
                    port=props[PORT_KEY].strip(), url=values["connect"])
    lock_key: str | None
    if implicit:
        table_path = props.get(TABLE_BASE_PATH_KEY, "").strip() or table_base_uri
        base_path, lock_key = implicit_base_path(table_path), IMPLICIT_LOCK_KEY
        ignored = sorted(k for k in (BASE_PATH_KEY, LOCK_KEY_KEY) if props.get(k, "").strip())
        if ignored:
            log.warning("keys ignored by the implicit ZooKeeper lock provider (Apache Hudi ignores them too)",
                        keys=ignored)
        log.info("ZooKeeper lock path derived from the table's base path", base_path=table_path,
                 lock_path=f"{base_path}/{lock_key}")
    else:
        base_path = str(values["base_path"])
        lock_key = None if values["lock_key"] is None else str(values["lock_key"])
    return ZooKeeperOptions(
        connect=str(values["connect"]), base_path=base_path, lock_key=lock_key,
        session_timeout_ms=_int(values, SESSION_TIMEOUT_KEY),
        connection_timeout_ms=_int(values, CONNECTION_TIMEOUT_KEY),
        num_retries=_int(values, NUM_RETRIES_KEY), retry_wait_ms=_int(values, RETRY_WAIT_KEY),
        retry_max_wait_ms=_int(values, RETRY_MAX_WAIT_KEY), app_id=str(values["app_id"]), timeout_s=timeout_s,
    ), []


def _int(values: Mapping[str, object], key: str) -> int:
    value = values[key]
    assert isinstance(value, int)
    return value


def zookeeper_reference() -> list[tuple[str, str | None, str]]:
    """``(key, default, description)`` of every key the ZooKeeper locks read."""
    return [
        (URL_KEY, None, "ZooKeeper lock: the writers' connect string, host:port[,host:port][/chroot], used as is "
         "(required)."),
        (PORT_KEY, None, "Ignored by Apache Hudi and by the daemon (a warning says so): put the port in "
         f"{URL_KEY}."),
        (BASE_PATH_KEY, None, "ZookeeperBasedLockProvider: the ZooKeeper path under which the writers lock "
         "(required); the lock is <base_path>/<lock_key>."),
        (LOCK_KEY_KEY, None, "ZookeeperBasedLockProvider: the lock's name under the base path; unset = "
         "hoodie.table.name (from the daemon's keys, else the table's hoodie.properties), as Hudi infers it."),
        (SESSION_TIMEOUT_KEY, "60000", "ZooKeeper lock: session timeout asked of the server (it caps it); the "
         "daemon's lock node disappears this long after its connection is lost."),
        (CONNECTION_TIMEOUT_KEY, "15000", "ZooKeeper lock: how long to wait for a connection when taking the "
         "lock before giving up for this round."),
        (NUM_RETRIES_KEY, "15", "ZooKeeper lock: how often a lost connection is retried (bounded exponential "
         "backoff, as Hudi's Curator client)."),
        (RETRY_WAIT_KEY, "1000", "ZooKeeper lock: first wait between connection retries, in milliseconds."),
        (RETRY_MAX_WAIT_KEY, "16000", "ZooKeeper lock: longest wait between connection retries, in "
         "milliseconds."),
        (APP_ID_KEY, DEFAULT_APP_ID, "ZooKeeper lock: written into the daemon's lock node as "
         "application_id=<value>, as Hudi 1.x writers write theirs."),
        (TABLE_BASE_PATH_KEY, None, "ZookeeperBasedImplicitBasePathLockProvider: the writers' base path of the "
         "table, hashed into the lock path /tmp/<hash>/lock_key; unset = the daemon's base path of the table."),
    ]


__all__ = [
    "APP_ID_KEY", "BASE_PATH_KEY", "CONNECTION_TIMEOUT_KEY", "IMPLICIT_LOCK_KEY", "IMPLICIT_ZOOKEEPER_PROVIDER",
    "LOCK_KEY_KEY", "NUM_RETRIES_KEY", "PORT_KEY", "RETRY_MAX_WAIT_KEY", "RETRY_WAIT_KEY", "SESSION_TIMEOUT_KEY",
    "TABLE_BASE_PATH_KEY", "TABLE_NAME_KEY", "URL_KEY", "ZOOKEEPER_PROVIDER", "ZooKeeperOptions",
    "implicit_base_path", "path_problem", "zookeeper_options", "zookeeper_problems",
    "zookeeper_reference",
]
