"""The HFile writer: the layout of Hudi 1.1+'s native writer (``org.apache.hudi.io.hfile.HFileWriterImpl``),
which Hudi 1.x reads natively and Hudi 0.14/0.15 reads through their shaded HBase 2.4.9 reader.

File: data blocks, then one meta block per meta entry, then the load-on-open section (root data index, meta
index, file info), then the 4096-byte trailer. A data block is closed when the next cell would take its
uncompressed size (key + value + 21 bytes per cell) past the block size. Blocks are compressed with GZ (one gzip
member as Java's ``GZIPOutputStream`` of Java 8/11 writes it) or stored as they are (NONE), with NULL checksums.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from hudi_clusterd.errors import MetadataTableError
from hudi_clusterd.formats.hfile.block import data_payload, encode_block
from hudi_clusterd.formats.hfile.encoding import java_hashmap_order
from hudi_clusterd.formats.hfile.file_info import encode_file_info
from hudi_clusterd.formats.hfile.format import (
    CELL_OVERHEAD,
    CODEC_IDS,
    DATA_MAGIC,
    DEFAULT_BLOCK_SIZE,
    FILE_INFO_MAGIC,
    META_MAGIC,
    ROOT_INDEX_MAGIC,
    WRITER_FILE_INFO_KEYS,
    HFileLayout,
)
from hudi_clusterd.formats.hfile.index import data_index_key, encode_index
from hudi_clusterd.formats.hfile.trailer import encode_trailer

_MAX_ROW = 0x7FFF
_MAX_INT = 0x7FFFFFFF


def _codec_id(codec: str) -> int:
    cid = CODEC_IDS.get(codec.upper())
    if cid is None:
        raise MetadataTableError(f"HFile codec {codec!r} is not supported (GZ or NONE)")
    return cid


def _check_cells(cells: Sequence[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    checked: list[tuple[bytes, bytes]] = []
    previous: bytes | None = None
    for i, cell in enumerate(cells):
        row, value = bytes(cell[0]), bytes(cell[1])
        if len(row) > _MAX_ROW:
            raise MetadataTableError(f"HFile row {i} is {len(row)} bytes long; at most {_MAX_ROW} fit")
        if len(value) > _MAX_INT - 64:
            raise MetadataTableError(f"HFile value {i} is too large ({len(value)} bytes)")
        if previous is not None and row <= previous:
            what = "repeats" if row == previous else "sorts before"
            raise MetadataTableError(f"HFile rows must be strictly ascending: row {i} {row!r} {what} {previous!r}")
        checked.append((row, value))
        previous = row
    return checked


def write_hfile(
    cells: Sequence[tuple[bytes, bytes]],
    file_info: Mapping[str, bytes] | None = None,
    *,
    codec: str = "GZ",
    block_size: int = DEFAULT_BLOCK_SIZE,
    create_time_ms: int | None = None,
    meta_blocks: Mapping[str, bytes] | None = None,
    layout: HFileLayout = HFileLayout.HBASE_COMPATIBLE,
) -> bytes:
    """An HFile of ``cells`` (``(row, value)``, rows strictly ascending in unsigned byte order), with the
    caller's ``file_info`` entries besides the computed ones, and one meta block per ``meta_blocks`` entry.
    ``create_time_ms`` defaults to now. Raises ``MetadataTableError`` for unsorted or duplicate rows, an
    unsupported codec or a reserved file-info key."""
    codec_id = _codec_id(codec)
    layout = HFileLayout(layout)
    if block_size <= 0:
        raise MetadataTableError(f"HFile block size must be positive, got {block_size}")
    rows = _check_cells(cells)
    extra = dict(file_info or {})
    reserved = sorted(k for k in extra if k in WRITER_FILE_INFO_KEYS)
    if reserved:
        raise MetadataTableError(f"HFile file-info keys {reserved} are computed by the writer")
    if create_time_ms is None:
        create_time_ms = time.time_ns() // 1_000_000

    out: list[bytes] = []
    offset = 0
    index: list[tuple[int, int, bytes]] = []  # offset, on-disk size, first row
    last_data_offset = 0
    prev_offset = -1
    block_start = 0
    block_bytes = 0
    uncompressed_total = 0

    def flush(end: int) -> None:
        nonlocal offset, prev_offset, last_data_offset
        block = encode_block(DATA_MAGIC, data_payload(rows[block_start:end]), prev_offset, codec_id)
        index.append((offset, len(block), rows[block_start][0]))
        out.append(block)
        last_data_offset = offset
        prev_offset = offset if layout is HFileLayout.HBASE_COMPATIBLE else offset + len(block)
        offset += len(block)

    for i, (row, value) in enumerate(rows):
        size = len(row) + len(value) + CELL_OVERHEAD
        if i > block_start and block_bytes + size > block_size:
            flush(i)
            block_start, block_bytes = i, 0
        block_bytes += size
        uncompressed_total += size
    if rows:
        flush(len(rows))

    meta_index: list[tuple[int, int, bytes]] = []
    metas = dict(meta_blocks or {})
    for name in java_hashmap_order(list(metas)):
        block = encode_block(META_MAGIC, bytes(metas[name]), -1, codec_id)
        meta_index.append((offset, len(block), name.encode()))
        out.append(block)
        offset += len(block)

    load_on_open = offset
    root = encode_index((block_offset, size, data_index_key(first, layout)) for block_offset, size, first in index)
    block = encode_block(ROOT_INDEX_MAGIC, root, -1, codec_id)
    out.append(block)
    offset += len(block)
    block = encode_block(ROOT_INDEX_MAGIC, encode_index(meta_index), -1, codec_id)
    out.append(block)
    offset += len(block)

    file_info_offset = offset
    block = encode_block(FILE_INFO_MAGIC, encode_file_info(extra, rows, create_time_ms), -1, codec_id)
    out.append(block)
    offset += len(block)

    out.append(encode_trailer(
        file_info_offset=file_info_offset, load_on_open_offset=load_on_open,
        uncompressed_data_index_size=uncompressed_total, data_index_count=len(index),
        meta_index_count=len(meta_index), entry_count=len(rows),
        first_data_block_offset=index[0][0] if index else -1, last_data_block_offset=last_data_offset,
        codec_id=codec_id))
    return b"".join(out)
