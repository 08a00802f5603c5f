"""A data table's log file read into its blocks: AVRO_DATA and PARQUET_DATA blocks as Arrow batches in the reader
schema, DELETE, ROLLBACK and CORRUPT blocks; CDC skipped; what the merge does not serve refused in one line."""

from __future__ import annotations

import datetime
import decimal
import json
import struct

import pyarrow as pa
import pytest

from hudi_clusterd.errors import LogFileError
from hudi_clusterd.formats.log import (
    BlockType,
    CorruptBlock,
    DataBlock,
    DeleteBlock,
    DeletedRecord,
    HeaderKey,
    LogBlock,
    OrderingValue,
    RollbackBlock,
    encode_block,
    hfile_data_block,
    read_data_log,
    rollback_block,
)
from hudi_clusterd.formats.log.arrow_blocks import AVRO_CHUNK_RECORDS
from tests.harness.mor_logs import avro_block, delete_block, ordering_bytes, parquet_block, record_schema

SOURCE = "/t/p/.f1-0_20240101000000000.log.1_0-1-2"
DECIMAL = {"type": "fixed", "name": "fixed", "namespace": "hoodie.t.t_record.amount", "size": 5,
           "logicalType": "decimal", "precision": 10, "scale": 2}
TS = {"type": "long", "logicalType": "timestamp-micros"}
DATE = {"type": "int", "logicalType": "date"}
OLD = record_schema([("v", "long"), ("amount", DECIMAL), ("at", TS), ("day", DATE),
                     ("tags", {"type": "array", "items": "string"}), ("attrs", {"type": "map", "values": "long"})])
NEW = record_schema([*[(f["name"], f["type"][1]) for f in OLD["fields"][5:]], ("note", "string")])
ROW = {"_hoodie_commit_time": "20240101000000001", "_hoodie_commit_seqno": "20240101000000001_0_1",
       "_hoodie_record_key": "k1", "_hoodie_partition_path": "p", "_hoodie_file_name": "f1-0", "v": 5,
       "amount": decimal.Decimal("12.34"), "at": datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.UTC),
       "day": datetime.date(2024, 1, 2), "tags": ["a", "b"], "attrs": {"x": 1}}


def _log(*blocks: LogBlock) -> bytes:
    return b"".join(encode_block(b) for b in blocks)


def test_avro_records_are_resolved_to_the_reader_schema() -> None:
    data = _log(avro_block("20240101000000001", OLD, [ROW, {**ROW, "_hoodie_record_key": "k2", "v": None}]))
    [block] = read_data_log(data, source=SOURCE, reader_schema=json.dumps(NEW))
    assert isinstance(block, DataBlock) and block.instant == "20240101000000001" and block.offset == 0
    rows = block.records.to_pylist()
    assert [r["_hoodie_record_key"] for r in rows] == ["k1", "k2"]
    assert rows[0] == {**ROW, "attrs": [("x", 1)], "note": None}
    assert rows[1]["v"] is None
    assert block.records.schema.field("amount").type == pa.decimal128(10, 2)
    assert block.records.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert block.records.schema.names[-1] == "note"


def test_avro_records_read_with_their_own_schema_without_a_reader_schema() -> None:
    [block] = read_data_log(_log(avro_block("1", OLD, [ROW])), source=SOURCE)
    assert isinstance(block, DataBlock) and block.records.schema.names == [f["name"] for f in OLD["fields"]]


def test_a_block_of_more_records_than_a_chunk_is_decoded_whole_in_order() -> None:
    rows = [{**ROW, "_hoodie_record_key": f"k{i}", "v": i} for i in range(AVRO_CHUNK_RECORDS * 2 + 5)]
    [block] = read_data_log(_log(avro_block("1", OLD, rows)), source=SOURCE)
    assert isinstance(block, DataBlock) and block.records.num_rows == len(rows)
    assert block.records.column("v").to_pylist() == list(range(len(rows)))
    assert block.records.slice(AVRO_CHUNK_RECORDS, 1).to_pylist()[0] == {
        **ROW, "_hoodie_record_key": f"k{AVRO_CHUNK_RECORDS}", "v": AVRO_CHUNK_RECORDS, "attrs": [("x", 1)]}


