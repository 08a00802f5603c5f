"""Partition selection: regex, selected partitions and the four Hudi filter modes."""

from __future__ import annotations

from datetime import datetime

from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.domain.partition_filter import select_partitions
from hudi_clusterd.domain.policy import ClusteringKey
from tests.builders import make_policy

K = ClusteringKey
NOON = datetime(2024, 7, 7, 12, 30)
DAYS = ["2024/01/03", "2024/01/01", "2024/01/05", "2024/01/02", "2024/01/04"]


def at_hour(hour: int) -> datetime:
    return datetime(2024, 7, 7, hour, 5)


# --- listing, regex, selected partitions ---


def test_select_partitions_mode_none_keeps_listing_order() -> None:
    assert select_partitions(DAYS, make_policy(), NOON) == DAYS


def test_select_partitions_duplicates_in_listing_removed() -> None:
    assert select_partitions(["a", "b", "a"], make_policy(), NOON) == ["a", "b"]


def test_select_partitions_regex_must_match_whole_partition() -> None:
    # Given a pattern that matches a prefix of the longer partitions only
    policy = make_policy(PARTITION_REGEX_PATTERN="2024/01/0[1-3]")
    partitions = [*DAYS, "2024/01/01/extra", "x2024/01/01"]
    # Then only full matches are kept, in listing order
    assert select_partitions(partitions, policy, NOON) == ["2024/01/03", "2024/01/01", "2024/01/02"]


def test_select_partitions_selected_bypasses_listing_and_regex() -> None:
    # Given selected partitions that the listing lacks and the regex rejects
    policy = make_policy(PARTITION_SELECTED="2023/12/31,2024/01/02", PARTITION_REGEX_PATTERN="nothing")
    # Then they are taken as written
    assert select_partitions(DAYS, policy, NOON) == ["2023/12/31", "2024/01/02"]


def test_select_partitions_selected_still_goes_through_filter_mode() -> None:
    policy = make_policy(
        PARTITION_SELECTED="2024/01/01,2024/01/09,2024/01/05",
        PARTITION_FILTER_MODE="RECENT_DAYS",
        DAYBASED_LOOKBACK_PARTITIONS="1",
    )
    assert select_partitions([], policy, NOON) == ["2024/01/09"]


def test_select_partitions_regex_then_filter_mode() -> None:
    policy = make_policy(
        PARTITION_REGEX_PATTERN=r"2024/01/0[2-5]", PARTITION_FILTER_MODE="RECENT_DAYS", DAYBASED_LOOKBACK_PARTITIONS="2"
    )
    assert select_partitions([*DAYS, "2025/01/01"], policy, NOON) == ["2024/01/05", "2024/01/04"]


# --- RECENT_DAYS ---


def test_select_partitions_recent_days_default_takes_two_newest() -> None:
    policy = make_policy(PARTITION_FILTER_MODE="RECENT_DAYS")
    assert select_partitions(DAYS, policy, NOON) == ["2024/01/05", "2024/01/04"]


def test_select_partitions_recent_days_skips_newest_then_takes_lookback() -> None:
    policy = make_policy(
        PARTITION_FILTER_MODE="RECENT_DAYS",
        DAYBASED_LOOKBACK_PARTITIONS="2",
        DAYBASED_SKIP_FROM_LATEST_PARTITIONS="1",
    )
    assert select_partitions(DAYS, policy, NOON) == ["2024/01/04", "2024/01/03"]


def test_select_partitions_recent_days_lookback_not_positive_takes_all_remaining() -> None:
    for lookback in ("0", "-3"):
        policy = make_policy(
            PARTITION_FILTER_MODE="RECENT_DAYS",
            DAYBASED_LOOKBACK_PARTITIONS=lookback,
            DAYBASED_SKIP_FROM_LATEST_PARTITIONS="2",
        )
        assert select_partitions(DAYS, policy, NOON) == ["2024/01/03", "2024/01/02", "2024/01/01"]


