"""The requests a storage makes to its object store: counted by kind (`RequestCounts`), and their failures named in
one line each (`object_error`).

Kinds are those of the S3 API, named as the test suite's counting proxy names them (``tests/harness/s3_proxy.py``)
so that the two can be compared: a ``LIST`` is one page of up to 1000 entries, a ``GET`` a whole object or a range,
a ``PUT`` a whole object or one part, a ``POST`` the start or completion of a multipart upload, a ``DELETE`` one key
or one batch of up to 1000; ``precondition_failed`` counts the conditional requests the store refused. Retries made
inside the object-store client are not seen, and so not counted.
"""

from __future__ import annotations

import re
import threading
from typing import Final

from hudi_clusterd.errors import StorageAccessError, StorageError, ThrottledError, TransientStorageError

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


_STATUS: Final = re.compile(r"status code: (\d{3})|status: (\d{3})")
_CODE: Final = re.compile(r"<Code>([A-Za-z0-9.]{1,64})</Code>")
_UNREACHABLE: Final = ("error sending request", "tcp connect error", "connection refused", "dns error",
                       "timed out", "timeout", "connection reset", "broken pipe", "unexpected eof")
_ACCESS_CODES: Final = frozenset({"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
                                  "InvalidToken", "TokenRefreshRequired", "AuthorizationHeaderMalformed",
                                  "AuthenticationFailed", "AuthorizationFailure", "InvalidSecurity"})
_MISSING_BUCKET_CODES: Final = frozenset({"NoSuchBucket", "ContainerNotFound"})
_THROTTLE_CODES: Final = frozenset({"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
                                    "TooManyRequests", "ServerBusy", "RequestThrottled"})


def object_error(op: str, where: str, endpoint: str, e: BaseException) -> StorageError:
    """One line for a failed request, ``<op> <uri> (endpoint <endpoint>): <what went wrong>``, as a
    `StorageAccessError` (wrong credentials, a missing bucket: trying again cannot help), a `ThrottledError` (503
    SlowDown, 429: nothing done, try again after a pause), a `TransientStorageError` (no answer, a reset, a server
    error: try again, a write read back first) or a `StorageError` (anything else). obstore's own message is never
    quoted (it runs over many lines and can hold the access key id and the string that was signed): only the HTTP
    status, the store's error code (such as ``NoSuchBucket``) and the kind of failure are kept."""
    from obstore.exceptions import PermissionDeniedError, UnauthenticatedError

    text = str(e)
    found, code_found = _STATUS.search(text), _CODE.search(text)
    status = int(found.group(1) or found.group(2)) if found else None
    code = code_found.group(1) if code_found else None
    prefix = f"{op} {where} (endpoint {endpoint})"
    answer = f"HTTP {status}" + (f" {code}" if code else "") if status else (code or "")
    text = text.lower()
    if code in _MISSING_BUCKET_CODES:
        return StorageAccessError(f"{prefix}: the bucket does not exist ({answer})")
    if isinstance(e, PermissionDeniedError | UnauthenticatedError) or status in (401, 403) or code in _ACCESS_CODES:
        return StorageAccessError(f"{prefix}: access denied ({answer or type(e).__name__}); check the credentials "
                                  "and their permissions on the bucket")
    if status in (429, 503) or code in _THROTTLE_CODES:
        return ThrottledError(f"{prefix}: throttled by the store ({answer or 'slow down'})")
    if status is not None and status >= 500:
        return TransientStorageError(f"{prefix}: the store failed ({answer})")
    if status is None and any(word in text for word in _UNREACHABLE):
        cause = next((w for w in ("connection refused", "dns error", "timed out", "timeout", "connection reset")
                      if w in text), "no connection")
        return TransientStorageError(f"{prefix}: cannot reach the endpoint ({cause})")
    if isinstance(e, FileNotFoundError):
        return StorageError(f"{prefix}: not found" + (f" ({answer})" if answer else ""))
    return StorageError(f"{prefix}: {type(e).__name__}" + (f" ({answer})" if answer else ""))


__all__ = ["COPY", "DELETE", "GET", "HEAD", "KINDS", "LIST", "POST", "PRECONDITION_FAILED", "PUT", "RequestCounts",
           "difference", "object_error"]