def test_a_record_that_cannot_be_resolved_is_refused() -> None:
    reader = record_schema([("v", "boolean")])
    with pytest.raises(LogFileError, match=rf"^{SOURCE}: AVRO_DATA block at byte 0: AVRO_DATA record 0 cannot be "
                                           "read with the reader schema"):
        read_data_log(_log(avro_block("1", OLD, [ROW])), source=SOURCE, reader_schema=json.dumps(reader))


def test_parquet_blocks_are_shaped_to_the_reader_schema() -> None:
    table = pa.table({"_hoodie_record_key": ["k1"], "v": pa.array([3], pa.int32()), "extra": ["x"]})
    [block] = read_data_log(_log(parquet_block("7", table, OLD)), source=SOURCE,
                            reader_schema=json.dumps(record_schema([("v", "long"), ("note", "string")])))
    assert isinstance(block, DataBlock) and block.instant == "7"
    assert block.records.to_pylist() == [{"_hoodie_commit_time": None, "_hoodie_commit_seqno": None,
                                          "_hoodie_record_key": "k1", "_hoodie_partition_path": None,
                                          "_hoodie_file_name": None, "v": 3, "note": None}]


def test_delete_rollback_and_corrupt_blocks_in_file_order_and_cdc_left_out() -> None:
    cdc = LogBlock(BlockType.CDC_DATA, {HeaderKey.INSTANT_TIME: "3"}, b"anything")
    good = _log(avro_block("1", OLD, [ROW]), delete_block("2", [("k1", "p", ordering_bytes("long", 9))]), cdc)
    torn = encode_block(rollback_block("5", "2"))[:-3]
    blocks = read_data_log(good + _log(rollback_block("4", "1")) + torn, source=SOURCE)
    rollback_at = len(good)
    assert [type(b) for b in blocks] == [DataBlock, DeleteBlock, RollbackBlock, CorruptBlock]
    deleted = (DeletedRecord("k1", "p", OrderingValue("long", 9)),)
    assert blocks[1] == DeleteBlock(SOURCE, len(_log(avro_block("1", OLD, [ROW]))), "2", deleted)
    assert blocks[2] == RollbackBlock(SOURCE, rollback_at, "4", "1")
    assert blocks[3] == CorruptBlock(SOURCE, rollback_at + len(_log(rollback_block("4", "1"))), len(torn))


@pytest.mark.parametrize(("block", "message"), [
    (hfile_data_block("1", "{}", [("k", b"v")], create_time_ms=1),
     "HFILE_DATA block at byte 0: HFILE data blocks are not read on a data table"),
    (avro_block("1", OLD, [ROW], COMPACTED_BLOCK_TIMES="0,1"),
     "AVRO_DATA block at byte 0 is a log compaction's block"),
    (avro_block("1", OLD, [ROW], IS_PARTIAL="true"), "AVRO_DATA block at byte 0 holds partial updates"),
    (LogBlock(BlockType.COMMAND, {HeaderKey.INSTANT_TIME: "1", HeaderKey.TARGET_INSTANT_TIME: "0",
                                  HeaderKey.COMMAND_BLOCK_TYPE: "1"}, b""), "COMMAND block at byte 0 is command '1'"),
    (LogBlock(BlockType.AVRO_DATA, {HeaderKey.INSTANT_TIME: "1"}, b""), "AVRO_DATA block has no SCHEMA header"),
    (LogBlock(BlockType.AVRO_DATA, {HeaderKey.SCHEMA: json.dumps(OLD)}, b""), "has no INSTANT_TIME header"),
    (LogBlock(BlockType.AVRO_DATA, {HeaderKey.INSTANT_TIME: "1", HeaderKey.SCHEMA: json.dumps(OLD)},
              struct.pack(">iii", 3, 2, 100)), "AVRO_DATA record 0 of 100 bytes runs past the block"),
    (LogBlock(BlockType.PARQUET_DATA, {HeaderKey.INSTANT_TIME: "1"}, b"PAR1nope"),
     "PARQUET_DATA content is not a parquet file"),
])
def test_blocks_not_served_are_refused_naming_the_file_and_offset(block: LogBlock, message: str) -> None:
    with pytest.raises(LogFileError) as caught:
        read_data_log(_log(block), source=SOURCE)
    text = str(caught.value)
    assert text.startswith(f"{SOURCE}: ") and message in text and "\n" not in text
