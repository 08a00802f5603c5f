"""Column ranges from parquet footers (statistics only; data pages are never read)."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow.parquet as pq
import structlog

from hudi_clusterd.domain.file_group import BaseFile, FileGroupId
from hudi_clusterd.io.storage import Storage

log = structlog.get_logger(__name__)

ColumnRange = tuple[Any, Any]


def _file_range(storage: Storage, bf: BaseFile, column: str) -> ColumnRange | None:
    try:
        with storage.fs.open_input_file(storage.full_path(bf.relative_path)) as f:
            md = pq.ParquetFile(f).metadata
    except Exception as e:  # a damaged footer must not stop planning: the file just has no known range
        log.warning("cannot read parquet footer", file=bf.relative_path, error=str(e))
        return None
    schema = md.schema
    index = next((i for i in range(md.num_columns) if schema.column(i).path == column), None)
    if index is None:
        return None
    lo: Any = None
    hi: Any = None
    for r in range(md.num_row_groups):
        col = md.row_group(r).column(index)
        if col.num_values == 0:
            continue
        stats = col.statistics
        if stats is None or not stats.has_min_max:
            if stats is not None and stats.null_count == md.row_group(r).num_rows:
                continue  # all nulls: no range to contribute
            return None
        lo = stats.min if lo is None or stats.min < lo else lo
        hi = stats.max if hi is None or stats.max > hi else hi
    return None if lo is None else (lo, hi)


def column_ranges(
    storage: Storage, files: Iterable[BaseFile], column: str, max_workers: int = 16
) -> dict[FileGroupId, ColumnRange | None]:
    """(min, max) of ``column`` per base file's group, read from footers in parallel; None where unknown."""
    todo = list(files)
    if not todo:
        return {}
    with ThreadPoolExecutor(max_workers=min(max_workers, len(todo))) as pool:
        results = pool.map(lambda bf: (bf.group_id, _file_range(storage, bf, column)), todo)
        return dict(results)

