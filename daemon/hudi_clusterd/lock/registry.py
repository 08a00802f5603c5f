"""The lock a table's writers name, read from its ``hoodie.write.lock.*`` keys (Apache Hudi's own).

:data:`PROVIDERS` maps each ``hoodie.write.lock.provider`` class the daemon implements to that implementation
(unset: ``FileSystemBasedLockProvider``); any other class is refused in one ``ConfigError`` line naming it and the
providers to use instead. A lock may also depend on ``hoodie.table.name`` and ``hoodie.base.path``
(:mod:`.table_keys`). How long to wait for the lock and when a daemon's own file lock counts as dead are the
daemon's settings (``clusterd.lock.timeout.seconds``, ``clusterd.lock.stale.seconds``), passed in by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from hudi_clusterd.domain.keys import Key, KeyReader, reference_rows
from hudi_clusterd.domain.values import optional_text
from hudi_clusterd.errors import ConfigError
from hudi_clusterd.lock.dynamodb_config import (
    DYNAMODB_IMPLICIT_PROVIDER,
    DYNAMODB_KEYS,
    DYNAMODB_PROVIDER,
    dynamodb_lock_config,
)
from hudi_clusterd.lock.file import (
    DEFAULT_STALE_S,
    DEFAULT_TIMEOUT_S,
    FILE_LOCK_KEYS,
    FileSystemLockProvider,
    file_lock_options,
)
from hudi_clusterd.lock.provider import LocalMutexes, LockProvider
from hudi_clusterd.lock.storage_lock import StorageLockProvider
from hudi_clusterd.lock.storage_lock_format import STORAGE_LOCK_KEYS, STORAGE_PROVIDER, storage_lock_times
from hudi_clusterd.lock.table_keys import TABLE_BASE_PATH, TABLE_NAME
from hudi_clusterd.lock.zookeeper_options import (
    IMPLICIT_ZOOKEEPER_PROVIDER,
    ZOOKEEPER_KEYS,
    ZOOKEEPER_PROVIDER,
    zookeeper_options,
    zookeeper_problems,
)
from hudi_clusterd.storage import Storage
from hudi_clusterd.storage.s3_settings import HUDI_AWS_KEYS

__all__ = [
    "AWS_PREFIX",
    "FILE_SYSTEM_PROVIDER",
    "LOCK_KEYS",
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
T = TypeVar("T")


class _Build(Protocol):
    def __call__(self, props: Mapping[str, str], storage: Storage, *, timeout_s: float, stale_s: float,
                 mutexes: LocalMutexes | None) -> LockProvider: ...


@dataclass(frozen=True, slots=True)
class Registration:
    """One implementation: ``problems`` checks its keys (``<key>: must be ..., got ...``), ``build`` makes the
    provider of a table from keys that passed."""

    problems: Callable[[Mapping[str, str]], list[str]]
    build: _Build


def _valid(found: tuple[T | None, list[str]]) -> T:
    options, problems = found
    if options is None:
        raise ConfigError("invalid table lock settings", problems)
    return options


def _file_system(props: Mapping[str, str], storage: Storage, *, timeout_s: float, stale_s: float,
                 mutexes: LocalMutexes | None) -> LockProvider:
    options = _valid(file_lock_options(props, timeout_s=timeout_s, stale_s=stale_s))
    return FileSystemLockProvider(storage, options, mutexes=mutexes)


def _storage(props: Mapping[str, str], storage: Storage, *, timeout_s: float, stale_s: float,
             mutexes: LocalMutexes | None) -> LockProvider:
    times = _valid(storage_lock_times(props))
    return StorageLockProvider(storage, validity_s=times.validity_s, renew_interval_s=times.renew_interval_s,
                               timeout_s=timeout_s, mutexes=mutexes)


def _zookeeper_builder(implicit: bool) -> _Build:
    def build(props: Mapping[str, str], storage: Storage, *, timeout_s: float, stale_s: float,
              mutexes: LocalMutexes | None) -> LockProvider:
        # stale_s has no part here: a ZooKeeper lock dies with its holder's session
        from hudi_clusterd.lock.zookeeper import ZooKeeperLockProvider  # kazoo only for a table that uses it

        options = _valid(zookeeper_options(props, implicit=implicit, table_base_uri=storage.base_uri,
                                           timeout_s=timeout_s))
        return ZooKeeperLockProvider(options, storage, mutexes=mutexes)

    return build


def _dynamodb_builder(implicit: bool) -> _Build:
    def build(props: Mapping[str, str], storage: Storage, *, timeout_s: float, stale_s: float,
              mutexes: LocalMutexes | None) -> LockProvider:
        # stale_s has no part here: a holder's lease is in its item
        from hudi_clusterd.lock.dynamodb import DynamoDBLockProvider  # boto3 only for a table that uses it

        config = _valid(dynamodb_lock_config(props, implicit=implicit))
        return DynamoDBLockProvider(config, storage, timeout_s=timeout_s, mutexes=mutexes)

    return build


PROVIDERS: Mapping[str, Registration] = MappingProxyType({
    FILE_SYSTEM_PROVIDER: Registration(lambda props: file_lock_options(props)[1], _file_system),
    STORAGE_PROVIDER: Registration(lambda props: storage_lock_times(props)[1], _storage),
    ZOOKEEPER_PROVIDER: Registration(zookeeper_problems, _zookeeper_builder(implicit=False)),
    IMPLICIT_ZOOKEEPER_PROVIDER: Registration(lambda props: zookeeper_problems(props, implicit=True),
                                              _zookeeper_builder(implicit=True)),
    DYNAMODB_PROVIDER: Registration(lambda props: dynamodb_lock_config(props)[1],
                                    _dynamodb_builder(implicit=False)),
    DYNAMODB_IMPLICIT_PROVIDER: Registration(lambda props: dynamodb_lock_config(props, implicit=True)[1],
                                             _dynamodb_builder(implicit=True)),
})
"""Hudi's lock provider class name -> the daemon's implementation of that lock."""
PROVIDER = Key(PROVIDER_KEY, None, optional_text, (
    f"Lock provider class of the table's writers; unset = {FILE_SYSTEM_PROVIDER}. Supported: "
    + ", ".join(PROVIDERS) + " (any other class is refused)."))


def _provider_class(props: Mapping[str, str]) -> str:
    return KeyReader(props).get(PROVIDER) or FILE_SYSTEM_PROVIDER


CONCURRENCY_MODE_KEY = "hoodie.write.concurrency.mode"
NBCC = "NON_BLOCKING_CONCURRENCY_CONTROL"


def lock_problems(props: Mapping[str, str]) -> list[str]:
    """What is wrong with a table's ``hoodie.write.lock.*`` keys (empty when the daemon can take that lock), and
    with its writers' concurrency mode: non-blocking concurrency control lets writers append logs to file groups
    beside any table service without a conflict check, which a clustering would lose."""
    mode = props.get(CONCURRENCY_MODE_KEY, "").strip().upper()
    if mode == NBCC:
        return [f"{CONCURRENCY_MODE_KEY}={props[CONCURRENCY_MODE_KEY]}: tables written with non-blocking "
                "concurrency control are not served (supported: SINGLE_WRITER, OPTIMISTIC_CONCURRENCY_CONTROL)"]
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
    table_keys = (TABLE_NAME.name, TABLE_BASE_PATH.name)
    return tuple(sorted((k, v) for k, v in props.items()
                        if k.startswith((LOCK_PREFIX, AWS_PREFIX)) or k in table_keys))


LOCK_KEYS: tuple[Key[Any], ...] = (PROVIDER, *FILE_LOCK_KEYS, *STORAGE_LOCK_KEYS, *ZOOKEEPER_KEYS, TABLE_NAME,
                                   TABLE_BASE_PATH, *DYNAMODB_KEYS, *HUDI_AWS_KEYS)
"""Every key of the table lock the daemon reads."""


def lock_reference() -> list[tuple[str, str | None, str]]:
    """``(key, default, description)`` of every key of the table lock the daemon reads."""
    return reference_rows(LOCK_KEYS)
