"""The faults object stores really produce, injected into a real `Storage` at its single-attempt calls.

`inject(storage)` turns a storage (memory, local, an object store) into one whose ``_put`` and ``_delete`` (one
attempt of `Storage.put` / `Storage.delete`, under the storage's own settling and retries), ``delete_dir`` (a
folder's deletion, which the caller handles itself) and reads (``read_bytes``, ``open_input_file``) fail as a store
fails, for the calls a `Rule` matches:

- ``REFUSED``: the store says no before writing (an access error): nothing written, not worth retrying;
- ``REPLY_LOST``: the write lands, then the call raises a timeout as if its answer never came back;
- ``THROTTLED``: a 503 SlowDown before writing: nothing written, served when tried again;
- ``TIMEOUT_BEFORE``: a timeout before the request reached the store: nothing written.

A read fails before anything is read, ``REPLY_LOST`` as a timeout (the store served it, the answer never came).
A rule fires ``times`` times (then the calls pass through) for calls whose operation (``"put"``, ``"delete"``,
``"delete_dir"`` or ``"read"``) and path match; ``fired`` lists what fired. The storage's retry policy is replaced
by one that does not sleep, so the retries cost no time.
"""

from __future__ import annotations

import enum
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hudi_clusterd.errors import StorageAccessError, ThrottledError, TransientStorageError
from hudi_clusterd.retry import RetryPolicy
from hudi_clusterd.storage import PutMode, Storage
from hudi_clusterd.storage.base import FileInfo

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["FAST_RETRY", "Fault", "FaultLog", "Rule", "inject"]

FAST_RETRY = RetryPolicy(deadline_s=5.0, first_s=0.0, cap_s=0.0, jitter_s=0.0, sleep=lambda _s: None)


class Fault(enum.Enum):
    REFUSED = "refused before writing"
    REPLY_LOST = "written, then the reply lost"
    THROTTLED = "throttled, then served"
    TIMEOUT_BEFORE = "a timeout before writing"


@dataclass
class Rule:
    """Fail the next ``times`` calls of ``op`` (``put``/``delete``/``read``) on a path that ``path`` (a regex)
    searches."""

    fault: Fault
    path: str
    op: str = "put"
    times: int = 1

    def matches(self, op: str, rel: str) -> bool:
        return self.times > 0 and op == self.op and re.search(self.path, rel) is not None


@dataclass
class FaultLog:
    rules: list[Rule] = field(default_factory=list)
    fired: list[tuple[Fault, str, str]] = field(default_factory=list)
    guard: threading.Lock = field(default_factory=threading.Lock)

    def take(self, op: str, rel: str) -> Fault | None:
        with self.guard:
            for rule in self.rules:
                if rule.matches(op, rel):
                    rule.times -= 1
                    self.fired.append((rule.fault, op, rel))
                    return rule.fault
        return None


def _before(fault: Fault, op: str, rel: str) -> None:
    if fault is Fault.REFUSED:
        raise StorageAccessError(f"{op} {rel}: access denied (HTTP 403 AccessDenied, injected)")
    if fault is Fault.THROTTLED:
        raise ThrottledError(f"{op} {rel}: throttled by the store (HTTP 503 SlowDown, injected)")
    if fault is Fault.TIMEOUT_BEFORE:
        raise TransientStorageError(f"{op} {rel}: cannot reach the endpoint (timed out before sending, injected)")


def inject(storage: Storage, *rules: Rule) -> FaultLog:
    """Make ``storage`` fail as ``rules`` say (in place: its class becomes a subclass injecting the faults); returns
    the log, whose ``rules`` may be added to later. Children of the storage (`Storage.child`) are not injected."""
    faults = FaultLog(list(rules))
    base: type[Any] = type(storage)

    def _put(self: Storage, rel: str, data: bytes, *, mode: PutMode, if_match: str | None) -> FileInfo | None:
        fault = faults.take("put", rel)
        if fault is not None and fault is not Fault.REPLY_LOST:
            _before(fault, "put", rel)
        written: FileInfo | None = base._put(self, rel, data, mode=mode, if_match=if_match)
        if fault is Fault.REPLY_LOST:
            raise TransientStorageError(f"put {rel}: timed out waiting for the answer (injected; it landed)")
        return written

    def _delete(self: Storage, rel: str, *, if_match: str | None) -> bool:
        fault = faults.take("delete", rel)
        if fault is not None and fault is not Fault.REPLY_LOST:
            _before(fault, "delete", rel)
        existed: bool = base._delete(self, rel, if_match=if_match)
        if fault is Fault.REPLY_LOST:
            raise TransientStorageError(f"delete {rel}: timed out waiting for the answer (injected; it landed)")
        return existed

    def delete_dir(self: Storage, rel: str) -> None:
        fault = faults.take("delete_dir", rel)
        if fault is not None and fault is not Fault.REPLY_LOST:
            _before(fault, "delete folder", rel)
        base.delete_dir(self, rel)
        if fault is Fault.REPLY_LOST:
            raise TransientStorageError(f"delete folder {rel}: timed out waiting for the answer (injected; done)")

    def _read(rel: str) -> None:
        fault = faults.take("read", rel)
        if fault is Fault.REPLY_LOST:
            raise TransientStorageError(f"read {rel}: timed out waiting for the answer (injected)")
        if fault is not None:
            _before(fault, "read", rel)

    def read_bytes(self: Storage, rel: str) -> bytes:
        _read(rel)
        data: bytes = base.read_bytes(self, rel)
        return data

    def open_input_file(self: Storage, rel: str) -> pa.NativeFile:
        _read(rel)
        opened: pa.NativeFile = base.open_input_file(self, rel)
        return opened

    storage.__class__ = type(f"FaultInjecting{base.__name__}", (base,),
                             {"_put": _put, "_delete": _delete, "delete_dir": delete_dir, "read_bytes": read_bytes,
                              "open_input_file": open_input_file, "retry": FAST_RETRY})
    return faults
