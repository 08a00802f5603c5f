"""Scanning a data table's log file as Hudi's log reader does (``HoodieLogFileReader``): a block whose frame is damaged
becomes a CORRUPT block and the scan resumes at the next magic.

A block's frame is intact when its length fits the file, its reverse pointer agrees with its length and the bytes
after it are another magic or fewer than a magic's six (the end of the file, for Hudi's reader). Anything else (a
torn last block, a block overwritten in the middle) is a CORRUPT block spanning from its magic up to the next magic
(or the end), which readers skip. A block whose frame is intact but whose inside cannot be decoded (log format
version 0, an unknown block type, a header that runs past its block) is refused with a ``LogFileError`` naming the
file and the offset, as Hudi's reader fails on it. A file that does not start with the magic is refused likewise.
Fewer than six bytes after the last block are no block at all: the scan stops there, as Hudi's does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from hudi_clusterd.errors import LogFileError
from hudi_clusterd.formats.log.block import MAGIC, BlockDamage, BlockType, LogBlock, read_block

_I64 = struct.Struct(">q")
_HEAD = len(MAGIC) + _I64.size  # magic and block length


@dataclass(frozen=True)
class ScannedBlock:
    """One block of a log file at byte ``offset``; a CORRUPT block's content is its bytes after the magic."""

    offset: int
    block: LogBlock

    @property
    def corrupt(self) -> bool:
        return self.block.block_type is BlockType.CORRUPT


def _frame_end(data: bytes, pos: int) -> int | None:
    """The end of the block at ``pos`` when its frame is intact, else None."""
    if len(data) - pos < _HEAD:
        return None
    length: int = _I64.unpack_from(data, pos + len(MAGIC))[0]
    end = pos + _HEAD + length
    if length < _I64.size or end > len(data):
        return None
    if _I64.unpack_from(data, end - _I64.size)[0] != length + len(MAGIC):
        return None
    if len(data) - end >= len(MAGIC) and data[end:end + len(MAGIC)] != MAGIC:
        return None
    return end


def _corrupt(data: bytes, pos: int) -> tuple[ScannedBlock, int]:
    found = data.find(MAGIC, pos + 1)
    end = len(data) if found < 0 else found
    return ScannedBlock(pos, LogBlock(BlockType.CORRUPT, {}, data[pos + len(MAGIC):end])), end


def scan_log_file(data: bytes, *, source: str) -> list[ScannedBlock]:
    """Every block of a data table's log file in order, damaged frames as CORRUPT blocks. Raises
    ``LogFileError`` naming ``source`` and the offset for a file that does not start with the magic or a block
    whose frame is intact but whose contents cannot be read."""
    raw = bytes(data)
    out: list[ScannedBlock] = []
    pos = 0
    while len(raw) - pos >= len(MAGIC):
        if raw[pos:pos + len(MAGIC)] != MAGIC:
            raise LogFileError(f"{source}: no log block magic at byte {pos}")
        end = _frame_end(raw, pos)
        if end is None:
            scanned, pos = _corrupt(raw, pos)
            out.append(scanned)
            continue
        try:
            block, after = read_block(raw, pos)
        except BlockDamage as e:
            raise LogFileError(f"{source}: log block at byte {pos} cannot be read: {e} (at byte {e.offset})") from None
        out.append(ScannedBlock(pos, block))
        pos = after
    return out
