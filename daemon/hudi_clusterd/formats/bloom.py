"""Apache Hudi's record-key bloom filters, bit for bit as Hudi writes them into base file footers.

Hudi's BLOOM and GLOBAL_BLOOM indexes read a filter of the record keys from every base file's footer
(``org.apache.hudi.bloomfilter``, older files ``com.uber.hoodie.bloomfilter``; ``hoodie_bloom_filter_type_code``
names the kind, SIMPLE when absent). This module builds, encodes and decodes those filters without a JVM; the
behaviour below was taken from Hudi 0.14/0.15 (``org.apache.hudi.common.bloom``) and is checked against footers
written by Hudi itself (``tests/unit/io/test_bloom.py``).

Sizing, from the writer's ``hoodie.index.bloom.num_entries`` ``n`` and ``hoodie.index.bloom.fpp`` ``p``: a bit
vector of ``m = ceil(n * -ln(p) / ln(2)^2)`` bits and ``k = ceil(ln(2) * m / n)`` hash functions (2587966 bits
and 30 hashes with Hudi's defaults).

Hashing: a key is its UTF-8 bytes (an empty key is refused, as Hudi does). Hash ``j`` of a key is
``h_j = murmur(key, seed=h_{j-1})`` with ``h_{-1} = 0``, the 32-bit MurmurHash2 variant of Hadoop (whose 1 to 3
trailing bytes are sign-extended before mixing), and its bit is ``abs(h_j rem m)`` with Java's truncating
remainder on the signed value.

Kinds:

- SIMPLE: one bit vector.
- DYNAMIC_V0: rows of bit vectors. Keys fill a row until it holds ``n`` keys; another row is opened while
  ``rows * n`` is below ``hoodie.bloom.index.filter.dynamic.max.entries``. Once no row may be opened, the next
  key goes to row 0 and the keys after it go round robin from row 0 again (so row 0 takes two keys in a row).
  A key is contained when any row has all its ``k`` bits set. The state depends on the order and number of adds
  (duplicates count), so a file's filter is built from its keys in row order.

Encoding (big-endian integers, then standard padded Base64): a vector is ``int32 -1`` (format version),
``int32 k``, ``int8`` hash type (1: Murmur), ``int32 m``, then ``ceil(m / 8)`` bytes with bit ``i`` in byte
``i // 8`` under mask ``1 << (i % 8)``. SIMPLE is one vector. DYNAMIC_V0 is the same 13-byte header, then
``int32 n``, ``int32`` keys added since the last row was opened (it keeps counting once the rows are all open),
``int32`` row count, and every row as a vector.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pyarrow as pa

from hudi_clusterd.errors import BloomFilterError
from hudi_clusterd.formats.bloom_hash import bit_positions, key_buffers

BLOOM_FILTER_FOOTER = "org.apache.hudi.bloomfilter"
OLD_BLOOM_FILTER_FOOTER = "com.uber.hoodie.bloomfilter"
BLOOM_TYPE_CODE_FOOTER = "hoodie_bloom_filter_type_code"
DEFAULT_NUM_ENTRIES = 60_000  # hoodie.index.bloom.num_entries
DEFAULT_FPP = 0.000000001  # hoodie.index.bloom.fpp
DEFAULT_DYNAMIC_MAX_ENTRIES = 100_000  # hoodie.bloom.index.filter.dynamic.max.entries
MURMUR_HASH = 1  # Hudi's hash type code for Murmur (0 is Jenkins, which Hudi's writers do not use)

_VERSION = -1
_HEADER = struct.Struct(">iibi")  # version, hash count, hash type, vector size
_DYNAMIC = struct.Struct(">iii")  # keys per row, keys in the current row, row count
_INT32_MAX = 2**31 - 1


class BloomFilterType(StrEnum):
    """``hoodie.bloom.index.filter.type``."""

    SIMPLE = "SIMPLE"
    DYNAMIC_V0 = "DYNAMIC_V0"

    @classmethod
    def parse(cls, value: str) -> BloomFilterType:
        """The type named by a config value or a type-code footer (case-insensitive, as Hudi reads it)."""
        for member in cls:
            if member.value.lower() == value.strip().lower():
                return member
        raise BloomFilterError(f"bloom filter type {value!r} is unknown (expected SIMPLE or DYNAMIC_V0)")


@dataclass(frozen=True, slots=True)
class BloomSettings:
    """How a writer builds the record-key bloom filter of each base file: Hudi's keys and defaults."""

    filter_type: str = BloomFilterType.DYNAMIC_V0.value  # hoodie.bloom.index.filter.type
    num_entries: int = DEFAULT_NUM_ENTRIES  # hoodie.index.bloom.num_entries
    fpp: float = DEFAULT_FPP  # hoodie.index.bloom.fpp
    dynamic_max_entries: int = DEFAULT_DYNAMIC_MAX_ENTRIES  # hoodie.bloom.index.filter.dynamic.max.entries
    enabled: bool = True

    def spec_fields(self) -> dict[str, Any]:
        """The matching fields of ``io.base_file_writer.BaseFileWriteSpec``."""
        return {"bloom_filter_enabled": self.enabled, "bloom_filter_type": self.filter_type,
                "bloom_num_entries": self.num_entries, "bloom_fpp": self.fpp,
                "bloom_dynamic_max_entries": self.dynamic_max_entries}


