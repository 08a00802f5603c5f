"""HFile (format version 3) as Apache Hudi's metadata table writes it: the base files of MDT partitions and the
content of HFILE_DATA log blocks.

The writer produces the layout of Hudi 1.1+'s native writer (``org.apache.hudi.io.hfile.HFileWriterImpl``), which
Hudi 1.x reads natively and Hudi 0.14/0.15 reads through their shaded HBase 2.4.9 reader. All integers are
big-endian.

File: data blocks, then one meta block per meta entry, then the load-on-open section (root data index, meta index,
file info), then a 4096-byte trailer.

Block: a 33-byte header (8-byte magic, ``int32`` on-disk size without header, ``int32`` uncompressed payload size,
``int64`` previous block offset, ``int8`` checksum type, ``int32`` bytes per checksum (16384), ``int32`` on-disk
data size with header), the payload compressed on its own with the file's codec (GZ: one gzip member as Java's
``GZIPOutputStream`` of Java 8/11 writes it: deflate level 6, header ``1f8b0800 00000000 0000``), then
``4 * ceil(on-disk data size with header / 16384)`` checksum bytes: zeros for the NULL type the writer uses; CRC32
or CRC32C of each 16384-byte chunk of header and data for HBase-written files.

Data block payload, per cell: ``int32 keyLen = len(row) + 12``, ``int32 valueLen``, the key (``int16 len(row)``,
row, ``int8 0`` family length, ``int64 0x7FFFFFFFFFFFFFFF`` timestamp, ``int8 4`` type Put), the value, and a
Hadoop vlong MVCC version (one ``0`` byte). A block is closed when the next cell would take its uncompressed
size (key + value + 21 bytes per cell) past the block size.

Index entries: ``int64`` block offset, ``int32`` on-disk block size with header, a Hadoop vint key length, the
key. Data index keys are the first key of the block: ``int16 len(row)`` and the row, followed by the 10 bytes
of family length, timestamp and type in the ``HBASE_COMPATIBLE`` layout (Hudi 1.2.0 leaves them out, and HBase's
reader then fails when a point lookup lands on a block's first row). Meta index keys are the bare entry name.

File info: ``PBUF``, a protobuf varint length, protobuf ``InfoProto {repeated BytesBytesPair map_entry = 1}``
in ``java.util.HashMap`` iteration order. The writer sets ``MAX_MEMSTORE_TS_KEY`` (``int64 0``),
``hfile.LASTKEY`` (``int16 len(row)`` and the last row), ``hfile.AVG_KEY_LEN`` and ``hfile.AVG_VALUE_LEN``
(``int32``, row and value bytes per cell), ``hfile.CREATE_TIME_TS`` (``int64`` ms) and ``KEY_VALUE_VERSION``
(``int32 1``: each cell carries an MVCC vlong); the caller adds the rest (``schema`` in the MDT).

Trailer: magic ``TRABLK"$``, a varint length, protobuf ``TrailerProto``, zero padding, and the version in the
last 4 bytes (minor version byte, then the major version in 3 bytes: 3).
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from hudi_clusterd.errors import MetadataTableError

HEADER_SIZE = 33
TRAILER_SIZE = 4096
BYTES_PER_CHECKSUM = 16384
DEFAULT_BLOCK_SIZE = 1 << 20
MAJOR_VERSION = 3
COMPARATOR_CLASS_NAME = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"

DATA_MAGIC = b"DATABLK*"
ENCODED_DATA_MAGIC = b"DATABLKE"
LEAF_INDEX_MAGIC = b"IDXLEAF2"
BLOOM_CHUNK_MAGIC = b"BLMFBLK2"
META_MAGIC = b"METABLKc"
INTERMEDIATE_INDEX_MAGIC = b"IDXINTE2"
ROOT_INDEX_MAGIC = b"IDXROOT2"
FILE_INFO_MAGIC = b"FILEINF2"
GENERAL_BLOOM_META_MAGIC = b"BLMFMET2"
DELETE_FAMILY_BLOOM_META_MAGIC = b"DFBLMET2"
TRAILER_MAGIC = b'TRABLK"$'
_BLOCK_MAGICS = frozenset({DATA_MAGIC, ENCODED_DATA_MAGIC, LEAF_INDEX_MAGIC, BLOOM_CHUNK_MAGIC, META_MAGIC,
                           INTERMEDIATE_INDEX_MAGIC, ROOT_INDEX_MAGIC, FILE_INFO_MAGIC, GENERAL_BLOOM_META_MAGIC,
                           DELETE_FAMILY_BLOOM_META_MAGIC})
_PB_MAGIC = b"PBUF"

CHECKSUM_NULL = 0
CHECKSUM_CRC32 = 1
CHECKSUM_CRC32C = 2

# HBase's compression codec ids (Hudi's CompressionCodec ids are the same)
CODEC_IDS = {"GZ": 1, "NONE": 2}
_CODEC_NAMES = {0: "LZO", 1: "GZ", 2: "NONE", 3: "SNAPPY", 4: "LZ4", 5: "BZ2", 6: "ZSTD"}

MAX_MEMSTORE_TS_KEY = "MAX_MEMSTORE_TS_KEY"
LAST_KEY = "hfile.LASTKEY"
AVG_KEY_LEN = "hfile.AVG_KEY_LEN"
AVG_VALUE_LEN = "hfile.AVG_VALUE_LEN"
CREATE_TIME_KEY = "hfile.CREATE_TIME_TS"
KEY_VALUE_VERSION = "KEY_VALUE_VERSION"
SCHEMA_KEY = "schema"
# file-info entries the writer computes; a caller may not pass them
WRITER_FILE_INFO_KEYS = frozenset({MAX_MEMSTORE_TS_KEY, LAST_KEY, AVG_KEY_LEN, AVG_VALUE_LEN, CREATE_TIME_KEY,
                                   KEY_VALUE_VERSION})
_MAX_TAGS_LEN = "hfile.MAX_TAGS_LEN"
_DATA_BLOCK_ENCODING = "DATA_BLOCK_ENCODING"

_LATEST_TIMESTAMP = (1 << 63) - 1
_TYPE_PUT = 4
_KEY_SUFFIX = b"\x00" + struct.pack(">qB", _LATEST_TIMESTAMP, _TYPE_PUT)  # family length, timestamp, type
_CELL_OVERHEAD = 21  # per-cell bytes besides row and value: lengths 8, row length 2, suffix 10, MVCC 1
_MAX_ROW = 0x7FFF
_MAX_INT = 0x7FFFFFFF

_HEADER = struct.Struct(">8siiqbii")
_INDEX_ENTRY = struct.Struct(">qi")
_CELL_HEAD = struct.Struct(">iih")
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"  # java.util.zip.GZIPOutputStream: no mtime, OS 0

# TrailerProto field numbers
_T_FILE_INFO_OFFSET = 1
_T_LOAD_ON_OPEN_OFFSET = 2
_T_UNCOMPRESSED_DATA_INDEX_SIZE = 3
_T_TOTAL_UNCOMPRESSED_BYTES = 4
_T_DATA_INDEX_COUNT = 5
_T_META_INDEX_COUNT = 6
_T_ENTRY_COUNT = 7
_T_NUM_DATA_INDEX_LEVELS = 8
_T_FIRST_DATA_BLOCK_OFFSET = 9
_T_LAST_DATA_BLOCK_OFFSET = 10
_T_COMPARATOR_CLASS_NAME = 11
_T_COMPRESSION_CODEC = 12
_T_ENCRYPTION_KEY = 13


class HFileLayout(StrEnum):
    """Which bytes ``write_hfile`` produces where Hudi 1.2.0's writer and HBase's reader disagree."""

    HBASE_COMPATIBLE = "hbase-compatible"
    """Data index keys are full KeyValue keys and each data block names the previous one; read by HBase 2.4.9
    (Hudi 0.14/0.15) and by Hudi 1.x's native reader."""
    HUDI_1_2 = "hudi-1.2"
    """Hudi 1.2.0's bytes: data index keys are the row only, and every data block after the first gives its own
    offset as the previous block's."""


