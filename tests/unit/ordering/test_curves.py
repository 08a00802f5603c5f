"""Space-filling-curve keys: Hilbert and Z-order correctness, order-preserving coordinates, rank mapping."""

from __future__ import annotations

import datetime as dt
import itertools
import math
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hudi_clusterd.domain.row_order import LayoutStrategy
from hudi_clusterd.ordering import curves


def key_ints(keys: np.ndarray, dims: int, bits: int) -> list[int]:
    """Keys as integers (dropping the zero padding of the last byte)."""
    pad = keys.shape[1] * 8 - dims * bits
    return [int.from_bytes(k.tobytes(), "big") >> pad for k in keys]


def grid(dims: int, bits: int) -> np.ndarray:
    return np.array(list(itertools.product(range(1 << bits), repeat=dims)), dtype=np.uint64).reshape(-1, dims)


def naive_interleave(coords: list[list[int]], bits: int) -> list[int]:
    out = []
    for row in zip(*coords, strict=True):
        value = 0
        for level in range(bits - 1, -1, -1):
            for c in row:
                value = (value << 1) | ((c >> level) & 1)
        out.append(value)
    return out


# --- Hilbert ---------------------------------------------------------------------------------------------


@given(dims=st.integers(2, 5), bits=st.integers(1, 5))
@settings(max_examples=40, deadline=None)
def test_hilbert_keys_small_grid_bijection_with_adjacent_neighbours(dims: int, bits: int) -> None:
    if dims * bits > 12:
        bits = 12 // dims
    # Given every point of a 2**bits-wide grid in `dims` dimensions
    points = grid(dims, bits)
    # When keyed on the Hilbert curve
    ints = key_ints(curves.hilbert_keys(list(points.T), bits), dims, bits)
    # Then the keys are exactly 0 .. cells-1 (a bijection) ...
    assert sorted(ints) == list(range(len(points)))
    # ... and consecutive keys are grid neighbours (Manhattan distance 1)
    walk = points[np.argsort(ints)].astype(np.int64)
    assert np.abs(np.diff(walk, axis=0)).sum(axis=1).tolist() == [1] * (len(points) - 1)
    assert walk[0].tolist() == [0] * dims


def test_hilbert_keys_2d_order_is_the_classic_u_shape() -> None:
    # Given the 2x2 grid / When ordered by Hilbert key / Then the walk is (0,0) (0,1) (1,1) (1,0)
    points = grid(2, 1)
    order = np.argsort(key_ints(curves.hilbert_keys(list(points.T), 1), 2, 1))
    assert points[order].tolist() == [[0, 0], [0, 1], [1, 1], [1, 0]]


@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)), min_size=2, max_size=40))
@settings(max_examples=50, deadline=None)
def test_hilbert_keys_64_bits_distinct_points_distinct_keys(points: list[tuple[int, int]]) -> None:
    xs = np.array([p[0] for p in points], dtype=np.uint64)
    ys = np.array([p[1] for p in points], dtype=np.uint64)
    keys = curves.hilbert_keys([xs, ys], 64)
    assert keys.shape == (len(points), 16)
    assert len({k.tobytes() for k in keys}) == len(set(points))


def test_hilbert_keys_one_dimension_is_identity() -> None:
    values = np.array([5, 0, 255, 17], dtype=np.uint64)
    assert key_ints(curves.hilbert_keys([values], 8), 1, 8) == [5, 0, 255, 17]


# --- Z-order ---------------------------------------------------------------------------------------------


@st.composite
def coordinate_sets(draw: st.DrawFn) -> tuple[list[list[int]], int]:
    dims = draw(st.integers(1, 10))
    bits = draw(st.integers(1, 64))
    n = draw(st.integers(1, 20))
    coords = [draw(st.lists(st.integers(0, 2**bits - 1), min_size=n, max_size=n)) for _ in range(dims)]
    return coords, bits


