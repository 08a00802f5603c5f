"""Streams over one object: a random-access reader that fetches byte ranges (`RangeReader`), and a writer whose
object appears when it is closed (`UploadWriter`).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from hudi_clusterd.storage.requests import POST, PUT

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer
    from obstore import WritableFile

    from hudi_clusterd.storage.requests import RequestCounts

MIN_FETCH: Final = 64 * 1024
PART_BYTES: Final = 10 * 1024 * 1024
"""The part size of multipart uploads (S3 takes parts of 5 MiB and more), and the largest single ``PUT``."""
UPLOAD_CONCURRENCY: Final = 4


class RangeReader(io.RawIOBase):
    """A seekable reader of an object of ``size`` bytes; ``fetch(start, end)`` returns bytes ``[start, end)``.
    Each read is served from one fetch of at least `MIN_FETCH` bytes, kept for the reads that follow: a Parquet
    reader that asks for the footer and then for the columns it needs downloads those, never the whole file.
    ``tail``, the object's last bytes when the opener has them (a suffix-range ``GET`` also tells the size), serves
    the reads that fall inside it, the footer's first."""

    def __init__(self, fetch: Callable[[int, int], bytes], size: int, name: str, tail: bytes = b"") -> None:
        super().__init__()
        if len(tail) > size:
            raise ValueError(f"{name}: a tail of {len(tail)} bytes for an object of {size}")
        self._fetch = fetch
        self._size = size
        self._pos = 0
        self._buffer = tail
        self._buffer_start = size - len(tail)
        self.name = name

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def size(self) -> int:
        return self._size

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        origins = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}
        if whence not in origins:
            raise ValueError(f"{self.name}: invalid whence {whence}")
        pos = origins[whence] + offset
        if pos < 0:
            raise OSError(f"{self.name}: seek to {pos}, before the start of the object")
        self._pos = pos
        return pos

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        data = self._take(len(view))
        view[:len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        return self._take(self._size - self._pos)

    def _take(self, n: int) -> bytes:
        """Up to ``n`` bytes from the position (fewer at the end of the object), from the buffer or one fetch of at
        least `MIN_FETCH` bytes; the position moves past them."""
        n = min(n, self._size - self._pos)
        if n <= 0:
            return b""
        start, offset = self._pos, self._pos - self._buffer_start
        if offset >= 0 and offset + n <= len(self._buffer):
            data = self._buffer[offset:offset + n]
        else:
            fetched = self._fetch(start, min(self._size, start + max(n, MIN_FETCH)))
            if len(fetched) < n:
                raise OSError(f"{self.name}: the object ended after {start + len(fetched)} bytes, "
                              f"{self._size} were expected (changed while read?)")
            self._buffer, self._buffer_start = fetched, start
            data = fetched[:n]
        self._pos += n
        return data

    def close(self) -> None:
        self._buffer = b""
        super().close()


class UploadWriter(io.RawIOBase):
    """A write-only stream into obstore's buffered writer: one ``PUT`` on close up to `PART_BYTES`, else a multipart
    upload of `PART_BYTES` parts, completed (and only then visible) on close. Its requests are counted in
    ``requests`` once the object is complete (`upload_requests`); ``wrap`` turns the writer's errors into the
    storage's."""

    def __init__(self, writer: WritableFile, name: str, requests: RequestCounts,
                 wrap: Callable[[Exception], Exception]) -> None:
        super().__init__()
        self._writer = writer
        self._written = 0
        self._requests = requests
        self._wrap = wrap
        self.name = name

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._written

    def write(self, data: ReadableBuffer) -> int:
        if self.closed:
            raise ValueError(f"{self.name}: write to a closed stream")
        view = memoryview(data).cast("B")
        try:
            self._writer.write(view)
        except Exception as e:
            raise self._wrap(e) from e
        self._written += len(view)
        return len(view)

    def flush(self) -> None:
        """Nothing: the object is written whole when the stream is closed (a flush would cut a short part)."""

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._writer.close()
        except Exception as e:
            raise self._wrap(e) from e
        finally:
            super().close()
        for kind, n in upload_requests(self._written).items():
            self._requests.add(kind, n)


def upload_requests(total_bytes: int) -> dict[str, int]:
    """The requests an upload of ``total_bytes`` through `UploadWriter` made: one ``PUT`` up to `PART_BYTES`;
    else a multipart upload: a ``POST`` to start it, one ``PUT`` per part, a ``POST`` to complete it."""
    if total_bytes <= PART_BYTES:
        return {PUT: 1}
    return {POST: 2, PUT: math.ceil(total_bytes / PART_BYTES)}


__all__ = ["MIN_FETCH", "PART_BYTES", "UPLOAD_CONCURRENCY", "RangeReader", "UploadWriter", "upload_requests"]
