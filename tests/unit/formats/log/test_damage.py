"""Damaged log files fail with an error naming the file and offset."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.errors import MetadataTableError
from hudi_clusterd.formats.log import (
    BlockType,
    HeaderKey,
    decode_log_file,
    empty_delete_block,
    encode_block,
    hfile_data_block,
    rollback_block,
)
from tests.support import FUZZ, raw_log_blocks

SCHEMA = '{"type":"record","name":"HoodieMetadataRecord","fields":[]}'


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
    ends = {o + 14 + n for o, n, _ in raw_log_blocks(VALID)}
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
