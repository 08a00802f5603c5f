"""Clustering policy: Hudi's keys, defaults, aliases, strategy mapping, warnings and aggregated errors."""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.domain import partition_filter, policy, policy_keys
from hudi_clusterd.domain.plan import WorkOrder
from hudi_clusterd.domain.policy import (
    DEFAULT_POLICY,
    ClusteringKey,
    ClusteringPolicy,
    ExecutionStrategy,
    PartitionFilterMode,
    PlanStrategy,
    parse_policy,
    policy_reference,
)
from hudi_clusterd.domain.row_order import CurveBuildMethod, LayoutStrategy
from hudi_clusterd.errors import ConfigError

PLAN = "org.apache.hudi.client.clustering.plan.strategy."
RUN = "org.apache.hudi.client.clustering.run.strategy."
K = ClusteringKey


def parse(**props: str) -> tuple[ClusteringPolicy, list[str]]:
    """parse_policy over keyword arguments whose names are keys with '.' written as '__'."""
    return parse_policy({k.replace("__", "."): v for k, v in props.items()}, source="test")


def parse_one(key: ClusteringKey | str, value: str) -> tuple[ClusteringPolicy, list[str]]:
    return parse_policy({str(key): value}, source="test")


def problems_of(props: dict[str, str]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_policy(props, source="test.properties")
    assert "test.properties" in str(info.value)
    return info.value.problems


# --- defaults ---


def test_parse_policy_empty_props_gives_hudi_defaults() -> None:
    # Given no keys / When parsed / Then every value is Hudi 0.14/0.15's default, without warnings
    p, warnings = parse_policy({}, source="test")
    assert warnings == []
    assert p == DEFAULT_POLICY
    assert p.plan_strategy is PlanStrategy.SIZE_BASED
    assert p.execution_strategy is ExecutionStrategy.SORT_AND_SIZE
    assert p.execution_strategy_class == RUN + "SparkSortAndSizeExecutionStrategy"
    assert p.small_file_limit == 314572800
    assert p.target_file_max_bytes == 1073741824
    assert p.max_bytes_per_group == 2147483648
    assert p.max_num_groups == 30
    assert p.sort_columns == ()
    assert p.single_group_clustering_enabled is True
    assert p.partition_filter_mode is PartitionFilterMode.NONE
    assert p.lookback_partitions == 2
    assert p.skip_from_latest_partitions == 0
    assert p.begin_partition is None
    assert p.end_partition is None
    assert p.partition_regex is None
    assert p.selected_partitions == ()
    assert p.inline_max_commits == 4
    assert p.async_max_commits == 4
    assert p.max_parallelism == 15
    assert p.updates_strategy == "org.apache.hudi.client.clustering.update.strategy.SparkRejectUpdateStrategy"
    assert p.rollback_pending_on_conflict is False
    assert p.layout_strategy is LayoutStrategy.LINEAR
    assert p.curve_build_method is CurveBuildMethod.DIRECT
    assert p.curve_sample_size == 200000
    assert p.parquet_max_file_size == 125829120


def test_clustering_key_exposes_default_aliases_and_description() -> None:
    assert K.TARGET_FILE_MAX_BYTES.value == "hoodie.clustering.plan.strategy.target.file.max.bytes"
    assert K.TARGET_FILE_MAX_BYTES.default == "1073741824"
    assert K.SORT_COLUMNS.default is None
    assert K.INLINE.aliases == ("hoodie.datasource.clustering.inline.enable",)
    assert K.ASYNC_ENABLED.aliases == ("hoodie.datasource.clustering.async.enable",)
    assert all(key.description for key in ClusteringKey)


def test_policy_reference_lists_every_key_with_its_default() -> None:
    rows = policy_reference()
    listed = {key: default for key, default, _ in rows}
    assert {k.value for k in ClusteringKey} <= set(listed)
    assert all(listed[k.value] == k.default for k in ClusteringKey)
    assert "hoodie.layout.optimize.enable" in listed
    assert "hoodie.clustering.preserve.commit.metadata" in listed
    assert all(description for _, _, description in rows)


# --- Hudi-style files ---


def test_parse_policy_hudi_clustering_job_example_loads_without_warnings() -> None:
    # Given the keys of Hudi's clusteringjob.properties example
    p, warnings = parse(
        hoodie__clustering__inline__max__commits="4",
        hoodie__clustering__plan__strategy__target__file__max__bytes="1073741824",
        hoodie__clustering__plan__strategy__small__file__limit="629145600",
        hoodie__clustering__plan__strategy__sort__columns="column1,column2",
    )
    # Then they are read as Hudi reads them
    assert warnings == []
    assert p.inline_max_commits == 4
    assert p.target_file_max_bytes == 1073741824
    assert p.small_file_limit == 629145600
    assert p.sort_columns == ("column1", "column2")


def test_parse_policy_writer_keys_accepted_silently() -> None:
    p, warnings = parse_policy(
        {
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
            "hoodie.table.name": "t",
            "hoodie.clustering.inline": "false",
            "hoodie.clustering.schedule.inline": "false",
            "hoodie.datasource.clustering.async.enable": "false",
            "spark.executor.memory": "4g",
        },
        source="test",
    )
    assert warnings == []
    assert p == DEFAULT_POLICY


def test_parse_policy_unknown_clustering_keys_warned_one_by_one() -> None:
    _, warnings = parse_policy(
        {
            "hoodie.clustering.plan.strategy.smal.file.limit": "1",
            "hoodie.layout.optimize.bogus": "x",
            "hoodie.clustering.whatever": "y",
        },
        source="test",
    )
    assert len(warnings) == 3
    assert any(
        w.startswith("hoodie.clustering.plan.strategy.smal.file.limit: unknown")
        and "did you mean hoodie.clustering.plan.strategy.small.file.limit" in w
        for w in warnings
    )
    assert any(w.startswith("hoodie.layout.optimize.bogus: unknown") for w in warnings)
    assert any(w.startswith("hoodie.clustering.whatever: unknown") for w in warnings)


@pytest.mark.parametrize(
    "key",
    [
        "hoodie.layout.optimize.enable",
        "hoodie.layout.optimize.data.skipping.enable",
        "hoodie.clustering.preserve.commit.metadata",
        "hoodie.clustering.group.read.parallelism",
    ],
)
def test_parse_policy_deprecated_or_foreign_key_warned_as_no_op(key: str) -> None:
    p, warnings = parse_one(key, "true")
    assert p == DEFAULT_POLICY
    assert len(warnings) == 1
    assert warnings[0].startswith(key + ":")
    assert "ignored" in warnings[0]


def test_parse_policy_alias_used_when_primary_absent() -> None:
    _, warnings = parse_one("hoodie.datasource.clustering.inline.enable", "false")
    assert warnings == []


def test_parse_policy_alias_conflicting_with_primary_warned() -> None:
    _, warnings = parse_policy(
        {"hoodie.clustering.async.enabled": "true", "hoodie.datasource.clustering.async.enable": "false"},
        source="test",
    )
    assert warnings == [
        "hoodie.datasource.clustering.async.enable: alias of hoodie.clustering.async.enabled, "
        "which is also set and wins"
    ]


# --- strategies ---


@pytest.mark.parametrize(
    ("class_name", "strategy", "mode"),
    [
        (PLAN + "SparkSizeBasedClusteringPlanStrategy", PlanStrategy.SIZE_BASED, PartitionFilterMode.NONE),
        (PLAN + "JavaSizeBasedClusteringPlanStrategy", PlanStrategy.SIZE_BASED, PartitionFilterMode.NONE),
        (PLAN + "FlinkSizeBasedClusteringPlanStrategy", PlanStrategy.SIZE_BASED, PartitionFilterMode.NONE),
        (PLAN + "SparkSingleFileSortPlanStrategy", PlanStrategy.SINGLE_FILE_SORT, PartitionFilterMode.NONE),
        (PLAN + "SparkRecentDaysClusteringPlanStrategy", PlanStrategy.SIZE_BASED, PartitionFilterMode.RECENT_DAYS),
        (PLAN + "JavaRecentDaysClusteringPlanStrategy", PlanStrategy.SIZE_BASED, PartitionFilterMode.RECENT_DAYS),
        (
            PLAN + "SparkSelectedPartitionsClusteringPlanStrategy",
            PlanStrategy.SIZE_BASED,
            PartitionFilterMode.SELECTED_PARTITIONS,
        ),
    ],
)
def test_parse_policy_hudi_plan_class_maps_to_builtin(
    class_name: str, strategy: PlanStrategy, mode: PartitionFilterMode
) -> None:
    p, warnings = parse_one(K.PLAN_STRATEGY_CLASS, f" {class_name} ")
    assert p.plan_strategy is strategy
    assert p.partition_filter_mode is mode
    # Only the removed classes produce a deprecation warning.
    assert bool(warnings) == (mode is not PartitionFilterMode.NONE)


def test_parse_policy_removed_plan_class_overrides_explicit_filter_mode_with_warning() -> None:
    p, warnings = parse_policy(
        {
            K.PLAN_STRATEGY_CLASS: PLAN + "SparkRecentDaysClusteringPlanStrategy",
            K.PARTITION_FILTER_MODE: "DAY_ROLLING",
        },
        source="test",
    )
    assert p.partition_filter_mode is PartitionFilterMode.RECENT_DAYS
    assert any("DAY_ROLLING is overridden" in w for w in warnings)


@pytest.mark.parametrize(
    "class_name",
    ["com.example.MyPlanStrategy", PLAN + "SparkConsistentBucketClusteringPlanStrategy", ""],
)
def test_parse_policy_other_plan_class_is_config_error(class_name: str) -> None:
    problems = problems_of({K.PLAN_STRATEGY_CLASS: class_name})
    assert len(problems) == 1
    assert problems[0].startswith(K.PLAN_STRATEGY_CLASS.value + ":")
    assert "no code is loaded" in problems[0]


def test_parse_policy_single_file_sort_pair_accepted() -> None:
    p, _ = parse_policy(
        {
            K.PLAN_STRATEGY_CLASS: PLAN + "SparkSingleFileSortPlanStrategy",
            K.EXECUTION_STRATEGY_CLASS: RUN + "SparkSingleFileSortExecutionStrategy",
        },
        source="test",
    )
    assert p.execution_strategy is ExecutionStrategy.SINGLE_FILE_SORT
    assert p.execution_strategy_class == RUN + "SparkSingleFileSortExecutionStrategy"


def test_parse_policy_single_file_execution_with_size_based_plan_is_config_error() -> None:
    problems = problems_of({K.EXECUTION_STRATEGY_CLASS: RUN + "SparkSingleFileSortExecutionStrategy"})
    assert len(problems) == 1
    assert problems[0].startswith(K.EXECUTION_STRATEGY_CLASS.value + ":")


@pytest.mark.parametrize(
    "class_name", [RUN + "JavaSortAndSizeExecutionStrategy", RUN + "SparkConsistentBucketClusteringExecutionStrategy"]
)
def test_parse_policy_other_execution_class_is_config_error(class_name: str) -> None:
    problems = problems_of({K.EXECUTION_STRATEGY_CLASS: class_name})
    assert problems == [f"{K.EXECUTION_STRATEGY_CLASS.value}: must be one of {RUN}SparkSortAndSizeExecutionStrategy, "
                        f"{RUN}SparkSingleFileSortExecutionStrategy, got {class_name!r}"]  # fmt: skip


def test_parse_policy_unknown_updates_strategy_stored_with_warning() -> None:
    p, warnings = parse_one(K.UPDATES_STRATEGY, "com.example.Custom")
    assert p.updates_strategy == "com.example.Custom"
    assert warnings == [f"{K.UPDATES_STRATEGY.value}: com.example.Custom is not a known Spark update strategy"]


def test_parse_policy_allow_updates_strategy_accepted_silently() -> None:
    p, warnings = parse_policy(
        {
            K.UPDATES_STRATEGY: "org.apache.hudi.client.clustering.update.strategy.SparkAllowUpdateStrategy",
            K.ROLLBACK_PENDING_ON_CONFLICT: "TRUE",
        },
        source="test",
    )
    assert warnings == []
    assert p.updates_strategy.endswith("SparkAllowUpdateStrategy")
    assert p.rollback_pending_on_conflict is True


# --- values ---


def test_parse_policy_csv_values_trimmed_and_selected_partitions_deduplicated() -> None:
    p, _ = parse_policy(
        {K.SORT_COLUMNS: " a , b ", K.PARTITION_SELECTED: "2024/01/02, 2024/01/01,2024/01/02"}, source="test"
    )
    assert p.sort_columns == ("a", "b")
    assert p.selected_partitions == ("2024/01/02", "2024/01/01")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("linear", LayoutStrategy.LINEAR), ("ZORDER", LayoutStrategy.ZORDER), ("z-order", LayoutStrategy.ZORDER),
     ("Hilbert", LayoutStrategy.HILBERT)],
)  # fmt: skip
def test_parse_policy_layout_strategy_spellings_accepted(text: str, expected: LayoutStrategy) -> None:
    p, _ = parse_policy({K.LAYOUT_STRATEGY: text, K.SORT_COLUMNS: "a,b"}, source="test")
    assert p.layout_strategy is expected


