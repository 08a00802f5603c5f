"""Apache Hudi log files: the blocks in them, the blocks the metadata table needs, and log file names.

A log file is a run of blocks (``HoodieLogFormatWriter.appendBlocks``), all integers big-endian:

- magic ``#HUDI#``;
- ``int64`` block length: the bytes after this field up to the end of the block;
- ``int32`` log format version (1);
- ``int32`` block type (``BlockType``);
- header: ``int32`` entry count, then per entry ``int32`` key ordinal (``HeaderKey``), ``int32`` byte length and
  the UTF-8 value;
- ``int64`` content length and the content;
- footer, encoded like the header (Hudi writes no entries);
- ``int64`` reverse pointer: the block's bytes from the magic up to this field (block length + 6).

Hudi keeps headers in a ``HashMap`` keyed by enum constants, so their order in a file is arbitrary;
``LogBlock.header`` keeps the file's order and ``encode_block`` writes the mapping's order.

The metadata table writes HFILE_DATA blocks (content: an HFile of record key -> Avro record with its key field
blanked, file info ``schema`` = the SCHEMA header; ``HFileUtils.serializeRecordsToLogBlock``), an empty DELETE
block in each new file group's first log file, and (table version 6) ROLLBACK command blocks.
"""

from __future__ import annotations

import itertools
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from hudi_clusterd.errors import MetadataTableError
from hudi_clusterd.formats.hfile import (
    DEFAULT_BLOCK_SIZE,
    SCHEMA_KEY,
    HFileLayout,
    read_hfile,
    write_hfile,
)

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
DELETE_BLOCK_VERSION = 3
ROLLBACK_COMMAND = "0"  # HoodieCommandBlockTypeEnum.ROLLBACK_BLOCK's ordinal
LOG_BASE_VERSION = 1

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_BLOCK_HEAD = struct.Struct(">qii")  # block length, format version, block type
_MIN_BLOCK_LENGTH = 4 + 4 + 4 + 8 + 4 + 8  # version, type, header count, content length, footer count, pointer
_EMPTY_DELETE_CONTENT = struct.pack(">ii", DELETE_BLOCK_VERSION, 1) + b"\x00"  # Avro: an empty array


class BlockType(IntEnum):
    """``HoodieLogBlock.HoodieLogBlockType``, stored as its ordinal."""

    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(IntEnum):
    """``HoodieLogBlock.HeaderMetadataType``, stored as its ordinal."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


@dataclass(frozen=True)
class LogBlock:
    """One log block: type, header, raw content and footer."""

    block_type: BlockType
    header: Mapping[HeaderKey, str]
    content: bytes
    footer: Mapping[HeaderKey, str] = field(default_factory=dict)


def _metadata_bytes(entries: Mapping[HeaderKey, str], what: str) -> bytes:
    parts = [_I32.pack(len(entries))]
    for key, value in entries.items():
        if not isinstance(value, str):
            raise MetadataTableError(f"log block {what} {key!r} must be a string, got {type(value).__name__}")
        raw = value.encode()
        parts += (struct.pack(">ii", HeaderKey(key), len(raw)), raw)
    return b"".join(parts)


def encode_block(block: LogBlock) -> bytes:
    """The bytes of ``block`` as Hudi's log writer appends them."""
    header = _metadata_bytes(block.header, "header")
    footer = _metadata_bytes(block.footer, "footer")
    content = bytes(block.content)
    length = 4 + 4 + len(header) + 8 + len(content) + len(footer) + 8
    return b"".join((MAGIC, _BLOCK_HEAD.pack(length, LOG_FORMAT_VERSION, BlockType(block.block_type)), header,
                     _I64.pack(len(content)), content, footer, _I64.pack(length + len(MAGIC))))


