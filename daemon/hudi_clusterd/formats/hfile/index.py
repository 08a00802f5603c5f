"""HFile root index blocks: one entry per data (or meta) block, an ``int64`` block offset, an ``int32`` on-disk
block size with header, a Hadoop vint key length and the key.

Data index keys are the first key of the block: ``int16 len(row)`` and the row, followed by the 10 bytes of
family length, timestamp and type in the ``HBASE_COMPATIBLE`` layout (Hudi 1.2.0 leaves them out, and HBase's
reader then fails when a point lookup lands on a block's first row). Meta index keys are the bare entry name."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from hudi_clusterd.formats.hfile.encoding import hadoop_read_vlong, hadoop_vint
from hudi_clusterd.formats.hfile.format import KEY_SUFFIX, Damage, HFileLayout

INDEX_ENTRY = struct.Struct(">qi")


@dataclass(frozen=True)
class IndexEntry:
    """A root index entry: the block's offset and on-disk size with header, and its key as stored."""

    offset: int
    size: int
    key: bytes


def read_index(payload: bytes, count: int, offset: int) -> tuple[list[IndexEntry], int]:
    """``count`` root index entries from ``payload``, and the position after them."""
    entries: list[IndexEntry] = []
    pos = 0
    end = len(payload)
    for i in range(count):
        if pos + 12 > end:
            raise Damage(f"index entry {i} of {count} runs past the index block", offset)
        block_offset, size = INDEX_ENTRY.unpack_from(payload, pos)
        try:
            key_len, pos = hadoop_read_vlong(payload, pos + 12, end)
        except ValueError as e:
            raise Damage(f"index entry {i}: {e}", offset) from e
        if key_len < 0 or pos + key_len > end:
            raise Damage(f"index entry {i} has a bad key length {key_len}", offset)
        entries.append(IndexEntry(block_offset, size, bytes(payload[pos:pos + key_len])))
        pos += key_len
    return entries, pos


def row_of_key(key: bytes) -> bytes | None:
    """The row of a KeyValue key or of a bare ``int16 len + row`` key; None when the length does not fit."""
    if len(key) < 2:
        return None
    n = struct.unpack_from(">h", key)[0]
    if n < 0 or 2 + n > len(key):
        return None
    return key[2:2 + n]


def encode_index(entries: Iterable[tuple[int, int, bytes]]) -> bytes:
    """The payload of a root index block of ``(block offset, on-disk size with header, key)`` entries."""
    parts: list[bytes] = []
    for block_offset, size, key in entries:
        parts += (INDEX_ENTRY.pack(block_offset, size), hadoop_vint(len(key)), key)
    return b"".join(parts)


def data_index_key(first_row: bytes, layout: HFileLayout) -> bytes:
    """The data index key of a block whose first row is ``first_row``, in ``layout``."""
    key = struct.pack(">h", len(first_row)) + first_row
    if layout is HFileLayout.HBASE_COMPATIBLE:
        key += KEY_SUFFIX
    return key