def test_parse_policy_filter_mode_case_insensitive_and_curve_method_parsed() -> None:
    p, _ = parse_policy({K.PARTITION_FILTER_MODE: "day_rolling", K.CURVE_BUILD_METHOD: "sample"}, source="test")
    assert p.partition_filter_mode is PartitionFilterMode.DAY_ROLLING
    assert p.curve_build_method is CurveBuildMethod.SAMPLE


def test_parse_policy_numbers_accept_sign_and_surrounding_spaces() -> None:
    p, _ = parse_policy({K.MAX_NUM_GROUPS: " +7 ", K.PARQUET_MAX_FILE_SIZE: "9223372036854775807"}, source="test")
    assert p.max_num_groups == 7
    assert p.parquet_max_file_size == 2**63 - 1


def test_parse_policy_lookback_zero_or_negative_allowed() -> None:
    p, _ = parse_policy({K.PARTITION_FILTER_MODE: "RECENT_DAYS", K.DAYBASED_LOOKBACK_PARTITIONS: "-1"}, source="t")
    assert p.lookback_partitions == -1


def test_parse_policy_empty_optional_values_mean_unset() -> None:
    p, _ = parse_policy(
        {K.SORT_COLUMNS: "", K.PARTITION_REGEX_PATTERN: " ", K.CLUSTER_BEGIN_PARTITION: "", K.PARTITION_SELECTED: ""},
        source="test",
    )
    assert p == DEFAULT_POLICY


