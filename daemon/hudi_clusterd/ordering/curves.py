"""Space-filling-curve sort keys, vectorised with numpy (no Spark here: this module runs inside executors).

Arrow arrays come in (pyarrow only reads their buffers), numpy arrays come out; no per-row Python.

The pipeline for one batch of rows is: *column values → unsigned coordinates → curve key*.

Coordinates (``uint64`` per row and column, ``0`` reserved for null so nulls sort first):

* **direct** (`direct_coordinates`): an order-preserving map of the raw value. Signed integers, dates and
  timestamps flip the sign bit; floats use the IEEE-754 total-order trick (``-0.0`` folded into ``0.0`` and
  every NaN into one NaN that sorts last, as Spark orders them); decimals use their unscaled integer
  (precision > 18: its top 64 significant bits); strings and binaries their first 8 bytes, big-endian
  (UTF-8 byte order is Spark's string order); booleans are 1/2. Non-null values are clamped to ``>= 1``,
  so the order is preserved weakly at the very bottom (``INT64_MIN`` ties ``INT64_MIN + 1``, ``""`` ties
  ``"\\0"``) and strictly elsewhere, except strings/binaries sharing their first 8 bytes and decimals of
  precision > 18 differing only below their top 64 bits. Direct coordinates use all 64 bits, so curves built
  on them need ``bits=64`` (as Hudi's direct method interleaves all 8 bytes).
* **sample** (`sample_boundaries` + `rank_coordinates`): a column's direct coordinates are replaced by an
  estimate of their CDF — the piecewise-linear interpolation of the value's rank between quantile
  boundaries computed from a sample — scaled to ``[1, 2**bits - 1]``. Skewed columns spread evenly over the
  coordinate space, and every dimension weighs the same in the curve.

Keys are **fixed-width big-endian byte strings**: an ``(n, width)`` ``uint8`` array whose row ``i`` is row
``i``'s key, ``width = ceil(dims * bits / 8)``; unsigned lexicographic byte order is curve order.
`keys_to_words` re-expresses them as ``ceil(width / 8)`` ``int64`` columns (sign bit flipped) whose
lexicographic *signed* order is the same, which is what Spark sorts fastest: a single ``long`` key (two
dimensions sampled, up to four with 16 bits each) even gets a radix sort.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hudi_clusterd.domain.row_order import LayoutStrategy

DIRECT_BITS = 64
"""Bits per dimension for curves over direct coordinates (the whole ``uint64``)."""

SAMPLE_BITS = 16
"""Bits per dimension over sample (CDF) coordinates: 65536 levels, 16 between two of the 4096 boundaries."""

DEFAULT_MAX_BOUNDARIES = 4096
"""Quantile boundaries kept per column by `sample_boundaries` (32 KiB per column at most)."""

_SIGN = np.uint64(1 << 63)
_ONE = np.uint64(1)
_STRING_PREFIX = 8


def _numpy_values(array: pa.Array, dtype: Any) -> np.ndarray:
    """The value buffer of a primitive array as numpy (nulls become 0; they are masked afterwards)."""
    if array.null_count:
        fill = pa.scalar(False) if pa.types.is_boolean(array.type) else pa.scalar(0, type=array.type)
        array = pc.fill_null(array, fill)
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=dtype)


def _flip_signed(values: np.ndarray) -> np.ndarray:
    return values.astype(np.int64, copy=False).view(np.uint64) ^ _SIGN


def _float_coordinates(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.float64)  # float32 -> float64 is exact and monotone
    v[v == 0.0] = 0.0  # fold -0.0 into +0.0
    v[np.isnan(v)] = np.nan  # one canonical (positive, quiet) NaN: sorts after +inf, as in Spark
    bits = v.view(np.uint64)
    negative = (bits & _SIGN) != 0
    return np.where(negative, ~bits, bits | _SIGN)


def _decimal_coordinates(array: pa.Array) -> np.ndarray:
    n = len(array)
    words = np.frombuffer(array.buffers()[1], dtype=np.uint64)[2 * array.offset : 2 * (array.offset + n)]
    low, high = words[0::2], words[1::2].view(np.int64)
    precision = array.type.precision
    if precision <= 18:  # |unscaled| < 10**18 < 2**63: the low word is the whole value
        return low.view(np.int64).view(np.uint64) ^ _SIGN
    # |unscaled| < 2**magnitude; an arithmetic shift by `shift` keeps the top 64 significant bits (monotone).
    magnitude = int(np.ceil(precision * np.log2(10.0)))
    shift = min(64, max(0, magnitude + 1 - 64))
    if shift == 64:
        top = high
    else:
        top = ((low >> np.uint64(shift)) | (high.view(np.uint64) << np.uint64(64 - shift))).view(np.int64)
    return top.view(np.uint64) ^ _SIGN


def _prefix_coordinates(array: pa.Array) -> np.ndarray:
    """First 8 bytes of each string/binary, big-endian, zero-padded (order-preserving on byte order)."""
    n = len(array)
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    buffers = array.buffers()
    raw_offsets = np.frombuffer(buffers[1], dtype=np.int64 if large else np.int32)
    offsets = raw_offsets[array.offset : array.offset + n + 1].astype(np.int64)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    if n == 0:
        return np.zeros(0, np.uint64)
    if data.size == 0:
        return np.zeros(n, np.uint64)
    starts, lengths = offsets[:-1], np.diff(offsets)
    lanes = np.arange(_STRING_PREFIX, dtype=np.int64)
    index = np.minimum(starts[:, None] + lanes, data.size - 1)
    prefix = np.where(lanes < lengths[:, None], data[index], 0).astype(np.uint8)
    return prefix.view(">u8").reshape(n).astype(np.uint64)


def _is_int64_temporal(t: pa.DataType) -> bool:
    checks = (pa.types.is_date64, pa.types.is_timestamp, pa.types.is_time64, pa.types.is_duration)
    return any(check(t) for check in checks)


def _is_bytes_like(t: pa.DataType) -> bool:
    checks = (pa.types.is_string, pa.types.is_binary, pa.types.is_large_string, pa.types.is_large_binary)
    return any(check(t) for check in checks)


def direct_coordinates(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Order-preserving ``uint64`` coordinates of an Arrow column; ``0`` for null, ``>= 1`` otherwise.

    Supports integers, floats, decimal128, dates, timestamps, times, durations, booleans, strings and
    binaries (plain, large and view layouts, dictionary-encoded or not). Raises ``TypeError`` otherwise.
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    t = array.type
    if pa.types.is_dictionary(t):
        return direct_coordinates(array.dictionary_decode())
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return direct_coordinates(array.cast(pa.large_binary()))
    if pa.types.is_null(t):
        return np.zeros(len(array), np.uint64)
    coords: np.ndarray
    if pa.types.is_boolean(t) or pa.types.is_unsigned_integer(t):
        raw = _numpy_values(array, np.uint64)  # shift up by one to keep 0 for null (saturating at the top)
        coords = np.where(raw == np.iinfo(np.uint64).max, raw, raw + _ONE)
    elif pa.types.is_signed_integer(t):
        coords = _flip_signed(_numpy_values(array, np.int64))
    elif pa.types.is_floating(t):
        coords = _float_coordinates(_numpy_values(array, np.float64))
    elif pa.types.is_date32(t) or pa.types.is_time32(t):
        coords = _flip_signed(_numpy_values(array.view(pa.int32()), np.int64))
    elif _is_int64_temporal(t):
        coords = _flip_signed(_numpy_values(array.view(pa.int64()), np.int64))
    elif pa.types.is_decimal128(t):
        coords = _decimal_coordinates(array)
    elif _is_bytes_like(t):
        coords = _prefix_coordinates(array)
    else:
        raise TypeError(f"no order-preserving coordinate mapping for Arrow type {t}")
    coords = np.maximum(coords, _ONE).astype(np.uint64, copy=False)
    if array.null_count:
        coords[np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)] = 0
    return coords


def sample_boundaries(coords: np.ndarray, max_boundaries: int = DEFAULT_MAX_BOUNDARIES) -> np.ndarray:
    """Distinct quantile boundaries (sorted ``uint64``) of a sample's direct coordinates, nulls ignored.

    The boundaries are the sample's order statistics at ``max_boundaries`` evenly spaced ranks, always
    including its minimum and maximum; fewer come back when the sample has fewer distinct values.
    """
    if max_boundaries < 2:
        raise ValueError(f"max_boundaries must be >= 2, got {max_boundaries}")
    values = np.sort(coords[coords != 0])
    if values.size == 0:
        return np.zeros(0, np.uint64)
    ranks = np.linspace(0, values.size - 1, min(max_boundaries, values.size)).round().astype(np.int64)
    boundaries: np.ndarray = np.unique(values[ranks])
    return boundaries


def sample_bits(dims: int) -> int:
    """Bits per dimension over sample (CDF) coordinates: `SAMPLE_BITS` whatever the dimensions, so the key fits
    one ``int64`` up to 4 dimensions. The sample's boundaries resolve far less (a 4096th of each column's
    values), and every level more costs the Hilbert transform another pass over the keys."""
    if dims < 1:
        raise ValueError(f"dims must be >= 1, got {dims}")
    return SAMPLE_BITS


def key_width(dims: int, sampled: bool) -> int:
    """Bytes per key for ``dims`` dimensions over sample or direct coordinates."""
    bits = sample_bits(dims) if sampled else DIRECT_BITS
    return (dims * bits + 7) // 8


def rank_coordinates(coords: np.ndarray, boundaries: np.ndarray, bits: int = SAMPLE_BITS) -> np.ndarray:
    """Map direct coordinates to ``[1, 2**bits - 1]`` by their estimated CDF; ``0`` (null) stays ``0``.

    With boundaries ``b_0 < … < b_{m-1}``, a value in ``[b_j, b_{j+1}]`` maps to
    ``(j + (v - b_j) / (b_{j+1} - b_j)) / (m - 1)``; values outside the sample's range clamp to its ends.
    The map is monotone (non-decreasing), so sorting by the result never inverts two values.
    """
    if not 1 <= bits <= 53:
        raise ValueError(f"bits must be in [1, 53] for rank coordinates, got {bits}")
    coords = np.asarray(coords, dtype=np.uint64)
    m = boundaries.size
    if m == 0:
        cdf = np.full(coords.shape, 0.5)
    elif m == 1:
        cdf = np.where(coords < boundaries[0], 0.0, np.where(coords > boundaries[0], 1.0, 0.5))
    else:
        j = np.clip(np.searchsorted(boundaries, coords, side="right") - 1, 0, m - 2)
        low, high = boundaries[j], boundaries[j + 1]
        above = np.where(coords > low, coords - low, np.uint64(0))  # exact uint64 difference, no wrap
        frac = np.minimum(above.astype(np.float64) / (high - low).astype(np.float64), 1.0)
        cdf = (j + frac) / (m - 1)
    top = float((1 << bits) - 2)
    out = (1 + np.rint(cdf * top)).astype(np.uint64)
    out[coords == 0] = 0
    return out


def _check_coordinates(coords: Sequence[np.ndarray], bits: int) -> np.ndarray:
    if not coords:
        raise ValueError("at least one coordinate column is needed")
    if not 1 <= bits <= 64:
        raise ValueError(f"bits must be in [1, 64], got {bits}")
    stacked = np.stack([np.asarray(c, dtype=np.uint64) for c in coords])
    if bits < 64 and stacked.size and int(stacked.max()) >> bits:
        raise ValueError(f"a coordinate does not fit in {bits} bits")
    return stacked


def _spread_table(dims: int) -> np.ndarray:
    """``table[v]``: the 8 bits of byte ``v`` spread ``dims`` apart, MSB first, in an ``8*dims``-bit word."""
    table = np.zeros(256, np.uint64)
    values = np.arange(256, dtype=np.uint64)
    for k in range(8):  # bit k of the byte (from its MSB) lands at bit k*dims of the word (from its MSB)
        bit = (values >> np.uint64(7 - k)) & _ONE
        table |= bit << np.uint64(8 * dims - 1 - k * dims)
    return table


_SPREAD_TABLES = {dims: _spread_table(dims) for dims in range(1, 9)}


def _interleave(stacked: np.ndarray, bits: int) -> np.ndarray:
    """Bit-interleave ``(dims, n)`` coordinates, most significant bit first, dimension 0 leading."""
    dims, n = stacked.shape
    width = (dims * bits + 7) // 8
    nbytes = (bits + 7) // 8
    if bits % 8:  # left-align the coordinates on whole bytes; the trailing pad bits end up past `width`
        stacked = stacked << np.uint64(8 * nbytes - bits)
    if dims > 8:  # a byte's spread no longer fits a uint64 word: go bit by bit
        big_endian = np.ascontiguousarray(stacked.T).astype(">u8").view(np.uint8).reshape(n, dims, 8)
        unpacked = np.unpackbits(big_endian, axis=2)[:, :, 64 - 8 * nbytes :]
        return np.packbits(unpacked.transpose(0, 2, 1).reshape(n, 8 * nbytes * dims), axis=1)[:, :width]
    table = _SPREAD_TABLES[dims]
    out = np.empty((n, nbytes * dims), np.uint8)
    chunk = np.empty(n, np.uint64)
    for j in range(nbytes):  # byte j of every coordinate fills output bytes [j*dims, (j+1)*dims)
        shift = np.uint64(8 * (nbytes - 1 - j))
        chunk[:] = 0
        for d in range(dims):
            byte = ((stacked[d] >> shift) & np.uint64(0xFF)).astype(np.intp)
            chunk |= table[byte] >> np.uint64(d)
        out[:, j * dims : (j + 1) * dims] = chunk.astype(">u8").view(np.uint8).reshape(n, 8)[:, 8 - dims :]
    return out[:, :width]


def zorder_keys(coords: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """Morton keys: ``(n, ceil(dims*bits/8))`` big-endian ``uint8``; coordinates must be < 2**bits."""
    return _interleave(_check_coordinates(coords, bits), bits)


def _low_bits_where_clear(x: np.ndarray, level: int, out: np.ndarray) -> np.ndarray:
    """``out = (2**level - 1)`` where bit ``level`` of ``x`` is clear, else 0 (``(bit - 1) & low``)."""
    np.right_shift(x, np.uint64(level), out=out)
    np.bitwise_and(out, _ONE, out=out)
    np.subtract(out, _ONE, out=out)
    np.bitwise_and(out, np.uint64((1 << level) - 1), out=out)
    return out


def _axes_to_transpose(x: np.ndarray, bits: int) -> None:
    """Skilling's (2004) in-place transform of ``(dims, n)`` axes into the Hilbert index's transpose form.

    At each level ``q`` (top bit down to bit 1) and for each axis ``i``: where bit ``q`` of ``x[i]`` is set,
    invert the bits of ``x[0]`` below ``q``; else exchange those bits between ``x[0]`` and ``x[i]``. Then
    Gray-encode across axes and undo the excess work. Branches become masks, so each step is a handful of
    whole-array operations.
    """
    dims = x.shape[0]
    clear = np.empty(x.shape[1], np.uint64)
    swap = np.empty(x.shape[1], np.uint64)
    for level in range(bits - 1, 0, -1):
        low = np.uint64((1 << level) - 1)
        for i in range(dims):
            _low_bits_where_clear(x[i], level, clear)
            if i:
                np.bitwise_xor(x[0], x[i], out=swap)
                np.bitwise_and(swap, clear, out=swap)  # exchange where clear
                np.bitwise_xor(x[i], swap, out=x[i])
                np.bitwise_xor(x[0], swap, out=x[0])
            np.bitwise_xor(clear, low, out=clear)  # now: low bits where set
            np.bitwise_xor(x[0], clear, out=x[0])  # invert where set
    for i in range(1, dims):  # Gray encode
        np.bitwise_xor(x[i], x[i - 1], out=x[i])
    flips = np.zeros(x.shape[1], np.uint64)
    for level in range(bits - 1, 0, -1):
        _low_bits_where_clear(x[dims - 1], level, clear)
        np.bitwise_xor(clear, np.uint64((1 << level) - 1), out=clear)
        np.bitwise_xor(flips, clear, out=flips)
    for i in range(dims):
        np.bitwise_xor(x[i], flips, out=x[i])


def hilbert_keys(coords: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """Hilbert-curve keys for ``dims >= 1`` coordinates, same layout as `zorder_keys`.

    The index is Skilling's transpose form interleaved, so consecutive keys are grid neighbours.
    """
    stacked = _check_coordinates(coords, bits).copy()
    if stacked.shape[0] > 1:
        _axes_to_transpose(stacked, bits)
    return _interleave(stacked, bits)


def keys_to_words(keys: np.ndarray) -> np.ndarray:
    """``(n, ceil(width/8))`` ``int64`` words whose lexicographic signed order is the keys' byte order.

    Each 8-byte group (the last one zero-padded) is read big-endian and its sign bit flipped.
    """
    n, width = keys.shape
    words = -(-width // 8)
    padded = np.zeros((n, words * 8), np.uint8)
    padded[:, :width] = keys
    unsigned = padded.view(">u8").astype(np.uint64)
    flipped: np.ndarray = (unsigned ^ _SIGN).view(np.int64)
    return flipped


def linear_keys(columns: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
    """Keys in the columns' lexicographic order, nulls first: each column's direct coordinate, big-endian, one
    after the other (``(n, 8 * dims)`` ``uint8``). Weakly monotone where `direct_coordinates` is weak (long
    strings sharing their first 8 bytes tie), exact for numbers, dates and timestamps otherwise."""
    if not columns:
        raise ValueError("at least one column is needed")
    coords = np.stack([direct_coordinates(c) for c in columns], axis=1)
    return np.ascontiguousarray(coords.astype(">u8")).view(np.uint8).reshape(coords.shape[0], 8 * len(columns))


def curve_keys(
    columns: Sequence[pa.Array | pa.ChunkedArray],
    strategy: LayoutStrategy,
    boundaries: Sequence[np.ndarray] | None = None,
) -> np.ndarray:
    """Layout keys for one batch: for a curve, over direct coordinates when ``boundaries`` is None, else over
    sample (CDF) ones; for ``LINEAR``, `linear_keys` (``boundaries`` must then be None).
    """
    if strategy is LayoutStrategy.LINEAR:
        if boundaries is not None:
            raise ValueError("a linear layout orders by the values themselves; it takes no sample boundaries")
        return linear_keys(columns)
    direct = [direct_coordinates(c) for c in columns]
    if boundaries is None:
        coords, bits = direct, DIRECT_BITS
    else:
        if len(boundaries) != len(direct):
            raise ValueError(f"{len(boundaries)} boundary arrays for {len(direct)} columns")
        bits = sample_bits(len(direct))
        coords = [rank_coordinates(c, b, bits) for c, b in zip(direct, boundaries, strict=True)]
    if strategy is LayoutStrategy.HILBERT:
        return hilbert_keys(coords, bits)
    return zorder_keys(coords, bits)