def bit_size(num_entries: int, fpp: float) -> int:
    """Bits of one vector for ``num_entries`` keys at false-positive rate ``fpp`` (Hudi's rounding)."""
    if num_entries <= 0:
        raise BloomFilterError(f"bloom filter entries must be positive, got {num_entries}")
    if not 0.0 < fpp < 1.0:
        raise BloomFilterError(f"bloom filter false-positive rate must be in (0, 1), got {fpp}")
    bits = math.ceil(num_entries * (-math.log(fpp) / (math.log(2) * math.log(2))))
    if bits > _INT32_MAX:
        raise BloomFilterError(f"bloom filter of {num_entries} entries at fpp {fpp} needs {bits} bits, "
                               f"more than Hudi can hold ({_INT32_MAX})")
    return bits


def hash_count(bits: int, num_entries: int) -> int:
    """Hash functions for a vector of ``bits`` bits meant for ``num_entries`` keys (Hudi's rounding)."""
    return max(1, math.ceil(math.log(2) * bits / num_entries))


@dataclass(slots=True)
class HudiBloomFilter:
    """A SIMPLE or DYNAMIC_V0 filter: build with ``create`` and ``add``, read with ``from_footer``."""

    type_code: BloomFilterType
    vector_size: int
    num_hashes: int
    keys_per_row: int  # DYNAMIC_V0: keys a row takes before another opens (num_entries)
    max_entries: int  # DYNAMIC_V0: no row opens once rows * keys_per_row reaches this (0 once decoded, as in Hudi)
    rows: list[np.ndarray[Any, Any]] = field(default_factory=list)  # bool vectors of vector_size
    row_keys: int = 0  # DYNAMIC_V0: keys added since the last row opened (counting on once all rows are open)
    full: bool = False  # DYNAMIC_V0: all rows open, keys go round robin
    next_row: int = 0  # DYNAMIC_V0: round-robin counter once full

    # --- building ------------------------------------------------------------------------------------------

    @classmethod
    def create(cls, type_code: BloomFilterType | str = BloomFilterType.DYNAMIC_V0,
               num_entries: int = DEFAULT_NUM_ENTRIES, fpp: float = DEFAULT_FPP,
               max_entries: int = DEFAULT_DYNAMIC_MAX_ENTRIES) -> HudiBloomFilter:
        """An empty filter sized as Hudi's writer sizes it from the same settings."""
        kind = type_code if isinstance(type_code, BloomFilterType) else BloomFilterType.parse(type_code)
        bits = bit_size(num_entries, fpp)
        return cls(kind, bits, hash_count(bits, num_entries), num_entries, max_entries,
                   [np.zeros(bits, dtype=np.bool_)])

    def add(self, keys: Iterable[str | bytes] | pa.Array | pa.ChunkedArray) -> None:
        """Add record keys in order (strings are UTF-8 encoded; null and empty keys are refused)."""
        data, offsets = key_buffers(keys)
        starts, lengths = offsets[:-1], np.diff(offsets)
        if not len(starts):
            return
        row_of_key = self._assign_rows(len(starts))
        for r, row in enumerate(self.rows):
            if row_of_key is None and r != len(self.rows) - 1:
                continue
            sel = None if row_of_key is None else np.flatnonzero(row_of_key == r)
            if sel is not None and not len(sel):
                continue
            row_starts = starts if sel is None else starts[sel]
            row_lengths = lengths if sel is None else lengths[sel]
            for _, positions in bit_positions(data, row_starts, row_lengths, self.num_hashes, self.vector_size):
                row[positions] = True

    def _assign_rows(self, n: int) -> np.ndarray[Any, Any] | None:
        """Advance the row state over ``n`` new keys; the row of each key, or None when all go to the last row."""
        if self.type_code is BloomFilterType.SIMPLE:
            return None
        out: list[np.ndarray[Any, Any]] = []
        done = 0
        while done < n:
            if self.full:
                count = n - done
                out.append((self.next_row + np.arange(count, dtype=np.int64)) % len(self.rows))
                self.next_row += count
                self.row_keys += count
                done = n
            elif self.row_keys >= self.keys_per_row:
                if len(self.rows) * self.keys_per_row < self.max_entries:
                    self.rows.append(np.zeros(self.vector_size, dtype=np.bool_))
                    self.row_keys = 0
                else:  # the key that finds the rows full goes to row 0 without moving the round-robin counter
                    self.full = True
                    out.append(np.zeros(1, dtype=np.int64))
                    self.row_keys += 1
                    done += 1
            else:
                count = min(n - done, self.keys_per_row - self.row_keys)
                out.append(np.full(count, len(self.rows) - 1, dtype=np.int64))
                self.row_keys += count
                done += count
        if len(out) == 1 and not self.full and len(self.rows) == 1:
            return None
        return np.concatenate(out)

    # --- querying ------------------------------------------------------------------------------------------

    def might_contain(self, key: str | bytes) -> bool:
        """Whether ``key`` may be in the filter (no means certainly not), as Hudi's ``mightContain`` answers."""
        return bool(self.might_contain_many([key])[0])

    def might_contain_many(self, keys: Iterable[str | bytes] | pa.Array | pa.ChunkedArray) -> np.ndarray[Any, Any]:
        """``might_contain`` of every key, as a bool array in the keys' order."""
        data, offsets = key_buffers(keys)
        result = np.zeros(len(offsets) - 1, dtype=np.bool_)
        for idx, positions in bit_positions(data, offsets[:-1], np.diff(offsets), self.num_hashes,
                                             self.vector_size):
            hit = np.zeros(len(idx), dtype=np.bool_)
            for row in self.rows:
                hit |= row[positions].all(axis=0)
            result[idx] = hit
        return result

    # --- encoding ------------------------------------------------------------------------------------------

    def serialize(self) -> bytes:
        """The bytes Hudi's ``serializeToString`` Base64-encodes."""
        vectors = [self._vector_bytes(row) for row in self.rows]
        if self.type_code is BloomFilterType.SIMPLE:
            return vectors[0]
        header = _HEADER.pack(_VERSION, self.num_hashes, MURMUR_HASH, self.vector_size)
        current = (self.row_keys + 2**31) % 2**32 - 2**31  # a Java int, wrapping as Hudi's does
        return b"".join([header, _DYNAMIC.pack(self.keys_per_row, current, len(self.rows)), *vectors])

    def _vector_bytes(self, row: np.ndarray[Any, Any]) -> bytes:
        header = _HEADER.pack(_VERSION, self.num_hashes, MURMUR_HASH, self.vector_size)
        return header + np.packbits(row, bitorder="little").tobytes()

    def to_footer(self) -> str:
        """The ``org.apache.hudi.bloomfilter`` footer value."""
        return base64.b64encode(self.serialize()).decode("ascii")

    def footers(self) -> dict[str, str]:
        """The footer entries Hudi writes for this filter (the type code only for DYNAMIC kinds)."""
        out = {BLOOM_FILTER_FOOTER: self.to_footer()}
        if self.type_code is BloomFilterType.DYNAMIC_V0:
            out[BLOOM_TYPE_CODE_FOOTER] = self.type_code.value
        return out

    # --- decoding ------------------------------------------------------------------------------------------

    @classmethod
    def from_footer(cls, value: str | bytes, type_code: str | None = None) -> HudiBloomFilter:
        """Decode a ``org.apache.hudi.bloomfilter`` value; ``type_code`` is the type-code footer (None: SIMPLE).

        Trailing bytes after the filter are ignored, as Hudi ignores them. Raises ``BloomFilterError``."""
        kind = BloomFilterType.SIMPLE if type_code is None else BloomFilterType.parse(type_code)
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as e:
            raise BloomFilterError(f"bloom filter footer {BLOOM_FILTER_FOOTER} is not valid Base64: {e}") from e
        reader = _Reader(raw, kind)
        num_hashes, vector_size = reader.header("filter")
        if kind is BloomFilterType.SIMPLE:
            return cls(kind, vector_size, num_hashes, 0, 0, [reader.bits(vector_size, "filter")])
        per_row, current, count = reader.ints(_DYNAMIC, "row counts")
        if per_row <= 0 or count < 0:
            raise BloomFilterError(f"{kind} bloom filter footer has {count} rows of {per_row} keys each")
        rows = []
        for i in range(count):
            row_hashes, row_size = reader.header(f"row {i}")
            if (row_hashes, row_size) != (num_hashes, vector_size):
                raise BloomFilterError(f"{kind} bloom filter footer: row {i} has {row_hashes} hashes of "
                                       f"{row_size} bits, the filter {num_hashes} of {vector_size}")
            rows.append(reader.bits(vector_size, f"row {i}"))
        return cls(kind, vector_size, num_hashes, per_row, 0, rows, row_keys=current)

    @classmethod
    def from_footers(cls, footers: Mapping[str, str] | Mapping[bytes, bytes]) -> HudiBloomFilter | None:
        """The filter of a parquet file's key-value metadata, read as Hudi reads it; None when it has none."""
        meta = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
                for k, v in footers.items()}
        value = meta.get(BLOOM_FILTER_FOOTER, meta.get(OLD_BLOOM_FILTER_FOOTER))
        return None if value is None else cls.from_footer(value, meta.get(BLOOM_TYPE_CODE_FOOTER))


