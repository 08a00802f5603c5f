"""HFiles as HBase writes them (checksums, tags, MVCC versions) read back, and damaged files fail with an
error naming the file."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.errors import MetadataTableError
from hudi_clusterd.formats.hfile import (
    BYTES_PER_CHECKSUM,
    CHECKSUM_CRC32,
    CHECKSUM_CRC32C,
    HEADER_SIZE,
    SCHEMA_KEY,
    TRAILER_SIZE,
    crc32c,
    read_blocks,
    read_hfile,
    write_hfile,
)
from tests.support import FUZZ

KEY_SUFFIX = b"\x00\x7f\xff\xff\xff\xff\xff\xff\xff\x04"  # family length 0, LATEST_TIMESTAMP, type Put
CREATE = 1_772_922_294_799


def _cells(n: int, value_size: int = 40) -> list[tuple[bytes, bytes]]:
    return [(f"key-{i:05d}".encode(), bytes([i % 251]) * value_size) for i in range(n)]


def _with_checksums(data: bytes, checksum_type: int, minor: int = 3) -> bytes:
    """``data`` (a NULL-checksum file) with every block's checksums computed as HBase does, and HBase's
    trailer minor version."""
    out = bytearray(data)
    compute = crc32c if checksum_type == CHECKSUM_CRC32C else zlib.crc32
    for block in read_blocks(data):
        out[block.offset + 24] = checksum_type
        size = block.on_disk_data_size_with_header
        for i in range(-(-size // BYTES_PER_CHECKSUM)):
            chunk = bytes(out[block.offset + i * BYTES_PER_CHECKSUM:block.offset + min((i + 1) * BYTES_PER_CHECKSUM,
                                                                                        size)])
            struct.pack_into(">I", out, block.offset + size + 4 * i, compute(chunk))
    out[-4] = minor
    return bytes(out)


@pytest.mark.parametrize("checksum_type", [CHECKSUM_CRC32, CHECKSUM_CRC32C])
def test_hbase_checksums_are_verified(checksum_type: int) -> None:
    cells = [(f"k{i:04d}".encode(), bytes(range(256)) * 80) for i in range(5)]  # blocks of several 16K chunks
    data = _with_checksums(write_hfile(cells, codec="NONE", block_size=1 << 16), checksum_type)
    h = read_hfile(data, source="hbase.hfile")
    assert h.cells == cells and h.trailer.minor_version == 3
    assert {b.checksum_type for b in read_blocks(data)} == {checksum_type}
    damaged = bytearray(data)
    damaged[HEADER_SIZE + 20000] ^= 1
    with pytest.raises(MetadataTableError, match=r"hbase\.hfile.*checksum mismatch"):
        read_hfile(bytes(damaged), source="hbase.hfile")


def test_hbase_style_tags_and_mvcc_versions_are_skipped() -> None:
    """Cells with an int16 tags length (files whose info has hfile.MAX_TAGS_LEN) and a 3-byte MVCC vlong."""
    cells = [(b"a", b"1"), (b"b", b"22")]
    data = bytearray(write_hfile([(r, v + b"pad!") for r, v in cells], {"hfile.MAX_TAGS_LEN": bytes(4)},
                                 codec="NONE"))
    payload = b""
    for row, value in cells:
        key = struct.pack(">h", len(row)) + row + KEY_SUFFIX
        payload += struct.pack(">ii", len(key), len(value)) + key + value + b"\x00\x00" + b"\x8e\x01\x00"
    block = read_blocks(bytes(data))[0]
    assert len(payload) == len(block.payload)
    data[HEADER_SIZE:HEADER_SIZE + len(payload)] = payload
    assert read_hfile(bytes(data), source="tags.hfile").cells == cells


# ----------------------------------------------------------------------------------------------- hostile


VALID_GZ = write_hfile(_cells(40), {SCHEMA_KEY: b'{"type":"record"}'}, block_size=400, create_time_ms=CREATE,
                       meta_blocks={"bloomFilter": b"bits"})
VALID_NONE = write_hfile(_cells(40), {SCHEMA_KEY: b'{"type":"record"}'}, codec="NONE", block_size=400,
                         create_time_ms=CREATE, meta_blocks={"bloomFilter": b"bits"})


def _read_or_error(data: bytes) -> None:
    try:
        h = read_hfile(data, source="/t/.hoodie/metadata/files/files-0000-0_0-1-2_001.hfile")
    except MetadataTableError as e:
        assert "files-0000-0_0-1-2_001.hfile" in str(e)
        return
    assert all(isinstance(r, bytes) and isinstance(v, bytes) for r, v in h.cells)
    assert all(a[0] < b[0] for a, b in zip(h.cells, h.cells[1:], strict=False))


@pytest.mark.parametrize("valid", [VALID_GZ, VALID_NONE], ids=["GZ", "NONE"])
def test_every_truncation_is_refused(valid: bytes) -> None:
    for cut in range(0, len(valid), 13):
        with pytest.raises(MetadataTableError, match=r"files-0000-0_0-1-2_001\.hfile"):
            read_hfile(valid[:cut], source="/t/.hoodie/metadata/files/files-0000-0_0-1-2_001.hfile")


@pytest.mark.parametrize("valid", [VALID_GZ, VALID_NONE], ids=["GZ", "NONE"])
def test_every_flipped_byte_is_refused_or_harmless(valid: bytes) -> None:
    for pos in range(0, len(valid), 5):
        damaged = bytearray(valid)
        damaged[pos] ^= 0xFF
        _read_or_error(bytes(damaged))


@FUZZ
@given(st.sampled_from([VALID_GZ, VALID_NONE]),
       st.lists(st.tuples(st.integers(0, len(VALID_NONE) - 1), st.integers(0, 255)), max_size=6),
       st.integers(0, len(VALID_NONE)))
def test_mutated_hfile_decodes_or_metadata_error(valid: bytes, edits: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(valid)
    for pos, value in edits:
        data[pos % len(data)] = value
    _read_or_error(bytes(data[:cut]) if cut else bytes(data))


@FUZZ
@given(st.binary(max_size=200), st.binary(max_size=120))
def test_random_bytes_around_a_trailer_decode_or_metadata_error(head: bytes, trailer_tail: bytes) -> None:
    trailer = (b'TRABLK"$' + trailer_tail)[:TRAILER_SIZE - 4].ljust(TRAILER_SIZE - 4, b"\x00") + b"\x00\x00\x00\x03"
    _read_or_error(head + trailer)
    _read_or_error(VALID_NONE[:-TRAILER_SIZE] + trailer)


def test_damage_messages_are_specific() -> None:
    src = "x.hfile"
    with pytest.raises(MetadataTableError, match="too short"):
        read_hfile(b"", source=src)
    bad_magic = bytearray(VALID_GZ)
    bad_magic[-TRAILER_SIZE] = ord("X")
    with pytest.raises(MetadataTableError, match="bad trailer magic"):
        read_hfile(bytes(bad_magic), source=src)
    v2 = bytearray(VALID_GZ)
    v2[-1] = 2
    with pytest.raises(MetadataTableError, match="major version 2"):
        read_hfile(bytes(v2), source=src)
    first = bytearray(VALID_GZ)
    first[0:8] = b"NOTABLOK"
    with pytest.raises(MetadataTableError, match=r"x\.hfile: corrupt HFile at byte 0: bad block magic"):
        read_hfile(bytes(first), source=src)
    with pytest.raises(MetadataTableError, match="<HFile bytes>"):
        read_hfile(b"\x00" * 5000)
