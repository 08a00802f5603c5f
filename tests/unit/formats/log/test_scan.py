"""A data table's log file scanned as Hudi scans it: damaged frames become CORRUPT blocks and the scan goes on
at the next magic; an intact frame whose contents cannot be read is refused naming the file and the offset."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.errors import LogFileError
from hudi_clusterd.formats.log import BlockType, LogBlock, encode_block, rollback_block, scan_log_file
from tests.harness.mor_logs import avro_block, delete_block, ordering_bytes, record_schema
from tests.support import FUZZ, raw_log_blocks

SOURCE = "/t/p/.f1-0_20240101000000000.log.1_0-1-2"
SCHEMA = record_schema([("v", "long")])
BLOCKS = [
    avro_block("20240101000000001", SCHEMA, [{"_hoodie_record_key": "k1", "v": 1}]),
    delete_block("20240101000000002", [("k1", "p", ordering_bytes("int", 0))]),
    rollback_block("20240101000000003", "20240101000000002"),
]
ENCODED = [encode_block(b) for b in BLOCKS]
VALID = b"".join(ENCODED)
STARTS = [o for o, _n, _r in raw_log_blocks(VALID)]


def _kinds(data: bytes) -> list[tuple[int, BlockType]]:
    return [(s.offset, s.block.block_type) for s in scan_log_file(data, source=SOURCE)]


def test_intact_blocks_scan_as_they_were_written() -> None:
    scanned = scan_log_file(VALID, source=SOURCE)
    assert [s.offset for s in scanned] == STARTS and len(STARTS) == 3
    assert [s.block for s in scanned] == BLOCKS
    assert not any(s.corrupt for s in scanned)


def test_every_torn_tail_is_a_corrupt_block_after_the_intact_ones() -> None:
    ends = [o + len(e) for o, e in zip(STARTS, ENCODED, strict=True)]
    for cut in range(1, len(VALID)):
        kinds = _kinds(VALID[:cut])
        whole = [o for o, end in zip(STARTS, ends, strict=True) if end <= cut]
        assert [o for o, k in kinds if k is not BlockType.CORRUPT] == whole, cut
        last = max(o for o in STARTS if o < cut)
        torn = cut not in ends and cut - last >= 6  # fewer than a magic's bytes are no block (Hudi's EOF)
        assert [k for _o, k in kinds].count(BlockType.CORRUPT) == (1 if torn else 0), cut
        if torn:
            assert kinds[-1] == (last, BlockType.CORRUPT)


def test_a_corrupt_block_in_the_middle_is_skipped_to_the_next_magic() -> None:
    damaged = bytearray(VALID)
    reverse_at = STARTS[1] + len(ENCODED[1]) - 8
    damaged[reverse_at + 7] ^= 0x01  # the second block's reverse pointer disagrees with its length
    scanned = scan_log_file(bytes(damaged), source=SOURCE)
    assert [(s.offset, s.block.block_type) for s in scanned] == [
        (STARTS[0], BlockType.AVRO_DATA), (STARTS[1], BlockType.CORRUPT), (STARTS[2], BlockType.COMMAND)]
    assert scanned[1].block.content == bytes(damaged[STARTS[1] + 6:STARTS[2]])
    assert scanned[2].block == BLOCKS[2]


def test_a_block_length_past_the_end_is_corrupt_up_to_the_next_magic() -> None:
    damaged = bytearray(VALID)
    struct.pack_into(">q", damaged, STARTS[0] + 6, 10**9)
    assert _kinds(bytes(damaged)) == [(STARTS[0], BlockType.CORRUPT), (STARTS[1], BlockType.DELETE),
                                      (STARTS[2], BlockType.COMMAND)]


def test_garbage_between_blocks_makes_the_block_before_it_corrupt() -> None:
    data = ENCODED[0] + b"garbage" + ENCODED[1]
    assert _kinds(data) == [(0, BlockType.CORRUPT), (len(ENCODED[0]) + 7, BlockType.DELETE)]


def test_fewer_than_six_bytes_after_the_last_block_end_the_scan_as_hudi_does() -> None:
    for tail in (b"#", b"#HU", b"#HUDI", b"xxxxx"):
        assert _kinds(VALID + tail) == [(o, k.block_type) for o, k in zip(STARTS, BLOCKS, strict=True)]
    assert _kinds(VALID + b"#HUDI#") == [(o, k.block_type) for o, k in zip(STARTS, BLOCKS, strict=True)] + [
        (len(VALID), BlockType.CORRUPT)]


def _with_type(ordinal: int) -> bytes:
    data = bytearray(encode_block(BLOCKS[2]))
    struct.pack_into(">i", data, 18, ordinal)
    return bytes(data)


def test_an_unknown_block_type_is_refused_naming_the_file_and_offset() -> None:
    with pytest.raises(LogFileError, match=r"^/t/p/\.f1-0_20240101000000000\.log\.1_0-1-2: log block at byte "
                                           rf"{len(VALID)} cannot be read: unknown block type 7 "):
        scan_log_file(VALID + _with_type(7), source=SOURCE)


def test_log_format_version_0_is_refused() -> None:
    data = bytearray(encode_block(BLOCKS[2]))
    struct.pack_into(">i", data, 14, 0)
    with pytest.raises(LogFileError, match=r"log block at byte 0 cannot be read: log format version 0"):
        scan_log_file(bytes(data), source=SOURCE)


def test_a_file_that_does_not_start_with_the_magic_is_refused() -> None:
    with pytest.raises(LogFileError, match=r"\.log\.1_0-1-2: no log block magic at byte 0$"):
        scan_log_file(b"PAR1" + VALID, source=SOURCE)


def test_an_empty_file_has_no_blocks() -> None:
    assert scan_log_file(b"", source=SOURCE) == []


def _scan_or_refused(data: bytes) -> None:
    try:
        scanned = scan_log_file(data, source=SOURCE)
    except LogFileError as e:
        assert str(e).startswith(SOURCE + ": ") and "byte" in str(e) and "\n" not in str(e)
        return
    assert all(isinstance(s.block, LogBlock) for s in scanned)
    for before, after in itertools.pairwise(scanned):
        assert before.offset < after.offset
        assert data[after.offset:after.offset + 6] == b"#HUDI#"


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=6),
       st.integers(0, len(VALID)))
def test_mutated_log_file_scans_or_is_refused_in_one_line(edits: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(VALID)
    for pos, value in edits:
        data[pos] = value
    _scan_or_refused(bytes(data[:cut]) if cut else bytes(data))
