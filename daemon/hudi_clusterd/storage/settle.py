"""Writes whose answer was lost, settled by reading back: the one home of what `Storage.put` and `Storage.delete`
do when the store's answer does not say what happened.

A `TransientStorageError` (no answer, a reset, a server error) leaves a write's outcome unknown: it may have landed.
So the file is read back. Our exact bytes there: it landed, and the call succeeds with the file's info. Another
writer's bytes: the other writer won (a create returns None, a compare-and-swap raises `PreconditionFailed`, an
overwrite is tried again), unless they are the very version a compare-and-swap meant to replace: then it did not
land, and it is tried again. No file: it did not land, and it is tried again. A `ThrottledError` did nothing and is
tried again after a pause. The tries are bounded by the storage's `RetryPolicy` deadline.

A create that finds the file, or a compare-and-swap that fails its condition, is read back as well: the store's
client retries requests on its own, and its retry of a write of ours that had landed finds our own bytes. Every
conditional writer of a table writes bytes that differ from every other writer's (a lock file names its owner and
its validity, an instant file its own plan or commit), so our bytes there are our write.

A delete whose answer was lost is settled by looking again: the file gone means it landed.
"""

from __future__ import annotations

import structlog

from hudi_clusterd.errors import PreconditionFailed, StorageError, ThrottledError, TransientStorageError
from hudi_clusterd.retry import is_transient
from hudi_clusterd.storage.base import FileInfo, PutMode, Storage

log = structlog.get_logger(__name__)

__all__ = ["settled_delete", "settled_put"]


def settled_put(storage: Storage, rel: str, data: bytes, mode: PutMode, if_match: str | None) -> FileInfo | None:
    """`Storage.put` with lost answers settled and transient failures retried (see the module docstring)."""
    for attempt in storage.retry.attempts(retry_on=is_transient):
        with attempt:
            return _put_once(storage, rel, data, mode, if_match)
    raise AssertionError("unreachable: the retry policy returns or raises")  # pragma: no cover


def _landed(storage: Storage, rel: str, info: FileInfo) -> FileInfo:
    log.info("storage write landed, its answer lost", path=storage.full_path(rel))
    return info


def _put_once(storage: Storage, rel: str, data: bytes, mode: PutMode, if_match: str | None) -> FileInfo | None:
    try:
        written = storage._put(rel, data, mode=mode, if_match=if_match)
    except ThrottledError:
        raise  # nothing was written: tried again after a pause
    except PreconditionFailed:
        found = _read_back(storage, rel, data)
        if found is not None and found[1]:
            return _landed(storage, rel, found[0])
        raise
    except TransientStorageError:
        found = _read_back(storage, rel, data)
        if found is None:
            raise  # it did not land: tried again
        info, ours = found
        if ours:
            return _landed(storage, rel, info)
        if mode is PutMode.CREATE:
            return None
        if if_match is not None and info.version == if_match:
            raise  # the version we meant to replace is still there: it did not land, tried again
        if if_match is not None:
            raise PreconditionFailed(f"{storage.full_path(rel)}: version {if_match} expected, found another "
                                     "writer's file after a write whose answer was lost") from None
        raise  # an overwrite: tried again
    if written is None:  # the create found a file: ours, when the client's own retry found our landed write
        found = _read_back(storage, rel, data)
        if found is not None and found[1]:
            return _landed(storage, rel, found[0])
    return written


def _read_back(storage: Storage, rel: str, data: bytes) -> tuple[FileInfo, bool] | None:
    """The file's info and whether it holds exactly ``data`` (the info is read first, so a version returned with
    True is the version of our bytes); None when there is no such file."""
    info = storage.info(rel)
    if info is None or info.is_dir:
        return None
    if info.size != len(data):
        return info, False
    try:
        return info, storage.read_bytes(rel) == data
    except StorageError:
        if storage.info(rel) is None:
            return None  # deleted between the two reads
        raise


def settled_delete(storage: Storage, rel: str, if_match: str | None) -> bool:
    """`Storage.delete` with a lost answer settled by looking again, and transient failures retried: whether the
    file was there."""
    for attempt in storage.retry.attempts(retry_on=is_transient):
        with attempt:
            try:
                return storage._delete(rel, if_match=if_match)
            except ThrottledError:
                raise
            except TransientStorageError:
                info = storage.info(rel)
                if info is None:
                    return True
                if if_match is not None and info.version != if_match:
                    raise PreconditionFailed(f"{storage.full_path(rel)}: version {if_match} expected, found "
                                             "another after a delete whose answer was lost") from None
                raise
    raise AssertionError("unreachable: the retry policy returns or raises")  # pragma: no cover
