"""Hudi log files of the metadata table: every golden log file decodes and re-encodes to its bytes, the blocks
we build are the ones Hudi builds, log file names parse as Hudi parses them, and damaged files fail with an
error naming the file and offset."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.errors import MetadataTableError
from hudi_clusterd.formats.hfile import SCHEMA_KEY, HFileLayout, read_hfile
from hudi_clusterd.formats.log_blocks import (
    BlockType,
    HeaderKey,
    LogBlock,
    LogFileName,
    decode_log_file,
    empty_delete_block,
    encode_block,
    hfile_block_records,
    hfile_data_block,
    rollback_block,
)
from tests.support import FUZZ

INIT_TOKEN = "0-0-0"


@pytest.fixture(scope="module")
def golden_logs(golden_tables: Path) -> list[Path]:
    """Every log file of the golden tables' metadata tables."""
    logs = sorted(p for mdt in golden_tables.glob("*/.hoodie/metadata") for p in mdt.rglob(".*.log.*")
                  if ".hoodie/metadata/.hoodie" not in str(p))
    assert len(logs) > 300, "too few golden MDT log files found"
    return logs


def _raw_blocks(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, block length, reverse pointer) of every block, read with struct alone."""
    out = []
    pos = 0
    while pos < len(data):
        length = struct.unpack_from(">q", data, pos + 6)[0]
        end = pos + 14 + length
        out.append((pos, length, struct.unpack_from(">q", data, end - 8)[0]))
        pos = end
    assert pos == len(data)
    return out


# ------------------------------------------------------------------------------------------------- golden


def test_every_golden_log_file_decodes_and_reencodes_to_its_bytes(golden_logs: list[Path]) -> None:
    counts: dict[BlockType, int] = {}
    for path in golden_logs:
        data = path.read_bytes()
        blocks = decode_log_file(data, source=str(path))
        raw = _raw_blocks(data)
        assert len(blocks) == len(raw) >= 1, path
        for block, (_offset, length, reverse) in zip(blocks, raw, strict=True):
            encoded = encode_block(block)
            assert len(encoded) == length + 14 and reverse == length + 6
            counts[block.block_type] = counts.get(block.block_type, 0) + 1
            assert block.footer == {}
            assert HeaderKey.INSTANT_TIME in block.header
        assert b"".join(encode_block(b) for b in blocks) == data, path
    assert set(counts) == {BlockType.DELETE, BlockType.HFILE_DATA}
    assert counts[BlockType.HFILE_DATA] > 100


def test_golden_init_files_are_our_empty_delete_block(golden_logs: list[Path]) -> None:
    inits = [p for p in golden_logs if p.stat().st_size == 80]
    assert len(inits) > 50
    for path in golden_logs:
        name = LogFileName.parse(path.name)
        assert name is not None, path
        assert (path in inits) == (name.write_token == INIT_TOKEN), path
        if path in inits:
            assert path.read_bytes() == encode_block(empty_delete_block(name.base_instant)), path
            assert len(encode_block(empty_delete_block(name.base_instant))) == 80


def test_golden_hfile_blocks_are_rebuilt_byte_for_byte(golden_logs: list[Path]) -> None:
    rebuilt = 0
    for path in golden_logs:
        for i, block in enumerate(decode_log_file(path.read_bytes(), source=str(path))):
            if block.block_type != BlockType.HFILE_DATA:
                continue
            source = f"{path}#{i}"
            records = hfile_block_records(block, source=source)
            contents = read_hfile(block.content, source=source)
            schema = block.header[HeaderKey.SCHEMA]
            assert contents.file_info[SCHEMA_KEY] == schema.encode(), source
            assert set(block.header) == {HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA}
            name = LogFileName.parse(path.name)
            assert name is not None and block.header[HeaderKey.INSTANT_TIME] == name.base_instant
            ours = hfile_data_block(name.base_instant, schema, records[::-1], create_time_ms=contents.create_time_ms,
                                    layout=HFileLayout.HUDI_1_2)
            assert ours.content == block.content, source
            assert dict(ours.header) == dict(block.header)
            assert ours.block_type == block.block_type and ours.footer == {}
            assert read_hfile(hfile_data_block(name.base_instant, schema, records).content).cells == contents.cells
            rebuilt += 1
    assert rebuilt > 100


def test_golden_log_file_names_round_trip(golden_logs: list[Path]) -> None:
    for path in golden_logs:
        name = LogFileName.parse(path.name)
        assert name is not None and str(name) == path.name
        assert name.version == 1 and path.name.startswith(f".{name.file_id}_{name.base_instant}.log.1_")


# ----------------------------------------------------------------------------------------------- blocks


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
    assert [(o, r) for o, _, r in _raw_blocks(data)] == [(o, n + 6) for o, n, _ in _raw_blocks(data)]


def test_empty_file_has_no_blocks() -> None:
    assert decode_log_file(b"", source="x") == []


# ------------------------------------------------------------------------------------------------ names


@pytest.mark.parametrize(("name", "parts"), [
    (".files-0000-0_20260307162454799.log.1_3-243-630", ("files-0000-0", "20260307162454799", 1, "3-243-630")),
    (".files-0000-0_00000000000000000.log.1_0-0-0", ("files-0000-0", "00000000000000000", 1, "0-0-0")),
    (".e1d239c0-049d-43de-a138-e1915a3e29a7-0_20240101.log.12_1-0-1",
     ("e1d239c0-049d-43de-a138-e1915a3e29a7-0", "20240101", 12, "1-0-1")),
    (".f1_.log.0_1-2-3", ("f1", "", 0, "1-2-3")),
    # Hudi's pattern ends the file id at the first '_' (the rest goes to the instant)
    (".files_0000-0_20260307162454799.log.1_3-243-630", ("files", "0000-0_20260307162454799", 1, "3-243-630")),
])
def test_log_file_names_parse(name: str, parts: tuple[str, str, int, str]) -> None:
    parsed = LogFileName.parse(name)
    assert parsed == LogFileName(*parts) and str(parsed) == name


@pytest.mark.parametrize("name", [
    "files-0000-0_20260307162454799.log.1_3-243-630",  # no leading dot
    ".files-0000-0_20260307162454799.log.1",  # no write token
    ".files-0000-0_20260307162454799.archive.1_3-243-630",
    ".files-0000-0_20260307162454799.log.1_3-243-630.cdc",
    ".files-0000-0_20260307162454799.log.1_3-243",
    ".files-0000-0_2026.0307.log.1_3-243-630",
    ".files-0000-0_20260307162454799.log.1_3-243-630\n",
    ".files-0000-0_20260307162454799.log.\u0661_3-243-630",  # a non-ASCII digit
    ".files-0000-0_20260307162454799.hfile",
    "",
])
def test_other_names_do_not_parse(name: str) -> None:
    assert LogFileName.parse(name) is None


def test_bad_log_file_name_parts_are_refused() -> None:
    for parts in [("a_b", "1", 1, "1-0-1"), ("a", "1.2", 1, "1-0-1"), ("a", "1", -1, "1-0-1"), ("a", "1", 1, "x")]:
        with pytest.raises(ValueError):
            LogFileName(*parts)


@FUZZ
@given(st.from_regex(r"[A-Za-z0-9-]{1,20}", fullmatch=True), st.from_regex(r"[0-9]{0,17}", fullmatch=True),
       st.integers(0, 10**6), st.tuples(st.integers(0, 999), st.integers(0, 999), st.integers(0, 999)))
def test_log_file_name_round_trip(file_id: str, instant: str, version: int, token: tuple[int, int, int]) -> None:
    name = LogFileName(file_id, instant, version, "-".join(map(str, token)))
    assert LogFileName.parse(str(name)) == name


# ----------------------------------------------------------------------------------------------- hostile


VALID = b"".join(encode_block(b) for b in (
    empty_delete_block("00000000000000000"),
    hfile_data_block("20240101000000000", SCHEMA, [("a", b"1"), ("b", b"2")], create_time_ms=1),
    rollback_block("20240101000000001", "20240101000000000"),
))
SOURCE = "/t/.hoodie/metadata/files/.files-0000-0_20240101000000000.log.1_0-1-2"


def _decode_or_error(data: bytes) -> None:
    try:
        blocks = decode_log_file(data, source=SOURCE)
    except MetadataTableError as e:
        assert ".files-0000-0_20240101000000000.log.1_0-1-2" in str(e) and "at byte" in str(e)
        return
    for b in blocks:
        assert isinstance(b.block_type, BlockType) and isinstance(b.content, bytes)
        assert all(isinstance(k, HeaderKey) and isinstance(v, str) for k, v in b.header.items())
    assert b"".join(encode_block(b) for b in blocks) == data


def test_every_truncation_is_refused() -> None:
    ends = {o + 14 + n for o, n, _ in _raw_blocks(VALID)}
    for cut in range(1, len(VALID)):
        if cut in ends:
            assert len(decode_log_file(VALID[:cut], source=SOURCE)) >= 1
            continue
        with pytest.raises(MetadataTableError, match=r"\.files-0000-0_20240101000000000\.log\.1_0-1-2: corrupt "
                                                     r"log block \d at byte \d+"):
            decode_log_file(VALID[:cut], source=SOURCE)


def test_every_flipped_byte_is_refused_or_harmless() -> None:
    for pos in range(len(VALID)):
        damaged = bytearray(VALID)
        damaged[pos] ^= 0x41
        _decode_or_error(bytes(damaged))


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=6),
       st.integers(0, len(VALID)))
def test_mutated_log_file_decodes_or_metadata_error(edits: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(VALID)
    for pos, value in edits:
        data[pos] = value
    _decode_or_error(bytes(data[:cut]) if cut else bytes(data))


@FUZZ
@given(st.binary(max_size=100))
def test_random_bytes_after_the_magic_decode_or_metadata_error(tail: bytes) -> None:
    _decode_or_error(b"#HUDI#" + tail)


def test_damage_messages_name_the_offset() -> None:
    second = len(encode_block(empty_delete_block("00000000000000000")))
    damaged = bytearray(VALID)
    damaged[second + 17] = 9  # the second block's format version
    with pytest.raises(MetadataTableError, match=rf"corrupt log block 1 at byte {second + 14}: log format "
                                                 r"version 9"):
        decode_log_file(bytes(damaged), source=SOURCE)
    damaged = bytearray(VALID)
    damaged[second - 1] ^= 1  # the first block's reverse pointer
    with pytest.raises(MetadataTableError, match=rf"block 0 at byte {second - 8}: reverse pointer 73"):
        decode_log_file(bytes(damaged), source=SOURCE)
    with pytest.raises(MetadataTableError, match="<log file bytes>: corrupt log block 0 at byte 0: no block magic"):
        decode_log_file(b"junk")
