"""The table lock that every writer of a table shares: the seam (:mod:`.provider`), the lease base
(:mod:`.lease`), the locks (:mod:`.file`, :mod:`.storage_lock`, :mod:`.zookeeper`, :mod:`.dynamodb`) with their
keys, and the registry that picks one from the table's ``hoodie.write.lock.*`` keys (:mod:`.registry`). The
ZooKeeper and DynamoDB providers are imported only for a table whose lock they are (they import kazoo and boto3).
"""

from hudi_clusterd.lock.file import AUX_LOCK_FILE, LOCK_FILE, FileSystemLockProvider, LockOptions
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
from hudi_clusterd.lock.storage_lock_format import STORAGE_PROVIDER, LockData, storage_lock_times
from hudi_clusterd.lock.usage import LockStats, LockUsage

__all__ = [
    "AUX_LOCK_FILE",
    "FILE_SYSTEM_PROVIDER",
    "LOCK_FILE",
    "PROVIDER_KEY",
    "STORAGE_PROVIDER",
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
    "lock_problems",
    "lock_properties",
    "lock_provider_from_properties",
    "lock_reference",
    "storage_lock_times",
]
