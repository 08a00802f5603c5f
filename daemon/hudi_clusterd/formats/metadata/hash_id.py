"""Hudi's index ids (``common/util/hash/HashID``): the column, partition and file parts of column-stats,
partition-stats and bloom-filter keys.

A column or partition id is XXHash64 (lz4-java's, seed ``0xdabadaba`` passed as a Java ``int``, so sign-extended
to the 64-bit seed ``0xffffffffdabadaba``) of the UTF-8 name, as 8 big-endian bytes; a file id is the MD5 of
the UTF-8 file name. Each id is then Base64 (standard alphabet, padded) as Hudi's ``Base64CodecUtil.encode``.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from functools import lru_cache

_MASK = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5

HASH_SEED = 0xDABADABA - (1 << 32)
"""``HashID.HASH_SEED``: the Java ``int`` 0xdabadaba, negative."""


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _MASK
    return (_rotl(acc, 31) * _P1) & _MASK


def _merge(acc: int, val: int) -> int:
    acc ^= _round(0, val)
    return (acc * _P1 + _P4) & _MASK


def xxhash64(data: bytes, seed: int = HASH_SEED) -> int:
    """XXH64 of ``data`` as an unsigned 64-bit int (``seed`` taken modulo 2**64, as Java's ``long``)."""
    seed &= _MASK
    n = len(data)
    i = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _MASK
        v2 = (seed + _P2) & _MASK
        v3 = seed
        v4 = (seed - _P1) & _MASK
        limit = n - 32
        while i <= limit:
            a, b, c, d = struct.unpack_from("<4Q", data, i)
            v1 = _round(v1, a)
            v2 = _round(v2, b)
            v3 = _round(v3, c)
            v4 = _round(v4, d)
            i += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = (seed + _P5) & _MASK
    h = (h + n) & _MASK
    while i + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, i)
        h ^= _round(0, k)
        h = (_rotl(h, 27) * _P1 + _P4) & _MASK
        i += 8
    if i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h ^= (k * _P1) & _MASK
        h = (_rotl(h, 23) * _P2 + _P3) & _MASK
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _MASK
        h = (_rotl(h, 11) * _P1) & _MASK
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _MASK
    h ^= h >> 29
    h = (h * _P3) & _MASK
    h ^= h >> 32
    return h


def xxhash_hex(text: str) -> str:
    """``HashID.generateXXHashAsString(text, BITS_64)``: the 8 big-endian bytes of XXH64 (Hudi's seed) of the UTF-8
    text, as upper-case hex."""
    return f"{xxhash64(text.encode('utf-8')):016X}"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


@lru_cache(maxsize=4096)
def name_id(name: str) -> str:
    """``ColumnIndexID`` / ``PartitionIndexID`` of ``name``: Base64 of its XXHash64 (8 bytes, big-endian)."""
    return _b64(xxhash64(name.encode("utf-8")).to_bytes(8, "big"))


def file_id(file_name: str) -> str:
    """``FileIndexID`` of a file name: Base64 of its MD5."""
    return _b64(hashlib.md5(file_name.encode("utf-8"), usedforsecurity=False).digest())
