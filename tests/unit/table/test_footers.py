"""Footer reads: column paths without the schema object, no footer left waiting for the cyclic collector, and a
storage that fails told from a file whose bytes are damaged."""

from __future__ import annotations

import errno
import gc
import io
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from structlog.testing import capture_logs

from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.errors import StorageAccessError, StorageError, ThrottledError, TransientStorageError
from hudi_clusterd.ordering.quality import read_boxes
from hudi_clusterd.storage import Storage, open_storage
from hudi_clusterd.table.footers import FooterRanges, column_ranges_by_path, leaf_columns
from tests.harness.fault_injection import Fault, Rule, inject

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


# ------------------------------------------------------------------------------------------------ failures


@pytest.mark.parametrize(("fault", "raised"), [(Fault.TIMEOUT_BEFORE, TransientStorageError),
                                               (Fault.REPLY_LOST, TransientStorageError),
                                               (Fault.THROTTLED, ThrottledError),
                                               (Fault.REFUSED, StorageAccessError)])
def test_a_footer_the_storage_failed_to_read_raises_and_is_read_again(tmp_path: Path, fault: Fault,
                                                                      raised: type[StorageError]) -> None:
    # Given files of which the storage fails to read one, once
    files = _files(tmp_path, 3)
    storage = open_storage(str(tmp_path))
    faults = inject(storage, Rule(fault, files[1].relative_path, op="read"))
    ranges = FooterRanges(storage)
    # When their ranges are asked for, the storage's error comes out (no file is taken for damaged)
    with capture_logs() as logs, pytest.raises(raised, match="injected"):
        ranges.ranges(files, "x")
    assert [f for f, _, _ in faults.fired] == [fault] and logs == []
    # And nothing was kept of that call: the next one reads every footer, the failed one included
    assert ranges.ranges(files, "x") == {bf.relative_path: (float(i), float(i) + 1) for i, bf in enumerate(files)}


class _FailingReads(io.RawIOBase):
    """A file of 1000 bytes whose reads fail as a disk's or a network's do (EIO)."""

    at = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.at = 1000 + offset if whence == io.SEEK_END else offset
        return self.at

    def tell(self) -> int:
        return self.at

    def readinto(self, buffer: Any) -> int:
        raise OSError(errno.EIO, "Input/output error")


def test_an_os_error_of_reading_is_the_storage_s_not_damage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    files = _files(tmp_path, 1)
    storage = open_storage(str(tmp_path))
    monkeypatch.setattr(storage, "open_input_file", lambda rel: pa.PythonFile(_FailingReads(), mode="r"))
    with pytest.raises(StorageError, match=r"read .*f0-0_0-1-1_20260101000000000\.parquet: .*Input/output error"):
        column_ranges_by_path(storage, files, "x")


def _thrift_damaged(data: bytes) -> bytes:
    """The footer's thrift bytes turned to garbage, its length and magic kept (pyarrow raises an OSError)."""
    length = struct.unpack("<I", data[-8:-4])[0]
    return data[:-8 - length] + bytes(b ^ 0x55 for b in data[-8 - length:-8]) + data[-8:]


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "empty": lambda data: b"",
    "garbage": lambda data: b"\x00garbage" * (len(data) // 8),
    "truncated": lambda data: data[: len(data) // 2],
    "thrift": _thrift_damaged,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_footer_is_planned_around_with_a_warning(tmp_path: Path, damage: str) -> None:
    files = _files(tmp_path, 3)
    bad = tmp_path / files[1].relative_path
    bad.write_bytes(DAMAGE[damage](bad.read_bytes()))
    storage: Storage = open_storage(str(tmp_path))
    with capture_logs() as logs:
        found = FooterRanges(storage).ranges(files, "x")
    assert found == {files[0].relative_path: (0.0, 1.0), files[1].relative_path: None,
                     files[2].relative_path: (2.0, 3.0)}
    assert [(e["log_level"], e["file"]) for e in logs] == [("warning", files[1].relative_path)]
