"""The table lock that every writer of a table shares: the seam every lock implements (:mod:`.provider`), the
lease they share (:mod:`.lease`), the locks themselves (:mod:`.file`, :mod:`.storage_lock`, :mod:`.dynamodb`,
:mod:`.zookeeper`) and the registry that picks one from the table's ``hoodie.write.lock.*`` keys
(:mod:`.registry`). The ZooKeeper lock's names are loaded, with kazoo, on first use."""

from typing import TYPE_CHECKING

from hudi_clusterd.lock.file import AUX_LOCK_FILE, LOCK_FILE, FileLease, FileSystemLockProvider, LockOptions
from hudi_clusterd.lock.provider import Lease, LocalMutexes, LockProvider
from hudi_clusterd.lock.registry import (
    FILE_SYSTEM_PROVIDER,
    PROVIDER_KEY,
    lock_problems,
    lock_properties,
    lock_provider_from_properties,
    lock_reference,
)
from hudi_clusterd.lock.storage_lock import StorageLease, StorageLockProvider
from hudi_clusterd.lock.storage_lock_format import LOCKS_FOLDER, STORAGE_PROVIDER, LockData, storage_lock_times
from hudi_clusterd.lock.usage import LockStats, LockUsage

if TYPE_CHECKING:
    from hudi_clusterd.lock.zookeeper import ZooKeeperLease, ZooKeeperLockProvider


def __getattr__(name: str) -> object:
    """The ZooKeeper lock's classes, imported (with kazoo) on first use only."""
    if name in ("ZooKeeperLease", "ZooKeeperLockProvider"):
        from hudi_clusterd.lock import zookeeper

        return getattr(zookeeper, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AUX_LOCK_FILE",
    "FILE_SYSTEM_PROVIDER",
    "LOCKS_FOLDER",
    "LOCK_FILE",
    "PROVIDER_KEY",
    "STORAGE_PROVIDER",
    "FileLease",
    "FileSystemLockProvider",
    "Lease",
    "LocalMutexes",
    "LockData",
    "LockOptions",
    "LockProvider",
    "LockStats",
    "LockUsage",
    "StorageLease",
    "StorageLockProvider",
    "ZooKeeperLease",
    "ZooKeeperLockProvider",
    "lock_problems",
    "lock_properties",
    "lock_provider_from_properties",
    "lock_reference",
    "storage_lock_times",
]
