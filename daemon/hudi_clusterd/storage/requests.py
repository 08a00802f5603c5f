"""`RequestCounts`: the requests a storage made to its object store, by kind, thread-safe.

Kinds are those of the S3 API, named as the test suite's counting proxy names them (``tests/harness/s3_proxy.py``),
so that the two can be compared: ``LIST`` (one page of a listing, up to 1000 entries), ``GET`` (a whole object or
a byte range), ``HEAD``, ``PUT`` (a whole object, or one part of a multipart upload), ``POST`` (starting and
completing a multipart upload), ``DELETE`` (one key, or one batch of up to 1000 keys) and ``COPY``; plus
``precondition_failed``, the conditional requests the store refused (a create that found the object, an update
that found another version or none). Retries made inside the object-store client are not seen, and so not
counted.
"""

from __future__ import annotations

import threading
from typing import Final

LIST: Final = "LIST"
GET: Final = "GET"
HEAD: Final = "HEAD"
PUT: Final = "PUT"
POST: Final = "POST"
DELETE: Final = "DELETE"
COPY: Final = "COPY"
PRECONDITION_FAILED: Final = "precondition_failed"
KINDS: Final = (LIST, GET, HEAD, PUT, POST, DELETE, COPY, PRECONDITION_FAILED)


class RequestCounts:
    """Counts of requests by kind (`KINDS`), and the bytes received by ``GET``s; shared by a storage and its
    children, safe to update from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(KINDS, 0)
        self._bytes_read = 0

    def add(self, kind: str, n: int = 1) -> None:
        """Count ``n`` requests of ``kind`` (one of `KINDS`)."""
        if kind not in self._counts:
            raise ValueError(f"unknown request kind {kind!r}; one of {', '.join(KINDS)}")
        with self._lock:
            self._counts[kind] += n

    def add_bytes_read(self, n: int) -> None:
        with self._lock:
            self._bytes_read += n

    def snapshot(self) -> dict[str, int]:
        """Every kind's count so far (zeros included)."""
        with self._lock:
            return dict(self._counts)

    @property
    def bytes_read(self) -> int:
        """Bytes received in answers to ``GET`` requests so far."""
        with self._lock:
            return self._bytes_read

    def total(self) -> int:
        """Requests of every kind so far (``precondition_failed`` answers are requests counted by kind already)."""
        with self._lock:
            return sum(n for kind, n in self._counts.items() if kind != PRECONDITION_FAILED)

    def __repr__(self) -> str:
        counts = {k: n for k, n in self.snapshot().items() if n}
        return f"RequestCounts({counts})"


def difference(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """The counts of ``after`` less those of ``before`` (two snapshots), kinds without requests left out."""
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


__all__ = ["COPY", "DELETE", "GET", "HEAD", "KINDS", "LIST", "POST", "PRECONDITION_FAILED", "PUT", "RequestCounts",
           "difference"]