def test_parse_policy_begin_equal_to_end_accepted() -> None:
    p, _ = parse_policy(
        {
            K.PARTITION_FILTER_MODE: "SELECTED_PARTITIONS",
            K.CLUSTER_BEGIN_PARTITION: "2024/01/01",
            K.CLUSTER_END_PARTITION: "2024/01/01",
        },
        source="test",
    )
    assert p.begin_partition == p.end_partition == "2024/01/01"


# --- errors, all together ---


def test_parse_policy_every_bad_value_reported_in_one_error() -> None:
    # Given many invalid values at once
    props = {
        K.TARGET_FILE_MAX_BYTES: "-1",
        K.SMALL_FILE_LIMIT: "0",
        K.MAX_BYTES_PER_GROUP: "lots",
        K.MAX_NUM_GROUPS: "2147483648",
        K.SINGLE_GROUP_CLUSTERING_ENABLED: "yes",
        K.PARTITION_FILTER_MODE: "WEEKLY",
        K.DAYBASED_SKIP_FROM_LATEST_PARTITIONS: "-2",
        K.PARTITION_REGEX_PATTERN: "(2024",
        K.MAX_PARALLELISM: "0",
        K.LAYOUT_STRATEGY: "spiral",
        K.CURVE_BUILD_METHOD: "guess",
        K.CURVE_SAMPLE_SIZE: "1.5",
        K.ASYNC_MAX_COMMITS: "-1",
        K.PARQUET_MAX_FILE_SIZE: "99999999999999999999",
        K.CLUSTER_BEGIN_PARTITION: "2024/02",
        K.CLUSTER_END_PARTITION: "2024/01",
    }
    # When parsed / Then one ConfigError lists each of them, keyed and with the offending value
    problems = problems_of({str(k): v for k, v in props.items()})
    assert sorted(p.split(":", 1)[0] for p in problems) == sorted(str(k) for k in props if k != K.CLUSTER_END_PARTITION)
    assert f"{K.TARGET_FILE_MAX_BYTES.value}: must be > 0, got -1" in problems
    assert f"{K.SMALL_FILE_LIMIT.value}: must be > 0, got 0" in problems
    assert f"{K.MAX_BYTES_PER_GROUP.value}: must be an integer, got 'lots'" in problems
    assert f"{K.MAX_NUM_GROUPS.value}: must fit a Java int, got 2147483648" in problems
    assert f"{K.SINGLE_GROUP_CLUSTERING_ENABLED.value}: must be true or false, got 'yes'" in problems
    assert f"{K.DAYBASED_SKIP_FROM_LATEST_PARTITIONS.value}: must be >= 0, got -2" in problems
    assert f"{K.ASYNC_MAX_COMMITS.value}: must be >= 0, got -1" in problems
    assert any(p.startswith(f"{K.PARTITION_FILTER_MODE.value}: must be one of NONE") for p in problems)
    assert any(p.startswith(f"{K.PARTITION_REGEX_PATTERN.value}: must be a valid regular expression") for p in problems)
    assert any("'2024/02' sorts after end partition '2024/01'" in p for p in problems)


