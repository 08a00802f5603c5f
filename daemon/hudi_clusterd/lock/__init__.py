"""The table lock that every writer of a table shares."""

from hudi_clusterd.lock.file import AUX_LOCK_FILE, LOCK_FILE, LockOptions, TableLock

__all__ = ["AUX_LOCK_FILE", "LOCK_FILE", "LockOptions", "TableLock"]
