"""The parquet footer-statistics walker: every chunk of the asked columns, column by column and row group by row
group, with what the footer says of it (and nothing it does not say)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.formats.parquet_stats import (
    NO_LOGICAL_TYPE,
    ChunkStats,
    LogicalType,
    column_chunks,
    leaf_columns,
    logical_type,
)

TABLE = pa.table({
    "i": pa.array([5, None, 1, 7, None, None], pa.int64()),
    "s": pa.array(["b", "a", None, "d", "c", "e"]),
    "nulls": pa.array([None] * 6, pa.int32()),
    "day": pa.array([dt.date(2024, 1, d) for d in (3, 1, 2, 9, 8, 7)], pa.date32()),
    "amount": pa.array([Decimal("1.50"), Decimal("-2.25"), None, Decimal("0.00"), None, Decimal("9.99")],
                       pa.decimal128(9, 2)),
    "at": pa.array([1, 2, 3, 4, 5, 6], pa.timestamp("us", tz="UTC")),
    "st": pa.array([{"x": float(n)} for n in (3, 2, 1, 6, 5, 4)]),
    "tags": pa.array([["p"], [], None, ["q", "r"], ["z"], ["a"]]),
})


def _footer(tmp_path: Path, table: pa.Table = TABLE, **kwargs: object) -> pq.FileMetaData:
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, row_group_size=3, **kwargs)
    return pq.read_metadata(path)


def chunk_statistics(md: pq.FileMetaData, columns: Iterable[int] | None = None) -> Iterator[ChunkStats]:
    """Every chunk of ``columns`` (default: every leaf column), column by column in the given order."""
    for column in range(md.num_columns) if columns is None else columns:
        yield from column_chunks(md, column)


def _by_path(chunks: list[ChunkStats]) -> dict[str, list[ChunkStats]]:
    out: dict[str, list[ChunkStats]] = {}
    for c in chunks:
        out.setdefault(c.path, []).append(c)
    return out


def test_every_chunk_column_by_column_then_row_group_by_row_group(tmp_path: Path) -> None:
    md = _footer(tmp_path)
    chunks = list(chunk_statistics(md))
    leaves = leaf_columns(md)
    assert list(leaves) == ["i", "s", "nulls", "day", "amount", "at", "st.x", "tags.list.element"]
    assert [(c.column, c.row_group) for c in chunks] == [(i, r) for i in range(md.num_columns) for r in range(2)]
    assert [c.path for c in chunks] == [p for p in leaves for _ in range(2)]
    for c in chunks:
        meta = md.row_group(c.row_group).column(c.column)
        assert c.num_rows == 3 and c.value_count == meta.num_values
        assert (c.compressed_size, c.uncompressed_size) == (meta.total_compressed_size, meta.total_uncompressed_size)
        assert c.physical_type == meta.physical_type and c.has_statistics
        assert c.logical_type is None  # not asked for


def test_min_max_and_null_counts_as_the_footer_gives_them(tmp_path: Path) -> None:
    chunks = _by_path(list(chunk_statistics(_footer(tmp_path))))
    i0, i1 = chunks["i"]
    assert (i0.min, i0.max, i0.null_count, i0.has_min_max) == (1, 5, 1, True)
    assert (i1.min, i1.max, i1.null_count) == (7, 7, 2)
    assert [(c.min, c.max, c.min_raw, c.max_raw) for c in chunks["s"]] == [("a", "b", b"a", b"b"),
                                                                            ("c", "e", b"c", b"e")]
    for c in chunks["nulls"]:  # all nulls: statistics without min/max
        assert (c.has_statistics, c.has_min_max, c.null_count, c.value_count) == (True, False, 3, 3)
        assert (c.min, c.max, c.min_raw, c.max_raw) == (None, None, None, None)
    day = chunks["day"][0]
    assert (day.min, day.max) == (dt.date(2024, 1, 1), dt.date(2024, 1, 3))
    assert (day.min_raw, day.max_raw) == (19723, 19725)  # days since the epoch
    amount = chunks["amount"][0]
    assert (amount.min, amount.max) == (Decimal("-2.25"), Decimal("1.50"))
    assert chunks["at"][1].min == dt.datetime(1970, 1, 1, 0, 0, 0, 4, tzinfo=dt.UTC)
    assert chunks["at"][1].min_raw == 4
    assert [(c.min, c.max) for c in chunks["st.x"]] == [(1.0, 3.0), (4.0, 6.0)]
    tags = chunks["tags.list.element"]
    assert [c.value_count for c in tags] == [3, 4]  # one entry per list slot: empty and null lists count too
    assert [(c.min, c.max) for c in tags] == [("p", "p"), ("a", "z")]


def test_logical_types_only_when_asked(tmp_path: Path) -> None:
    md = _footer(tmp_path)
    leaves = leaf_columns(md)
    assert logical_type(md, leaves["i"]) is NO_LOGICAL_TYPE
    assert logical_type(md, leaves["s"]) == LogicalType("STRING", {"Type": "String"})
    amount = logical_type(md, leaves["amount"])
    assert (amount.name, amount.params["precision"], amount.params["scale"]) == ("DECIMAL", 9, 2)
    at = logical_type(md, leaves["at"])
    assert (at.name, at.params["timeUnit"], at.params["isAdjustedToUTC"]) == ("TIMESTAMP", "microseconds", True)
    assert logical_type(md, leaves["day"]).name == "DATE"
    asked = list(column_chunks(md, leaves["amount"], logical=True))
    assert [c.logical_type for c in asked] == [amount, amount]
    assert [c.logical_type for c in column_chunks(md, leaves["amount"])] == [None, None]


def test_chosen_columns_in_the_given_order(tmp_path: Path) -> None:
    md = _footer(tmp_path)
    leaves = leaf_columns(md)
    chunks = list(chunk_statistics(md, [leaves["st.x"], leaves["i"]]))
    assert [(c.path, c.row_group) for c in chunks] == [("st.x", 0), ("st.x", 1), ("i", 0), ("i", 1)]
    assert list(chunk_statistics(md, [])) == []


def test_a_file_without_statistics(tmp_path: Path) -> None:
    md = _footer(tmp_path, write_statistics=False)
    for c in chunk_statistics(md):
        assert (c.has_statistics, c.has_min_max, c.null_count) == (False, False, None)
        assert (c.min, c.max, c.min_raw, c.max_raw) == (None, None, None, None)
        assert c.value_count > 0 and c.compressed_size > 0


@pytest.mark.parametrize("rows", [6, 0], ids=["with-row-groups", "empty"])
def test_leaf_columns_with_and_without_row_groups(tmp_path: Path, rows: int) -> None:
    md = _footer(tmp_path, TABLE.slice(0, rows))
    assert leaf_columns(md) == {md.schema.column(i).path: i for i in range(md.num_columns)}
    assert len(list(chunk_statistics(md))) == md.num_row_groups * md.num_columns