@given(coordinate_sets())
@settings(max_examples=150, deadline=None)
def test_zorder_keys_random_coordinates_match_bitwise_interleaving(case: tuple[list[list[int]], int]) -> None:
    coords, bits = case
    keys = curves.zorder_keys([np.array(c, dtype=np.uint64) for c in coords], bits)
    assert keys.shape[1] == math.ceil(len(coords) * bits / 8)
    assert key_ints(keys, len(coords), bits) == naive_interleave(coords, bits)


def test_zorder_keys_2d_grid_visits_quadrants_in_z_order() -> None:
    points = grid(2, 1)
    order = np.argsort(key_ints(curves.zorder_keys(list(points.T), 1), 2, 1))
    assert points[order].tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]


def test_zorder_keys_coordinate_wider_than_bits_raises() -> None:
    with pytest.raises(ValueError, match="does not fit in 4 bits"):
        curves.zorder_keys([np.array([16], dtype=np.uint64)], 4)


def test_zorder_keys_no_columns_raises() -> None:
    with pytest.raises(ValueError, match="at least one"):
        curves.zorder_keys([], 8)


def test_keys_sort_as_bytes_like_their_integer_value() -> None:
    # Spark compares BinaryType as unsigned lexicographic bytes: that order must be the numeric order
    rng = np.random.default_rng(3)
    coords = [rng.integers(0, 2**20, 500, dtype=np.uint64) for _ in range(3)]
    keys = curves.hilbert_keys(coords, 20)
    as_bytes = sorted(range(500), key=lambda i: keys[i].tobytes())
    as_ints = sorted(range(500), key=lambda i: key_ints(keys[i : i + 1], 3, 20)[0])
    assert as_bytes == as_ints


@given(st.integers(1, 20), st.integers(1, 60))
@settings(max_examples=60, deadline=None)
def test_keys_to_words_signed_order_equals_byte_order(width: int, n: int) -> None:
    rng = np.random.default_rng(width * 100 + n)
    keys = rng.integers(0, 256, (n, width), dtype=np.uint8)
    keys[: n // 2, 0] = rng.choice([0, 127, 128, 255], n // 2)  # exercise the sign bit
    words = curves.keys_to_words(keys)
    assert words.shape == (n, math.ceil(width / 8)) and words.dtype == np.int64
    by_bytes = sorted(range(n), key=lambda i: (keys[i].tobytes(), i))
    by_words = sorted(range(n), key=lambda i: (tuple(words[i].tolist()), i))
    assert by_bytes == by_words


@pytest.mark.parametrize(("dims", "bits"), [(1, 16), (2, 16), (3, 16), (4, 16), (5, 16), (9, 16)])
def test_sample_bits_fit_one_word_up_to_four_dimensions(dims: int, bits: int) -> None:
    assert curves.sample_bits(dims) == bits
    assert curves.key_width(dims, sampled=True) == math.ceil(dims * bits / 8)
    assert curves.key_width(dims, sampled=False) == dims * 8


# --- direct coordinates ----------------------------------------------------------------------------------


def assert_order_preserved(values: list[Any], array: pa.Array, strict: bool = True) -> None:
    """Sorting by value never inverts the coordinates; distinct values get distinct ones when strict."""
    coords = curves.direct_coordinates(array)
    ranked = sorted(range(len(values)), key=lambda i: values[i])
    for a, b in itertools.pairwise(ranked):
        assert coords[a] <= coords[b], (values[a], values[b])
        if strict and values[a] != values[b]:
            assert coords[a] < coords[b], (values[a], values[b])


INT_TYPES = [(pa.int8(), 8), (pa.int16(), 16), (pa.int32(), 32), (pa.int64(), 64)]


@pytest.mark.parametrize(("arrow_type", "width"), INT_TYPES, ids=lambda v: str(v))
@given(data=st.data())
@settings(max_examples=40, deadline=None)
def test_direct_coordinates_signed_ints_order_preserved(arrow_type: pa.DataType, width: int, data: Any) -> None:
    low = -(2 ** (width - 1)) + 1  # INT_MIN itself ties INT_MIN + 1 (0 is reserved for null)
    values = data.draw(st.lists(st.integers(low, 2 ** (width - 1) - 1), min_size=2, max_size=50))
    assert_order_preserved(values, pa.array(values, arrow_type))


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=2, max_size=50))
@settings(max_examples=80, deadline=None)
def test_direct_coordinates_doubles_follow_spark_order(values: list[float]) -> None:
    # Spark: -0.0 == 0.0, NaN above +inf and equal to itself
    def spark_key(v: float) -> tuple[int, float]:
        return (1, 0.0) if math.isnan(v) else (0, v + 0.0)

    coords = curves.direct_coordinates(pa.array(values, pa.float64()))
    ranked = sorted(range(len(values)), key=lambda i: spark_key(values[i]))
    for a, b in itertools.pairwise(ranked):
        ka, kb = spark_key(values[a]), spark_key(values[b])
        assert coords[a] < coords[b] if ka < kb else coords[a] == coords[b]


