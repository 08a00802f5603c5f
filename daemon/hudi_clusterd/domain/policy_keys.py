"""Hudi's clustering configuration vocabulary: every key, its default, alias, parser and range.

:class:`ClusteringKey` plus :data:`KEY_SPECS` is the single source of truth for the ``hoodie.clustering.*`` /
``hoodie.layout.optimize.*`` keys the daemon reads (Hudi 0.14/0.15 ``HoodieClusteringConfig`` keys, defaults
and aliases): :func:`~hudi_clusterd.domain.policy.parse_policy`, the range checks of
:class:`~hudi_clusterd.domain.policy.ClusteringPolicy` and the configuration reference in docs/configuration.md
(:func:`policy_reference`) all read it.

No code is ever loaded from configuration: the plan and execution strategy *class names* Hudi accepts are
mapped onto the built-in behaviours below, and any other class name is a configuration error.
"""

from __future__ import annotations

from enum import Enum, StrEnum
from typing import Any

from hudi_clusterd.domain.keys import Key, reference_rows
from hudi_clusterd.domain.row_order import CurveBuildMethod, LayoutStrategy
from hudi_clusterd.domain.sort_columns import parse_sort_columns
from hudi_clusterd.domain.values import (
    any_text as _anything,
)
from hudi_clusterd.domain.values import (
    boolean as _bool,
)
from hudi_clusterd.domain.values import (
    class_name as _class_name,
)
from hudi_clusterd.domain.values import (
    enum_member as _member,
)
from hudi_clusterd.domain.values import (
    fraction as _fraction,
)
from hudi_clusterd.domain.values import (
    java_int as _int,
)
from hudi_clusterd.domain.values import (
    java_long as _long,
)
from hudi_clusterd.domain.values import (
    optional_text as _optional,
)
from hudi_clusterd.domain.values import (
    regex as _regex,
)
from hudi_clusterd.domain.values import (
    unique_csv as _unique_csv,
)

__all__ = [
    "KEY_SPECS",
    "ClusteringKey",
    "ExecutionStrategy",
    "PartitionFilterMode",
    "PlanStrategy",
    "java_string_order",
    "policy_reference",
]

_PLAN_PKG = "org.apache.hudi.client.clustering.plan.strategy."
_RUN_PKG = "org.apache.hudi.client.clustering.run.strategy."
_UPDATE_PKG = "org.apache.hudi.client.clustering.update.strategy."


class PlanStrategy(StrEnum):
    """Built-in plan strategies; the value is the Spark class name Hudi uses for it."""

    SIZE_BASED = _PLAN_PKG + "SparkSizeBasedClusteringPlanStrategy"
    SINGLE_FILE_SORT = _PLAN_PKG + "SparkSingleFileSortPlanStrategy"


class ExecutionStrategy(StrEnum):
    """Execution strategies; the value is the class name written into ``plan.strategy.strategyClassName``."""

    SORT_AND_SIZE = _RUN_PKG + "SparkSortAndSizeExecutionStrategy"
    SINGLE_FILE_SORT = _RUN_PKG + "SparkSingleFileSortExecutionStrategy"


class PartitionFilterMode(StrEnum):
    """``hoodie.clustering.plan.partition.filter.mode`` (Hudi's ``ClusteringPlanPartitionFilterMode``)."""

    NONE = "NONE"
    RECENT_DAYS = "RECENT_DAYS"
    SELECTED_PARTITIONS = "SELECTED_PARTITIONS"
    DAY_ROLLING = "DAY_ROLLING"


