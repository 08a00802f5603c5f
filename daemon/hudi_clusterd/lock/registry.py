"""The lock a table's writers name, read from its ``hoodie.write.lock.*`` keys (Apache Hudi's own).

``hoodie.write.lock.provider`` names the writers' lock provider class; the daemon must take the same lock.
:data:`PROVIDERS` maps each class name the daemon implements to that implementation, one entry per class; the
key unset means ``FileSystemBasedLockProvider``. Any other class (``InProcessLockProvider``,
``HiveMetastoreBasedLockProvider`` or an unknown one) is refused with one ``ConfigError`` line naming it and the
providers to use instead.

Besides the ``hoodie.write.lock.*`` keys a lock may depend on the table's ``hoodie.table.name`` (Hudi's default
ZooKeeper lock key and DynamoDB partition key) and ``hoodie.base.path`` (hashed into the implicit ZooKeeper lock
path).

:func:`lock_properties` keeps the ``hoodie.write.lock.*`` keys and the ``hoodie.aws.*`` credentials; a secret among
them never appears in a message or a log line.

How long to wait for the lock and when a daemon's own lock counts as dead are the daemon's settings
(``clusterd.lock.timeout.seconds``, ``clusterd.lock.stale.seconds``), passed in by the caller. The storage lock
has no stale time of the daemon's: its leases last what the writers' ``hoodie.write.lock.storage.*`` keys say.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from hudi_clusterd.errors import ConfigError
from hudi_clusterd.lock.dynamodb_config import DYNAMODB_IMPLICIT_PROVIDER, DYNAMODB_PROVIDER, dynamodb_lock_config
from hudi_clusterd.lock.dynamodb_config import reference as dynamodb_reference
from hudi_clusterd.lock.file import (
    DEFAULT_STALE_S,
    DEFAULT_TIMEOUT_S,
    EXPIRE_KEY,
    PATH_KEY,
    FileSystemLockProvider,
    file_lock_options,
)
from hudi_clusterd.lock.provider import LocalMutexes, LockProvider
from hudi_clusterd.lock.storage_lock import StorageLockProvider
from hudi_clusterd.lock.storage_lock_format import (
    DEFAULT_RENEW_S,
    DEFAULT_VALIDITY_S,
    RENEW_ALT_KEY,
    RENEW_KEY,
    STORAGE_PROVIDER,
    VALIDITY_KEY,
    storage_lock_times,
)
from hudi_clusterd.lock.zookeeper_options import (
    IMPLICIT_ZOOKEEPER_PROVIDER,
    TABLE_BASE_PATH_KEY,
    TABLE_NAME_KEY,
    ZOOKEEPER_PROVIDER,
    zookeeper_options,
    zookeeper_problems,
    zookeeper_reference,
)
from hudi_clusterd.storage import Storage

__all__ = [
    "AWS_PREFIX",
    "FILE_SYSTEM_PROVIDER",
    "LOCK_PREFIX",
    "PROVIDERS",
    "PROVIDER_KEY",
    "Registration",
    "lock_problems",
    "lock_properties",
    "lock_provider_from_properties",
    "lock_reference",
]

LOCK_PREFIX = "hoodie.write.lock."
AWS_PREFIX = "hoodie.aws."
PROVIDER_KEY = "hoodie.write.lock.provider"
FILE_SYSTEM_PROVIDER = "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"


class _Build(Protocol):
    def __call__(self, props: Mapping[str, str], storage: Storage, *, timeout_s: float, stale_s: float,
                 mutexes: LocalMutexes | None) -> LockProvider: ...


@dataclass(frozen=True, slots=True)
class Registration:
    """One implementation: ``problems`` checks its keys (``<key>: must be ..., got ...``), ``build`` makes the
    provider of a table from keys that passed."""

    problems: Callable[[Mapping[str, str]], list[str]]
    build: _Build


def _file_system_problems(props: Mapping[str, str]) -> list[str]:
    return file_lock_options(props)[1]


def _file_system(props: Mapping[str, str], storage: Storage, *, timeout_s: float, stale_s: float,
                 mutexes: LocalMutexes | None) -> LockProvider:
    options, problems = file_lock_options(props, timeout_s=timeout_s, stale_s=stale_s)
    if options is None:
        raise ConfigError("invalid table lock settings", problems)
    return FileSystemLockProvider(storage, options, mutexes=mutexes)


def _storage_problems(props: Mapping[str, str]) -> list[str]:
    return storage_lock_times(props)[1]


def _storage(props: Mapping[str, str], storage: Storage, *, timeout_s: float, stale_s: float,
             mutexes: LocalMutexes | None) -> LockProvider:
    times, problems = storage_lock_times(props)
    if times is None:
        raise ConfigError("invalid table lock settings", problems)
    return StorageLockProvider(storage, validity_s=times.validity_s, renew_interval_s=times.renew_interval_s,
                               timeout_s=timeout_s, mutexes=mutexes)
def _zookeeper_problems(props: Mapping[str, str]) -> list[str]:
    return zookeeper_problems(props)


def _implicit_zookeeper_problems(props: Mapping[str, str]) -> list[str]:
    return zookeeper_problems(props, implicit=True)


def _zookeeper_builder(implicit: bool) -> _Build:
    def build(props: Mapping[str, str], storage: Storage, *, timeout_s: float, stale_s: float,
              mutexes: LocalMutexes | None) -> LockProvider:
        # stale_s has no part here: a ZooKeeper lock dies with its holder's session
        options, problems = zookeeper_options(props, implicit=implicit, table_base_uri=storage.base_uri,
                                              timeout_s=timeout_s)
        if options is None:
            raise ConfigError("invalid table lock settings", problems)
        from hudi_clusterd.lock.zookeeper import ZooKeeperLockProvider  # kazoo, only for a table that uses it

        return ZooKeeperLockProvider(options, storage, mutexes=mutexes)

    return build


def _dynamodb_problems(implicit: bool) -> Callable[[Mapping[str, str]], list[str]]:
    return lambda props: dynamodb_lock_config(props, implicit=implicit)[1]


def _dynamodb_builder(implicit: bool) -> _Build:
    def build(props: Mapping[str, str], storage: Storage, *, timeout_s: float, stale_s: float,
              mutexes: LocalMutexes | None) -> LockProvider:
        # boto3 and botocore, only for a table that uses it
        from hudi_clusterd.lock.dynamodb import build_dynamodb, build_implicit_dynamodb

        builder = build_implicit_dynamodb if implicit else build_dynamodb
        return builder(props, storage, timeout_s=timeout_s, stale_s=stale_s, mutexes=mutexes)

    return build


PROVIDERS: Mapping[str, Registration] = MappingProxyType({
    FILE_SYSTEM_PROVIDER: Registration(_file_system_problems, _file_system),
    STORAGE_PROVIDER: Registration(_storage_problems, _storage),
    ZOOKEEPER_PROVIDER: Registration(_zookeeper_problems, _zookeeper_builder(implicit=False)),
    IMPLICIT_ZOOKEEPER_PROVIDER: Registration(_implicit_zookeeper_problems, _zookeeper_builder(implicit=True)),
    DYNAMODB_PROVIDER: Registration(_dynamodb_problems(implicit=False), _dynamodb_builder(implicit=False)),
    DYNAMODB_IMPLICIT_PROVIDER: Registration(_dynamodb_problems(implicit=True), _dynamodb_builder(implicit=True)),
})
"""Hudi's lock provider class name -> the daemon's implementation of that lock."""


def _provider_class(props: Mapping[str, str]) -> str:
    return props.get(PROVIDER_KEY, "").strip() or FILE_SYSTEM_PROVIDER


def lock_problems(props: Mapping[str, str]) -> list[str]:
    """What is wrong with a table's ``hoodie.write.lock.*`` keys (empty when the daemon can take that lock)."""
    name = _provider_class(props)
    registration = PROVIDERS.get(name)
    if registration is None:
        others = ", ".join(p.rsplit(".", 1)[-1] for p in PROVIDERS if p != FILE_SYSTEM_PROVIDER)
        why = (" locks inside one JVM only and cannot exclude another process" if name.endswith(
            ".InProcessLockProvider") else " is not supported")
        return [f"{PROVIDER_KEY}: {name}{why}; give the table's writers and the daemon one shared lock: "
                f"{FILE_SYSTEM_PROVIDER.rsplit('.', 1)[-1]} (a local or mounted file system) or {others}"]
    return registration.problems(props)


