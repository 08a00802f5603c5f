"""Streams over one object: a random-access reader that fetches byte ranges, and a writer whose object appears
when it is closed.

`RangeReader` serves each read from one ranged ``GET`` (at least `MIN_FETCH` bytes, kept for the reads that
follow): a Parquet reader that asks for the footer and then for the columns it needs downloads those, never the
whole file. It starts from the object's last `MIN_FETCH` bytes when its opener fetched them (one suffix-range
``GET`` tells the object's size too, so no ``HEAD`` is needed, and the footer is read from them).

`UploadWriter` hands bytes to obstore's buffered writer: an object up to `PART_BYTES` is one ``PUT`` when the
stream is closed; a larger one is a multipart upload of `PART_BYTES` parts, completed (and only then
visible) when the stream is closed.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer
    from obstore import WritableFile

MIN_FETCH: Final = 64 * 1024
PART_BYTES: Final = 10 * 1024 * 1024
"""The part size of multipart uploads (S3 takes parts of 5 MiB and more), and the largest single ``PUT``."""
UPLOAD_CONCURRENCY: Final = 4


class RangeReader(io.RawIOBase):
    """A seekable reader of an object of ``size`` bytes; ``fetch(start, end)`` returns bytes ``[start, end)``.
    ``tail``, the object's last bytes when the opener has them, serves the reads that fall inside it."""

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
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._size + offset
        else:
            raise ValueError(f"{self.name}: invalid whence {whence}")
        if pos < 0:
            raise OSError(f"{self.name}: seek to {pos}, before the start of the object")
        self._pos = pos
        return pos

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        n = min(len(view), self._size - self._pos)
        if n <= 0:
            return 0
        data = self._read(self._pos, n)
        view[:n] = data
        self._pos += n
        return n

    def readall(self) -> bytes:
        n = self._size - self._pos
        if n <= 0:
            return b""
        data = self._read(self._pos, n)
        self._pos += n
        return data

    def _read(self, start: int, n: int) -> bytes:
        """``n`` bytes from ``start`` (inside the object), from the buffer or one fetch of at least `MIN_FETCH`."""
        offset = start - self._buffer_start
        if offset >= 0 and offset + n <= len(self._buffer):
            return self._buffer[offset:offset + n]
        end = min(self._size, start + max(n, MIN_FETCH))
        data = self._fetch(start, end)
        if len(data) < n:
            raise OSError(f"{self.name}: the object ended after {start + len(data)} bytes, "
                          f"{self._size} were expected (changed while read?)")
        self._buffer, self._buffer_start = data, start
        return data[:n]

    def close(self) -> None:
        self._buffer = b""
        super().close()


class UploadWriter(io.RawIOBase):
    """A write-only stream into obstore's buffered writer; ``done(total_bytes)`` is called once the object is
    complete (the upload finished on close), ``wrap`` turns the writer's errors into the storage's."""

    def __init__(self, writer: WritableFile, name: str, done: Callable[[int], None],
                 wrap: Callable[[Exception], Exception]) -> None:
        super().__init__()
        self._writer = writer
        self._written = 0
        self._done = done
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
        self._done(self._written)


def upload_requests(total_bytes: int) -> dict[str, int]:
    """The requests an upload of ``total_bytes`` through `UploadWriter` made: one ``PUT`` up to `PART_BYTES`;
    else a multipart upload: a ``POST`` to start it, one ``PUT`` per part, a ``POST`` to complete it."""
    if total_bytes <= PART_BYTES:
        return {"PUT": 1}
    return {"POST": 2, "PUT": math.ceil(total_bytes / PART_BYTES)}


__all__ = ["MIN_FETCH", "PART_BYTES", "UPLOAD_CONCURRENCY", "RangeReader", "UploadWriter", "upload_requests"]
