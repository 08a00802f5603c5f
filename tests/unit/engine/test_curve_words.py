"""The 64-bit word program behind JVM curve keys, run on numpy: the same keys as the byte-string curves."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hudi_clusterd.domain.layout import LayoutStrategy
from hudi_clusterd.engine import curve_sql, curves

OPS = curves.NumpyWordOps()


def naive_spread(x: int, dims: int, bits: int) -> int:
    return sum(1 << (i * dims) for i in range(bits) if x >> i & 1)


@pytest.mark.parametrize("dims", range(1, 9))
def test_spread_stages_move_bit_i_to_bit_i_times_dims(dims: int) -> None:
    rng = np.random.default_rng(dims)
    for bits in range(1, 64 // dims + 1):
        # Given random words of `bits` bits, the stages' shifts and masks applied with Python integers
        for x in [0, (1 << bits) - 1, *(int(v) for v in rng.integers(0, 1 << bits, 20, dtype=np.uint64))]:
            spread = x
            for shift, mask in curves.spread_stages(dims, bits):
                spread = ((spread | (spread << shift)) & mask) & ((1 << 64) - 1)
            # Then bit i lands on bit i * dims, and nothing else is set
            assert spread == naive_spread(x, dims, bits), (dims, bits, x)


def test_spread_stages_reject_more_than_64_bits() -> None:
    with pytest.raises(ValueError, match="cannot spread 33 bits over 2"):
        curves.spread_stages(2, 33)


@pytest.mark.parametrize("strategy", [LayoutStrategy.ZORDER, LayoutStrategy.HILBERT], ids=lambda s: s.value)
@pytest.mark.parametrize(("dims", "bits"), [(2, 16), (2, 32), (3, 16), (3, 21), (4, 16), (2, 1), (3, 5)])
def test_curve_word_equals_the_first_word_of_the_byte_keys(strategy: LayoutStrategy, dims: int, bits: int) -> None:
    # Given random coordinates, with the extremes of the grid among them
    rng = np.random.default_rng(dims * 100 + bits)
    coords = [rng.integers(0, 1 << bits, 500, dtype=np.uint64) for _ in range(dims)]
    for c in coords:
        c[:2] = [0, (1 << bits) - 1]
    # When keyed by the word program and by the byte-string curves
    word = curves.curve_word([c.copy() for c in coords], strategy, bits, OPS)
    make = curves.hilbert_keys if strategy is LayoutStrategy.HILBERT else curves.zorder_keys
    reference = curves.keys_to_words(make(coords, bits))
    # Then the word (sign flipped, left-aligned) is the reference's only word
    assert reference.shape[1] == 1
    assert np.array_equal(np.asarray(word, np.uint64).view(np.int64), reference[:, 0])


def test_curve_word_rejects_linear() -> None:
    with pytest.raises(ValueError, match="linear"):
        curves.curve_word([np.zeros(1, np.uint64)] * 2, LayoutStrategy.LINEAR, 16, OPS)


def test_value_boundaries_ignore_nulls_nan_and_infinities_and_keep_the_ends() -> None:
    values = pa.array([3.0, None, float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 10.0, 7.5])
    b = curves.value_boundaries(values, 4)
    assert b[0] == 0.0 and not math.copysign(1.0, b[0]) < 0  # -0.0 counted as 0.0
    assert b[-1] == 10.0
    assert b.size <= 4 and np.all(np.diff(b) > 0)
    assert curves.value_boundaries(pa.array([None, float("nan")], pa.float64())).size == 0
    with pytest.raises(ValueError, match="max_boundaries"):
        curves.value_boundaries(values, 1)


@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64) | st.none(), min_size=1, max_size=300),
    st.integers(2, 40),
)
@settings(max_examples=80, deadline=None)
def test_value_coordinates_are_monotone_with_null_first_and_nan_last(values: list[float | None], knots: int) -> None:
    array = pa.array(values, pa.float64())
    boundaries = curves.value_boundaries(array, knots)
    coords = curves.value_coordinates(array, boundaries, 16)
    top = (1 << 16) - 1
    for v, c in zip(values, coords.tolist(), strict=True):
        if v is None:
            assert c == 0
        elif math.isnan(v):
            assert c == top
        else:
            assert 1 <= c <= top - 1
    # Non-decreasing along the values' order (nulls and NaN excepted)
    real = sorted((v, c) for v, c in zip(values, coords.tolist(), strict=True) if v is not None and not math.isnan(v))
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(real))


def test_value_coordinates_spread_a_skewed_column_evenly() -> None:
    # Given a log-normal column: most values small, a long tail
    rng = np.random.default_rng(7)
    values = pa.array(np.exp(rng.normal(0, 3, 20_000)))
    coords = curves.value_coordinates(values, curves.value_boundaries(values), 16)
    # Then every quarter of the coordinate range holds about a quarter of the rows
    quarters = np.bincount((coords >> np.uint64(14)).astype(np.int64), minlength=4)
    assert quarters.min() > 0.2 * len(values), quarters


def test_value_coordinates_with_one_or_no_boundary() -> None:
    values = pa.array([1.0, 2.0, 3.0, None])
    assert curves.value_coordinates(values, np.array([2.0]), 4).tolist() == [1, 7, 14, 0]
    assert curves.value_coordinates(values, np.zeros(0), 4).tolist() == [7, 7, 7, 0]  # rint(6.5) is 6: half to even


def test_sql_literals() -> None:
    assert curve_sql.long_literal(5) == "5L"
    assert curve_sql.long_literal(-(1 << 63)) == "(-9223372036854775807L - 1L)"
    with pytest.raises(ValueError, match="does not fit"):
        curve_sql.long_literal(1 << 63)
    assert curve_sql.double_literal(1e-05) == "1E-05D"
    assert curve_sql.double_literal(-2.5) == "(-2.5D)"
    with pytest.raises(ValueError, match="non-finite"):
        curve_sql.double_literal(float("inf"))


def test_split_words_cut_the_sample_into_equal_parts() -> None:
    rng = np.random.default_rng(3)
    words = rng.integers(-(1 << 63), (1 << 63) - 1, 10_000, dtype=np.int64)
    splits = curve_sql.split_words(words, 8)
    assert len(splits) == 7 and list(splits) == sorted(splits)
    partitioning = curve_sql.SqlCurvePartitioning(LayoutStrategy.HILBERT, (), splits, words.size)
    counts = np.bincount(partitioning.partitions(words), minlength=8)
    assert counts.tolist() == [1250] * 8
    assert curve_sql.split_words(words, 1) == ()