def test_parse_policy_cross_check_skipped_when_its_key_is_already_invalid() -> None:
    # An unknown plan class is reported once, not again as a plan/execution mismatch.
    problems = problems_of(
        {K.PLAN_STRATEGY_CLASS: "x.Y", K.EXECUTION_STRATEGY_CLASS: RUN + "SparkSingleFileSortExecutionStrategy"}
    )
    assert len(problems) == 1


def test_clustering_policy_replace_with_invalid_value_raises() -> None:
    with pytest.raises(ConfigError, match=r"max\.num\.groups: must be > 0, got 0"):
        dataclasses.replace(DEFAULT_POLICY, max_num_groups=0)


# --- warnings about keys without effect ---


def test_parse_policy_mode_scoped_keys_without_their_mode_warned() -> None:
    _, warnings = parse_policy(
        {K.DAYBASED_LOOKBACK_PARTITIONS: "5", K.CLUSTER_BEGIN_PARTITION: "a", K.LAYOUT_STRATEGY: "z-order"},
        source="test",
    )
    assert sorted(w.split(":", 1)[0] for w in warnings) == sorted(
        [K.DAYBASED_LOOKBACK_PARTITIONS.value, K.CLUSTER_BEGIN_PARTITION.value, K.LAYOUT_STRATEGY.value]
    )


