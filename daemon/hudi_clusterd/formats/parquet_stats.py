"""The column chunk statistics of a parquet footer, walked the same way for every reader of them: planning's
column ranges (``table.footers``), the layout-quality boxes (``layout.quality``) and the metadata table's column
statistics (``formats.metadata.column_stats``).

The walker reports what the footer holds and nothing more: each caller keeps its own rules for chunks without
statistics or without min/max, all-null chunks, NaN bounds and the like. Nothing here reads a data page.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow.parquet as pq


@dataclass(frozen=True, slots=True)
class LogicalType:
    """A leaf column's logical type annotation: pyarrow's name of it (``"NONE"`` without one, ``"STRING"``,
    ``"DECIMAL"``, ``"TIMESTAMP"``...) and its parameters (``precision``, ``scale``, ``timeUnit``,
    ``isAdjustedToUTC``...; empty without an annotation)."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


NO_LOGICAL_TYPE = LogicalType("NONE")


@dataclass(frozen=True, slots=True)
class ChunkStats:
    """The footer's statistics of one column chunk (one leaf column in one row group).

    ``min``/``max`` are pyarrow's values in the column's logical type (``datetime.date``, ``Decimal``, ``str``...)
    and ``min_raw``/``max_raw`` the physical ones (``int``, ``float``, ``bytes``...); all four are None without
    min/max and are converted only when read."""

    path: str
    """The dotted leaf path (``path_in_schema``)."""
    column: int
    """The leaf column's index."""
    row_group: int
    physical_type: str
    logical_type: LogicalType | None
    """None unless the walk was asked for logical types (they come from the file's schema)."""
    num_rows: int
    """Rows of the row group."""
    value_count: int
    """Values of the chunk, nulls included (``num_values``)."""
    compressed_size: int
    uncompressed_size: int
    has_statistics: bool
    """The chunk has statistics at all (and the writer's are trusted, as pyarrow's ``is_stats_set`` says)."""
    has_min_max: bool
    null_count: int | None
    """None when the statistics hold no null count (or there are no statistics)."""
    statistics: Any = field(default=None, repr=False, compare=False)
    """pyarrow's ``Statistics`` of the chunk, or None: the source of the min/max properties."""

    @property
    def min(self) -> Any:
        return self.statistics.min if self.has_min_max else None

    @property
    def max(self) -> Any:
        return self.statistics.max if self.has_min_max else None

    @property
    def min_raw(self) -> Any:
        return self.statistics.min_raw if self.has_min_max else None

    @property
    def max_raw(self) -> Any:
        return self.statistics.max_raw if self.has_min_max else None


def leaf_columns(md: pq.FileMetaData) -> dict[str, int]:
    """Column index by dotted leaf path, from the first row group's column chunks.

    ``FileMetaData.schema`` would do, but the schema object and the metadata refer to each other, so the
    metadata (with its footer, about 0.9 MB on a Hudi base file of 86,000 rows: the bloom filter) then waits for
    the cyclic garbage collector: reading 400 footers that way held 0.5 GiB at once. A file without row groups
    has no rows, and only then is the schema read."""
    if md.num_row_groups == 0:
        return {md.schema.column(i).path: i for i in range(md.num_columns)}
    group = md.row_group(0)
    return {group.column(i).path_in_schema: i for i in range(md.num_columns)}


def logical_type(md: pq.FileMetaData, column: int) -> LogicalType:
    """The logical type annotation of leaf ``column``, from the file's schema."""
    annotation = md.schema.column(column).logical_type
    name = str(annotation.type)
    if name == "NONE":
        return NO_LOGICAL_TYPE
    return LogicalType(name, json.loads(annotation.to_json()))


def column_chunks(md: pq.FileMetaData, column: int, *, logical: bool = False) -> Iterator[ChunkStats]:
    """The statistics of leaf ``column`` in every row group, in row-group order; with ``logical``, each carries
    the column's logical type (read once, from the schema)."""
    annotation = logical_type(md, column) if logical and md.num_row_groups else None
    for r in range(md.num_row_groups):
        group = md.row_group(r)
        chunk = group.column(column)
        stats = chunk.statistics
        has_min_max = stats is not None and bool(stats.has_min_max)
        yield ChunkStats(
            path=chunk.path_in_schema,
            column=column,
            row_group=r,
            physical_type=str(chunk.physical_type),
            logical_type=annotation,
            num_rows=int(group.num_rows),
            value_count=int(chunk.num_values),
            compressed_size=int(chunk.total_compressed_size),
            uncompressed_size=int(chunk.total_uncompressed_size),
            has_statistics=stats is not None,
            has_min_max=has_min_max,
            null_count=int(stats.null_count) if stats is not None and stats.has_null_count else None,
            statistics=stats,
        )