@given(st.lists(st.floats(width=32, allow_nan=False), min_size=2, max_size=50))
@settings(max_examples=40, deadline=None)
def test_direct_coordinates_floats_order_preserved(values: list[float]) -> None:
    assert_order_preserved([v + 0.0 for v in values], pa.array(values, pa.float32()))


@pytest.mark.parametrize("precision", [9, 18, 19, 30, 38])
@given(data=st.data())
@settings(max_examples=30, deadline=None)
def test_direct_coordinates_decimals_order_preserved(precision: int, data: Any) -> None:
    scale = 2
    bound = 10 ** (precision - scale) - 1
    values = data.draw(st.lists(st.decimals(-bound, bound, places=scale, allow_nan=False), min_size=2, max_size=40))
    # Up to precision 18 the unscaled value is kept whole; beyond, only its top 64 bits (monotone, not strict)
    assert_order_preserved(values, pa.array(values, pa.decimal128(precision, scale)), strict=precision <= 18)


def test_direct_coordinates_wide_decimals_still_separate_distant_values() -> None:
    values = [Decimal("-1e30"), Decimal(-1), Decimal(0), Decimal("1e20"), Decimal("1e30")]
    coords = curves.direct_coordinates(pa.array(values, pa.decimal128(38, 2)))
    assert list(coords) == sorted(coords)
    assert coords[0] < coords[2] < coords[3] < coords[4]


@given(st.lists(st.dates(), min_size=2, max_size=50))
@settings(max_examples=40, deadline=None)
def test_direct_coordinates_dates_order_preserved(values: list[dt.date]) -> None:
    assert_order_preserved(values, pa.array(values, pa.date32()))


@given(st.lists(st.datetimes(min_value=dt.datetime(1, 1, 2)), min_size=2, max_size=50))
@settings(max_examples=40, deadline=None)
def test_direct_coordinates_timestamps_order_preserved(values: list[dt.datetime]) -> None:
    assert_order_preserved(values, pa.array(values, pa.timestamp("us", tz="UTC")))
    assert_order_preserved(values, pa.array(values, pa.timestamp("us")))


@given(st.lists(st.text(max_size=12), min_size=2, max_size=50))
@settings(max_examples=80, deadline=None)
def test_direct_coordinates_strings_follow_utf8_byte_order(values: list[str]) -> None:
    encoded = [v.encode("utf-8") for v in values]

    def prefix(raw: bytes) -> int:  # the documented coordinate: first 8 bytes, zero-padded, at least 1
        return max(1, int.from_bytes(raw[:8].ljust(8, b"\0"), "big"))

    coords = curves.direct_coordinates(pa.array(values, pa.string()))
    large = curves.direct_coordinates(pa.array(values, pa.large_string()))
    assert coords.tolist() == large.tolist()
    ranked = sorted(range(len(values)), key=lambda i: encoded[i])
    for a, b in itertools.pairwise(ranked):
        assert coords[a] <= coords[b]
        if prefix(encoded[a]) != prefix(encoded[b]):
            assert coords[a] < coords[b]  # only a shared 8-byte prefix may tie