SIZE_BASED = PlanStrategy.SIZE_BASED
_SELECTED = PartitionFilterMode.SELECTED_PARTITIONS
# Plan strategy class -> (behaviour, the partition filter mode it forces).
PLAN_CLASSES: dict[str, tuple[PlanStrategy, PartitionFilterMode | None]] = {
    SIZE_BASED.value: (SIZE_BASED, None),
    PlanStrategy.SINGLE_FILE_SORT.value: (PlanStrategy.SINGLE_FILE_SORT, None),
    _PLAN_PKG + "JavaSizeBasedClusteringPlanStrategy": (SIZE_BASED, None),
    _PLAN_PKG + "FlinkSizeBasedClusteringPlanStrategy": (SIZE_BASED, None),
    # Removed before 0.14; Hudi maps them to size-based plus a filter mode, and so do we.
    _PLAN_PKG + "SparkRecentDaysClusteringPlanStrategy": (SIZE_BASED, PartitionFilterMode.RECENT_DAYS),
    _PLAN_PKG + "JavaRecentDaysClusteringPlanStrategy": (SIZE_BASED, PartitionFilterMode.RECENT_DAYS),
    _PLAN_PKG + "SparkSelectedPartitionsClusteringPlanStrategy": (SIZE_BASED, _SELECTED),
}
KNOWN_UPDATE_STRATEGIES = (
    _UPDATE_PKG + "SparkRejectUpdateStrategy",
    _UPDATE_PKG + "SparkAllowUpdateStrategy",
)

# Keys that Hudi 0.14/0.15 still accepts but that have no effect.
NO_OP_KEYS = {
    "hoodie.layout.optimize.enable": "deprecated since Hudi 0.11",
    "hoodie.layout.optimize.data.skipping.enable": "deprecated since Hudi 0.11",
    "hoodie.clustering.preserve.commit.metadata": "removed in Hudi 0.14 (plans always preserve metadata)",
}
# Keys that exist only in Hudi 1.x (table version 8+).
NOT_IN_V6 = ("hoodie.clustering.group.read.parallelism",)


def java_string_order(value: str) -> bytes:
    """Sort key equal to Java's ``String.compareTo`` (UTF-16 code units), which Hudi uses for partitions."""
    return value.encode("utf-16-be", "surrogatepass")


class ClusteringKey(StrEnum):
    """Every Hudi key the policy reads; the value is the key as written in a ``.properties`` file."""

    PLAN_STRATEGY_CLASS = "hoodie.clustering.plan.strategy.class"
    EXECUTION_STRATEGY_CLASS = "hoodie.clustering.execution.strategy.class"
    SMALL_FILE_LIMIT = "hoodie.clustering.plan.strategy.small.file.limit"
    TARGET_FILE_MAX_BYTES = "hoodie.clustering.plan.strategy.target.file.max.bytes"
    MAX_BYTES_PER_GROUP = "hoodie.clustering.plan.strategy.max.bytes.per.group"
    MAX_NUM_GROUPS = "hoodie.clustering.plan.strategy.max.num.groups"
    SORT_COLUMNS = "hoodie.clustering.plan.strategy.sort.columns"
    SINGLE_GROUP_CLUSTERING_ENABLED = "hoodie.clustering.plan.strategy.single.group.clustering.enabled"
    PARTITION_FILTER_MODE = "hoodie.clustering.plan.partition.filter.mode"
    DAYBASED_LOOKBACK_PARTITIONS = "hoodie.clustering.plan.strategy.daybased.lookback.partitions"
    DAYBASED_SKIP_FROM_LATEST_PARTITIONS = "hoodie.clustering.plan.strategy.daybased.skipfromlatest.partitions"
    CLUSTER_BEGIN_PARTITION = "hoodie.clustering.plan.strategy.cluster.begin.partition"
    CLUSTER_END_PARTITION = "hoodie.clustering.plan.strategy.cluster.end.partition"
    PARTITION_REGEX_PATTERN = "hoodie.clustering.plan.strategy.partition.regex.pattern"
    PARTITION_SELECTED = "hoodie.clustering.plan.strategy.partition.selected"
    INLINE_MAX_COMMITS = "hoodie.clustering.inline.max.commits"
    ASYNC_MAX_COMMITS = "hoodie.clustering.async.max.commits"
    MAX_PARALLELISM = "hoodie.clustering.max.parallelism"
    UPDATES_STRATEGY = "hoodie.clustering.updates.strategy"
    ROLLBACK_PENDING_ON_CONFLICT = "hoodie.clustering.rollback.pending.replacecommit.on.conflict"
    LAYOUT_STRATEGY = "hoodie.layout.optimize.strategy"
    CURVE_BUILD_METHOD = "hoodie.layout.optimize.curve.build.method"
    CURVE_SAMPLE_SIZE = "hoodie.layout.optimize.build.curve.sample.size"
    PARQUET_MAX_FILE_SIZE = "hoodie.parquet.max.file.size"
    MERGE_MAX_MEMORY = "hoodie.memory.merge.max.size"
    BLOOM_FILTER_TYPE = "hoodie.bloom.index.filter.type"
    BLOOM_NUM_ENTRIES = "hoodie.index.bloom.num_entries"
    BLOOM_FPP = "hoodie.index.bloom.fpp"
    BLOOM_DYNAMIC_MAX_ENTRIES = "hoodie.bloom.index.filter.dynamic.max.entries"
    # Writer-side switches: recognised (no unknown-key warning) but they do not change what the daemon does.
    INLINE = "hoodie.clustering.inline"
    SCHEDULE_INLINE = "hoodie.clustering.schedule.inline"
    ASYNC_ENABLED = "hoodie.clustering.async.enabled"

    @property
    def default(self) -> str | None:
        """The default as written in a properties file; ``None`` when the key has no default."""
        return KEY_SPECS[self].default

    @property
    def aliases(self) -> tuple[str, ...]:
        """Alternative spellings Hudi accepts for this key (the primary key wins when both are set)."""
        return KEY_SPECS[self].aliases

    @property
    def description(self) -> str:
        """One line for the configuration reference."""
        return KEY_SPECS[self].description