def test_parse_policy_regex_with_selected_partitions_warned() -> None:
    _, warnings = parse_policy({K.PARTITION_REGEX_PATTERN: "2024.*", K.PARTITION_SELECTED: "2024/01"}, source="t")
    assert warnings == [f"{K.PARTITION_REGEX_PATTERN.value}: has no effect while {K.PARTITION_SELECTED.value} is set"]


# --- schema check, plan params, round trip ---


@pytest.mark.parametrize(("raw", "why"), [("a,b,a", "'a' appears twice"), ("a,nested.b", "'nested.b' is a nested"),
                                          ("a,,b", "without empty items")])
def test_parse_policy_bad_sort_columns_are_refused_naming_the_key(raw: str, why: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_one(K.SORT_COLUMNS, raw)
    (problem,) = info.value.problems
    assert problem.startswith(f"{K.SORT_COLUMNS.value}: ") and why in problem


def test_strategy_params_are_the_work_order_with_sort_columns_only_when_set() -> None:
    assert DEFAULT_POLICY.strategy_params() == {
        "hoodie.layout.optimize.strategy": "LINEAR", "hoodie.layout.optimize.curve.build.method": "DIRECT",
        "hoodie.layout.optimize.build.curve.sample.size": "200000",
        "hoodie.clustering.plan.strategy.target.file.max.bytes": "1073741824",
        "hoodie.bloom.index.filter.type": "DYNAMIC_V0", "hoodie.index.bloom.num_entries": "60000",
        "hoodie.index.bloom.fpp": "1e-09", "hoodie.bloom.index.filter.dynamic.max.entries": "100000"}
    p, _ = parse_one(K.SORT_COLUMNS, "a, b")
    assert p.strategy_params()["hoodie.clustering.plan.strategy.sort.columns"] == "a,b"
    assert WorkOrder.from_params(p.strategy_params()) == p.work_order


_NAME = st.text(st.characters(min_codepoint=48, max_codepoint=122, exclude_characters=",\\"), min_size=1, max_size=8)


@given(
    st.fixed_dictionaries(
        {
            "small_file_limit": st.integers(1, 2**40),
            "max_num_groups": st.integers(1, 1000),
            "sort_columns": st.lists(_NAME, max_size=3, unique=True).map(tuple),
            "partition_filter_mode": st.sampled_from(PartitionFilterMode),
            "lookback_partitions": st.integers(-5, 50),
            "selected_partitions": st.lists(_NAME, max_size=3, unique=True).map(tuple),
            "layout_strategy": st.sampled_from(LayoutStrategy),
            "curve_build_method": st.sampled_from(CurveBuildMethod),
            "single_group_clustering_enabled": st.booleans(),
            "end_partition": st.none() | _NAME,
        }
    )
)
def test_to_properties_round_trip_gives_equal_policy(changes: dict[str, object]) -> None:
    original = dataclasses.replace(DEFAULT_POLICY, **changes)  # type: ignore[arg-type]
    parsed, _ = parse_policy(original.to_properties(), source="round-trip")
    assert parsed == original


# --- purity ---


@pytest.mark.parametrize("module", [policy, policy_keys, partition_filter])
def test_domain_policy_modules_import_only_stdlib_and_domain(module: object) -> None:
    source = Path(module.__file__).read_text()  # type: ignore[attr-defined]
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    for name in imported:
        top = name.split(".")[0]
        assert (
            top in sys.stdlib_module_names
            or top == "__future__"
            or name.startswith("hudi_clusterd.domain")
            or name in ("hudi_clusterd.errors", "hudi_clusterd.domain.row_order")
        ), name