@given(st.lists(st.binary(max_size=10), min_size=2, max_size=50))
@settings(max_examples=40, deadline=None)
def test_direct_coordinates_binary_order_preserved_weakly(values: list[bytes]) -> None:
    assert_order_preserved(values, pa.array(values, pa.binary()), strict=False)


def test_direct_coordinates_booleans_false_before_true() -> None:
    coords = curves.direct_coordinates(pa.array([True, False, None]))
    assert coords[2] == 0 < coords[1] < coords[0]


def test_direct_coordinates_nulls_are_zero_and_values_at_least_one() -> None:
    cases = [
        pa.array([None, -(2**63), 0], pa.int64()),
        pa.array([None, float("-inf"), 0.0], pa.float64()),
        pa.array([None, "", "a"], pa.string()),
        pa.array([None, Decimal("-9.99"), Decimal(1)], pa.decimal128(3, 2)),
        pa.array([None, dt.date(1, 1, 1), dt.date(2020, 1, 1)], pa.date32()),
    ]
    for array in cases:
        coords = curves.direct_coordinates(array)
        assert coords[0] == 0, array.type
        assert coords[1] >= 1 and coords[2] >= coords[1], array.type


def test_direct_coordinates_sliced_and_chunked_arrays_use_their_own_rows() -> None:
    strings = pa.array(["zz", "a", "m", "b"]).slice(1, 2)
    decimals = pa.array([Decimal(5), Decimal(-1), Decimal(3)], pa.decimal128(5, 0)).slice(1)
    chunked = pa.chunked_array([pa.array([3, 1]), pa.array([2])])
    assert curves.direct_coordinates(strings).tolist() == curves.direct_coordinates(pa.array(["a", "m"])).tolist()
    d = curves.direct_coordinates(decimals)
    assert d.size == 2 and d[0] < d[1]
    c = curves.direct_coordinates(chunked)
    assert c[1] < c[2] < c[0]


def test_direct_coordinates_dictionary_and_view_strings_match_plain() -> None:
    values = ["pear", "apple", None, "fig"]
    plain = curves.direct_coordinates(pa.array(values)).tolist()
    assert curves.direct_coordinates(pa.array(values).dictionary_encode()).tolist() == plain
    assert curves.direct_coordinates(pa.array(values, pa.string_view())).tolist() == plain


def test_direct_coordinates_nested_type_raises_type_error() -> None:
    with pytest.raises(TypeError, match="struct"):
        curves.direct_coordinates(pa.array([{"a": 1}]))


# --- sample (rank) coordinates ---------------------------------------------------------------------------


def test_sample_boundaries_sorted_distinct_with_sample_extremes() -> None:
    coords = curves.direct_coordinates(pa.array(np.random.default_rng(1).lognormal(0, 2, 10_000)))
    bounds = curves.sample_boundaries(coords, max_boundaries=100)
    assert 2 <= bounds.size <= 100
    assert np.all(np.diff(bounds.astype(np.float64)) > 0)
    assert bounds[0] == coords.min() and bounds[-1] == coords.max()


def test_sample_boundaries_ignore_nulls_and_collapse_duplicates() -> None:
    coords = curves.direct_coordinates(pa.array([None, 1, 1, 1, 2, None], pa.int32()))
    assert curves.sample_boundaries(coords).tolist() == sorted(set(coords[coords != 0].tolist()))
    assert curves.sample_boundaries(np.zeros(3, np.uint64)).size == 0


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=200), st.lists(st.floats(-2e6, 2e6), max_size=100))
@settings(max_examples=60, deadline=None)
def test_rank_coordinates_monotone_within_bits(sample: list[float], values: list[float]) -> None:
    bounds = curves.sample_boundaries(curves.direct_coordinates(pa.array(sample, pa.float64())), 16)
    data = sorted(v + 0.0 for v in values)
    ranks = curves.rank_coordinates(curves.direct_coordinates(pa.array(data, pa.float64())), bounds, 20)
    assert np.all(np.diff(ranks.astype(np.int64)) >= 0)
    assert np.all((ranks >= 1) & (ranks < 2**20))


