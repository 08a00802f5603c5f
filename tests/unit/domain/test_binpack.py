"""Generic bin packing: Hudi's largest-first greedy, and output file counts."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.domain.binpack import output_groups, pack_largest_first


def weight_of(item: tuple[str, int]) -> int:
    return item[1]


def names(bins: list[list[tuple[str, int]]]) -> list[list[str]]:
    return [[name for name, _ in b] for b in bins]


def test_pack_largest_first_sorts_descending_and_closes_full_bins() -> None:
    # Given items that do not fit one bin of 100
    items = [("a", 10), ("b", 60), ("c", 30), ("d", 50), ("e", 20)]
    # When packed / Then heaviest first (b, d, c, e, a): b alone (b+d = 110), d+c+e = 100, then a
    bins = pack_largest_first(items, weight_of, max_bin_weight=100, max_bins=10)
    assert names(bins) == [["b"], ["d", "c", "e"], ["a"]]


def test_pack_largest_first_bin_may_reach_cap_exactly() -> None:
    bins = pack_largest_first([("a", 60), ("b", 40), ("c", 1)], weight_of, 100, 10)
    assert names(bins) == [["a", "b"], ["c"]]


def test_pack_largest_first_equal_weights_keep_input_order() -> None:
    items = [("x", 5), ("y", 5), ("z", 5)]
    assert names(pack_largest_first(items, weight_of, 10, 10)) == [["x", "y"], ["z"]]


def test_pack_largest_first_item_over_cap_gets_own_bin() -> None:
    bins = pack_largest_first([("small", 1), ("huge", 500)], weight_of, 100, 10)
    assert names(bins) == [["huge"], ["small"]]


def test_pack_largest_first_stops_after_max_bins_closed_leaving_rest_out() -> None:
    # Given five items that need one bin each and room for two bins
    items = [(str(i), 90) for i in range(5)]
    # Then exactly two bins come back and the item that closed the second bin is left out
    assert names(pack_largest_first(items, weight_of, 100, max_bins=2)) == [["0"], ["1"]]


def test_pack_largest_first_final_bin_returned_even_with_single_item() -> None:
    bins = pack_largest_first([("a", 90), ("b", 90)], weight_of, 100, max_bins=2)
    assert names(bins) == [["a"], ["b"]]


def test_pack_largest_first_single_bin_limit_with_everything_fitting() -> None:
    assert names(pack_largest_first([("a", 1), ("b", 2)], weight_of, 100, max_bins=1)) == [["b", "a"]]


def test_pack_largest_first_no_items_gives_no_bins() -> None:
    assert pack_largest_first([], weight_of, 100, 10) == []


def test_pack_largest_first_zero_weights_fill_one_bin() -> None:
    assert names(pack_largest_first([("a", 0), ("b", 0)], weight_of, 1, 10)) == [["a", "b"]]


@pytest.mark.parametrize(
    ("cap", "max_bins", "items", "message"),
    [
        (0, 1, [], "max_bin_weight must be > 0"),
        (1, 0, [], "max_bins must be > 0"),
        (1, 1, [("a", -1)], "weights must be >= 0"),
    ],
)
def test_pack_largest_first_invalid_arguments_raise(
    cap: int, max_bins: int, items: list[tuple[str, int]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        pack_largest_first(items, weight_of, cap, max_bins)


@given(
    st.lists(st.integers(0, 300), max_size=60),
    st.integers(1, 400),
    st.integers(1, 12),
)
def test_pack_largest_first_properties_hold(weights: list[int], cap: int, max_bins: int) -> None:
    items = [(f"i{n}", w) for n, w in enumerate(weights)]
    bins = pack_largest_first(items, weight_of, cap, max_bins)
    flat = [item for b in bins for item in b]
    # Bins are non-empty, never more than asked for, and hold a prefix of the items sorted heaviest first.
    assert all(bins)
    assert len(bins) <= max_bins
    assert flat == sorted(items, key=lambda it: -it[1])[: len(flat)]
    assert not Counter(flat) - Counter(items)
    # A bin only exceeds the cap when it holds a single item.
    assert all(sum(w for _, w in b) <= cap or len(b) == 1 for b in bins)
    # Items are left out only when the bin limit was reached.
    if len(flat) < len(items):
        assert len(bins) == max_bins
    # Greedy: the next bin's first item did not fit into the previous bin.
    for prev, nxt in itertools.pairwise(bins):
        assert sum(w for _, w in prev) + nxt[0][1] > cap


@pytest.mark.parametrize(
    ("total", "target", "expected"),
    [(0, 100, 1), (1, 100, 1), (100, 100, 1), (101, 100, 2), (2 * 2**30, 2**30, 2), (2**31 + 1, 2**30, 3)],
)
def test_output_groups_is_ceiling_at_least_one(total: int, target: int, expected: int) -> None:
    assert output_groups(total, target) == expected


def test_output_groups_invalid_arguments_raise() -> None:
    with pytest.raises(ValueError, match="target must be > 0"):
        output_groups(10, 0)
    with pytest.raises(ValueError, match="total_bytes must be >= 0"):
        output_groups(-1, 10)