class _Damage(Exception):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def _read_metadata(data: bytes, pos: int, end: int, what: str) -> tuple[dict[HeaderKey, str], int]:
    if pos + 4 > end:
        raise _Damage(f"{what} count runs past the block", pos)
    count = _I32.unpack_from(data, pos)[0]
    pos += 4
    if count < 0 or count * 8 > end - pos:
        raise _Damage(f"bad {what} entry count {count}", pos - 4)
    entries: dict[HeaderKey, str] = {}
    for _ in range(count):
        if pos + 8 > end:
            raise _Damage(f"{what} entry runs past the block", pos)
        ordinal, length = struct.unpack_from(">ii", data, pos)
        if ordinal not in HeaderKey._value2member_map_:
            raise _Damage(f"unknown {what} key ordinal {ordinal}", pos)
        if length < 0 or length > end - pos - 8:
            raise _Damage(f"{what} entry of {length} bytes runs past the block", pos)
        key = HeaderKey(ordinal)
        if key in entries:
            raise _Damage(f"{what} key {key.name} repeats", pos)
        try:
            entries[key] = data[pos + 8:pos + 8 + length].decode()
        except UnicodeDecodeError as e:
            raise _Damage(f"{what} {key.name} is not UTF-8", pos) from e
        pos += 8 + length
    return entries, pos


def _read_block(data: bytes, pos: int) -> tuple[LogBlock, int]:
    start = pos
    if data[pos:pos + len(MAGIC)] != MAGIC:
        raise _Damage(f"no block magic (found {bytes(data[pos:pos + len(MAGIC)])!r})", pos)
    pos += len(MAGIC)
    if pos + _BLOCK_HEAD.size > len(data):
        raise _Damage("block head is truncated", start)
    length, version, type_ordinal = _BLOCK_HEAD.unpack_from(data, pos)
    end = pos + 8 + length
    if length < _MIN_BLOCK_LENGTH or end > len(data):
        raise _Damage(f"block length {length} does not fit the {len(data) - start} bytes left", start)
    if version != LOG_FORMAT_VERSION:
        raise _Damage(f"log format version {version} is not supported (only {LOG_FORMAT_VERSION})", pos + 8)
    if type_ordinal not in BlockType._value2member_map_:
        raise _Damage(f"unknown block type {type_ordinal}", pos + 12)
    reverse = _I64.unpack_from(data, end - 8)[0]
    if reverse != end - 8 - start:
        raise _Damage(f"reverse pointer {reverse} disagrees with block length {length}", end - 8)
    header, pos = _read_metadata(data, pos + 16, end - 8, "header")
    if pos + 8 > end - 8:
        raise _Damage("content length runs past the block", pos)
    content_length = _I64.unpack_from(data, pos)[0]
    pos += 8
    if content_length < 0 or content_length > end - 8 - pos:
        raise _Damage(f"content length {content_length} does not fit the block", pos - 8)
    content = bytes(data[pos:pos + content_length])
    footer, pos = _read_metadata(data, pos + content_length, end - 8, "footer")
    if pos != end - 8:
        raise _Damage(f"{end - 8 - pos} stray bytes after the footer", pos)
    return LogBlock(BlockType(type_ordinal), header, content, footer), end


def decode_log_file(data: bytes, *, source: str = "") -> list[LogBlock]:
    """Every block of a log file, in order. Raises ``MetadataTableError`` naming ``source`` and the offset when
    a block is damaged or truncated (Hudi's reader would turn it into a CORRUPT block)."""
    raw = bytes(data)
    blocks: list[LogBlock] = []
    pos = 0
    try:
        while pos < len(raw):
            block, pos = _read_block(raw, pos)
            blocks.append(block)
    except _Damage as e:
        raise MetadataTableError(f"{source or '<log file bytes>'}: corrupt log block {len(blocks)} at byte "
                                 f"{e.offset}: {e}") from None
    return blocks


