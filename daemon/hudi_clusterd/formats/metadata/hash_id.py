"""Hudi's index ids (``common/util/hash/HashID``): the column, partition and file parts of column-stats,
partition-stats and bloom-filter keys.

A column or partition id is XXHash64 (lz4-java's, seed ``0xdabadaba`` passed as a Java ``int``, so sign-extended
to the 64-bit seed ``0xffffffffdabadaba``) of the UTF-8 name, as 8 big-endian bytes, computed by the ``xxhash``
package; a file id is the MD5 of the UTF-8 file name. Each id is then Base64 (standard alphabet, padded) as
Hudi's ``Base64CodecUtil.encode``.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache

import xxhash

HASH_SEED = 0xDABADABA - (1 << 32)
"""``HashID.HASH_SEED``: the Java ``int`` 0xdabadaba, negative."""
_SEED = HASH_SEED & ((1 << 64) - 1)
"""The same seed as XXH64 takes it: an unsigned 64-bit int."""


def xxhash64(data: bytes, seed: int = HASH_SEED) -> int:
    """XXH64 of ``data`` as an unsigned 64-bit int (``seed`` taken modulo 2**64, as Java's ``long``)."""
    return xxhash.xxh64_intdigest(data, seed & ((1 << 64) - 1))


def xxhash_hex(text: str) -> str:
    """``HashID.generateXXHashAsString(text, BITS_64)``: the 8 big-endian bytes of XXH64 (Hudi's seed) of the UTF-8
    text, as upper-case hex."""
    return xxhash.xxh64_hexdigest(text.encode("utf-8"), _SEED).upper()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


@lru_cache(maxsize=4096)
def name_id(name: str) -> str:
    """``ColumnIndexID`` / ``PartitionIndexID`` of ``name``: Base64 of its XXHash64 (8 bytes, big-endian)."""
    return _b64(xxhash.xxh64_digest(name.encode("utf-8"), _SEED))


def file_id(file_name: str) -> str:
    """``FileIndexID`` of a file name: Base64 of its MD5."""
    return _b64(hashlib.md5(file_name.encode("utf-8"), usedforsecurity=False).digest())
