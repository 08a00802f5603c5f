from __future__ import annotations

import json

import pytest

from hudi_clusterd.domain.commit import CommitMetadata, Operation, RuntimeStats, WriteStat
from hudi_clusterd.errors import MetadataDecodeError

HUDI_WRITE_STAT_FIELDS = [
    "fileId", "path", "cdcStats", "prevCommit", "numWrites", "numDeletes", "numUpdateWrites", "numInserts",
    "totalWriteBytes", "totalWriteErrors", "tempPath", "partitionPath", "totalLogRecords", "totalLogFilesCompacted",
    "totalLogSizeCompacted", "totalUpdatedRecordsCompacted", "totalLogBlocks", "totalCorruptLogBlock",
    "totalRollbackBlocks", "fileSizeInBytes", "minEventTime", "maxEventTime", "runtimeStats",
]


def test_commit_metadata_round_trips_with_hudi_field_order() -> None:
    ws = WriteStat("f-0", "p/f-0_0-1-2_20240101000000001.parquet", "p", num_writes=3, num_inserts=3,
                   total_write_bytes=10, file_size_in_bytes=10, runtime_stats=RuntimeStats(0, 0, 5))
    meta = CommitMetadata({"p": (ws,)}, {"schema": "{}"}, Operation.CLUSTER,
                          partition_to_replace_file_ids={"p": ("old-0",)})
    data = meta.to_json_bytes()
    d = json.loads(data)
    assert list(d) == ["partitionToWriteStats", "compacted", "extraMetadata", "operationType",
                       "partitionToReplaceFileIds"]
    assert list(d["partitionToWriteStats"]["p"][0]) == HUDI_WRITE_STAT_FIELDS
    assert CommitMetadata.from_json_bytes(data, "x") == meta


def test_commit_metadata_golden_replacecommit_decodes(golden_tables) -> None:  # type: ignore[no-untyped-def]
    path = golden_tables / "v6_simplekeygen_nonhivestyle_overwritetable/.hoodie/20240707001303088.replacecommit"
    meta = CommitMetadata.from_json_bytes(path.read_bytes(), str(path))
    assert meta.operation_type == "INSERT_OVERWRITE_TABLE"
    assert meta.replaced_groups() == {("30", "d398fae1-c0e6-4098-8124-f55f7098bdba-0"),
                                      ("20", "88163884-fef0-4aab-865d-c72327a8a1d5-0"),
                                      ("10", "4f2685a3-614f-49ca-9b2b-e1cb9fb61f27-0")}
    # our encoding carries every field Hudi wrote
    original = json.loads(path.read_bytes())
    ours = json.loads(meta.to_json_bytes())
    assert ours["partitionToWriteStats"] == original["partitionToWriteStats"]
    assert ours["extraMetadata"] == original["extraMetadata"]


@pytest.mark.parametrize("payload", [b"{\"partitionToWriteStats\": ", b"not json", b"[1, 2]", b"\xff\xfe"])
def test_commit_metadata_bad_bytes_raise_naming_source(payload: bytes) -> None:
    with pytest.raises(MetadataDecodeError, match=r"20240101000000001\.commit"):
        CommitMetadata.from_json_bytes(payload, ".hoodie/20240101000000001.commit")


def test_commit_metadata_empty_file_is_empty_metadata() -> None:
    assert CommitMetadata.from_json_bytes(b"", "x").write_stats() == []

