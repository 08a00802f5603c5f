"""Hudi's log format: a log file is a run of blocks (``HoodieLogFormatWriter.appendBlocks``), all integers
big-endian:

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
``LogBlock.header`` keeps the file's order and ``encode_block`` writes the mapping's order. This module frames
blocks of any type; what a block's content means is the business of the block-type modules.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from hudi_clusterd.errors import MetadataTableError

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_BLOCK_HEAD = struct.Struct(">qii")  # block length, format version, block type
_MIN_BLOCK_LENGTH = 4 + 4 + 4 + 8 + 4 + 8  # version, type, header count, content length, footer count, pointer


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


class BlockDamage(Exception):
    """A block that cannot be decoded; ``offset`` is the byte of the file where the damage was found."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def _read_metadata(data: bytes, pos: int, end: int, what: str) -> tuple[dict[HeaderKey, str], int]:
    if pos + 4 > end:
        raise BlockDamage(f"{what} count runs past the block", pos)
    count = _I32.unpack_from(data, pos)[0]
    pos += 4
    if count < 0 or count * 8 > end - pos:
        raise BlockDamage(f"bad {what} entry count {count}", pos - 4)
    entries: dict[HeaderKey, str] = {}
    for _ in range(count):
        if pos + 8 > end:
            raise BlockDamage(f"{what} entry runs past the block", pos)
        ordinal, length = struct.unpack_from(">ii", data, pos)
        if ordinal not in HeaderKey._value2member_map_:
            raise BlockDamage(f"unknown {what} key ordinal {ordinal}", pos)
        if length < 0 or length > end - pos - 8:
            raise BlockDamage(f"{what} entry of {length} bytes runs past the block", pos)
        key = HeaderKey(ordinal)
        if key in entries:
            raise BlockDamage(f"{what} key {key.name} repeats", pos)
        try:
            entries[key] = data[pos + 8:pos + 8 + length].decode()
        except UnicodeDecodeError as e:
            raise BlockDamage(f"{what} {key.name} is not UTF-8", pos) from e
        pos += 8 + length
    return entries, pos


def read_block(data: bytes, pos: int) -> tuple[LogBlock, int]:
    """The block that starts at byte ``pos`` of ``data`` and the offset after it. Raises ``BlockDamage``."""
    start = pos
    if data[pos:pos + len(MAGIC)] != MAGIC:
        raise BlockDamage(f"no block magic (found {bytes(data[pos:pos + len(MAGIC)])!r})", pos)
    pos += len(MAGIC)
    if pos + _BLOCK_HEAD.size > len(data):
        raise BlockDamage("block head is truncated", start)
    length, version, type_ordinal = _BLOCK_HEAD.unpack_from(data, pos)
    end = pos + 8 + length
    if length < _MIN_BLOCK_LENGTH or end > len(data):
        raise BlockDamage(f"block length {length} does not fit the {len(data) - start} bytes left", start)
    if version != LOG_FORMAT_VERSION:
        raise BlockDamage(f"log format version {version} is not supported (only {LOG_FORMAT_VERSION})", pos + 8)
    if type_ordinal not in BlockType._value2member_map_:
        raise BlockDamage(f"unknown block type {type_ordinal}", pos + 12)
    reverse = _I64.unpack_from(data, end - 8)[0]
    if reverse != end - 8 - start:
        raise BlockDamage(f"reverse pointer {reverse} disagrees with block length {length}", end - 8)
    header, pos = _read_metadata(data, pos + 16, end - 8, "header")
    if pos + 8 > end - 8:
        raise BlockDamage("content length runs past the block", pos)
    content_length = _I64.unpack_from(data, pos)[0]
    pos += 8
    if content_length < 0 or content_length > end - 8 - pos:
        raise BlockDamage(f"content length {content_length} does not fit the block", pos - 8)
    content = bytes(data[pos:pos + content_length])
    footer, pos = _read_metadata(data, pos + content_length, end - 8, "footer")
    if pos != end - 8:
        raise BlockDamage(f"{end - 8 - pos} stray bytes after the footer", pos)
    return LogBlock(BlockType(type_ordinal), header, content, footer), end


def decode_log_file(data: bytes, *, source: str = "") -> list[LogBlock]:
    """Every block of a log file, in order. Raises ``MetadataTableError`` naming ``source`` and the offset when
    a block is damaged or truncated (Hudi's reader would turn it into a CORRUPT block)."""
    raw = bytes(data)
    blocks: list[LogBlock] = []
    pos = 0
    try:
        while pos < len(raw):
            block, pos = read_block(raw, pos)
            blocks.append(block)
    except BlockDamage as e:
        raise MetadataTableError(f"{source or '<log file bytes>'}: corrupt log block {len(blocks)} at byte "
                                 f"{e.offset}: {e}") from None
    return blocks
