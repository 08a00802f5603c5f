"""HFile blocks: the 33-byte header, the payload compressed on its own with the file's codec, and the
checksum bytes; and the cells of a data block's payload.

Header: 8-byte magic, ``int32`` on-disk size without header, ``int32`` uncompressed payload size, ``int64``
previous block offset, ``int8`` checksum type, ``int32`` bytes per checksum (16384), ``int32`` on-disk data size
with header. Checksums: ``4 * ceil(on-disk data size with header / bytes per checksum)`` bytes; zeros for the
NULL type the writer uses, CRC32 or CRC32C of each chunk of header and data for HBase-written files.

Data block payload, per cell: ``int32 keyLen = len(row) + 12``, ``int32 valueLen``, the key (``int16 len(row)``,
row, ``int8 0`` family length, ``int64 0x7FFFFFFFFFFFFFFF`` timestamp, ``int8 4`` type Put), the value, and a
Hadoop vlong MVCC version (one ``0`` byte).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from hudi_clusterd.formats.hfile.encoding import checksum_bytes, crc32c, gunzip, hadoop_read_vlong, java_gzip
from hudi_clusterd.formats.hfile.format import (
    BLOCK_MAGICS,
    BYTES_PER_CHECKSUM,
    CHECKSUM_CRC32,
    CHECKSUM_CRC32C,
    CHECKSUM_NULL,
    CODEC_IDS,
    HEADER_SIZE,
    KEY_SUFFIX,
    Damage,
)

_HEADER = struct.Struct(">8siiqbii")
CELL_HEAD = struct.Struct(">iih")


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


def encode_block(magic: bytes, payload: bytes, prev_offset: int, codec_id: int) -> bytes:
    """A block of ``payload`` as the writer stores it: compressed with the codec, NULL checksums."""
    body = java_gzip(payload) if codec_id == CODEC_IDS["GZ"] else payload
    data_size = HEADER_SIZE + len(body)
    n_checksum = checksum_bytes(data_size, BYTES_PER_CHECKSUM)
    header = _HEADER.pack(magic, len(body) + n_checksum, len(payload), prev_offset, CHECKSUM_NULL,
                          BYTES_PER_CHECKSUM, data_size)
    return b"".join((header, body, bytes(n_checksum)))


def data_payload(cells: Sequence[tuple[bytes, bytes]]) -> bytes:
    """The payload of a data block holding ``cells`` (``(row, value)``): Put cells with an MVCC version 0."""
    parts: list[bytes] = []
    for row, value in cells:
        parts += (CELL_HEAD.pack(len(row) + 12, len(value), len(row)), row, KEY_SUFFIX, value, b"\x00")
    return b"".join(parts)


def read_block(data: bytes, offset: int, limit: int, codec_id: int, magics: frozenset[bytes] | None = None,
               ) -> HFileBlock:
    """The block at ``offset``, which must end by ``limit``; checks its header, sizes and checksums."""
    if offset < 0 or offset + HEADER_SIZE > limit:
        raise Damage("block header runs past its section", offset)
    magic, on_disk, uncompressed, prev, ck_type, bpc, data_size = _HEADER.unpack_from(data, offset)
    if magic not in BLOCK_MAGICS:
        raise Damage(f"bad block magic {magic!r}", offset)
    if magics is not None and magic not in magics:
        raise Damage(f"expected a {'/'.join(sorted(m.decode() for m in magics))} block, found {magic.decode()}",
                     offset)
    if on_disk < 0 or uncompressed < 0 or data_size < HEADER_SIZE or data_size - HEADER_SIZE > on_disk:
        raise Damage(f"inconsistent block sizes (on disk {on_disk}, uncompressed {uncompressed}, data with "
                     f"header {data_size})", offset)
    if ck_type not in (CHECKSUM_NULL, CHECKSUM_CRC32, CHECKSUM_CRC32C):
        raise Damage(f"unknown checksum type {ck_type}", offset)
    if bpc < 0 or (bpc == 0 and ck_type != CHECKSUM_NULL):
        raise Damage(f"bad bytes per checksum {bpc}", offset)
    n_checksum = checksum_bytes(data_size, bpc)
    if data_size + n_checksum != HEADER_SIZE + on_disk:
        raise Damage(f"block of {HEADER_SIZE + on_disk} bytes does not hold {data_size} data bytes and "
                     f"{n_checksum} checksum bytes", offset)
    end = offset + HEADER_SIZE + on_disk
    if end > limit:
        raise Damage(f"block of {HEADER_SIZE + on_disk} bytes runs past its section", offset)
    checksum = bytes(data[offset + data_size:end])
    if ck_type != CHECKSUM_NULL:
        compute = zlib.crc32 if ck_type == CHECKSUM_CRC32 else crc32c
        sums = struct.unpack(f">{n_checksum // 4}I", checksum)
        for i, expected in enumerate(sums):
            chunk = data[offset + i * bpc:offset + min((i + 1) * bpc, data_size)]
            if compute(chunk) != expected:
                raise Damage(f"checksum mismatch in chunk {i}", offset)
    body = bytes(data[offset + HEADER_SIZE:offset + data_size])
    if codec_id == CODEC_IDS["GZ"]:
        try:
            payload = gunzip(body, uncompressed)
        except ValueError as e:
            raise Damage(str(e), offset) from e
    else:
        if len(body) != uncompressed:
            raise Damage(f"uncompressed block holds {len(body)} bytes, the header gives {uncompressed}", offset)
        payload = body
    return HFileBlock(offset, magic, on_disk, uncompressed, prev, ck_type, bpc, data_size, payload, checksum)


def read_cells(block: HFileBlock, with_mvcc: bool, with_tags: bool) -> list[tuple[bytes, bytes]]:
    """The ``(row, value)`` cells of a data block, skipping tags and MVCC versions where the file has them."""
    p = block.payload
    end = len(p)
    pos = 0
    cells: list[tuple[bytes, bytes]] = []
    while pos < end:
        if pos + 10 > end:
            raise Damage(f"cell at payload byte {pos} is truncated", block.offset)
        key_len, value_len, row_len = CELL_HEAD.unpack_from(p, pos)
        key_start = pos + 8
        value_end = key_start + key_len + value_len
        if key_len < 0 or value_len < 0 or value_end > end:
            raise Damage(f"cell at payload byte {pos} has bad lengths (key {key_len}, value {value_len})",
                         block.offset)
        if row_len < 0 or row_len + 12 > key_len or row_len + 12 + p[key_start + 2 + row_len] > key_len:
            raise Damage(f"cell at payload byte {pos} has a bad key layout (row {row_len}, key {key_len})",
                         block.offset)
        cells.append((bytes(p[key_start + 2:key_start + 2 + row_len]), bytes(p[key_start + key_len:value_end])))
        pos = value_end
        if with_tags:
            if pos + 2 > end:
                raise Damage(f"cell tags at payload byte {pos} are truncated", block.offset)
            pos += 2 + struct.unpack_from(">H", p, pos)[0]
        if with_mvcc:
            try:
                _, pos = hadoop_read_vlong(p, pos, end)
            except ValueError as e:
                raise Damage(f"cell MVCC version at payload byte {pos}: {e}", block.offset) from e
        if pos > end:
            raise Damage("last cell runs past its block", block.offset)
    return cells
