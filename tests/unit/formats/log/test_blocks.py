"""The log blocks we build (empty DELETE, ROLLBACK, HFILE_DATA) are Hudi's bytes and round-trip; data
blocks are read by their type."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.errors import MetadataTableError
from hudi_clusterd.formats.hfile import SCHEMA_KEY, read_hfile
from hudi_clusterd.formats.log import (
    DATA_BLOCK_TYPES,
    BlockType,
    HeaderKey,
    LogBlock,
    block_records,
    decode_log_file,
    empty_delete_block,
    encode_block,
    hfile_block_records,
    hfile_data_block,
    rollback_block,
)
from tests.support import FUZZ, raw_log_blocks

SCHEMA = '{"type":"record","name":"HoodieMetadataRecord","fields":[]}'


def test_empty_delete_block_bytes() -> None:
    data = encode_block(empty_delete_block("00000000000000000"))
    assert data.hex() == (
        "234855444923" "0000000000000042" "00000001" "00000001"  # magic, length 66, version 1, DELETE
        "00000001" "00000000" "00000011" + b"00000000000000000".hex()  # header: INSTANT_TIME
        + "0000000000000009" "00000003" "00000001" "00"  # content: version 3, 1 byte, empty Avro array
        "00000000" "0000000000000048")  # no footer, reverse pointer 72


def test_rollback_block_bytes_and_round_trip() -> None:
    block = rollback_block("20240101000000123", "20231231000000456")
    data = encode_block(block)
    assert data[:6] == b"#HUDI#" and struct.unpack_from(">qii", data, 6)[1:] == (1, BlockType.COMMAND)
    header = struct.pack(">i", 3) + b"".join(struct.pack(">ii", k, len(v)) + v.encode() for k, v in (
        (0, "20240101000000123"), (1, "20231231000000456"), (3, "0")))
    assert data[22:22 + len(header)] == header
    assert data[22 + len(header):] == bytes(8) + bytes(4) + struct.pack(">q", len(data) - 8)
    [back] = decode_log_file(data, source="x")
    assert back == block and list(back.header) == [HeaderKey.INSTANT_TIME, HeaderKey.TARGET_INSTANT_TIME,
                                                   HeaderKey.COMMAND_BLOCK_TYPE]


def test_hfile_data_block_sorts_by_key_bytes_and_refuses_duplicates_and_nothing() -> None:
    records = [("region=us", b"\x01"), ("__all_partitions__", b"\x02"), (".", b"\x03"), ("é", b"\x04"),
               ("\uffff", b"\x05"), ("\U0001f600", b"\x06")]
    block = hfile_data_block("20240101000000000", SCHEMA, records)
    # UTF-8 byte order: U+FFFF (ef bf bf) sorts before U+1F600 (f0 9f 98 80), unlike Java's UTF-16 order
    assert [k for k, _ in hfile_block_records(block)] == [".", "__all_partitions__", "region=us", "é", "\uffff",
                                                          "\U0001f600"]
    assert block.header == {HeaderKey.INSTANT_TIME: "20240101000000000", HeaderKey.SCHEMA: SCHEMA}
    assert read_hfile(block.content).file_info[SCHEMA_KEY] == SCHEMA.encode()
    with pytest.raises(MetadataTableError, match="appears twice"):
        hfile_data_block("1", SCHEMA, [("a", b""), ("b", b""), ("a", b"x")])
    with pytest.raises(MetadataTableError, match="at least one record"):
        hfile_data_block("1", SCHEMA, [])
    with pytest.raises(MetadataTableError, match=r"x\.log: a DELETE block holds no HFile records"):
        hfile_block_records(empty_delete_block("1"), source="x.log")


@FUZZ
@given(st.dictionaries(st.text(max_size=30), st.binary(max_size=60), min_size=1, max_size=40),
       st.sampled_from(["GZ", "NONE"]), st.integers(64, 4096))
def test_hfile_data_block_round_trips(records: dict[str, bytes], codec: str, block_size: int) -> None:
    block = hfile_data_block("20240101000000000", SCHEMA, list(records.items()), codec=codec,
                             block_size=block_size)
    [back] = decode_log_file(encode_block(block), source="x")
    assert back == block
    assert hfile_block_records(back) == sorted(records.items(), key=lambda kv: kv[0].encode())


_HEADERS = st.dictionaries(st.sampled_from(list(HeaderKey)), st.text(max_size=20), max_size=5)


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(list(BlockType)), _HEADERS, st.binary(max_size=50), _HEADERS),
                max_size=4))
def test_encode_decode_round_trip(specs: list[tuple[BlockType, dict[HeaderKey, str], bytes,
                                                    dict[HeaderKey, str]]]) -> None:
    blocks = [LogBlock(t, h, c, f) for t, h, c, f in specs]
    data = b"".join(encode_block(b) for b in blocks)
    back = decode_log_file(data, source="x")
    assert back == blocks
    assert [list(b.header) for b in back] == [list(b.header) for b in blocks]  # file order kept
    assert [(o, r) for o, _, r in raw_log_blocks(data)] == [(o, n + 6) for o, n, _ in raw_log_blocks(data)]


def test_empty_file_has_no_blocks() -> None:
    assert decode_log_file(b"", source="x") == []


def test_data_blocks_are_read_by_their_type() -> None:
    block = hfile_data_block("20240101000000000", SCHEMA, [("b", b"2"), ("a", b"1")], create_time_ms=1)
    assert block_records(block, source="x.log") == hfile_block_records(block) == [("a", b"1"), ("b", b"2")]
    assert BlockType.HFILE_DATA in DATA_BLOCK_TYPES and BlockType.DELETE not in DATA_BLOCK_TYPES
    with pytest.raises(MetadataTableError, match=r"x\.log: a DELETE block holds no records"):
        block_records(empty_delete_block("1"), source="x.log")
    with pytest.raises(MetadataTableError, match=r"<log block>: a COMMAND block holds no records"):
        block_records(rollback_block("2", "1"))
    with pytest.raises(MetadataTableError, match=r"x\.log: a AVRO_DATA block is not supported"):
        block_records(LogBlock(BlockType.AVRO_DATA, {HeaderKey.INSTANT_TIME: "1"}, b""), source="x.log")