class _Reader:
    """Reads an encoded filter front to back, naming what is missing or wrong."""

    def __init__(self, raw: bytes, kind: BloomFilterType) -> None:
        self.raw = raw
        self.kind = kind
        self.pos = 0

    def ints(self, layout: struct.Struct, what: str) -> tuple[int, ...]:
        end = self.pos + layout.size
        if end > len(self.raw):
            raise BloomFilterError(f"{self.kind} bloom filter footer is truncated: {len(self.raw)} bytes end in the "
                                   f"{what} at byte {self.pos}")
        values = layout.unpack_from(self.raw, self.pos)
        self.pos = end
        return tuple(values)

    def header(self, what: str) -> tuple[int, int]:
        version, num_hashes, hash_type, vector_size = self.ints(_HEADER, f"header of the {what}")
        if version != _VERSION:
            raise BloomFilterError(f"{self.kind} bloom filter footer: {what} has format version {version}, only "
                                   f"{_VERSION} is supported (positive versions are Hadoop's old Jenkins format)")
        if hash_type != MURMUR_HASH:
            raise BloomFilterError(f"{self.kind} bloom filter footer: {what} uses hash type {hash_type}, only "
                                   f"Murmur ({MURMUR_HASH}) is supported")
        if num_hashes <= 0 or vector_size <= 0:
            raise BloomFilterError(f"{self.kind} bloom filter footer: {what} has {num_hashes} hashes over "
                                   f"{vector_size} bits")
        return num_hashes, vector_size

    def bits(self, vector_size: int, what: str) -> np.ndarray[Any, Any]:
        size = (vector_size + 7) // 8
        end = self.pos + size
        if end > len(self.raw):
            raise BloomFilterError(f"{self.kind} bloom filter footer is truncated: {what} needs {size} bytes of "
                                   f"bits from byte {self.pos}, the footer has {len(self.raw)}")
        packed = np.frombuffer(self.raw, dtype=np.uint8, count=size, offset=self.pos)
        self.pos = end
        return np.unpackbits(packed, count=vector_size, bitorder="little").astype(np.bool_)
