"""HFiles we write round-trip and index every block; the writer refuses what Hudi refuses."""

from __future__ import annotations

import struct
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.errors import MetadataTableError
from hudi_clusterd.formats.hfile import (
    AVG_KEY_LEN,
    AVG_VALUE_LEN,
    CREATE_TIME_KEY,
    DATA_MAGIC,
    KEY_VALUE_VERSION,
    LAST_KEY,
    MAX_MEMSTORE_TS_KEY,
    SCHEMA_KEY,
    HFileBlock,
    HFileLayout,
    java_hashmap_order,
    read_blocks,
    read_hfile,
    write_hfile,
)
from tests.support import FUZZ

KEY_SUFFIX = b"\x00\x7f\xff\xff\xff\xff\xff\xff\xff\x04"  # family length 0, LATEST_TIMESTAMP, type Put
CREATE = 1_772_922_294_799


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