# --- value parsers: str -> value, raising ValueError("must be ..., got ...") ---


def _bloom_type(raw: str) -> str:
    text = raw.strip().upper()
    if text not in ("SIMPLE", "DYNAMIC_V0"):
        raise ValueError(f"must be SIMPLE or DYNAMIC_V0, got {raw!r}")
    return text


def _plan_strategy(raw: str) -> tuple[PlanStrategy, PartitionFilterMode | None]:
    name = raw.strip()
    if name in PLAN_CLASSES:
        return PLAN_CLASSES[name]
    hint = "; consistent-hashing bucket tables are not supported" if "ConsistentBucket" in name else ""
    raise ValueError(
        f"must be {PlanStrategy.SIZE_BASED.value} or {PlanStrategy.SINGLE_FILE_SORT.value} (the Java/Flink "
        f"size-based and the removed RecentDays/SelectedPartitions class names are accepted too; no code is "
        f"loaded from configuration{hint}), got {raw!r}"
    )


def _execution_strategy(raw: str) -> ExecutionStrategy:
    return _member(ExecutionStrategy, raw.strip(), raw)


def _filter_mode(raw: str) -> PartitionFilterMode:
    return _member(PartitionFilterMode, raw.strip().upper(), raw)


def _layout(raw: str) -> LayoutStrategy:
    try:
        return LayoutStrategy.parse(raw)
    except ValueError:
        raise ValueError(f"must be one of LINEAR, ZORDER (z-order), HILBERT, got {raw!r}") from None


def _curve_method(raw: str) -> CurveBuildMethod:
    try:
        return CurveBuildMethod.parse(raw)
    except ValueError:
        raise ValueError(f"must be DIRECT or SAMPLE, got {raw!r}") from None


