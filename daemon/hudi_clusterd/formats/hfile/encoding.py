"""The small encodings HFiles are made of: protobuf varints and fields (trailer, file info), Hadoop vints
(index entries, cell MVCC versions), ``java.util.HashMap`` iteration order (file info and meta block order),
gzip as Java writes it, and CRC-32C block checksums."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"  # java.util.zip.GZIPOutputStream: no mtime, OS 0


def pb_varint(value: int) -> bytes:
    """Protobuf base-128 varint of an unsigned 64-bit value (negative values as two's complement)."""
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def pb_read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
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


def pb_fields(buf: bytes, pos: int, end: int) -> list[tuple[int, int | bytes]]:
    """Every field of one protobuf message in ``buf[pos:end]``: (number, varint value or length-delimited bytes)."""
    out: list[tuple[int, int | bytes]] = []
    while pos < end:
        tag, pos = pb_read_varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ValueError("protobuf field number 0")
        if wire == 0:
            value, pos = pb_read_varint(buf, pos, end)
            out.append((number, value))
        elif wire == 2:
            length, pos = pb_read_varint(buf, pos, end)
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


def pb_bytes_field(number: int, value: bytes) -> bytes:
    return pb_varint(number << 3 | 2) + pb_varint(len(value)) + value


def pb_int_field(number: int, value: int) -> bytes:
    return pb_varint(number << 3) + pb_varint(value)


def signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def hadoop_vint(value: int) -> bytes:
    """Hadoop ``WritableUtils.writeVLong``: one byte for -112..127, else a length byte and big-endian bytes."""
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    marker = -112
    if value < 0:
        value = ~value
        marker = -120
    width = (value.bit_length() + 7) // 8
    return struct.pack(">b", marker - width) + value.to_bytes(width, "big")


def hadoop_read_vlong(buf: bytes, pos: int, end: int) -> tuple[int, int]:
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


def gunzip(data: bytes, expected: int) -> bytes:
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


def checksum_bytes(data_size_with_header: int, bytes_per_checksum: int) -> int:
    if bytes_per_checksum <= 0:
        return 0
    return 4 * -(-data_size_with_header // bytes_per_checksum)