@dataclass(frozen=True)
class HFileTrailer:
    """The trailer's fields; protobuf fields absent from the file read as 0, "" or None."""

    file_info_offset: int
    load_on_open_offset: int
    uncompressed_data_index_size: int
    total_uncompressed_bytes: int
    data_index_count: int
    meta_index_count: int
    entry_count: int
    num_data_index_levels: int
    first_data_block_offset: int
    last_data_block_offset: int
    comparator_class_name: str
    compression_codec: int
    encryption_key: bytes | None
    major_version: int
    minor_version: int
    fields: tuple[int, ...]
    """protobuf field numbers present, in file order"""

    @property
    def codec_name(self) -> str:
        return _CODEC_NAMES.get(self.compression_codec, str(self.compression_codec))


@dataclass(frozen=True)
class HFileBlock:
    """One block as stored: header fields and the uncompressed payload (checksum bytes apart)."""

    offset: int
    magic: bytes
    on_disk_size_without_header: int
    uncompressed_size: int
    prev_block_offset: int
    checksum_type: int
    bytes_per_checksum: int
    on_disk_data_size_with_header: int
    payload: bytes
    checksum: bytes

    @property
    def end(self) -> int:
        return self.offset + HEADER_SIZE + self.on_disk_size_without_header


@dataclass(frozen=True)
class IndexEntry:
    """A root index entry: the block's offset and on-disk size with header, and its key as stored."""

    offset: int
    size: int
    key: bytes


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


