"""The table lock that every writer of a table shares: a provider (:mod:`.provider`), its implementations
(:mod:`.file`, :mod:`.zookeeper`) and the registry that picks one from the table's ``hoodie.write.lock.*`` keys
(:mod:`.registry`)."""

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
from hudi_clusterd.lock.zookeeper import ZooKeeperLease, ZooKeeperLockProvider, ZooKeeperStats

__all__ = [
    "AUX_LOCK_FILE",
    "FILE_SYSTEM_PROVIDER",
    "LOCK_FILE",
    "PROVIDER_KEY",
    "FileLease",
    "FileSystemLockProvider",
    "Lease",
    "LocalMutexes",
    "LockOptions",
    "LockProvider",
    "ZooKeeperLease",
    "ZooKeeperLockProvider",
    "ZooKeeperStats",
    "lock_problems",
    "lock_properties",
    "lock_provider_from_properties",
    "lock_reference",
]
