"""A table lock for tests whose only writers are threads of this process: a mutex behind the `LockProvider` seam.

Tables on an object store cannot take the file lock (`FileSystemLockProvider` refuses object stores), and the
tests that build such tables with `tests.builders.TableGen` and cluster them in this process need no lock
between processes.
"""

from __future__ import annotations

import threading
import uuid
from types import TracebackType

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock.usage import LockStats


class ProcessLease:
    def __init__(self, lock: ProcessLock) -> None:
        self._lock = lock
        self.owner = f"test-process-lock:{uuid.uuid4().hex[:8]}"
        self._held = True

    def verify(self) -> None:
        if not self._held:
            raise LockError(f"{self.owner}: the lock is not held")

    def release(self) -> None:
        if self._held:
            self._held = False
            self._lock.mutex.release()

    def __enter__(self) -> ProcessLease:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


class ProcessLock:
    """Excludes the threads of this process, nothing else."""

    def __init__(self, timeout_s: float = 30.0) -> None:
        self.mutex = threading.Lock()
        self.stats = LockStats()
        self._timeout_s = timeout_s

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    def acquire(self, timeout_s: float | None = None) -> ProcessLease:
        timeout = self._timeout_s if timeout_s is None else timeout_s
        if not self.mutex.acquire(timeout=timeout):
            raise LockError(f"process lock: timed out after {timeout:.0f}s")
        return ProcessLease(self)
