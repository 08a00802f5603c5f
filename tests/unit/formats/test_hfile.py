"""HFiles of Apache Hudi's metadata table: every golden HFile reads and re-encodes to the same bytes, our files
round-trip and index every block, and damaged files fail with an error naming the file."""

from __future__ import annotations

import hashlib
import struct
import time
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.errors import MetadataTableError
from hudi_clusterd.formats.hfile import (
    AVG_KEY_LEN,
    AVG_VALUE_LEN,
    BYTES_PER_CHECKSUM,
    CHECKSUM_CRC32,
    CHECKSUM_CRC32C,
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
    HFileBlock,
    HFileContents,
    HFileLayout,
    crc32c,
    java_gzip,
    java_hashmap_order,
    read_blocks,
    read_hfile,
    write_hfile,
)
from tests.support import FUZZ

KEY_SUFFIX = b"\x00\x7f\xff\xff\xff\xff\xff\xff\xff\x04"  # family length 0, LATEST_TIMESTAMP, type Put
TRAILER_FIELDS = (1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12)  # TrailerProto fields Hudi's writer sets, in order
CREATE = 1_772_922_294_799


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


def test_java_hashmap_order_matches_java() -> None:
    # printed by OpenJDK 17: new HashMap<String, ?>() filled in the listed order, then keySet()
    assert java_hashmap_order([MAX_MEMSTORE_TS_KEY, SCHEMA_KEY, LAST_KEY, AVG_KEY_LEN, CREATE_TIME_KEY,
                               AVG_VALUE_LEN, KEY_VALUE_VERSION]) == [
        SCHEMA_KEY, LAST_KEY, AVG_VALUE_LEN, AVG_KEY_LEN, KEY_VALUE_VERSION, MAX_MEMSTORE_TS_KEY, CREATE_TIME_KEY]
    keys = [f"k{i:02d}" for i in range(20)] + ["zeta", "Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa", "é", "日本", "😀"]
    assert "|".join(java_hashmap_order(keys)) == (
        "Aa|BB|k11|k10|k13|k12|k15|k14|k17|k16|k19|k18|AaAa|BBBB|AaBB|BBAa|zeta|é|k00|日本|k02|k01|k04|k03|k06|"
        "k05|k08|k07|k09|😀")
    colliding = ["Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa", "AaAaAa", "BBBBBB", "AaAaBB", "AaBBAa", "BBAaAa",
                 "BBBBAa", "AaBBBB", "BBAaBB"]
    assert java_hashmap_order(colliding) == colliding
    assert java_hashmap_order(["b", "a", "b"]) == ["a", "b"]


def test_gzip_matches_java_gzip_output_stream() -> None:
    assert java_gzip(b"hello hello hello hudi metadata table").hex() == (
        "1f8b0800000000000000cb48cdc9c957c840264b53321572534b1253124b12154a1293725201d61a875325000000")
    payload = "".join(f"row-{i:07d}:{i * 7919 % 100003}|" for i in range(40000)).encode()
    out = bytearray(java_gzip(payload))
    out[9] = 0xFF  # OpenJDK 17 writes OS 255 where Java 8/11 (and the golden files) write 0
    assert (len(payload), len(out)) == (715557, 219203)
    assert hashlib.sha256(out).hexdigest() == "58600bce31a8fd3e9a9415b18938b3513f402e4fe9c783b199b4d5fa84896870"


def test_crc32c_known_answers() -> None:
    assert crc32c(b"") == 0
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA


# ------------------------------------------------------------------------------------------------- writer


def _cells(n: int, value_size: int = 40) -> list[tuple[bytes, bytes]]:
    return [(f"key-{i:05d}".encode(), bytes([i % 251]) * value_size) for i in range(n)]


def _expected_block_starts(cells: list[tuple[bytes, bytes]], block_size: int) -> list[int]:
    starts, size = [0], 0
    for i, (row, value) in enumerate(cells):
        cell = len(row) + len(value) + 21
        if i > starts[-1] and size + cell > block_size:
            starts.append(i)
            size = 0
        size += cell
    return starts


@pytest.mark.parametrize("layout", list(HFileLayout))
@pytest.mark.parametrize("codec", ["GZ", "NONE"])
def test_multi_block_hfile_indexes_every_block(layout: HFileLayout, codec: str) -> None:
    cells = _cells(300)
    data = write_hfile(cells, {SCHEMA_KEY: b"{}"}, codec=codec, block_size=1000, create_time_ms=CREATE,
                       layout=layout)
    h = read_hfile(data, source="multi.hfile")
    assert h.cells == cells and h.user_file_info == {SCHEMA_KEY: b"{}"} and h.create_time_ms == CREATE
    starts = _expected_block_starts(cells, 1000)
    assert len(starts) == len(h.data_index) == h.trailer.data_index_count > 10
    blocks = [b for b in read_blocks(data) if b.magic == DATA_MAGIC]
    assert len(blocks) == len(starts)
    previous: HFileBlock | None = None
    for start, entry, block in zip(starts, h.data_index, blocks, strict=True):
        row = cells[start][0]
        key = struct.pack(">h", len(row)) + row
        assert entry.key == (key + KEY_SUFFIX if layout is HFileLayout.HBASE_COMPATIBLE else key)
        assert (entry.offset, entry.size) == (block.offset, block.end - block.offset)
        assert block.payload[:8] == struct.pack(">ii", len(row) + 12, 40)
        if previous is None:
            assert block.prev_block_offset == -1
        elif layout is HFileLayout.HBASE_COMPATIBLE:
            assert block.prev_block_offset == previous.offset
        else:
            assert block.prev_block_offset == block.offset  # what Hudi 1.2.0 writes
        previous = block
    assert h.trailer.first_data_block_offset == 0 and h.trailer.last_data_block_offset == blocks[-1].offset
    assert h.trailer.codec_name == codec


