"""The HFile reader: files of Hudi's native writer and of HBase 2.x (single-level data index, GZ or NONE, NULL,
CRC32 or CRC32C checksums, optional cell tags and MVCC versions, HBase's bloom metadata blocks after the file
info), checked block by block against the trailer, the indexes and the file info."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from hudi_clusterd.errors import MetadataTableError
from hudi_clusterd.formats.hfile.block import HFileBlock, read_block, read_cells
from hudi_clusterd.formats.hfile.file_info import int_info, read_file_info
from hudi_clusterd.formats.hfile.format import (
    CODEC_IDS,
    CREATE_TIME_KEY,
    DATA_BLOCK_ENCODING,
    DATA_MAGIC,
    DELETE_FAMILY_BLOOM_META_MAGIC,
    ENCODED_DATA_MAGIC,
    FILE_INFO_MAGIC,
    GENERAL_BLOOM_META_MAGIC,
    HEADER_SIZE,
    KEY_VALUE_VERSION,
    LAST_KEY,
    MAX_TAGS_LEN,
    META_MAGIC,
    ROOT_INDEX_MAGIC,
    TRAILER_SIZE,
    WRITER_FILE_INFO_KEYS,
    Damage,
)
from hudi_clusterd.formats.hfile.index import IndexEntry, read_index, row_of_key
from hudi_clusterd.formats.hfile.trailer import HFileTrailer, read_trailer


@dataclass(frozen=True)
class HFileContents:
    """A decoded HFile: cells ``(row, value)`` in row order, file info and meta blocks in file order."""

    cells: list[tuple[bytes, bytes]]
    file_info: dict[str, bytes]
    trailer: HFileTrailer
    meta_blocks: dict[str, bytes] = field(default_factory=dict)
    data_index: list[IndexEntry] = field(default_factory=list)

    @property
    def user_file_info(self) -> dict[str, bytes]:
        """The file info less the entries ``write_hfile`` computes itself."""
        return {k: v for k, v in self.file_info.items() if k not in WRITER_FILE_INFO_KEYS}

    @property
    def create_time_ms(self) -> int | None:
        raw = self.file_info.get(CREATE_TIME_KEY)
        return struct.unpack(">q", raw)[0] if raw is not None and len(raw) == 8 else None


def _decode(data: bytes) -> HFileContents:
    """The HFile ``data`` decoded and checked; raises ``Damage`` for anything out of place."""
    if len(data) < TRAILER_SIZE + HEADER_SIZE:
        raise Damage(f"{len(data)} bytes is too short for an HFile (trailer alone is {TRAILER_SIZE})")
    trailer = read_trailer(data)
    codec = trailer.compression_codec
    if codec not in CODEC_IDS.values():
        raise Damage(f"HFile compression {trailer.codec_name} is not supported (GZ or NONE)")
    if trailer.encryption_key is not None:
        raise Damage("encrypted HFiles are not supported")
    if trailer.num_data_index_levels != 1:
        raise Damage(f"a {trailer.num_data_index_levels}-level data index is not supported (only 1)")
    if trailer.data_index_count < 0 or trailer.meta_index_count < 0 or trailer.entry_count < 0:
        raise Damage("negative counts in the trailer")
    section_end = len(data) - TRAILER_SIZE
    load_on_open = trailer.load_on_open_offset
    if not 0 <= load_on_open < section_end:
        raise Damage(f"load-on-open offset {load_on_open} lies outside the file")

    root = read_block(data, load_on_open, section_end, codec, frozenset({ROOT_INDEX_MAGIC}))
    data_index, used = read_index(root.payload, trailer.data_index_count, root.offset)
    if len(root.payload) - used not in (0, 16):  # HBase may append 16 bytes of mid-key metadata
        raise Damage(f"{len(root.payload) - used} stray bytes after the data index", root.offset)
    meta_root = read_block(data, root.end, section_end, codec, frozenset({ROOT_INDEX_MAGIC}))
    meta_index, used = read_index(meta_root.payload, trailer.meta_index_count, meta_root.offset)
    if used != len(meta_root.payload):
        raise Damage(f"{len(meta_root.payload) - used} stray bytes after the meta index", meta_root.offset)
    if trailer.file_info_offset != meta_root.end:
        raise Damage(f"trailer puts the file info at {trailer.file_info_offset}, the meta index ends at "
                     f"{meta_root.end}")
    info_block = read_block(data, meta_root.end, section_end, codec, frozenset({FILE_INFO_MAGIC}))
    file_info = read_file_info(info_block.payload, info_block.offset)
    pos = info_block.end
    while pos < section_end:  # HBase's bloom filter metadata may follow
        pos = read_block(data, pos, section_end, codec,
                          frozenset({GENERAL_BLOOM_META_MAGIC, DELETE_FAMILY_BLOOM_META_MAGIC})).end

    encoding = file_info.get(DATA_BLOCK_ENCODING)
    if encoding not in (None, b"NONE"):
        raise Damage(f"data block encoding {encoding!r} is not supported")
    kv_version = int_info(file_info, KEY_VALUE_VERSION, 4)
    with_mvcc = kv_version is None or kv_version == 1
    with_tags = MAX_TAGS_LEN in file_info

    cells: list[tuple[bytes, bytes]] = []
    previous_end = 0
    for i, entry in enumerate(data_index):
        if entry.offset < previous_end or entry.size < HEADER_SIZE or entry.offset + entry.size > load_on_open:
            raise Damage(f"data index entry {i} (offset {entry.offset}, size {entry.size}) is out of place",
                         root.offset)
        block = read_block(data, entry.offset, entry.offset + entry.size, codec,
                            frozenset({DATA_MAGIC, ENCODED_DATA_MAGIC}))
        if block.magic == ENCODED_DATA_MAGIC:
            raise Damage("encoded data blocks are not supported", block.offset)
        if block.end != entry.offset + entry.size:
            raise Damage(f"data block is {block.end - block.offset} bytes, the index gives {entry.size}",
                         block.offset)
        block_cells = read_cells(block, with_mvcc, with_tags)
        if not block_cells:
            raise Damage("empty data block", block.offset)
        index_row = row_of_key(entry.key)
        if index_row is None or index_row > block_cells[0][0]:
            raise Damage(f"data index key {entry.key!r} does not lead its block", block.offset)
        if cells and block_cells[0][0] <= cells[-1][0]:
            raise Damage("data blocks are out of row order", block.offset)
        cells += block_cells
        previous_end = block.end
    for i in range(1, len(cells)):
        if cells[i][0] <= cells[i - 1][0]:
            raise Damage(f"cell {i} is out of row order ({cells[i][0]!r} after {cells[i - 1][0]!r})")
    if len(cells) != trailer.entry_count:
        raise Damage(f"trailer counts {trailer.entry_count} cells, the data blocks hold {len(cells)}")
    if data_index and (trailer.first_data_block_offset != data_index[0].offset
                       or trailer.last_data_block_offset != data_index[-1].offset):
        raise Damage("trailer's first/last data block offsets disagree with the data index")
    last_key = file_info.get(LAST_KEY)
    if cells and last_key is not None and row_of_key(last_key) != cells[-1][0]:
        raise Damage(f"file info {LAST_KEY} {last_key!r} is not the last row {cells[-1][0]!r}")

    metas: dict[str, bytes] = {}
    for i, entry in enumerate(meta_index):
        if entry.offset < 0 or entry.size < HEADER_SIZE or entry.offset + entry.size > load_on_open:
            raise Damage(f"meta index entry {i} (offset {entry.offset}, size {entry.size}) is out of place",
                         meta_root.offset)
        block = read_block(data, entry.offset, entry.offset + entry.size, codec, frozenset({META_MAGIC}))
        if block.end != entry.offset + entry.size:
            raise Damage(f"meta block is {block.end - block.offset} bytes, the index gives {entry.size}",
                         block.offset)
        try:
            name = entry.key.decode()
        except UnicodeDecodeError as e:
            raise Damage(f"meta block name {entry.key!r} is not UTF-8", meta_root.offset) from e
        metas[name] = block.payload
    return HFileContents(cells=cells, file_info=file_info, trailer=trailer, meta_blocks=metas,
                         data_index=data_index)


def _error(e: Damage, source: str) -> MetadataTableError:
    where = f" at byte {e.offset}" if e.offset is not None else ""
    return MetadataTableError(f"{source or '<HFile bytes>'}: corrupt HFile{where}: {e}")


def read_hfile(data: bytes, *, source: str = "") -> HFileContents:
    """Decode an HFile written by Hudi's native writer or by HBase 2.x (single-level index, GZ or NONE, NULL,
    CRC32 or CRC32C checksums). Raises ``MetadataTableError`` naming ``source`` on any damage."""
    try:
        return _decode(bytes(data))
    except Damage as e:
        raise _error(e, source) from None


def read_blocks(data: bytes, *, source: str = "") -> list[HFileBlock]:
    """Every block of an HFile in file order, from offset 0 to the trailer, decompressed with the trailer's
    codec. Raises ``MetadataTableError`` naming ``source`` on any damage."""
    try:
        raw = bytes(data)
        if len(raw) < TRAILER_SIZE:
            raise Damage(f"{len(raw)} bytes is too short for an HFile")
        trailer = read_trailer(raw)
        if trailer.compression_codec not in CODEC_IDS.values():
            raise Damage(f"HFile compression {trailer.codec_name} is not supported (GZ or NONE)")
        blocks: list[HFileBlock] = []
        pos = 0
        end = len(raw) - TRAILER_SIZE
        while pos < end:
            block = read_block(raw, pos, end, trailer.compression_codec)
            blocks.append(block)
            pos = block.end
        return blocks
    except Damage as e:
        raise _error(e, source) from None
