"""Column ranges from parquet footers (statistics only; data pages are never read).

A footer that cannot be read because the storage failed (it did not answer, asked to slow down, refused this
process, or the file is gone: a `StorageError`, an `OSError` of the file's reads) raises that `StorageError`, and
the caller's planning stops: a range left out for such a file would plan the table differently while the store
is unwell, and the next attempt reads it again. Only a file whose bytes do not decode as Parquet (damaged) is
planned without its range, with a warning naming it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.errors import StorageError
from hudi_clusterd.formats.parquet_stats import column_chunks, leaf_columns
from hudi_clusterd.storage import Storage

log = structlog.get_logger(__name__)

ColumnRange = tuple[Any, Any]

__all__ = ["ColumnRange", "FooterRanges", "column_ranges_by_path", "leaf_columns"]


class _Reads:
    """The reads of an open file, their `OSError` (a disk's, a network's) turned into a `StorageError` naming the
    file, so that an `OSError` raised by pyarrow's Parquet reader above it is a decoding error: damaged bytes."""

    def __init__(self, f: pa.NativeFile, where: str) -> None:
        self._f = f
        self._where = where
        self.closed = False

    def _io(self, op: str, call: Any, *args: int) -> Any:
        try:
            return call(*args)
        except OSError as e:
            raise StorageError(f"{op} {self._where}: {e}") from e

    def read(self, n: int = -1) -> bytes:
        data: bytes = self._io("read", self._f.read, *([n] if n >= 0 else []))
        return data

    def seek(self, pos: int, whence: int = 0) -> int:
        at: int = self._io("seek", self._f.seek, pos, whence)
        return at

    def tell(self) -> int:
        at: int = self._io("tell", self._f.tell)
        return at

    def close(self) -> None:
        self.closed = True  # the file itself is closed by whoever opened it


def _file_range(storage: Storage, bf: BaseFile, column: str) -> ColumnRange | None:
    try:
        with storage.open_input_file(bf.relative_path) as f:
            md = pq.ParquetFile(pa.PythonFile(_Reads(f, storage.full_path(bf.relative_path)), mode="r")).metadata
    except (pa.ArrowException, OSError, ValueError) as e:  # damaged bytes: the file just has no known range
        log.warning("damaged parquet footer; planned without its column range", file=bf.relative_path,
                    error=str(e))
        return None
    index = leaf_columns(md).get(column)
    if index is None:
        return None
    lo: Any = None
    hi: Any = None
    for chunk in column_chunks(md, index):
        if chunk.value_count == 0:
            continue
        if not chunk.has_min_max:
            if chunk.has_statistics and chunk.null_count == chunk.num_rows:
                continue  # all nulls: no range to contribute
            return None
        chunk_min, chunk_max = chunk.min, chunk.max
        lo = chunk_min if lo is None or chunk_min < lo else lo
        hi = chunk_max if hi is None or chunk_max > hi else hi
    return None if lo is None else (lo, hi)


class FooterRanges:
    """Column ranges of a table's base files, each read once: base files never change after they are written.

    ``ranges`` reads what it has not seen (in parallel) and forgets files no longer asked about, so a
    long-running daemon holds entries only for the files of its latest listing."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._known: dict[tuple[str, str], ColumnRange | None] = {}
        self._lock = threading.Lock()

    def ranges(self, files: Iterable[BaseFile], column: str) -> dict[str, ColumnRange | None]:
        """(min, max) of ``column`` per file's relative path; None where the footer does not tell or is damaged.
        A footer the storage failed to read raises its `StorageError`; nothing of this call is kept then."""
        wanted = {bf.relative_path: bf for bf in files}
        with self._lock:
            self._known = {k: v for k, v in self._known.items() if k[0] in wanted}
            missing = [bf for path, bf in wanted.items() if (path, column) not in self._known]
        found = column_ranges_by_path(self.storage, missing, column)
        with self._lock:
            for path, value in found.items():
                self._known[(path, column)] = value
            return {path: self._known.get((path, column)) for path in wanted}


def column_ranges_by_path(storage: Storage, files: Iterable[BaseFile], column: str, max_workers: int = 16
                          ) -> dict[str, ColumnRange | None]:
    """``FooterRanges.ranges`` without the memory: every file's footer read, in parallel."""
    todo = list(files)
    if not todo:
        return {}
    with ThreadPoolExecutor(max_workers=min(max_workers, len(todo))) as pool:
        return dict(pool.map(lambda bf: (bf.relative_path, _file_range(storage, bf, column)), todo))
