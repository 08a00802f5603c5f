from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.formats.avro_schema import META_FIELDS, arrow_to_avro_json
from hudi_clusterd.table.base_file_writer import BaseFileTaskWriter, BaseFileWriteSpec, TaskIds, constant_strings
from hudi_clusterd.table.markers import list_markers
from hudi_clusterd.table.partition_metadata import read_partition_metadata

T = "20240101000000001"
DATA = pa.schema([("id", pa.int64()), ("v", pa.int32()), ("part", pa.string())])


def _spec(base: Path, **kw: object) -> BaseFileWriteSpec:
    return BaseFileWriteSpec(storage=str(base), instant_time=T, data_schema=DATA,
                             avro_schema_json=arrow_to_avro_json(DATA, "t", with_meta_fields=True), **kw)  # type: ignore[arg-type]


def _rows(ids: list[int], part: str, v_type: pa.DataType | None = None) -> pa.RecordBatch:
    v_type = v_type or pa.int32()
    return pa.record_batch({
        "_hoodie_record_key": [str(i) for i in ids], "_hoodie_partition_path": [part] * len(ids),
        "id": pa.array(ids, pa.int64()), "v": pa.array([i % 7 for i in ids], v_type), "part": [part] * len(ids),
    })


def test_writer_one_file_group_per_partition_with_meta_and_footers(tmp_path: Path) -> None:
    # Given rows of two partitions in one task (grouped by partition), written with an int8 'v' column
    writer = BaseFileTaskWriter(_spec(tmp_path), TaskIds(3, 7, 11), file_id_prefix="pfx")
    batches = [_rows([1, 2], "a=1", pa.int8()), _rows([3], "a=1", pa.int8()), _rows([5, 4], "b=2", pa.int8())]
    # When written
    files = list(writer.write(batches))
    # Then each partition got one new file group named <prefix>-<n>_<p>-<s>-<a>_<instant>.parquet
    assert [(f.file_id, f.partition_path, f.num_rows) for f in files] == [("pfx-0", "a=1", 3), ("pfx-1", "b=2", 2)]
    for f in files:
        bf = BaseFile.parse(f.partition_path, f.path.rsplit("/", 1)[1], 0)
        assert bf is not None and bf.write_token == "3-7-11" and bf.instant_time == T
        assert f.size == (tmp_path / f.path).stat().st_size
        assert read_partition_metadata(writer.storage, f.partition_path) == {"commitTime": T, "partitionDepth": "1"}
    first = pq.read_table(tmp_path / files[0].path)
    assert first.schema.names == [*META_FIELDS, "id", "v", "part"]
    assert first.schema.field("v").type == pa.int32()
    d = first.to_pydict()
    assert d["_hoodie_commit_time"] == [T] * 3
    assert d["_hoodie_commit_seqno"] == [f"{T}_3_0", f"{T}_3_1", f"{T}_3_2"]
    assert d["_hoodie_record_key"] == ["1", "2", "3"]
    assert d["_hoodie_partition_path"] == ["a=1"] * 3
    assert d["_hoodie_file_name"] == [files[0].path.rsplit("/", 1)[1]] * 3
    second = pq.read_table(tmp_path / files[1].path).to_pydict()
    assert second["_hoodie_commit_seqno"] == [f"{T}_3_3", f"{T}_3_4"]  # the row index runs across the task
    meta = pq.read_metadata(tmp_path / files[1].path).metadata
    assert meta[b"hoodie_min_record_key"] == b"4" and meta[b"hoodie_max_record_key"] == b"5"
    assert meta[b"writer.model.name"] == b"avro"
    assert meta[b"parquet.avro.schema"].decode() == arrow_to_avro_json(DATA, "t", with_meta_fields=True)
    # And a marker was written for every file
    assert sorted(m.data_file_path for m in list_markers(writer.storage, T)) == sorted(f.path for f in files)


def test_writer_rolls_over_at_max_file_bytes(tmp_path: Path) -> None:
    # Given 20k rows in one partition and a 40 KB target size
    spec = _spec(tmp_path, max_file_bytes=40_000, row_group_bytes=16_000, compression="none",
                 bloom_filter_enabled=False)  # Hudi's filter is a fixed 431 KB, not counted against the target
    batches = [_rows(list(range(i, i + 1000)), "p") for i in range(0, 20_000, 1000)]
    files = list(BaseFileTaskWriter(spec, TaskIds(0, 1, 2), file_id_prefix="x").write(batches))
    # Then several file groups of about the target size hold every row once
    assert len(files) > 3
    assert [f.file_id for f in files] == [f"x-{i}" for i in range(len(files))]
    assert all(f.size <= 40_000 * 1.25 for f in files)
    assert all(f.size >= 40_000 * 0.75 for f in files[:-1])
    ids = [i for f in files for i in pq.read_table(tmp_path / f.path, columns=["id"]).column("id").to_pylist()]
    assert sorted(ids) == list(range(20_000))


def _write_sizes(tmp_path: Path, rows: int, **kw: object) -> list[int]:
    spec = _spec(tmp_path, max_file_bytes=40_000, row_group_bytes=12_000, compression="none",
                 bloom_filter_enabled=False, **kw)
    batches = [_rows(list(range(i, min(i + 500, rows))), "p") for i in range(0, rows, 500)]
    files = list(BaseFileTaskWriter(spec, TaskIds(0, 1, 2)).write(batches))
    ids = [i for f in files for i in pq.read_table(tmp_path / f.path, columns=["id"]).column("id").to_pylist()]
    assert sorted(ids) == list(range(rows))
    return [f.size for f in files]


