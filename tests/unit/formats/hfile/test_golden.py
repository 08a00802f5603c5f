"""Golden HFiles of Apache Hudi's metadata tables: every one reads and re-encodes to the same bytes, and
its blocks are the ones the native writer writes."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from hudi_clusterd.formats.hfile import (
    AVG_KEY_LEN,
    AVG_VALUE_LEN,
    BYTES_PER_CHECKSUM,
    CHECKSUM_NULL,
    COMPARATOR_CLASS_NAME,
    CREATE_TIME_KEY,
    DATA_MAGIC,
    FILE_INFO_MAGIC,
    HEADER_SIZE,
    KEY_VALUE_VERSION,
    LAST_KEY,
    MAX_MEMSTORE_TS_KEY,
    META_MAGIC,
    ROOT_INDEX_MAGIC,
    SCHEMA_KEY,
    TRAILER_SIZE,
    HFileContents,
    HFileLayout,
    java_hashmap_order,
    read_blocks,
    read_hfile,
    write_hfile,
)

KEY_SUFFIX = b"\x00\x7f\xff\xff\xff\xff\xff\xff\xff\x04"  # family length 0, LATEST_TIMESTAMP, type Put
TRAILER_FIELDS = (1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12)  # TrailerProto fields Hudi's writer sets, in order


def _log_hfiles(path: Path) -> list[bytes]:
    """The content of every HFILE_DATA block of a log file (parsed here without the module under test)."""
    data = path.read_bytes()
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        assert data[pos:pos + 6] == b"#HUDI#", (path, pos)
        length, _version, block_type, count = struct.unpack_from(">qiii", data, pos + 6)
        p = pos + 26
        for _ in range(count):
            p += 8 + struct.unpack_from(">i", data, p + 4)[0]
        size = struct.unpack_from(">q", data, p)[0]
        if block_type == 4:
            out.append(data[p + 8:p + 8 + size])
        pos += 14 + length
    return out


@pytest.fixture(scope="module")
def golden_hfiles(golden_tables: Path) -> list[tuple[str, bytes]]:
    """(name, bytes) of every HFile in the golden tables' metadata tables: base files and log-block contents."""
    out: list[tuple[str, bytes]] = []
    for mdt in sorted(golden_tables.glob("*/.hoodie/metadata")):
        for path in sorted(mdt.rglob("*.hfile")):
            out.append((str(path), path.read_bytes()))
        for path in sorted(mdt.rglob(".*.log.*")):
            out += [(f"{path}#{i}", content) for i, content in enumerate(_log_hfiles(path))]
    assert len(out) > 200, "too few golden HFiles found"
    return out


def _rewrite(h: HFileContents, layout: HFileLayout) -> bytes:
    return write_hfile(h.cells, h.user_file_info, codec=h.trailer.codec_name, create_time_ms=h.create_time_ms,
                       meta_blocks=h.meta_blocks, layout=layout)


# ------------------------------------------------------------------------------------------------- golden


def test_every_golden_hfile_reads_and_reencodes_to_the_same_bytes(golden_hfiles: list[tuple[str, bytes]]) -> None:
    base_files = with_meta = empty = 0
    for name, data in golden_hfiles:
        h = read_hfile(data, source=name)
        t = h.trailer
        assert (t.major_version, t.minor_version, t.fields) == (3, 0, TRAILER_FIELDS), name
        assert (t.comparator_class_name, t.codec_name, t.num_data_index_levels) == (COMPARATOR_CLASS_NAME, "GZ", 1)
        assert t.entry_count == len(h.cells) and t.data_index_count == len(h.data_index)
        assert all(a[0] < b[0] for a, b in zip(h.cells, h.cells[1:], strict=False)), name
        assert set(h.file_info) >= {MAX_MEMSTORE_TS_KEY, LAST_KEY, AVG_KEY_LEN, AVG_VALUE_LEN, CREATE_TIME_KEY,
                                    KEY_VALUE_VERSION, SCHEMA_KEY}
        assert list(h.file_info) == java_hashmap_order(list(h.file_info)), name
        base_files += name.endswith(".hfile")
        with_meta += bool(h.meta_blocks)
        empty += not h.cells
        # Hudi 1.2's layout: every byte the same, the gzip streams of Java's Deflater included
        assert _rewrite(h, HFileLayout.HUDI_1_2) == data, name
    assert base_files > 50 and with_meta > 50 and empty > 0


