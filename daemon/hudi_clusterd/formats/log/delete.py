"""DELETE log blocks: the empty one (no keys) the metadata table writes first in each new file group's first
log file. Content: ``int32`` delete block version (3), ``int32`` length and the Avro array of deleted records
(here: empty)."""

from __future__ import annotations

import struct

from hudi_clusterd.formats.log.block import BlockType, HeaderKey, LogBlock

DELETE_BLOCK_VERSION = 3
_EMPTY_DELETE_CONTENT = struct.pack(">ii", DELETE_BLOCK_VERSION, 1) + b"\x00"  # Avro: an empty array


def empty_delete_block(instant: str) -> LogBlock:
    """The DELETE block with no keys that starts each new MDT file group's first log file (80 bytes for a
    17-digit instant)."""
    return LogBlock(BlockType.DELETE, {HeaderKey.INSTANT_TIME: instant}, _EMPTY_DELETE_CONTENT)