def test_writer_expected_rows_split_output_into_equal_files(tmp_path: Path) -> None:
    # Given a task whose output is about 1.3 times the target: rolling at the target alone leaves a small remainder
    per_row = sum(_write_sizes(tmp_path / "probe", 2_000)) / 2_000
    rows = int(40_000 * 1.3 / per_row)
    plain = _write_sizes(tmp_path / "plain", rows)
    assert len(plain) == 2 and min(plain) < 0.45 * max(plain)
    # When the writer is told how many rows the task gets
    balanced = _write_sizes(tmp_path / "balanced", rows, expected_task_rows=rows)
    # Then it writes as many files, of about equal size, each within the target
    assert len(balanced) == 2
    assert max(balanced) <= 40_000 * 1.25
    assert min(balanced) >= 0.8 * max(balanced)


def test_writer_more_rows_than_expected_fill_the_last_file_to_the_target(tmp_path: Path) -> None:
    # Given an estimate far below the rows that come, no file exceeds the target and no file is tiny but the last
    sizes = _write_sizes(tmp_path, 12_000, expected_task_rows=1_000)
    assert all(s <= 40_000 * 1.25 for s in sizes)
    assert all(s >= 40_000 * 0.6 for s in sizes[:-1])


def test_writer_constant_partition_path_for_rows_without_the_column(tmp_path: Path) -> None:
    batch = _rows([1, 2], "x").drop_columns(["_hoodie_partition_path"])
    files = list(BaseFileTaskWriter(_spec(tmp_path, partition_path="a=1"), TaskIds(0, 1, 2)).write([batch]))
    assert [f.partition_path for f in files] == ["a=1"]
    assert pq.read_table(tmp_path / files[0].path).column("_hoodie_partition_path").to_pylist() == ["a=1"] * 2


def test_writer_preserve_mode_keeps_meta_and_rewrites_file_name(tmp_path: Path) -> None:
    batch = _rows([1, 2], "p").append_column("_hoodie_commit_time", pa.array(["20230101000000000"] * 2)) \
        .append_column("_hoodie_commit_seqno", pa.array(["20230101000000000_0_5", "20230101000000000_0_6"])) \
        .append_column("_hoodie_file_name", pa.array(["old.parquet"] * 2))
    files = list(BaseFileTaskWriter(_spec(tmp_path, preserve_meta_fields=True), TaskIds(0, 1, 2)).write([batch]))
    d = pq.read_table(tmp_path / files[0].path).to_pydict()
    assert d["_hoodie_commit_time"] == ["20230101000000000"] * 2
    assert d["_hoodie_commit_seqno"] == ["20230101000000000_0_5", "20230101000000000_0_6"]
    assert d["_hoodie_file_name"] == [files[0].path.rsplit("/", 1)[1]] * 2


def test_writer_without_meta_fields_writes_only_file_name(tmp_path: Path) -> None:
    files = list(BaseFileTaskWriter(_spec(tmp_path, populate_meta_fields=False), TaskIds(0, 1, 2))
                 .write([_rows([1], "p")]))
    d = pq.read_table(tmp_path / files[0].path).to_pydict()
    assert [d[m] for m in META_FIELDS[:4]] == [[None]] * 4
    assert d["_hoodie_file_name"] == [files[0].path.rsplit("/", 1)[1]]
    assert b"hoodie_min_record_key" not in pq.read_metadata(tmp_path / files[0].path).metadata


def test_writer_null_partition_path_fails(tmp_path: Path) -> None:
    batch = _rows([1], "p").set_column(1, "_hoodie_partition_path", pa.array([None], pa.string()))
    with pytest.raises(ExecutionError, match="null partition path"):
        list(BaseFileTaskWriter(_spec(tmp_path), TaskIds(0, 1, 2)).write([batch]))


def test_writer_required_column_with_nulls_names_it(tmp_path: Path) -> None:
    data = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    spec = BaseFileWriteSpec(str(tmp_path), T, data, arrow_to_avro_json(data, "t", with_meta_fields=True))
    batch = pa.record_batch({"_hoodie_record_key": ["1"], "_hoodie_partition_path": [""],
                             "id": pa.array([None], pa.int64())})
    with pytest.raises(ExecutionError, match="'id' is required"):
        list(BaseFileTaskWriter(spec, TaskIds(0, 1, 2)).write([batch]))


def test_writer_failure_leaves_marker_for_rollback(tmp_path: Path) -> None:
    def batches() -> object:
        yield _rows([1], "p")
        raise RuntimeError("task killed")

    writer = BaseFileTaskWriter(_spec(tmp_path), TaskIds(0, 1, 2))
    with pytest.raises(RuntimeError):
        list(writer.write(batches()))  # type: ignore[arg-type]
    markers = list_markers(writer.storage, T)
    assert len(markers) == 1 and (tmp_path / markers[0].data_file_path).exists()


def test_constant_strings_builds_repeated_values() -> None:
    assert constant_strings("ab", 3).to_pylist() == ["ab", "ab", "ab"]
    assert constant_strings("x", 0).to_pylist() == []
