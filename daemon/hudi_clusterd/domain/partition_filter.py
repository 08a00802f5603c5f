"""Which partitions a clustering plan looks at (Hudi's ``ClusteringPlanPartitionFilter`` and its inputs).

Order of operations, as in Hudi's ``PartitionAwareClusteringPlanStrategy``:

1. ``partition.selected`` set: those partitions, as written (no listing, no regex); otherwise every partition
   of the table that fully matches ``partition.regex.pattern`` (all of them when unset);
2. then the filter mode:

   * ``NONE``: unchanged, in input order;
   * ``RECENT_DAYS``: sorted newest first (descending string order), skip ``skipfromlatest``, keep
     ``lookback`` (everything left when ``lookback <= 0``);
   * ``SELECTED_PARTITIONS``: ``begin <= p <= end`` (inclusive string order; a missing bound is open), in input
     order;
   * ``DAY_ROLLING``: sorted ascending, keep the partitions at indexes ``i`` with ``i % 24 == now.hour``, so
     every partition is visited once a day at one clustering per hour. Hudi takes the hour of the local
     clock; pass a local ``now`` to match it.

String order is Java's (UTF-16 code units), which equals Python's except around supplementary characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from hudi_clusterd.domain.policy import ClusteringPolicy, PartitionFilterMode, java_string_order

__all__ = ["select_partitions"]

_HOURS_PER_DAY = 24


def select_partitions(all_partitions: Iterable[str], policy: ClusteringPolicy, now: datetime) -> list[str]:
    """The partitions to plan for, in the order the filter mode defines (duplicates removed)."""
    if policy.selected_partitions:
        candidates = list(policy.selected_partitions)
    else:
        candidates = list(dict.fromkeys(all_partitions))
        if policy.partition_regex is not None:
            pattern = re.compile(policy.partition_regex)
            candidates = [p for p in candidates if pattern.fullmatch(p)]
    return _apply_mode(candidates, policy, now)


def _apply_mode(partitions: list[str], policy: ClusteringPolicy, now: datetime) -> list[str]:
    mode = policy.partition_filter_mode
    if mode is PartitionFilterMode.NONE:
        return partitions
    if mode is PartitionFilterMode.RECENT_DAYS:
        newest_first = sorted(partitions, key=java_string_order, reverse=True)
        remaining = newest_first[max(policy.skip_from_latest_partitions, 0) :]
        lookback = policy.lookback_partitions
        return remaining[:lookback] if lookback > 0 else remaining
    if mode is PartitionFilterMode.SELECTED_PARTITIONS:
        low = None if policy.begin_partition is None else java_string_order(policy.begin_partition)
        high = None if policy.end_partition is None else java_string_order(policy.end_partition)
        return [
            p
            for p in partitions
            if (low is None or java_string_order(p) >= low) and (high is None or java_string_order(p) <= high)
        ]
    if mode is PartitionFilterMode.DAY_ROLLING:
        ascending = sorted(partitions, key=java_string_order)
        return [p for i, p in enumerate(ascending) if i % _HOURS_PER_DAY == now.hour]
    raise AssertionError(f"unhandled partition filter mode {mode!r}")