def render_value(value: object) -> str:
    """A parsed value in the spelling a properties file uses (the inverse of the key's parser)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, LayoutStrategy | CurveBuildMethod):
        return value.name
    if isinstance(value, Enum):
        return str(value.value)
    return str(value)


K = ClusteringKey
_DS = "hoodie.datasource.clustering."
_WRITER_ONLY = "Writer-side; ignored by the daemon. Keep it false on writers the daemon serves."
# fmt: off
KEY_SPECS: dict[ClusteringKey, Key[Any]] = {
    K.PLAN_STRATEGY_CLASS: Key(K.PLAN_STRATEGY_CLASS.value,
        PlanStrategy.SIZE_BASED.value, _plan_strategy,
        "Plan strategy: Spark/Java/Flink SizeBased (default) or SparkSingleFileSortPlanStrategy; the removed "
        "RecentDays/SelectedPartitions classes map to SizeBased plus the matching filter mode.",
        "plan_strategy"),
    K.EXECUTION_STRATEGY_CLASS: Key(K.EXECUTION_STRATEGY_CLASS.value,
        ExecutionStrategy.SORT_AND_SIZE.value, _execution_strategy,
        "Execution strategy written into each plan: SparkSortAndSizeExecutionStrategy or "
        "SparkSingleFileSortExecutionStrategy (needs the single-file-sort plan strategy).",
        "execution_strategy"),
    K.SMALL_FILE_LIMIT: Key(K.SMALL_FILE_LIMIT.value,
        "314572800", _long, "Only file slices whose base file is smaller than this many bytes are clustered.",
        "small_file_limit", 1),
    K.TARGET_FILE_MAX_BYTES: Key(K.TARGET_FILE_MAX_BYTES.value,
        "1073741824", _long,
        "Target size in bytes of each output file; a group writes ceil(bytes / target) files.",
        "target_file_max_bytes", 1),
    K.MAX_BYTES_PER_GROUP: Key(K.MAX_BYTES_PER_GROUP.value,
        "2147483648", _long, "Cap on the input bytes of one clustering group.", "max_bytes_per_group", 1),
    K.MAX_NUM_GROUPS: Key(K.MAX_NUM_GROUPS.value,
        "30", _int, "Cap on the groups of one plan (per partition, then overall).", "max_num_groups", 1),
    K.SORT_COLUMNS: Key(K.SORT_COLUMNS.value,
        None, parse_sort_columns, "Comma-separated top-level columns to sort by (distinct, not nested); without "
        "them rows keep no particular order.",
        "sort_columns"),
    K.SINGLE_GROUP_CLUSTERING_ENABLED: Key(K.SINGLE_GROUP_CLUSTERING_ENABLED.value,
        "true", _bool, "When false, a partition's last group holding a single file slice is dropped.",
        "single_group_clustering_enabled"),
    K.PARTITION_FILTER_MODE: Key(K.PARTITION_FILTER_MODE.value,
        PartitionFilterMode.NONE.value, _filter_mode,
        "Partition filter: NONE, RECENT_DAYS, SELECTED_PARTITIONS (begin..end) or DAY_ROLLING "
        "(one 24th of the partitions per hour).", "partition_filter_mode"),
    K.DAYBASED_LOOKBACK_PARTITIONS: Key(K.DAYBASED_LOOKBACK_PARTITIONS.value,
        "2", _int, "RECENT_DAYS: how many of the newest partitions to cluster (all when <= 0).",
        "lookback_partitions"),
    K.DAYBASED_SKIP_FROM_LATEST_PARTITIONS: Key(K.DAYBASED_SKIP_FROM_LATEST_PARTITIONS.value,
        "0", _int, "RECENT_DAYS: how many of the newest partitions to skip first.",
        "skip_from_latest_partitions", 0),
    K.CLUSTER_BEGIN_PARTITION: Key(K.CLUSTER_BEGIN_PARTITION.value,
        None, _optional, "SELECTED_PARTITIONS: first partition, inclusive (string order); unset = open.",
        "begin_partition"),
    K.CLUSTER_END_PARTITION: Key(K.CLUSTER_END_PARTITION.value,
        None, _optional, "SELECTED_PARTITIONS: last partition, inclusive (string order); unset = open.",
        "end_partition"),
    K.PARTITION_REGEX_PATTERN: Key(K.PARTITION_REGEX_PATTERN.value,
        None, _regex, "Only partitions matching this regular expression in full are clustered (Python re syntax, "
        "which agrees with Java's for the usual patterns).",
        "partition_regex"),
    K.PARTITION_SELECTED: Key(K.PARTITION_SELECTED.value,
        None, _unique_csv, "Comma-separated partitions to cluster instead of listing the table (skips the "
        "regex; the filter mode still applies).", "selected_partitions"),
    K.INLINE_MAX_COMMITS: Key(K.INLINE_MAX_COMMITS.value,
        "4", _int, "Commits after the last clustering before an inline writer schedules again.",
        "inline_max_commits", 0),
    K.ASYNC_MAX_COMMITS: Key(K.ASYNC_MAX_COMMITS.value,
        "4", _int, "Completed commits after the last clustering (completed or pending, as Hudi 0.15 counts) "
        "before the daemon schedules a new plan.",
        "async_max_commits", 0),
    K.MAX_PARALLELISM: Key(K.MAX_PARALLELISM.value,
        "15", _int, "Maximum clustering groups executed concurrently.", "max_parallelism", 1),
    K.UPDATES_STRATEGY: Key(K.UPDATES_STRATEGY.value,
        KNOWN_UPDATE_STRATEGIES[0], _class_name,
        "How writers treat updates to file groups under clustering (SparkRejectUpdateStrategy rejects them, "
        "SparkAllowUpdateStrategy lets them through).", "updates_strategy"),
    K.ROLLBACK_PENDING_ON_CONFLICT: Key(K.ROLLBACK_PENDING_ON_CONFLICT.value,
        "false", _bool, "With an allow-updates strategy, writers roll back pending clustering they conflict "
        "with.", "rollback_pending_on_conflict"),
    K.LAYOUT_STRATEGY: Key(K.LAYOUT_STRATEGY.value,
        "LINEAR", _layout, "Row order when sort columns are set: LINEAR, ZORDER (or z-order) or HILBERT.",
        "layout_strategy"),
    K.CURVE_BUILD_METHOD: Key(K.CURVE_BUILD_METHOD.value,
        "DIRECT", _curve_method,
        "Z-order/Hilbert only: DIRECT (values as they are) or SAMPLE (sampled ranks).",
        "curve_build_method"),
    K.CURVE_SAMPLE_SIZE: Key(K.CURVE_SAMPLE_SIZE.value,
        "200000", _int, "Rows sampled by the SAMPLE curve build method.", "curve_sample_size", 1),
    K.PARQUET_MAX_FILE_SIZE: Key(K.PARQUET_MAX_FILE_SIZE.value,
        "125829120", _long, "Size assumed for a file slice without a base file when packing groups.",
        "parquet_max_file_size", 1),
    K.MERGE_MAX_MEMORY: Key(K.MERGE_MAX_MEMORY.value,
        "1073741824", _long, "Merge-on-read: the memory one file slice's merge may take in a Spark task (its base "
        "and log files, decoded, about 4 times their bytes); a slice whose files would take more is left out of "
        "the plan (the reason is logged) rather than run out of memory.", "merge_max_memory", 1),
    K.BLOOM_FILTER_TYPE: Key(K.BLOOM_FILTER_TYPE.value,
        "DYNAMIC_V0", _bloom_type, "Record-key bloom filter written into each output file's footer, as Hudi's "
        "BLOOM and GLOBAL_BLOOM indexes read it: DYNAMIC_V0 or SIMPLE.", "bloom_filter_type"),
    K.BLOOM_NUM_ENTRIES: Key(K.BLOOM_NUM_ENTRIES.value,
        "60000", _int, "Keys per bloom filter (DYNAMIC_V0: per row of the filter, which grows by rows).",
        "bloom_num_entries", 1),
    K.BLOOM_FPP: Key(K.BLOOM_FPP.value,
        "0.000000001", _fraction, "False-positive rate the bloom filter is sized for.", "bloom_fpp"),
    K.BLOOM_DYNAMIC_MAX_ENTRIES: Key(K.BLOOM_DYNAMIC_MAX_ENTRIES.value,
        "100000", _int, "DYNAMIC_V0: keys after which the filter stops growing.", "bloom_dynamic_max_entries", 1),
    K.INLINE: Key(K.INLINE.value, "false", _anything, _WRITER_ONLY, aliases=(_DS + "inline.enable",)),
    K.SCHEDULE_INLINE: Key(K.SCHEDULE_INLINE.value, "false", _anything, _WRITER_ONLY),
    K.ASYNC_ENABLED: Key(K.ASYNC_ENABLED.value, "false", _anything, _WRITER_ONLY, aliases=(_DS + "async.enable",)),
}
# fmt: on
KEY_OF_FIELD = {spec.field: key for key, spec in KEY_SPECS.items() if spec.field}
RECOGNISED_KEYS = frozenset(k.value for k in ClusteringKey) | {a for s in KEY_SPECS.values() for a in s.aliases}
POLICY_PREFIXES = ("hoodie.clustering.", "hoodie.layout.optimize.")


def policy_reference() -> list[tuple[str, str | None, str]]:
    """``(key, default, description)`` for every key, in reference order (``None`` = no default)."""
    rows = reference_rows(KEY_SPECS.values())
    rows.extend((key, None, f"No effect: {reason}.") for key, reason in NO_OP_KEYS.items())
    return rows