def test_golden_hfile_blocks_are_what_the_native_writer_writes(golden_hfiles: list[tuple[str, bytes]]) -> None:
    for name, data in golden_hfiles:
        blocks = read_blocks(data, source=name)
        h = read_hfile(data, source=name)
        magics = [b.magic for b in blocks]
        n_data = len(h.data_index)
        assert magics == [DATA_MAGIC] * n_data + [META_MAGIC] * len(h.meta_blocks) + [ROOT_INDEX_MAGIC] * 2 + [
            FILE_INFO_MAGIC], name
        for b in blocks:
            assert (b.checksum_type, b.bytes_per_checksum) == (CHECKSUM_NULL, BYTES_PER_CHECKSUM)
            assert b.checksum == bytes(4 * -(-b.on_disk_data_size_with_header // BYTES_PER_CHECKSUM))
            assert b.prev_block_offset == -1
            assert b.on_disk_data_size_with_header > HEADER_SIZE
        assert blocks[n_data + len(h.meta_blocks)].offset == h.trailer.load_on_open_offset
        assert blocks[-1].offset == h.trailer.file_info_offset
        assert blocks[-1].end == len(data) - TRAILER_SIZE
        assert data[-4:] == b"\x00\x00\x00\x03"
        for entry, block in zip(h.data_index, blocks, strict=False):
            assert (entry.offset, entry.size) == (block.offset, block.end - block.offset)
            assert entry.key == struct.pack(">h", len(h.cells[0][0])) + h.cells[0][0]  # the row only (Hudi 1.2)
        if h.cells:
            assert h.file_info[LAST_KEY] == struct.pack(">h", len(h.cells[-1][0])) + h.cells[-1][0]
            n = len(h.cells)
            assert h.file_info[AVG_KEY_LEN] == struct.pack(">i", sum(len(r) for r, _ in h.cells) // n)
            assert h.file_info[AVG_VALUE_LEN] == struct.pack(">i", sum(len(v) for _, v in h.cells) // n)
            assert h.trailer.uncompressed_data_index_size == sum(len(r) + len(v) + 21 for r, v in h.cells)
        else:
            assert h.file_info[LAST_KEY] == b"" and h.trailer.first_data_block_offset == -1
        assert h.file_info[MAX_MEMSTORE_TS_KEY] == bytes(8)
        assert h.file_info[KEY_VALUE_VERSION] == b"\x00\x00\x00\x01"


def _compare_layouts(native: bytes, compatible: bytes) -> None:
    """The HBase-compatible file differs from Hudi 1.2's only in the data index keys (and offsets after them)."""
    a, b = read_blocks(native), read_blocks(compatible)
    ha, hb = read_hfile(native), read_hfile(compatible)
    assert [x.magic for x in a] == [y.magic for y in b]
    assert ha.cells == hb.cells and ha.file_info == hb.file_info and ha.meta_blocks == hb.meta_blocks
    for x, y in zip(a, b, strict=True):
        if x.offset == ha.trailer.load_on_open_offset:
            for ea, eb in zip(ha.data_index, hb.data_index, strict=True):
                assert (ea.offset, ea.size) == (eb.offset, eb.size) and eb.key == ea.key + KEY_SUFFIX
        else:
            assert (x.payload, x.uncompressed_size, x.checksum_type) == (y.payload, y.uncompressed_size,
                                                                        y.checksum_type)
    ta, tb = ha.trailer, hb.trailer
    assert (ta.load_on_open_offset, ta.entry_count, ta.data_index_count, ta.first_data_block_offset,
            ta.last_data_block_offset, ta.uncompressed_data_index_size) == (
        tb.load_on_open_offset, tb.entry_count, tb.data_index_count, tb.first_data_block_offset,
        tb.last_data_block_offset, tb.uncompressed_data_index_size)


def test_golden_cells_in_the_hbase_compatible_layout(golden_hfiles: list[tuple[str, bytes]]) -> None:
    for _name, data in golden_hfiles[::7]:
        h = read_hfile(data)
        _compare_layouts(data, _rewrite(h, HFileLayout.HBASE_COMPATIBLE))


# ------------------------------------------------------------------------------------------ Java references
