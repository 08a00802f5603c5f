"""One error hierarchy for the whole daemon.

Every error carries a message that names the offending file, key, instant or value, so that the CLI can print
it on one line without a traceback. ``retryable`` says whether the same work may succeed when tried again
(after a re-plan, a fresh timeline, or a storage hiccup).
"""

from __future__ import annotations


class ClusterdError(Exception):
    """Root of every error the daemon raises on purpose."""

    retryable: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(ClusterdError):
    """A configuration file, key or value is invalid (fatal at start-up, rejected at reload)."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = list(problems or [])
        if self.problems:
            message = message + ": " + "; ".join(self.problems)
        super().__init__(message)


class TableError(ClusterdError):
    """A table cannot be opened or written as asked (missing properties, unsupported version, MDT on)."""


class UnsupportedTableError(TableError):
    """The table exists but uses a layout or feature this daemon refuses to touch."""


class BloomFilterError(TableError):
    """A bloom filter cannot be built, or a footer's filter cannot be decoded (the message says which part)."""


class TableBusyError(TableError):
    """Another writer's work on the table is half done, and clustering must not write until it is finished (a
    compaction of the metadata table, an upgrade of it, metadata partitions being built). Hudi's writers do such
    work under the table lock, so without the lock it is usually a moment's state; under the lock, a writer that
    died during it (its next write finishes it), or Hudi's async indexer at work. Nothing was written: the daemon
    waits and tries again."""

    retryable = True


class MetadataTableError(TableError):
    """A metadata-table file (log file, log block, HFile) cannot be decoded, or the records given cannot be
    written in Hudi's format (the message names the file and, for damage, the offset)."""


class LogFileError(TableError):
    """A data table's log file cannot be read: a block whose frame is intact but whose contents cannot be decoded,
    an unknown block type, or a block or feature the daemon does not read (an HFILE data block, a DELETE block of
    version 1 or 2, a partial update). The message names the file and the block's offset."""


class TimelineError(ClusterdError):
    """The timeline is inconsistent (a bad instant name, a transition from a missing state)."""


class InstantCollisionError(TimelineError):
    """Another writer took the same instant time for another action: the two share markers and heartbeat
    folders, so nothing of that time may be deleted by markers."""


class MetadataDecodeError(TimelineError):
    """An instant's payload (commit JSON, plan Avro, properties) cannot be decoded."""


class StorageError(ClusterdError):
    """A storage operation failed; usually worth retrying."""

    retryable = True


class TransientStorageError(StorageError):
    """The store did not answer in time, dropped the connection or failed on its side (a timeout, a reset, a 5xx).
    A read can simply be repeated; a write's outcome is unknown (it may have landed with its answer lost) until the
    object is read back, which `hudi_clusterd.storage.Storage.put` and ``delete`` do before they try again."""


class ThrottledError(TransientStorageError):
    """The store refused the request for now (S3's 503 SlowDown, a 429): nothing was done; try again after a
    pause."""


class StorageAccessError(StorageError):
    """The storage refuses this process or cannot be configured as given: wrong or missing credentials, no such
    bucket, an unknown or malformed storage option. Trying again does not help until the configuration changes."""

    retryable = False


class PathOutsideStorageError(StorageError):
    """A path leaves the storage's root (``..``, an absolute path, a backslash, a control character, a URI of
    another scheme or bucket): refused before anything is read, written or deleted. Trying again cannot help."""

    retryable = False


class PreconditionFailed(StorageError):
    """A conditional write or delete found another version of the file than the one it was given (or no file):
    someone else changed it since it was read. Read it again and decide again."""


class LockError(ClusterdError):
    """The table lock was not had: not taken in time (held by another writer, or its lock service did not answer),
    not to be held on this storage or with these settings, or a lease lost while held (nothing more is written
    under it)."""

    retryable = True


class CommitConflictError(ClusterdError):
    """A concurrent write touched file groups this instant claims; re-plan and retry."""

    retryable = True


class ExecutionError(ClusterdError):
    """A Spark job (ingestion or a clustering group) failed."""


class PlanError(ClusterdError):
    """A clustering plan cannot be created, found or executed as asked."""