def test_a_cell_larger_than_the_block_size_gets_a_block_of_its_own() -> None:
    cells = [(b"a", b"x" * 10), (b"b", b"y" * 5000), (b"c", b"z")]
    h = read_hfile(write_hfile(cells, block_size=100))
    assert [e.key[2:3] for e in h.data_index] == [b"a", b"b", b"c"] and h.cells == cells


def test_empty_hfile_round_trips() -> None:
    h = read_hfile(write_hfile([], {SCHEMA_KEY: b"s"}, create_time_ms=CREATE))
    assert h.cells == [] and h.data_index == [] and h.file_info[LAST_KEY] == b""
    assert h.trailer.first_data_block_offset == -1 and h.trailer.last_data_block_offset == 0
    assert h.file_info[AVG_KEY_LEN] == bytes(4)


def test_meta_blocks_round_trip_in_java_hashmap_order() -> None:
    metas = {"bloomFilter": b"\x01" * 300, "zz": b"", "another": b"abc"}
    h = read_hfile(write_hfile(_cells(3), meta_blocks=metas))
    assert h.meta_blocks == metas and list(h.meta_blocks) == java_hashmap_order(list(metas))
    assert h.trailer.meta_index_count == 3


@pytest.mark.parametrize("cells", [
    [(b"b", b""), (b"a", b"")],
    [(b"a", b""), (b"a", b"")],
    [(b"a", b""), (b"b", b""), (b"b", b"1")],
    [(b"\xff", b""), (b"\x00", b"")],
])
def test_unsorted_or_repeated_rows_are_refused(cells: list[tuple[bytes, bytes]]) -> None:
    with pytest.raises(MetadataTableError, match="strictly ascending"):
        write_hfile(cells)


def test_writer_refusals() -> None:
    with pytest.raises(MetadataTableError, match="computed by the writer"):
        write_hfile(_cells(1), {LAST_KEY: b"x"})
    with pytest.raises(MetadataTableError, match="codec"):
        write_hfile(_cells(1), codec="SNAPPY")
    with pytest.raises(MetadataTableError, match="at most"):
        write_hfile([(b"x" * 40000, b"")])
    with pytest.raises(MetadataTableError, match="block size"):
        write_hfile(_cells(1), block_size=0)
    assert read_hfile(write_hfile(_cells(2), codec="gz")).trailer.codec_name == "GZ"


def test_create_time_defaults_to_now() -> None:
    before = time.time_ns() // 1_000_000
    stamp = read_hfile(write_hfile(_cells(1))).create_time_ms
    assert stamp is not None and before <= stamp <= time.time_ns() // 1_000_000


_ROWS = st.lists(st.binary(max_size=40), max_size=60, unique=True).map(sorted)
_INFO = st.dictionaries(st.text(min_size=1, max_size=12).filter(lambda k: k not in {
    MAX_MEMSTORE_TS_KEY, LAST_KEY, AVG_KEY_LEN, AVG_VALUE_LEN, CREATE_TIME_KEY, KEY_VALUE_VERSION}),
    st.binary(max_size=30), max_size=6)


@FUZZ
@given(_ROWS, st.data(), _INFO, st.sampled_from(["GZ", "NONE"]), st.integers(1, 600),
       st.sampled_from(list(HFileLayout)))
def test_write_read_round_trip(rows: list[bytes], data: st.DataObject, info: dict[str, bytes], codec: str,
                               block_size: int, layout: HFileLayout) -> None:
    cells = [(row, data.draw(st.binary(max_size=80))) for row in rows]
    encoded = write_hfile(cells, info, codec=codec, block_size=block_size, create_time_ms=CREATE, layout=layout)
    h = read_hfile(encoded, source="fuzz.hfile")
    assert h.cells == cells and h.user_file_info == info and h.create_time_ms == CREATE
    assert list(h.file_info) == java_hashmap_order(list(h.file_info))
    assert len(h.data_index) == (len(_expected_block_starts(cells, block_size)) if cells else 0)
    assert write_hfile(h.cells, h.user_file_info, codec=codec, block_size=block_size, create_time_ms=CREATE,
                       layout=layout) == encoded


# ------------------------------------------------------------------------------------ HBase-written variants


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
