"""Hostile commit JSON (fuzzed bytes and structures, hostile values): a valid model or a MetadataDecodeError
naming the file; a writer's regular commit still decodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
from hudi_clusterd.errors import MetadataDecodeError
from tests.builders import JSON, small_table
from tests.support import FUZZ

WRITE_STAT_KEYS = ["fileId", "path", "partitionPath", "prevCommit", "numWrites", "numInserts", "totalWriteBytes",
                   "fileSizeInBytes", "minEventTime", "maxEventTime", "runtimeStats"]


def _assert_valid_commit(meta: CommitMetadata) -> None:
    """A decoded model holds the types its users rely on, and survives a write/read round trip."""
    for partition, stats in meta.partition_to_write_stats.items():
        assert isinstance(partition, str)
        for ws in stats:
            assert isinstance(ws, WriteStat) and isinstance(ws.file_id, str) and isinstance(ws.prev_commit, str)
            assert ws.path is None or isinstance(ws.path, str)
            assert ws.partition_path is None or isinstance(ws.partition_path, str)
            for n in (ws.num_writes, ws.num_inserts, ws.total_write_bytes, ws.file_size_in_bytes):
                assert type(n) is int
            for t in (ws.min_event_time, ws.max_event_time):
                assert t is None or type(t) is int
            hash((ws.partition_path, ws.file_id))
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.extra_metadata.items())
    assert isinstance(meta.operation_type, str)
    assert meta.replaced_groups() is not None
    assert CommitMetadata.from_json_bytes(meta.to_json_bytes(), "again") == meta


def _decode_commit_or_error(data: bytes) -> None:
    try:
        meta = CommitMetadata.from_json_bytes(data, "/t/.hoodie/20240101000000000.commit")
    except MetadataDecodeError as e:
        assert "20240101000000000.commit" in str(e)
        return
    _assert_valid_commit(meta)


@FUZZ
@given(st.binary(max_size=200))
def test_commit_from_json_bytes_fuzzed_bytes_decode_or_metadata_error(data: bytes) -> None:
    _decode_commit_or_error(data)


COMMIT_SHAPED = st.fixed_dictionaries(
    {"partitionToWriteStats": JSON | st.dictionaries(
        st.text(max_size=4), st.lists(st.dictionaries(st.sampled_from(WRITE_STAT_KEYS), JSON, max_size=6)) | JSON,
        max_size=2)},
    optional={"extraMetadata": JSON, "operationType": JSON, "compacted": JSON, "partitionToReplaceFileIds": JSON},
)


@FUZZ
@given(COMMIT_SHAPED)
def test_commit_from_json_bytes_fuzzed_structure_decodes_or_metadata_error(doc: dict[str, Any]) -> None:
    _decode_commit_or_error(json.dumps(doc).encode())


@pytest.mark.parametrize("data", [
    b'{"partitionToWriteStats": {"p": [{"fileId": "f", "numWrites": 1e999}]}}',  # int(inf): OverflowError
    b"[" * 100_000,  # json.loads: RecursionError
    b'{"partitionToWriteStats": {"p": [{"fileId": "f", "path": ["a"]}]}}',
    b'{"partitionToWriteStats": {"p": [{"fileId": "f", "partitionPath": {"a": 1}}]}}',
    b'{"partitionToWriteStats": {"p": [{"fileId": "f", "minEventTime": "soon"}]}}',
])
def test_commit_from_json_bytes_hostile_values_raise_metadata_error_naming_file(data: bytes) -> None:
    with pytest.raises(MetadataDecodeError, match=r"20240101000000000\.commit"):
        CommitMetadata.from_json_bytes(data, "/t/.hoodie/20240101000000000.commit")


def test_commit_metadata_round_trip_of_regular_commit_still_works(tmp_path: Path) -> None:
    """The stricter decoder still reads what a writer produces (guards the fixes above)."""
    gen = small_table(tmp_path, commits=1)
    commit = next((gen.base / ".hoodie").glob("*.commit"))
    meta = CommitMetadata.from_json_bytes(commit.read_bytes(), commit.name)
    assert meta.operation_type == Operation.INSERT and len(meta.write_stats()) == 2
    _assert_valid_commit(meta)