def test_rank_coordinates_spread_skewed_data_evenly() -> None:
    # Given heavily skewed data (lognormal) and boundaries from a sample of it
    rng = np.random.default_rng(7)
    data = curves.direct_coordinates(pa.array(rng.lognormal(0, 3, 200_000)))
    bounds = curves.sample_boundaries(data[rng.choice(data.size, 20_000, replace=False)], 1024)
    # When mapped to 16-bit rank coordinates
    ranks = curves.rank_coordinates(data, bounds, 16).astype(np.float64) / 2**16
    # Then every decile of the coordinate space holds about a tenth of the rows
    counts, _ = np.histogram(ranks, bins=10, range=(0, 1))
    assert np.all(np.abs(counts / data.size - 0.1) < 0.01), counts


def test_rank_coordinates_nulls_stay_zero_and_edges_clamp() -> None:
    bounds = np.array([10, 20, 30], dtype=np.uint64)
    ranks = curves.rank_coordinates(np.array([0, 5, 10, 15, 30, 99], dtype=np.uint64), bounds, 8)
    assert ranks.tolist() == [0, 1, 1, 65, 255, 255]  # 15 is a quarter of the way: 1 + rint(0.25 * 254)


def test_rank_coordinates_degenerate_boundaries() -> None:
    coords = np.array([0, 3, 5, 7], dtype=np.uint64)
    assert curves.rank_coordinates(coords, np.array([5], np.uint64), 4).tolist() == [0, 1, 8, 15]
    assert curves.rank_coordinates(coords, np.zeros(0, np.uint64), 4).tolist() == [0, 8, 8, 8]


# --- curve_keys ------------------------------------------------------------------------------------------


def test_linear_keys_order_rows_lexicographically_nulls_first() -> None:
    a = pa.array([2, None, 1, 1, -5], pa.int64())
    b = pa.array([0.5, 3.0, None, -1.0, 9.0])
    keys = curves.curve_keys([a, b], LayoutStrategy.LINEAR)
    assert keys.shape == (5, 16)
    order = sorted(range(5), key=lambda i: keys[i].tobytes())
    assert order == [1, 4, 2, 3, 0]  # (null, 3.0), (-5, 9.0), (1, null), (1, -1.0), (2, 0.5)


def test_linear_keys_take_no_boundaries() -> None:
    with pytest.raises(ValueError, match="linear"):
        curves.curve_keys([pa.array([1])], LayoutStrategy.LINEAR, [np.zeros(1, np.uint64)])


def test_curve_keys_boundary_count_must_match_columns() -> None:
    with pytest.raises(ValueError, match="1 boundary arrays for 2 columns"):
        curves.curve_keys([pa.array([1]), pa.array([2])], LayoutStrategy.HILBERT, [np.zeros(0, np.uint64)])


@pytest.mark.parametrize("strategy", [LayoutStrategy.ZORDER, LayoutStrategy.HILBERT])
def test_curve_keys_widths_direct_and_sample(strategy: LayoutStrategy) -> None:
    columns = [pa.array([1.5, None, -2.0]), pa.array(["b", "a", None])]
    direct = curves.curve_keys(columns, strategy)
    bounds = [curves.sample_boundaries(curves.direct_coordinates(c)) for c in columns]
    sample = curves.curve_keys(columns, strategy, bounds)
    assert direct.shape == (3, curves.key_width(2, sampled=False)) == (3, 16)
    assert sample.shape == (3, curves.key_width(2, sampled=True)) == (3, 4)


@pytest.mark.parametrize("strategy", [LayoutStrategy.ZORDER, LayoutStrategy.HILBERT])
def test_curve_keys_all_null_row_sorts_first(strategy: LayoutStrategy) -> None:
    columns = [pa.array([3, None, -(2**40)], pa.int64()), pa.array([None, None, "0"])]
    for keys in (curves.curve_keys(columns, strategy), curves.curve_keys(columns, strategy, [
        curves.sample_boundaries(curves.direct_coordinates(c)) for c in columns
    ])):  # fmt: skip
        assert min(range(3), key=lambda i: keys[i].tobytes()) == 1
        assert not keys[1].any()
