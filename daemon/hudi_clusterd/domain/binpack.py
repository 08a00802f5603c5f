"""Generic bin-packing helpers for planning; they know nothing about Hudi.

:func:`pack_largest_first` is the greedy that Hudi's size-based clustering plan strategy uses to cut one
partition's file slices into groups; :func:`output_groups` is how many output files a group of a given size
should be written as.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

__all__ = ["output_groups", "pack_largest_first"]

T = TypeVar("T")


def pack_largest_first(
    items: Iterable[T],
    weight: Callable[[T], int],
    max_bin_weight: int,
    max_bins: int,
) -> list[list[T]]:
    """Pack items into bins, heaviest first, in one greedy pass.

    Items are sorted by weight, descending (stable: equal weights keep their input order). Each item goes into
    the current bin; when adding it would push a non-empty bin over ``max_bin_weight``, that bin is closed
    first. An item heavier than the cap therefore gets a bin of its own. Packing stops as soon as ``max_bins``
    bins have been *closed*, leaving the remaining items out; otherwise the last, possibly light or
    single-item, bin is returned too, and the caller decides whether to keep it.

    Raises ``ValueError`` for ``max_bin_weight < 1``, ``max_bins < 1`` or a negative weight.
    """
    if max_bin_weight < 1:
        raise ValueError(f"max_bin_weight must be > 0, got {max_bin_weight}")
    if max_bins < 1:
        raise ValueError(f"max_bins must be > 0, got {max_bins}")
    weighed = [(weight(item), item) for item in items]
    for w, item in weighed:
        if w < 0:
            raise ValueError(f"weights must be >= 0, got {w} for {item!r}")
    weighed.sort(key=lambda pair: -pair[0])

    bins: list[list[T]] = []
    current: list[T] = []
    current_weight = 0
    for w, item in weighed:
        if current and current_weight + w > max_bin_weight:
            bins.append(current)
            current, current_weight = [], 0
            if len(bins) >= max_bins:
                return bins
        current.append(item)
        current_weight += w
    if current:
        bins.append(current)
    return bins


def output_groups(total_bytes: int, target: int) -> int:
    """``ceil(total_bytes / target)`` and at least 1: the number of output files for a group."""
    if target < 1:
        raise ValueError(f"target must be > 0, got {target}")
    if total_bytes < 0:
        raise ValueError(f"total_bytes must be >= 0, got {total_bytes}")
    return max(1, -(-total_bytes // target))