def lock_provider_from_properties(props: Mapping[str, str], storage: Storage, *,
                                  timeout_s: float = DEFAULT_TIMEOUT_S, stale_s: float = DEFAULT_STALE_S,
                                  mutexes: LocalMutexes | None = None) -> LockProvider:
    """The provider of the lock a table's ``hoodie.write.lock.*`` keys name (``storage`` is the table's).

    ``mutexes`` is shared by the providers one process builds for its tables (see
    :class:`~hudi_clusterd.lock.provider.LocalMutexes`); ``ConfigError`` when the keys name a lock the daemon
    cannot take."""
    problems = lock_problems(props)
    if problems:
        raise ConfigError(f"{storage.base_uri}: the table's lock cannot be taken", problems)
    return PROVIDERS[_provider_class(props)].build(props, storage, timeout_s=timeout_s, stale_s=stale_s,
                                                   mutexes=mutexes)


def lock_properties(props: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The ``hoodie.write.lock.*`` and ``hoodie.aws.*`` (credentials) keys among ``props`` and the table keys a
    lock may infer its place from (``hoodie.table.name``, ``hoodie.base.path``), sorted: what a table's lock
    depends on."""
    return tuple(sorted((k, v) for k, v in props.items()
                        if k.startswith((LOCK_PREFIX, AWS_PREFIX)) or k in (TABLE_NAME_KEY, TABLE_BASE_PATH_KEY)))


def lock_reference() -> list[tuple[str, str | None, str]]:
    """``(key, default, description)`` of every key of the table lock the daemon reads."""
    return [
        (PROVIDER_KEY, None, f"Lock provider class of the table's writers; unset = {FILE_SYSTEM_PROVIDER}. "
         "Supported: " + ", ".join(PROVIDERS) + " (any other class is refused)."),
        (PATH_KEY, None, "Folder of the writers' FileSystemBasedLockProvider lock file (absolute path or URI); "
         "unset = the table's .hoodie. The daemon holds <folder>/lock and .hoodie/.aux/lock."),
        (EXPIRE_KEY, "0", "Minutes after which the writers treat a lock file nobody refreshed as dead (0 = never, "
         "Hudi's default); the daemon takes over a Hudi writer's lock file only after this."),
        (VALIDITY_KEY, str(DEFAULT_VALIDITY_S), "Seconds one write of a StorageBasedLockProvider lock "
         "(.hoodie/.locks/table_lock.json) holds it (at least 10, and at least 10 renew intervals); the daemon's "
         "leases last as long."),
        (RENEW_KEY, str(DEFAULT_RENEW_S), "Seconds between two renewals of a StorageBasedLockProvider lock (at "
         f"least 1); {RENEW_ALT_KEY} is read when this is unset."),
        (RENEW_ALT_KEY, None, f"Former name of {RENEW_KEY}, read when that is unset."),
        *zookeeper_reference(),
        *dynamodb_reference(),
    ]
