"""A metadata log block of ours carries the record schema its file slice already carries: the base HFile's, else
the latest log block's, else the table version's default (Hudi 1.0.x's for version 8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.formats.avro import decode_commit_metadata_v2
from hudi_clusterd.formats.hfile import SCHEMA_KEY, write_hfile
from hudi_clusterd.formats.log import HeaderKey, LogFileName, decode_log_file, encode_block, hfile_data_block
from hudi_clusterd.formats.metadata import records as rec
from hudi_clusterd.formats.metadata.table_format import HUDI_0_15, HUDI_1_0, HUDI_1_2, MetadataTableFormat
from hudi_clusterd.storage import open_storage
from hudi_clusterd.table.metadata.writer import MetadataTable
from tests.support import column_stats_fields, new_metadata_table

T = "20261126010101000"
EARLIER = "20261126000000000"


def _table(base: Path, version: int) -> MetadataTable:
    """A data table of ``version`` with a ``files`` partition, its metadata table as Hudi initialises it."""
    config = TableConfig.for_new_table(name="t", record_key_fields=["id"], partition_fields=["p"],
                                       table_version=version)
    config = TableConfig({**config.raw, "hoodie.table.metadata.partitions": "files"})
    new_metadata_table(base, 6 if version < 8 else 9)
    props = base / ".hoodie" / "metadata" / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.table.version=9", f"hoodie.table.version={version}"))
    times = iter(["20261126010101500", "20261126010202500"])
    storage = open_storage(str(base))
    storage.makedirs("p=a")
    return MetadataTable(storage, config, before_write=lambda: None, new_time=lambda: next(times))


def _complete(base: Path, instant: str, action: str) -> None:
    timeline = base / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    for name in (f"{instant}.{action}.requested", f"{instant}.{action}.inflight",
                 f"{instant}_{instant[:-3]}999.{action}"):
        (timeline / name).write_bytes(b"")


def _files_records(schema: rec.RecordSchema) -> list[tuple[str, bytes]]:
    return [(str(r["key"]), rec.encode(schema, r)) for r in rec.files_records({"p=a": {"old.parquet": 100}})]


def _cluster(base: Path, mdt: MetadataTable) -> tuple[str, str]:
    """Commit a clustering's metadata deltacommit; the SCHEMA header of our log block and the deltacommit's
    ``extraMetadata.schema``."""
    path = base / "p=a" / f"f1-0_0-1-1_{T}.parquet"
    path.write_bytes(b"x" * 1234)
    stat = WriteStat(file_id="f1-0", path=f"p=a/{path.name}", partition_path="p=a", file_size_in_bytes=1234)
    meta = CommitMetadata({"p=a": (stat,)}, {}, Operation.CLUSTER, partition_to_replace_file_ids={"p=a": ("f0-0",)})
    done = mdt.commit(T, meta, {"p=a": [f"p=a/{path.name}"]}, [T])
    [ours] = done.log_files
    [block] = decode_log_file((base / ours).read_bytes())
    timeline = base / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    completed = next(timeline.glob(f"{T}_*.deltacommit"))
    extra = decode_commit_metadata_v2(completed.read_bytes(), str(completed)).extra_metadata
    return block.header[HeaderKey.SCHEMA], extra["schema"]


def test_a_slice_whose_base_hfile_has_1_0s_schema_gets_a_block_of_that_schema(tmp_path: Path) -> None:
    # Given a version-9 table whose files slice Hudi 1.0.x compacted (its base HFile in 1.0.x's 10-field schema)
    mdt = _table(tmp_path, 9)
    _complete(tmp_path, EARLIER, "commit")
    cells = [(k.encode(), v) for k, v in _files_records(HUDI_1_0.schema)]
    hfile = tmp_path / ".hoodie" / "metadata" / "files" / f"files-0000-0_0-0-0_{EARLIER}.hfile"
    hfile.write_bytes(write_hfile(cells, {SCHEMA_KEY: HUDI_1_0.schema.block_text.encode()}))
    # When the daemon commits a clustering
    block_schema, commit_schema = _cluster(tmp_path, mdt)
    # Then its block carries the base's schema (10 column-stats fields), not the version's default
    assert block_schema == HUDI_1_0.schema.block_text != HUDI_1_2.schema.block_text
    assert len(column_stats_fields(rec.schema_from_block(block_schema))) == 10
    assert json.loads(commit_schema) == json.loads(HUDI_1_0.schema.text)
    # and the base and our block merge
    assert mdt.live_files([T]) == {"p=a": {"old.parquet": 100, f"f1-0_0-1-1_{T}.parquet": 1234}}


def test_a_slice_whose_latest_log_block_has_1_2s_schema_keeps_it_on_version_8(tmp_path: Path) -> None:
    # Given a version-8 table Hudi 1.2 writes: its files slice has no base file, its latest block 1.2's schema
    mdt = _table(tmp_path, 8)
    _complete(tmp_path, EARLIER, "deltacommit")
    log = tmp_path / ".hoodie" / "metadata" / "files" / str(LogFileName("files-0000-0", EARLIER, 1, "0-1-0"))
    log.write_bytes(encode_block(hfile_data_block(EARLIER, HUDI_1_2.schema.block_text,
                                                  _files_records(HUDI_1_2.schema))))
    block_schema, _commit_schema = _cluster(tmp_path, mdt)
    assert block_schema == HUDI_1_2.schema.block_text
    assert mdt.live_files([EARLIER, T]) == {"p=a": {"old.parquet": 100, f"f1-0_0-1-1_{T}.parquet": 1234}}


@pytest.mark.parametrize(("version", "expected"), [(8, HUDI_1_0), (9, HUDI_1_2)])
def test_a_slice_carrying_no_schema_gets_the_versions_default(tmp_path: Path, version: int,
                                                              expected: MetadataTableFormat) -> None:
    # Given a metadata table right after Hudi initialised it (a delete block, which names no schema)
    mdt = _table(tmp_path, version)
    block_schema, commit_schema = _cluster(tmp_path, mdt)
    assert block_schema == expected.schema.block_text
    assert commit_schema == expected.schema.text
    fields = column_stats_fields(rec.schema_from_block(block_schema))
    assert len(fields) == (10 if version == 8 else 11)
    assert HUDI_0_15.schema.block_text != block_schema
