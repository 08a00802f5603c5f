"""obstore's errors as one line each, naming the object and the endpoint and nothing else.

obstore's messages run over many lines (a debug dump of the request) and quote the store's answer, whose XML can
hold the access key id and the string that was signed. Only the HTTP status, the store's error code (such as
``NoSuchBucket`` or ``InvalidAccessKeyId``) and the kind of failure are kept, and the error class says whether
trying again can help: `StorageAccessError` (wrong credentials, a missing bucket: no), `ThrottledError` (503
SlowDown, 429: nothing done, yes after a pause), `TransientStorageError` (no answer, a reset, a server error: yes,
a write read back first) or `StorageError` (anything else).
"""

from __future__ import annotations

import re
from typing import Final

from hudi_clusterd.errors import StorageAccessError, StorageError, ThrottledError, TransientStorageError

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


def status_and_code(e: BaseException) -> tuple[int | None, str | None]:
    """The HTTP status and the store's error code an obstore error quotes, when it does."""
    text = str(e)
    found = _STATUS.search(text)
    status = int(found.group(1) or found.group(2)) if found else None
    code = _CODE.search(text)
    return status, code.group(1) if code else None


def object_error(op: str, where: str, endpoint: str, e: BaseException) -> StorageError:
    """One line for a failed request: ``<op> <uri> (endpoint <endpoint>): <what went wrong>``."""
    from obstore.exceptions import PermissionDeniedError, UnauthenticatedError

    status, code = status_and_code(e)
    prefix = f"{op} {where} (endpoint {endpoint})"
    answer = f"HTTP {status}" + (f" {code}" if code else "") if status else (code or "")
    text = str(e).lower()
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


__all__ = ["object_error", "status_and_code"]