def test_select_partitions_recent_days_skip_beyond_all_gives_nothing() -> None:
    policy = make_policy(PARTITION_FILTER_MODE="RECENT_DAYS", DAYBASED_SKIP_FROM_LATEST_PARTITIONS="9")
    assert select_partitions(DAYS, policy, NOON) == []


def test_select_partitions_recent_days_uses_java_string_order() -> None:
    # Java compares UTF-16 code units: a supplementary character (surrogates D800..) sorts before U+FFFF,
    # while Python's code-point order puts it after.
    policy = make_policy(PARTITION_FILTER_MODE="RECENT_DAYS", DAYBASED_LOOKBACK_PARTITIONS="0")
    assert select_partitions(["\U00010000", "\uffff", "a"], policy, NOON) == ["\uffff", "\U00010000", "a"]


# --- SELECTED_PARTITIONS ---


def test_select_partitions_selected_range_is_inclusive() -> None:
    policy = make_policy(
        PARTITION_FILTER_MODE="SELECTED_PARTITIONS",
        CLUSTER_BEGIN_PARTITION="2024/01/02",
        CLUSTER_END_PARTITION="2024/01/04",
    )
    assert select_partitions(DAYS, policy, NOON) == ["2024/01/03", "2024/01/02", "2024/01/04"]


def test_select_partitions_selected_range_missing_bound_is_open() -> None:
    only_begin = make_policy(PARTITION_FILTER_MODE="SELECTED_PARTITIONS", CLUSTER_BEGIN_PARTITION="2024/01/04")
    only_end = make_policy(PARTITION_FILTER_MODE="SELECTED_PARTITIONS", CLUSTER_END_PARTITION="2024/01/02")
    neither = make_policy(PARTITION_FILTER_MODE="SELECTED_PARTITIONS")
    assert select_partitions(DAYS, only_begin, NOON) == ["2024/01/05", "2024/01/04"]
    assert select_partitions(DAYS, only_end, NOON) == ["2024/01/01", "2024/01/02"]
    assert select_partitions(DAYS, neither, NOON) == DAYS


def test_select_partitions_selected_range_compares_strings_not_dates() -> None:
    # "2024/1/10" sorts before "2024/1/9" as a string, exactly as in Hudi.
    policy = make_policy(
        PARTITION_FILTER_MODE="SELECTED_PARTITIONS",
        CLUSTER_BEGIN_PARTITION="2024/1/2",
        CLUSTER_END_PARTITION="2024/1/9",
    )
    assert select_partitions(["2024/1/10", "2024/1/3", "2024/1/1"], policy, NOON) == ["2024/1/3"]


# --- DAY_ROLLING ---


def test_select_partitions_day_rolling_takes_indexes_matching_hour() -> None:
    # Given 50 partitions listed in reverse order
    partitions = [f"p{i:02d}" for i in range(50)][::-1]
    policy = make_policy(PARTITION_FILTER_MODE="DAY_ROLLING")
    # Then hour 3 picks ascending indexes 3, 27 and hour 1 picks 1, 25, 49
    assert select_partitions(partitions, policy, at_hour(3)) == ["p03", "p27"]
    assert select_partitions(partitions, policy, at_hour(1)) == ["p01", "p25", "p49"]


def test_select_partitions_day_rolling_hour_beyond_count_gives_nothing() -> None:
    policy = make_policy(PARTITION_FILTER_MODE="DAY_ROLLING")
    assert select_partitions(DAYS, policy, at_hour(23)) == []


@given(st.lists(st.text(max_size=6), unique=True, max_size=80))
def test_select_partitions_day_rolling_visits_every_partition_once_a_day(partitions: list[str]) -> None:
    policy = make_policy(PARTITION_FILTER_MODE="DAY_ROLLING")
    visited = [p for hour in range(24) for p in select_partitions(partitions, policy, at_hour(hour))]
    assert sorted(visited) == sorted(partitions)


def test_select_partitions_non_partitioned_table_in_mode_none() -> None:
    assert select_partitions([""], make_policy(), NOON) == [""]