# ----------------------------------------------------------------------------------------------- encodings


def _pb_varint(value: int) -> bytes:
    """Protobuf base-128 varint of an unsigned 64-bit value (negative values as two's complement)."""
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _pb_read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it; ValueError when it runs past ``end`` or 10 bytes."""
    result = 0
    shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("truncated or overlong protobuf varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7


def _pb_fields(buf: bytes, pos: int, end: int) -> list[tuple[int, int | bytes]]:
    """Every field of one protobuf message in ``buf[pos:end]``: (number, varint value or length-delimited bytes)."""
    out: list[tuple[int, int | bytes]] = []
    while pos < end:
        tag, pos = _pb_read_varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ValueError("protobuf field number 0")
        if wire == 0:
            value, pos = _pb_read_varint(buf, pos, end)
            out.append((number, value))
        elif wire == 2:
            length, pos = _pb_read_varint(buf, pos, end)
            if length > end - pos:
                raise ValueError("protobuf field runs past its message")
            out.append((number, bytes(buf[pos:pos + length])))
            pos += length
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if width > end - pos:
                raise ValueError("protobuf field runs past its message")
            pos += width
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    return out


def _pb_bytes_field(number: int, value: bytes) -> bytes:
    return _pb_varint(number << 3 | 2) + _pb_varint(len(value)) + value


def _pb_int_field(number: int, value: int) -> bytes:
    return _pb_varint(number << 3) + _pb_varint(value)


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _hadoop_vint(value: int) -> bytes:
    """Hadoop ``WritableUtils.writeVLong``: one byte for -112..127, else a length byte and big-endian bytes."""
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    marker = -112
    if value < 0:
        value = ~value
        marker = -120
    width = (value.bit_length() + 7) // 8
    return struct.pack(">b", marker - width) + value.to_bytes(width, "big")


def _hadoop_read_vlong(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The Hadoop vlong at ``pos`` and the position after it; ValueError when it runs past ``end``."""
    if pos >= end:
        raise ValueError("truncated vlong")
    first = buf[pos] - 256 if buf[pos] > 127 else buf[pos]
    if first >= -112:
        return first, pos + 1
    width = (-119 - first) if first < -120 else (-111 - first)
    if pos + width > end:
        raise ValueError("truncated vlong")
    value = int.from_bytes(buf[pos + 1:pos + width], "big")
    return (~value if first < -120 or -112 <= first < 0 else value), pos + width


