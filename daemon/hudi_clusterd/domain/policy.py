"""The clustering policy of one table: Hudi's clustering keys parsed once into a frozen, validated value.

A ``clusteringjob.properties`` written for Hudi's own ``HoodieClusteringJob`` parses unchanged: the keys,
defaults and aliases (see :mod:`hudi_clusterd.domain.policy_keys`) are Hudi 0.14/0.15's. Parsing reports every
invalid value at once and warns about unknown, deprecated and ineffective keys.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from hudi_clusterd.domain.keys import KeyReader
from hudi_clusterd.domain.plan import WorkOrder
from hudi_clusterd.domain.policy_keys import (
    KEY_OF_FIELD,
    KEY_SPECS,
    KNOWN_UPDATE_STRATEGIES,
    NO_OP_KEYS,
    NOT_IN_V6,
    POLICY_PREFIXES,
    RECOGNISED_KEYS,
    SIZE_BASED,
    ClusteringKey,
    ExecutionStrategy,
    PartitionFilterMode,
    PlanStrategy,
    java_string_order,
    policy_reference,
    render_value,
)
from hudi_clusterd.domain.row_order import CurveBuildMethod, LayoutStrategy
from hudi_clusterd.errors import ConfigError

__all__ = [
    "DEFAULT_POLICY",
    "ClusteringKey",
    "ClusteringPolicy",
    "CurveBuildMethod",
    "ExecutionStrategy",
    "LayoutStrategy",
    "PartitionFilterMode",
    "PlanStrategy",
    "java_string_order",
    "parse_policy",
    "policy_reference",
]

K = ClusteringKey


@dataclass(frozen=True, slots=True)
class ClusteringPolicy:
    """Validated clustering settings for one table (build with :func:`parse_policy` or ``DEFAULT_POLICY``)."""

    plan_strategy: PlanStrategy
    execution_strategy: ExecutionStrategy
    small_file_limit: int
    target_file_max_bytes: int
    max_bytes_per_group: int
    max_num_groups: int
    sort_columns: tuple[str, ...]
    single_group_clustering_enabled: bool
    partition_filter_mode: PartitionFilterMode
    lookback_partitions: int
    skip_from_latest_partitions: int
    begin_partition: str | None
    end_partition: str | None
    partition_regex: str | None
    selected_partitions: tuple[str, ...]
    inline_max_commits: int
    async_max_commits: int
    max_parallelism: int
    updates_strategy: str
    rollback_pending_on_conflict: bool
    layout_strategy: LayoutStrategy
    curve_build_method: CurveBuildMethod
    curve_sample_size: int
    parquet_max_file_size: int
    merge_max_memory: int
    bloom_filter_type: str
    bloom_num_entries: int
    bloom_fpp: float
    bloom_dynamic_max_entries: int

    def __post_init__(self) -> None:
        problems = [message for _, message in _invariant_problems(self)]
        if problems:
            raise ConfigError("invalid clustering policy", problems)

    @property
    def execution_strategy_class(self) -> str:
        """The class name to write into ``HoodieClusteringPlan.strategy.strategyClassName``."""
        return self.execution_strategy.value

    @property
    def work_order(self) -> WorkOrder:
        """What a plan scheduled under this policy will execute with (frozen into its strategy parameters)."""
        return WorkOrder(self.sort_columns, self.layout_strategy, self.curve_build_method, self.curve_sample_size,
                         self.target_file_max_bytes, self.bloom_filter_type, self.bloom_num_entries, self.bloom_fpp,
                         self.bloom_dynamic_max_entries)

    def strategy_params(self) -> dict[str, str]:
        """``HoodieClusteringStrategy.strategyParams`` of a plan scheduled under this policy."""
        return self.work_order.to_params()

    def to_properties(self) -> dict[str, str]:
        """The policy as ``hoodie.*`` properties, unset keys omitted; parses back to an equal policy."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == ():
                continue
            out[KEY_OF_FIELD[f.name].value] = render_value(value)
        return out


def _invariant_problems(policy: ClusteringPolicy) -> list[tuple[frozenset[str], str]]:
    """Range and cross-field checks; each problem comes with the keys it concerns."""
    problems: list[tuple[frozenset[str], str]] = []
    for key, spec in KEY_SPECS.items():
        if spec.field is None or spec.minimum is None:
            continue
        value = getattr(policy, spec.field)
        if value < spec.minimum:
            bound = "> 0" if spec.minimum == 1 else f">= {spec.minimum}"
            problems.append((frozenset({key.value}), f"{key.value}: must be {bound}, got {value}"))
    begin, end = policy.begin_partition, policy.end_partition
    if begin is not None and end is not None and java_string_order(begin) > java_string_order(end):
        keys = (K.CLUSTER_BEGIN_PARTITION.value, K.CLUSTER_END_PARTITION.value)
        message = f"{keys[0]}: begin partition {begin!r} sorts after end partition {end!r}"
        problems.append((frozenset(keys), message))
    if (
        policy.execution_strategy is ExecutionStrategy.SINGLE_FILE_SORT
        and policy.plan_strategy is not PlanStrategy.SINGLE_FILE_SORT
    ):
        keys = (K.EXECUTION_STRATEGY_CLASS.value, K.PLAN_STRATEGY_CLASS.value)
        problems.append(
            (
                frozenset(keys),
                f"{keys[0]}: {ExecutionStrategy.SINGLE_FILE_SORT.value} takes one file slice per group; "
                f"set {keys[1]}={PlanStrategy.SINGLE_FILE_SORT.value}",
            )
        )
    return problems


