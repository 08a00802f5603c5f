"""Footer reads: column paths without the schema object, and no footer left waiting for the cyclic collector."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.ordering.quality import read_boxes
from hudi_clusterd.storage import open_storage
from hudi_clusterd.table.footers import column_ranges_by_path, leaf_columns

NESTED = pa.table({
    "id": pa.array([1, 2], pa.int64()),
    "s": pa.array([{"x": 1.0, "tags": ["a"]}, {"x": 2.0, "tags": []}]),
    "m": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64())),
    "events": pa.array([[{"at": 3}], None]),
})


def _schema_paths(md: pq.FileMetaData) -> dict[str, int]:
    return {md.schema.column(i).path: i for i in range(md.num_columns)}


@pytest.mark.parametrize("rows", [2, 0], ids=["with-row-groups", "empty"])
def test_leaf_columns_are_the_schema_paths(tmp_path: Path, rows: int) -> None:
    path = tmp_path / "f.parquet"
    pq.write_table(NESTED.slice(0, rows), path)
    md = pq.read_metadata(path)
    assert leaf_columns(md) == _schema_paths(md)
    assert "s.tags.list.element" in leaf_columns(md) and "m.key_value.value" in leaf_columns(md)


@pytest.fixture
def no_cyclic_collection() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _waiting_footers() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, pq.FileMetaData))


def _files(tmp_path: Path, n: int) -> list[BaseFile]:
    out = []
    (tmp_path / "p").mkdir()
    for i in range(n):
        name = f"f{i}-0_0-1-1_20260101000000000.parquet"
        pq.write_table(pa.table({"x": [float(i), float(i) + 1], "y": ["a", "b"]}), tmp_path / "p" / name)
        bf = BaseFile.parse("p", name, (tmp_path / "p" / name).stat().st_size)
        assert bf is not None
        out.append(bf)
    return out


def test_planning_footer_reads_leave_no_footer_behind(tmp_path: Path, no_cyclic_collection: None) -> None:
    files = _files(tmp_path, 20)
    found = column_ranges_by_path(open_storage(str(tmp_path)), files, "x")
    assert found == {bf.relative_path: (float(i), float(i) + 1) for i, bf in enumerate(files)}
    assert _waiting_footers() == 0


def test_layout_footer_reads_leave_no_footer_behind(tmp_path: Path, no_cyclic_collection: None) -> None:
    files = _files(tmp_path, 20)
    boxes = read_boxes([str(tmp_path / bf.relative_path) for bf in files], ["x"])
    assert boxes.file_low[:, 0].tolist() == [float(i) for i in range(20)]
    assert _waiting_footers() == 0