def _java_string_hash(s: str) -> int:
    """``String.hashCode`` as an unsigned 32-bit value (over UTF-16 code units)."""
    units = s.encode("utf-16-be")
    h = 0
    for unit in struct.unpack(f">{len(units) // 2}H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h


def java_hashmap_order(keys: Sequence[str]) -> list[str]:
    """The iteration order of a ``java.util.HashMap<String, ?>`` (default capacity and load factor) after
    putting ``keys`` in this order; a repeated key keeps its first place. Tree bins are not modelled (they need
    nine keys in one bucket of a table of 64 or more)."""
    capacity = 16
    buckets: list[list[tuple[int, str]]] = [[] for _ in range(capacity)]
    seen: set[str] = set()

    def resize() -> None:
        nonlocal capacity, buckets
        capacity *= 2
        grown: list[list[tuple[int, str]]] = [[] for _ in range(capacity)]
        for bucket in buckets:
            for h, key in bucket:
                grown[h & (capacity - 1)].append((h, key))
        buckets = grown

    for key in keys:
        if key in seen:
            continue
        seen.add(key)
        h = _java_string_hash(key)
        h ^= h >> 16
        bucket = buckets[h & (capacity - 1)]
        bucket.append((h, key))
        if len(bucket) > 8 and capacity < 64:
            resize()
        if len(seen) > capacity * 3 // 4:
            resize()
    return [key for bucket in buckets for _, key in bucket]


def java_gzip(payload: bytes) -> bytes:
    """One gzip member as ``java.util.zip.GZIPOutputStream`` of Java 8/11 writes it: default deflate level (6),
    no mtime, OS byte 0 (Java 16+ writes 255 there; the deflate bytes are the same)."""
    deflater = zlib.compressobj(6, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY)
    body = deflater.compress(payload) + deflater.flush()
    return b"".join((_GZIP_HEADER, body, struct.pack("<II", zlib.crc32(payload), len(payload) & 0xFFFFFFFF)))


def _gunzip(data: bytes, expected: int) -> bytes:
    """The gzip stream ``data`` (one or more members) decompressed; ValueError unless it is exactly ``expected``
    bytes long and nothing follows the last member."""
    out: list[bytes] = []
    total = 0
    rest = data
    while True:
        inflater = zlib.decompressobj(31)
        try:
            chunk = inflater.decompress(rest, expected - total + 1)
        except zlib.error as e:
            raise ValueError(f"corrupt gzip stream ({e})") from e
        total += len(chunk)
        out.append(chunk)
        if total > expected:
            raise ValueError(f"gzip stream inflates past the {expected} bytes the header gives")
        if not inflater.eof:
            raise ValueError("truncated gzip stream")
        rest = inflater.unused_data
        if not rest:
            break
    if total != expected:
        raise ValueError(f"gzip stream inflates to {total} bytes, the header gives {expected}")
    return b"".join(out)


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``."""
    crc = 0xFFFFFFFF
    table = _CRC32C_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _checksum_bytes(data_size_with_header: int, bytes_per_checksum: int) -> int:
    if bytes_per_checksum <= 0:
        return 0
    return 4 * -(-data_size_with_header // bytes_per_checksum)


# ----------------------------------------------------------------------------------------------------- writer


def _codec_id(codec: str) -> int:
    cid = CODEC_IDS.get(codec.upper())
    if cid is None:
        raise MetadataTableError(f"HFile codec {codec!r} is not supported (GZ or NONE)")
    return cid


def _block(magic: bytes, payload: bytes, prev_offset: int, codec_id: int) -> bytes:
    body = java_gzip(payload) if codec_id == CODEC_IDS["GZ"] else payload
    data_size = HEADER_SIZE + len(body)
    n_checksum = _checksum_bytes(data_size, BYTES_PER_CHECKSUM)
    header = _HEADER.pack(magic, len(body) + n_checksum, len(payload), prev_offset, CHECKSUM_NULL,
                          BYTES_PER_CHECKSUM, data_size)
    return b"".join((header, body, bytes(n_checksum)))


def _data_payload(cells: Sequence[tuple[bytes, bytes]]) -> bytes:
    parts: list[bytes] = []
    for row, value in cells:
        parts += (_CELL_HEAD.pack(len(row) + 12, len(value), len(row)), row, _KEY_SUFFIX, value, b"\x00")
    return b"".join(parts)


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
        block = _block(DATA_MAGIC, _data_payload(rows[block_start:end]), prev_offset, codec_id)
        index.append((offset, len(block), rows[block_start][0]))
        out.append(block)
        last_data_offset = offset
        prev_offset = offset if layout is HFileLayout.HBASE_COMPATIBLE else offset + len(block)
        offset += len(block)

    for i, (row, value) in enumerate(rows):
        size = len(row) + len(value) + _CELL_OVERHEAD
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
        block = _block(META_MAGIC, bytes(metas[name]), -1, codec_id)
        meta_index.append((offset, len(block), name.encode()))
        out.append(block)
        offset += len(block)

    load_on_open = offset
    root: list[bytes] = []
    for block_offset, size, first in index:
        key = struct.pack(">h", len(first)) + first
        if layout is HFileLayout.HBASE_COMPATIBLE:
            key += _KEY_SUFFIX
        root += (_INDEX_ENTRY.pack(block_offset, size), _hadoop_vint(len(key)), key)
    block = _block(ROOT_INDEX_MAGIC, b"".join(root), -1, codec_id)
    out.append(block)
    offset += len(block)
    meta_root: list[bytes] = []
    for block_offset, size, name_bytes in meta_index:
        meta_root += (_INDEX_ENTRY.pack(block_offset, size), _hadoop_vint(len(name_bytes)), name_bytes)
    block = _block(ROOT_INDEX_MAGIC, b"".join(meta_root), -1, codec_id)
    out.append(block)
    offset += len(block)

    n = len(rows)
    last_row = rows[-1][0] if rows else b""
    computed = {
        MAX_MEMSTORE_TS_KEY: struct.pack(">q", 0),
        LAST_KEY: struct.pack(">h", len(last_row)) + last_row if rows else b"",
        AVG_KEY_LEN: struct.pack(">i", sum(len(r) for r, _ in rows) // n if n else 0),
        CREATE_TIME_KEY: struct.pack(">q", create_time_ms),
        AVG_VALUE_LEN: struct.pack(">i", sum(len(v) for _, v in rows) // n if n else 0),
        KEY_VALUE_VERSION: struct.pack(">i", 1),
    }
    values = {**extra, **computed}
    insertion = [MAX_MEMSTORE_TS_KEY, *extra, LAST_KEY, AVG_KEY_LEN, CREATE_TIME_KEY, AVG_VALUE_LEN,
                 KEY_VALUE_VERSION]
    info = b"".join(_pb_bytes_field(1, _pb_bytes_field(1, key.encode()) + _pb_bytes_field(2, bytes(values[key])))
                    for key in java_hashmap_order(insertion))
    file_info_offset = offset
    block = _block(FILE_INFO_MAGIC, _PB_MAGIC + _pb_varint(len(info)) + info, -1, codec_id)
    out.append(block)
    offset += len(block)

    trailer = b"".join((
        _pb_int_field(_T_FILE_INFO_OFFSET, file_info_offset),
        _pb_int_field(_T_LOAD_ON_OPEN_OFFSET, load_on_open),
        _pb_int_field(_T_UNCOMPRESSED_DATA_INDEX_SIZE, uncompressed_total),
        _pb_int_field(_T_DATA_INDEX_COUNT, len(index)),
        _pb_int_field(_T_META_INDEX_COUNT, len(meta_index)),
        _pb_int_field(_T_ENTRY_COUNT, n),
        _pb_int_field(_T_NUM_DATA_INDEX_LEVELS, 1),
        _pb_int_field(_T_FIRST_DATA_BLOCK_OFFSET, index[0][0] if index else -1),
        _pb_int_field(_T_LAST_DATA_BLOCK_OFFSET, last_data_offset),
        _pb_bytes_field(_T_COMPARATOR_CLASS_NAME, COMPARATOR_CLASS_NAME.encode()),
        _pb_int_field(_T_COMPRESSION_CODEC, codec_id),
    ))
    head = TRAILER_MAGIC + _pb_varint(len(trailer)) + trailer
    out.append(head + bytes(TRAILER_SIZE - 1 - len(head)) + bytes((MAJOR_VERSION,)))
    return b"".join(out)


# ----------------------------------------------------------------------------------------------------- reader


class _Damage(Exception):
    """Internal: what is wrong, and where."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset


def _read_block(data: bytes, offset: int, limit: int, codec_id: int, magics: frozenset[bytes] | None = None,
                ) -> HFileBlock:
    """The block at ``offset``, which must end by ``limit``; checks its header, sizes and checksums."""
    if offset < 0 or offset + HEADER_SIZE > limit:
        raise _Damage("block header runs past its section", offset)
    magic, on_disk, uncompressed, prev, ck_type, bpc, data_size = _HEADER.unpack_from(data, offset)
    if magic not in _BLOCK_MAGICS:
        raise _Damage(f"bad block magic {magic!r}", offset)
    if magics is not None and magic not in magics:
        raise _Damage(f"expected a {'/'.join(sorted(m.decode() for m in magics))} block, found {magic.decode()}",
                      offset)
    if on_disk < 0 or uncompressed < 0 or data_size < HEADER_SIZE or data_size - HEADER_SIZE > on_disk:
        raise _Damage(f"inconsistent block sizes (on disk {on_disk}, uncompressed {uncompressed}, data with "
                      f"header {data_size})", offset)
    if ck_type not in (CHECKSUM_NULL, CHECKSUM_CRC32, CHECKSUM_CRC32C):
        raise _Damage(f"unknown checksum type {ck_type}", offset)
    if bpc < 0 or (bpc == 0 and ck_type != CHECKSUM_NULL):
        raise _Damage(f"bad bytes per checksum {bpc}", offset)
    n_checksum = _checksum_bytes(data_size, bpc)
    if data_size + n_checksum != HEADER_SIZE + on_disk:
        raise _Damage(f"block of {HEADER_SIZE + on_disk} bytes does not hold {data_size} data bytes and "
                      f"{n_checksum} checksum bytes", offset)
    end = offset + HEADER_SIZE + on_disk
    if end > limit:
        raise _Damage(f"block of {HEADER_SIZE + on_disk} bytes runs past its section", offset)
    checksum = bytes(data[offset + data_size:end])
    if ck_type != CHECKSUM_NULL:
        compute = zlib.crc32 if ck_type == CHECKSUM_CRC32 else crc32c
        sums = struct.unpack(f">{n_checksum // 4}I", checksum)
        for i, expected in enumerate(sums):
            chunk = data[offset + i * bpc:offset + min((i + 1) * bpc, data_size)]
            if compute(chunk) != expected:
                raise _Damage(f"checksum mismatch in chunk {i}", offset)
    body = bytes(data[offset + HEADER_SIZE:offset + data_size])
    if codec_id == CODEC_IDS["GZ"]:
        try:
            payload = _gunzip(body, uncompressed)
        except ValueError as e:
            raise _Damage(str(e), offset) from e
    else:
        if len(body) != uncompressed:
            raise _Damage(f"uncompressed block holds {len(body)} bytes, the header gives {uncompressed}", offset)
        payload = body
    return HFileBlock(offset, magic, on_disk, uncompressed, prev, ck_type, bpc, data_size, payload, checksum)


def _read_index(payload: bytes, count: int, offset: int) -> tuple[list[IndexEntry], int]:
    """``count`` root index entries from ``payload``, and the position after them."""
    entries: list[IndexEntry] = []
    pos = 0
    end = len(payload)
    for i in range(count):
        if pos + 12 > end:
            raise _Damage(f"index entry {i} of {count} runs past the index block", offset)
        block_offset, size = _INDEX_ENTRY.unpack_from(payload, pos)
        try:
            key_len, pos = _hadoop_read_vlong(payload, pos + 12, end)
        except ValueError as e:
            raise _Damage(f"index entry {i}: {e}", offset) from e
        if key_len < 0 or pos + key_len > end:
            raise _Damage(f"index entry {i} has a bad key length {key_len}", offset)
        entries.append(IndexEntry(block_offset, size, bytes(payload[pos:pos + key_len])))
        pos += key_len
    return entries, pos


def _row_of_key(key: bytes) -> bytes | None:
    """The row of a KeyValue key or of a bare ``int16 len + row`` key; None when the length does not fit."""
    if len(key) < 2:
        return None
    n = struct.unpack_from(">h", key)[0]
    if n < 0 or 2 + n > len(key):
        return None
    return key[2:2 + n]


def _read_trailer(data: bytes) -> HFileTrailer:
    base = len(data) - TRAILER_SIZE
    if data[base:base + 8] != TRAILER_MAGIC:
        raise _Damage(f"bad trailer magic {bytes(data[base:base + 8])!r}", base)
    version = struct.unpack_from(">I", data, len(data) - 4)[0]
    major, minor = version & 0xFFFFFF, version >> 24
    if major != MAJOR_VERSION:
        raise _Damage(f"HFile major version {major} is not supported (only {MAJOR_VERSION})", len(data) - 4)
    limit = len(data) - 4
    try:
        length, pos = _pb_read_varint(data, base + 8, limit)
        if length > limit - pos:
            raise ValueError("trailer protobuf runs past the trailer")
        fields = _pb_fields(data, pos, pos + length)
    except ValueError as e:
        raise _Damage(f"corrupt trailer ({e})", base) from e
    values: dict[int, int | bytes] = {}
    for number, value in fields:
        values[number] = value

    def num(n: int, default: int = 0) -> int:
        v = values.get(n, default)
        if not isinstance(v, int):
            raise _Damage(f"trailer field {n} has the wrong wire type", base)
        return _signed64(v)

    comparator = values.get(_T_COMPARATOR_CLASS_NAME, b"")
    encryption = values.get(_T_ENCRYPTION_KEY)
    if not isinstance(comparator, bytes) or not (encryption is None or isinstance(encryption, bytes)):
        raise _Damage("trailer string field has the wrong wire type", base)
    try:
        comparator_name = comparator.decode()
    except UnicodeDecodeError as e:
        raise _Damage("trailer comparator class name is not UTF-8", base) from e
    return HFileTrailer(
        file_info_offset=num(_T_FILE_INFO_OFFSET),
        load_on_open_offset=num(_T_LOAD_ON_OPEN_OFFSET),
        uncompressed_data_index_size=num(_T_UNCOMPRESSED_DATA_INDEX_SIZE),
        total_uncompressed_bytes=num(_T_TOTAL_UNCOMPRESSED_BYTES),
        data_index_count=num(_T_DATA_INDEX_COUNT),
        meta_index_count=num(_T_META_INDEX_COUNT),
        entry_count=num(_T_ENTRY_COUNT),
        num_data_index_levels=num(_T_NUM_DATA_INDEX_LEVELS),
        first_data_block_offset=num(_T_FIRST_DATA_BLOCK_OFFSET),
        last_data_block_offset=num(_T_LAST_DATA_BLOCK_OFFSET),
        comparator_class_name=comparator_name,
        compression_codec=num(_T_COMPRESSION_CODEC, CODEC_IDS["NONE"]),
        encryption_key=encryption,
        major_version=major,
        minor_version=minor,
        fields=tuple(number for number, _ in fields),
    )


def _read_file_info(payload: bytes, offset: int) -> dict[str, bytes]:
    if payload[:4] != _PB_MAGIC:
        raise _Damage("file info lacks its PBUF magic", offset)
    try:
        length, pos = _pb_read_varint(payload, 4, len(payload))
        if pos + length != len(payload):
            raise ValueError(f"file info protobuf of {length} bytes does not fill its block")
        info: dict[str, bytes] = {}
        for number, entry in _pb_fields(payload, pos, pos + length):
            if number != 1 or not isinstance(entry, bytes):
                raise ValueError(f"unexpected InfoProto field {number}")
            pair = dict(_pb_fields(entry, 0, len(entry)))
            first, second = pair.get(1), pair.get(2)
            if not isinstance(first, bytes) or not isinstance(second, bytes):
                raise ValueError("file info entry lacks its name or value")
            name = first.decode()
            if name in info:
                raise ValueError(f"file info key {name!r} repeats")
            info[name] = second
    except (ValueError, UnicodeDecodeError) as e:
        raise _Damage(f"corrupt file info ({e})", offset) from e
    return info


def _int_info(info: Mapping[str, bytes], key: str, width: int) -> int | None:
    raw = info.get(key)
    if raw is None:
        return None
    if len(raw) != width:
        raise _Damage(f"file info {key} holds {len(raw)} bytes, expected {width}")
    return int.from_bytes(raw, "big", signed=True)


def _read_cells(block: HFileBlock, with_mvcc: bool, with_tags: bool) -> list[tuple[bytes, bytes]]:
    p = block.payload
    end = len(p)
    pos = 0
    cells: list[tuple[bytes, bytes]] = []
    while pos < end:
        if pos + 10 > end:
            raise _Damage(f"cell at payload byte {pos} is truncated", block.offset)
        key_len, value_len, row_len = _CELL_HEAD.unpack_from(p, pos)
        key_start = pos + 8
        value_end = key_start + key_len + value_len
        if key_len < 0 or value_len < 0 or value_end > end:
            raise _Damage(f"cell at payload byte {pos} has bad lengths (key {key_len}, value {value_len})",
                          block.offset)
        if row_len < 0 or row_len + 12 > key_len or row_len + 12 + p[key_start + 2 + row_len] > key_len:
            raise _Damage(f"cell at payload byte {pos} has a bad key layout (row {row_len}, key {key_len})",
                          block.offset)
        cells.append((bytes(p[key_start + 2:key_start + 2 + row_len]), bytes(p[key_start + key_len:value_end])))
        pos = value_end
        if with_tags:
            if pos + 2 > end:
                raise _Damage(f"cell tags at payload byte {pos} are truncated", block.offset)
            pos += 2 + struct.unpack_from(">H", p, pos)[0]
        if with_mvcc:
            try:
                _, pos = _hadoop_read_vlong(p, pos, end)
            except ValueError as e:
                raise _Damage(f"cell MVCC version at payload byte {pos}: {e}", block.offset) from e
        if pos > end:
            raise _Damage("last cell runs past its block", block.offset)
    return cells


def _decode(data: bytes) -> HFileContents:
    if len(data) < TRAILER_SIZE + HEADER_SIZE:
        raise _Damage(f"{len(data)} bytes is too short for an HFile (trailer alone is {TRAILER_SIZE})")
    trailer = _read_trailer(data)
    codec = trailer.compression_codec
    if codec not in CODEC_IDS.values():
        raise _Damage(f"HFile compression {trailer.codec_name} is not supported (GZ or NONE)")
    if trailer.encryption_key is not None:
        raise _Damage("encrypted HFiles are not supported")
    if trailer.num_data_index_levels != 1:
        raise _Damage(f"a {trailer.num_data_index_levels}-level data index is not supported (only 1)")
    if trailer.data_index_count < 0 or trailer.meta_index_count < 0 or trailer.entry_count < 0:
        raise _Damage("negative counts in the trailer")
    section_end = len(data) - TRAILER_SIZE
    load_on_open = trailer.load_on_open_offset
    if not 0 <= load_on_open < section_end:
        raise _Damage(f"load-on-open offset {load_on_open} lies outside the file")

    root = _read_block(data, load_on_open, section_end, codec, frozenset({ROOT_INDEX_MAGIC}))
    data_index, used = _read_index(root.payload, trailer.data_index_count, root.offset)
    if len(root.payload) - used not in (0, 16):  # HBase may append 16 bytes of mid-key metadata
        raise _Damage(f"{len(root.payload) - used} stray bytes after the data index", root.offset)
    meta_root = _read_block(data, root.end, section_end, codec, frozenset({ROOT_INDEX_MAGIC}))
    meta_index, used = _read_index(meta_root.payload, trailer.meta_index_count, meta_root.offset)
    if used != len(meta_root.payload):
        raise _Damage(f"{len(meta_root.payload) - used} stray bytes after the meta index", meta_root.offset)
    if trailer.file_info_offset != meta_root.end:
        raise _Damage(f"trailer puts the file info at {trailer.file_info_offset}, the meta index ends at "
                      f"{meta_root.end}")
    info_block = _read_block(data, meta_root.end, section_end, codec, frozenset({FILE_INFO_MAGIC}))
    file_info = _read_file_info(info_block.payload, info_block.offset)
    pos = info_block.end
    while pos < section_end:  # HBase's bloom filter metadata may follow
        pos = _read_block(data, pos, section_end, codec,
                          frozenset({GENERAL_BLOOM_META_MAGIC, DELETE_FAMILY_BLOOM_META_MAGIC})).end

    encoding = file_info.get(_DATA_BLOCK_ENCODING)
    if encoding not in (None, b"NONE"):
        raise _Damage(f"data block encoding {encoding!r} is not supported")
    kv_version = _int_info(file_info, KEY_VALUE_VERSION, 4)
    with_mvcc = kv_version is None or kv_version == 1
    with_tags = _MAX_TAGS_LEN in file_info

    cells: list[tuple[bytes, bytes]] = []
    previous_end = 0
    for i, entry in enumerate(data_index):
        if entry.offset < previous_end or entry.size < HEADER_SIZE or entry.offset + entry.size > load_on_open:
            raise _Damage(f"data index entry {i} (offset {entry.offset}, size {entry.size}) is out of place",
                          root.offset)
        block = _read_block(data, entry.offset, entry.offset + entry.size, codec,
                            frozenset({DATA_MAGIC, ENCODED_DATA_MAGIC}))
        if block.magic == ENCODED_DATA_MAGIC:
            raise _Damage("encoded data blocks are not supported", block.offset)
        if block.end != entry.offset + entry.size:
            raise _Damage(f"data block is {block.end - block.offset} bytes, the index gives {entry.size}",
                          block.offset)
        block_cells = _read_cells(block, with_mvcc, with_tags)
        if not block_cells:
            raise _Damage("empty data block", block.offset)
        index_row = _row_of_key(entry.key)
        if index_row is None or index_row > block_cells[0][0]:
            raise _Damage(f"data index key {entry.key!r} does not lead its block", block.offset)
        if cells and block_cells[0][0] <= cells[-1][0]:
            raise _Damage("data blocks are out of row order", block.offset)
        cells += block_cells
        previous_end = block.end
    for i in range(1, len(cells)):
        if cells[i][0] <= cells[i - 1][0]:
            raise _Damage(f"cell {i} is out of row order ({cells[i][0]!r} after {cells[i - 1][0]!r})")
    if len(cells) != trailer.entry_count:
        raise _Damage(f"trailer counts {trailer.entry_count} cells, the data blocks hold {len(cells)}")
    if data_index and (trailer.first_data_block_offset != data_index[0].offset
                       or trailer.last_data_block_offset != data_index[-1].offset):
        raise _Damage("trailer's first/last data block offsets disagree with the data index")
    last_key = file_info.get(LAST_KEY)
    if cells and last_key is not None and _row_of_key(last_key) != cells[-1][0]:
        raise _Damage(f"file info {LAST_KEY} {last_key!r} is not the last row {cells[-1][0]!r}")

    metas: dict[str, bytes] = {}
    for i, entry in enumerate(meta_index):
        if entry.offset < 0 or entry.size < HEADER_SIZE or entry.offset + entry.size > load_on_open:
            raise _Damage(f"meta index entry {i} (offset {entry.offset}, size {entry.size}) is out of place",
                          meta_root.offset)
        block = _read_block(data, entry.offset, entry.offset + entry.size, codec, frozenset({META_MAGIC}))
        if block.end != entry.offset + entry.size:
            raise _Damage(f"meta block is {block.end - block.offset} bytes, the index gives {entry.size}",
                          block.offset)
        try:
            name = entry.key.decode()
        except UnicodeDecodeError as e:
            raise _Damage(f"meta block name {entry.key!r} is not UTF-8", meta_root.offset) from e
        metas[name] = block.payload
    return HFileContents(cells=cells, file_info=file_info, trailer=trailer, meta_blocks=metas,
                         data_index=data_index)


def _raise(e: _Damage, source: str) -> MetadataTableError:
    where = f" at byte {e.offset}" if e.offset is not None else ""
    return MetadataTableError(f"{source or '<HFile bytes>'}: corrupt HFile{where}: {e}")


def read_hfile(data: bytes, *, source: str = "") -> HFileContents:
    """Decode an HFile written by Hudi's native writer or by HBase 2.x (single-level index, GZ or NONE, NULL,
    CRC32 or CRC32C checksums). Raises ``MetadataTableError`` naming ``source`` on any damage."""
    try:
        return _decode(bytes(data))
    except _Damage as e:
        raise _raise(e, source) from None


def read_blocks(data: bytes, *, source: str = "") -> list[HFileBlock]:
    """Every block of an HFile in file order, from offset 0 to the trailer, decompressed with the trailer's
    codec. Raises ``MetadataTableError`` naming ``source`` on any damage."""
    try:
        raw = bytes(data)
        if len(raw) < TRAILER_SIZE:
            raise _Damage(f"{len(raw)} bytes is too short for an HFile")
        trailer = _read_trailer(raw)
        if trailer.compression_codec not in CODEC_IDS.values():
            raise _Damage(f"HFile compression {trailer.codec_name} is not supported (GZ or NONE)")
        blocks: list[HFileBlock] = []
        pos = 0
        end = len(raw) - TRAILER_SIZE
        while pos < end:
            block = _read_block(raw, pos, end, trailer.compression_codec)
            blocks.append(block)
            pos = block.end
        return blocks
    except _Damage as e:
        raise _raise(e, source) from None
