"""The base file writer's merge mode: rows naming an existing file id become one new slice of that file group."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from hudi_clusterd.formats.avro_schema import arrow_to_avro_json
from hudi_clusterd.storage import open_storage
from hudi_clusterd.table.base_file_writer import FILE_ID_COLUMN, BaseFileTaskWriter, BaseFileWriteSpec, TaskIds
from hudi_clusterd.table.markers import IOType, list_markers

T = "20240101000000002"
OLD = "20240101000000001"
DATA = pa.schema([("id", pa.int64()), ("v", pa.int32())])


def _spec(base: Path) -> BaseFileWriteSpec:
    return BaseFileWriteSpec(storage=str(base), instant_time=T, data_schema=DATA,
                             avro_schema_json=arrow_to_avro_json(DATA, "t", with_meta_fields=True),
                             preserve_meta_fields=True)


def _rows(ids: list[int], file_id: str | None, carried: bool, part: str = "p") -> pa.RecordBatch:
    n = len(ids)
    return pa.record_batch({
        "_hoodie_commit_time": pa.array([OLD if carried else None] * n, pa.string()),
        "_hoodie_commit_seqno": pa.array([f"{OLD}_0_{i}" if carried else None for i in ids], pa.string()),
        "_hoodie_record_key": [str(i) for i in ids], "_hoodie_partition_path": [part] * n,
        FILE_ID_COLUMN: pa.array([file_id] * n, pa.string()),
        "id": pa.array(ids, pa.int64()), "v": pa.array([i * 10 for i in ids], pa.int32()),
    })


def test_writer_merge_rows_over_several_batches_become_one_new_slice(tmp_path: Path) -> None:
    # Given the rows of file group "fg-1" split over three batches (carried-over and new rows), then inserts
    batches = [_rows([1, 2], "fg-1", carried=True), _rows([3], "fg-1", carried=False),
               _rows([4], "fg-1", carried=True), _rows([8, 9], None, carried=False)]
    # When one task writes them
    files = list(BaseFileTaskWriter(_spec(tmp_path), TaskIds(2, 5, 6), file_id_prefix="new").write(batches))
    # Then fg-1 got exactly one new slice, and the inserts a new file group
    assert [(f.file_id, f.num_rows) for f in files] == [("fg-1", 4), ("new-0", 2)]
    assert files[0].path == f"p/fg-1_2-5-6_{T}.parquet"
    d = pq.read_table(tmp_path / files[0].path).to_pydict()
    # And carried-over rows keep commit time and seqno; the new row gets this instant's
    assert d["_hoodie_commit_time"] == [OLD, OLD, T, OLD]
    assert d["_hoodie_commit_seqno"][:2] == [f"{OLD}_0_1", f"{OLD}_0_2"]
    assert d["_hoodie_commit_seqno"][2].startswith(f"{T}_2_") and d["_hoodie_commit_seqno"][3] == f"{OLD}_0_4"
    assert d["_hoodie_file_name"] == [files[0].path.rsplit("/", 1)[1]] * 4
    assert FILE_ID_COLUMN not in d
    # And the slice's marker says MERGE, the new group's CREATE
    markers = {m.data_file_name: m.io_type for m in list_markers(open_storage(str(tmp_path)), T)}
    assert markers == {files[0].path.rsplit("/", 1)[1]: IOType.MERGE, files[1].path.rsplit("/", 1)[1]: IOType.CREATE}


def test_writer_merge_consecutive_groups_each_get_their_own_file(tmp_path: Path) -> None:
    # Given two file groups of one partition and one of another, back to back in one batch stream
    batches = [_rows([1, 2], "a", carried=True), _rows([3], "b", carried=True), _rows([4], "c", True, part="q")]
    # When written
    files = list(BaseFileTaskWriter(_spec(tmp_path), TaskIds(0, 1, 1)).write(batches))
    # Then each group is one file of its own id and partition
    assert [(f.partition_path, f.file_id, f.num_rows) for f in files] == [("p", "a", 2), ("p", "b", 1),
                                                                          ("q", "c", 1)]