def hfile_data_block(
    instant: str,
    schema: str,
    records: Sequence[tuple[str, bytes]],
    *,
    codec: str = "GZ",
    create_time_ms: int | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    layout: HFileLayout = HFileLayout.HBASE_COMPATIBLE,
) -> LogBlock:
    """An HFILE_DATA block of ``records`` (record key, Avro binary of the record with its key field already
    blanked), sorted here by the keys' UTF-8 bytes; headers INSTANT_TIME and SCHEMA. Raises
    ``MetadataTableError`` for no records or a repeated key (Hudi refuses both)."""
    if not records:
        raise MetadataTableError("an HFILE_DATA block needs at least one record")
    cells = sorted(((key.encode(), bytes(value)) for key, value in records), key=lambda cell: cell[0])
    for before, after in itertools.pairwise(cells):
        if before[0] == after[0]:
            raise MetadataTableError(f"record key {after[0].decode()!r} appears twice; an HFILE_DATA block "
                                     "holds one record per key")
    content = write_hfile(cells, {SCHEMA_KEY: schema.encode()}, codec=codec, block_size=block_size,
                          create_time_ms=create_time_ms, layout=layout)
    return LogBlock(BlockType.HFILE_DATA, {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: schema}, content)


def hfile_block_records(block: LogBlock, *, source: str = "") -> list[tuple[str, bytes]]:
    """The (record key, value) pairs of an HFILE_DATA block, in key order. Raises ``MetadataTableError``
    naming ``source`` for another block type or a damaged HFile."""
    if block.block_type != BlockType.HFILE_DATA:
        raise MetadataTableError(f"{source or '<log block>'}: a {BlockType(block.block_type).name} block holds no "
                                 "HFile records")
    contents = read_hfile(block.content, source=source)
    try:
        return [(row.decode(), value) for row, value in contents.cells]
    except UnicodeDecodeError as e:
        raise MetadataTableError(f"{source or '<log block>'}: an HFile record key is not UTF-8") from e


def empty_delete_block(instant: str) -> LogBlock:
    """The DELETE block with no keys that starts each new MDT file group's first log file (80 bytes for a
    17-digit instant)."""
    return LogBlock(BlockType.DELETE, {HeaderKey.INSTANT_TIME: instant}, _EMPTY_DELETE_CONTENT)


def rollback_block(instant: str, target_instant: str) -> LogBlock:
    """The ROLLBACK command block that rolls back ``target_instant``'s blocks, written at ``instant``."""
    return LogBlock(BlockType.COMMAND, {HeaderKey.INSTANT_TIME: instant,
                                        HeaderKey.TARGET_INSTANT_TIME: target_instant,
                                        HeaderKey.COMMAND_BLOCK_TYPE: ROLLBACK_COMMAND}, b"")


# Hudi 1.x FSUtils.LOG_FILE_PATTERN (matched whole, ASCII digits, as Java's Matcher.matches does)
LOG_FILE_PATTERN = re.compile(r"\.([^._]+)_([^.]*)\.(log|archive)\.(\d+)(_((\d+)-(\d+)-(\d+))(\.cdc)?)?", re.ASCII)
_FILE_ID = re.compile(r"[^._]+")
_INSTANT = re.compile(r"[^.]*")
_WRITE_TOKEN = re.compile(r"\d+-\d+-\d+", re.ASCII)


@dataclass(frozen=True)
class LogFileName:
    """The name ``.<fileId>_<instant>.log.<version>_<writeToken>`` of a log file with a write token."""

    file_id: str
    base_instant: str
    version: int
    write_token: str

    def __post_init__(self) -> None:
        if not _FILE_ID.fullmatch(self.file_id) or not _INSTANT.fullmatch(self.base_instant):
            raise ValueError(f"not a log file id and instant: {self.file_id!r}, {self.base_instant!r}")
        if self.version < 0 or not _WRITE_TOKEN.fullmatch(self.write_token):
            raise ValueError(f"bad log version {self.version} or write token {self.write_token!r}")

    def __str__(self) -> str:
        return f".{self.file_id}_{self.base_instant}.log.{self.version}_{self.write_token}"

    @classmethod
    def parse(cls, name: str) -> LogFileName | None:
        """The parts of a ``.log`` file name with a write token (Hudi's LOG_FILE_PATTERN); None for any other
        name, archive and CDC log names included."""
        m = LOG_FILE_PATTERN.fullmatch(name)
        if m is None or m.group(3) != "log" or m.group(6) is None or m.group(10) is not None:
            return None
        return cls(m.group(1), m.group(2), int(m.group(4)), m.group(6))