def parse_policy(props: Mapping[str, str], *, source: str) -> tuple[ClusteringPolicy, list[str]]:
    """Build the policy from ``hoodie.*`` properties; return it with warnings.

    Keys outside ``hoodie.clustering.*``/``hoodie.layout.optimize.*`` that the policy does not read (writer
    keys such as ``hoodie.datasource.*``) are ignored silently; unknown clustering/layout keys and deprecated
    keys are warned about one by one. Every invalid value is reported in one :class:`ConfigError` whose
    problems read ``<key>: must be ..., got ...``.
    """
    warnings: list[str] = []
    problems: list[str] = []
    bad_keys: set[str] = set()
    values: dict[str, Any] = {}
    forced_mode: PartitionFilterMode | None = None
    reader = KeyReader(props)
    for key, spec in KEY_SPECS.items():
        known = len(reader.problems)
        value: Any = reader.get(spec)
        if len(reader.problems) > known:
            bad_keys.add(key.value)
        if key is K.PLAN_STRATEGY_CLASS:
            value, forced_mode = value
            if forced_mode is not None:
                warnings.append(
                    f"{key.value}: {props[key.value].strip()} was removed from Hudi; using {SIZE_BASED.value} "
                    f"with {K.PARTITION_FILTER_MODE.value}={forced_mode.value}"
                )
        if spec.field is not None:
            values[spec.field] = value
    problems.extend(reader.problems)
    warnings.extend(reader.warnings)
    if forced_mode is not None:
        explicit = values["partition_filter_mode"]
        if K.PARTITION_FILTER_MODE.value in props and explicit is not forced_mode:
            warnings.append(
                f"{K.PARTITION_FILTER_MODE.value}: {explicit.value} is overridden by the deprecated plan "
                f"strategy class, which implies {forced_mode.value}"
            )
        values["partition_filter_mode"] = forced_mode
    warnings.extend(_key_warnings(props))
    warnings.extend(_effect_warnings(props, values))
    policy = _build(values, bad_keys, problems)
    if problems:
        raise ConfigError(f"invalid clustering policy in {source}", problems)
    assert policy is not None
    return policy, warnings


def _build(values: dict[str, Any], bad_keys: set[str], problems: list[str]) -> ClusteringPolicy | None:
    try:
        return ClusteringPolicy(**values)
    except ConfigError:
        pass
    # Report invariant problems, except those about keys already reported as unparsable.
    invalid = object.__new__(ClusteringPolicy)
    for name, value in values.items():
        object.__setattr__(invalid, name, value)
    problems.extend(msg for keys, msg in _invariant_problems(invalid) if not keys & bad_keys)
    return None


def _key_warnings(props: Mapping[str, str]) -> list[str]:
    warnings: list[str] = []
    for key in props:
        if key in RECOGNISED_KEYS:
            continue
        if key in NO_OP_KEYS:
            warnings.append(f"{key}: {NO_OP_KEYS[key]}; no effect, ignored")
        elif key in NOT_IN_V6:
            warnings.append(f"{key}: exists only in Hudi 1.x (table version 8+); ignored")
        elif key.startswith(POLICY_PREFIXES):
            near = difflib.get_close_matches(key, sorted(RECOGNISED_KEYS), n=1, cutoff=0.85)
            hint = f" (did you mean {near[0]}?)" if near else ""
            warnings.append(f"{key}: unknown clustering key; ignored{hint}")
    return warnings


def _effect_warnings(props: Mapping[str, str], values: Mapping[str, Any]) -> list[str]:
    warnings: list[str] = []
    mode = values["partition_filter_mode"]
    scoped = {
        K.DAYBASED_LOOKBACK_PARTITIONS: PartitionFilterMode.RECENT_DAYS,
        K.DAYBASED_SKIP_FROM_LATEST_PARTITIONS: PartitionFilterMode.RECENT_DAYS,
        K.CLUSTER_BEGIN_PARTITION: PartitionFilterMode.SELECTED_PARTITIONS,
        K.CLUSTER_END_PARTITION: PartitionFilterMode.SELECTED_PARTITIONS,
    }
    for key, needed in scoped.items():
        if key.value in props and mode is not needed:
            warnings.append(f"{key.value}: has no effect unless {K.PARTITION_FILTER_MODE.value}={needed.value}")
    if values["partition_regex"] is not None and values["selected_partitions"]:
        warnings.append(f"{K.PARTITION_REGEX_PATTERN.value}: has no effect while {K.PARTITION_SELECTED.value} is set")
    if K.LAYOUT_STRATEGY.value in props and not values["sort_columns"]:
        warnings.append(f"{K.LAYOUT_STRATEGY.value}: has no effect without {K.SORT_COLUMNS.value}")
    updates = values["updates_strategy"]
    if updates is not None and updates not in KNOWN_UPDATE_STRATEGIES:
        warnings.append(f"{K.UPDATES_STRATEGY.value}: {updates} is not a known Spark update strategy")
    return warnings


DEFAULT_POLICY: ClusteringPolicy = parse_policy({}, source="defaults")[0]
