"""Hadoop's 32-bit MurmurHash2 as Hudi's bloom filters use it: a slow one-key reference, and a numpy version that
hashes many keys at once (the keys' bytes concatenated, with their offsets)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from hudi_clusterd.errors import BloomFilterError

_M = 0x5BD1E995
_CHUNK = 1 << 16  # keys hashed at a time: keeps the working arrays in cache


def murmur_hash(data: bytes, seed: int = 0) -> int:
    """Hadoop's 32-bit MurmurHash2 of ``data``, as Hudi uses it: a signed 32-bit result. A slow reference for
    tests and single keys; filters hash in bulk with ``bit_positions``."""
    mask = 0xFFFFFFFF
    length = len(data)
    h = (seed ^ length) & mask
    blocks = length >> 2
    for i in range(blocks):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * _M) & mask
        k ^= k >> 24
        k = (k * _M) & mask
        h = ((h * _M) & mask) ^ k
    left = length & 3
    if left:
        for back, shift in ((3, 16), (2, 8), (1, 0)):
            if left >= back:
                byte = data[length - back]
                signed = byte - 256 if byte >= 128 else byte
                h ^= (signed << shift) & mask
        h = (h * _M) & mask
    h ^= h >> 13
    h = (h * _M) & mask
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def key_positions(key: bytes, num_hashes: int, vector_size: int) -> list[int]:
    """The bits one key sets, computed one hash at a time with ``murmur_hash`` (the slow reference)."""
    positions = []
    h = 0
    for _ in range(num_hashes):
        h = murmur_hash(key, h)
        positions.append(abs(h) % vector_size)  # Java's abs(h % m) on a signed int equals abs(h) mod m
    return positions



def key_buffers(keys: Iterable[str | bytes] | pa.Array | pa.ChunkedArray) -> tuple[np.ndarray[Any, Any],
                                                                                     np.ndarray[Any, Any]]:
    """The keys' bytes, concatenated, and their ``n + 1`` offsets; refuses null and empty keys."""
    if isinstance(keys, pa.ChunkedArray):
        arr = keys.combine_chunks() if keys.num_chunks else pa.array([], pa.string())
    elif isinstance(keys, pa.Array):
        arr = keys
    else:
        items = list(keys)
        kind = pa.binary() if any(isinstance(k, bytes) for k in items) else pa.string()
        arr = pa.array([k.encode("utf-8") if isinstance(k, str) and kind == pa.binary() else k for k in items],
                       kind)
    if arr.null_count:
        raise BloomFilterError(f"{arr.null_count} of {len(arr)} record keys are null; a bloom filter holds no null")
    try:
        arr = arr.cast(pa.large_binary())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise BloomFilterError(f"record keys of type {arr.type} are not strings: {e}") from e
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64, count=len(arr) + 1, offset=arr.offset * 8)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    if len(arr) and not np.all(offsets[1:] > offsets[:-1]):
        first = int(np.flatnonzero(offsets[1:] == offsets[:-1])[0])
        raise BloomFilterError(f"record key #{first} is empty; Hudi's bloom filter refuses empty keys")
    return data, offsets


def bit_positions(data: np.ndarray[Any, Any], starts: np.ndarray[Any, Any], lengths: np.ndarray[Any, Any],
                   num_hashes: int, vector_size: int) -> Iterator[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    """Keys by their byte ``starts`` and ``lengths`` in ``data``, in groups of one length: each group's indexes
    (into ``starts``) and its ``(num_hashes, group size)`` bit positions (uint32)."""
    order = np.argsort(lengths, kind="stable")
    bounds = np.flatnonzero(np.diff(lengths[order])) + 1
    # every 4 bytes from every byte offset, read as a little-endian uint32 (a view: nothing is copied)
    words = np.ndarray(shape=(max(len(data) - 3, 0),), dtype="<u4", buffer=data, strides=(1,))
    for group in np.split(order, bounds):
        if not len(group):
            continue
        length = int(lengths[group[0]])
        for start in range(0, len(group), _CHUNK):
            idx = group[start:start + _CHUNK]
            yield idx, _murmur_chain(data, words, starts[idx], length, num_hashes, vector_size)


def _murmur_chain(data: np.ndarray[Any, Any], words: np.ndarray[Any, Any], starts: np.ndarray[Any, Any],
                  length: int, num_hashes: int, vector_size: int) -> np.ndarray[Any, Any]:
    """Bit positions ``abs(h_j rem vector_size)`` of the chained Murmur hashes of keys of ``length`` bytes at
    ``starts``. Murmur mixes each 4-byte block without the seed, so blocks are mixed once per key and each of the
    ``num_hashes`` chained hashes only redoes the cheap combining steps."""
    n = len(starts)
    mixed: list[np.ndarray[Any, Any]] = []
    for j in range(length >> 2):
        k = words[starts + 4 * j].astype(np.uint32, copy=False)
        k *= _M
        k ^= k >> 24
        k *= _M
        mixed.append(k)
    left = length & 3
    tail: np.ndarray[Any, Any] | None = None
    if left:
        tail = np.zeros(n, dtype=np.uint32)
        for back, shift in ((3, 16), (2, 8), (1, 0)):
            if left >= back:  # Java widens the signed byte before shifting
                byte = data[starts + (length - back)].view(np.int8).astype(np.int32)
                tail ^= (byte << shift).view(np.uint32)
    out = np.empty((num_hashes, n), dtype=np.uint32)
    h = np.zeros(n, dtype=np.uint32)
    tmp = np.empty(n, dtype=np.uint32)
    modulus = np.uint32(vector_size)
    for j in range(num_hashes):
        h ^= np.uint32(length)
        for k in mixed:
            h *= _M
            h ^= k
        if tail is not None:
            h ^= tail
            h *= _M
        np.right_shift(h, 13, out=tmp)
        h ^= tmp
        h *= _M
        np.right_shift(h, 15, out=tmp)
        h ^= tmp
        np.abs(h.view(np.int32), out=tmp.view(np.int32))  # |INT32_MIN| stays 2**31 once read unsigned
        np.remainder(tmp, modulus, out=out[j])
    return out
