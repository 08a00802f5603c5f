"""Clustering plans as Hudi stores them in ``<T>.replacecommit.requested`` (HoodieRequestedReplaceMetadata).

The dataclasses mirror the Avro records field for field; ``to_avro`` / ``from_avro`` convert to and from the
plain dicts the Avro codec (``hudi_clusterd.formats.avro``) reads and writes.

A plan is a self-contained work order: its groups name every input slice (with the slice's base instant, read
once from the file name), and its strategy parameters carry everything execution needs (`WorkOrder`), so a
configuration reload between scheduling and execution changes nothing a plan does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hudi_clusterd.domain.file_group import BaseFile, FileGroupId, check_relative_path
from hudi_clusterd.domain.instant import Instant
from hudi_clusterd.domain.log_file import LogFileName
from hudi_clusterd.domain.policy_keys import KEY_SPECS, ClusteringKey
from hudi_clusterd.domain.row_order import CurveBuildMethod, LayoutStrategy
from hudi_clusterd.errors import MetadataDecodeError, PlanError

CLUSTER_OPERATION = "CLUSTER"
PLAN_VERSION = 1
# Group metrics Hudi writes (FileSliceMetricUtils); sizes in MB.
METRIC_IO_READ_MB = "TOTAL_IO_READ_MB"
METRIC_IO_WRITE_MB = "TOTAL_IO_WRITE_MB"
METRIC_IO_MB = "TOTAL_IO_MB"
METRIC_LOG_FILES_SIZE = "TOTAL_LOG_FILES_SIZE"
METRIC_LOG_FILES = "TOTAL_LOG_FILES"


@dataclass(frozen=True, slots=True)
class SliceInfo:
    """HoodieSliceInfo: one input file slice. ``data_file_path`` is the full base-file path with scheme, ``""``
    for a slice of log files only; ``delta_file_paths`` are its log files' full paths, in Hudi's log order."""

    file_id: str
    partition_path: str
    data_file_path: str
    delta_file_paths: tuple[str, ...] = ()
    bootstrap_file_path: str = ""
    version: int = 1
    base_instant: str = field(default="", compare=False)
    """The slice's base instant, from the base file's name, or for a log-only slice from its first log file's
    (not an Avro field)."""

    def __post_init__(self) -> None:
        try:
            check_relative_path(self.partition_path, "HoodieSliceInfo.partitionPath")
        except ValueError as e:
            raise MetadataDecodeError(str(e)) from None
        logs = [LogFileName.parse(p.rsplit("/", 1)[-1]) for p in self.delta_file_paths]
        for path, name in zip(self.delta_file_paths, logs, strict=True):
            if name is None or name.file_id != self.file_id:
                raise MetadataDecodeError(
                    f"HoodieSliceInfo.deltaFilePaths {path!r} is not a log file of file group {self.file_id!r} "
                    "(expected .<fileId>_<instant>.log.<version>_<writeToken>)")
        if self.base_instant:
            return
        if not self.data_file_path and logs:
            first = min((n for n in logs if n is not None), key=lambda n: n.sort_key)
            object.__setattr__(self, "base_instant", first.base_instant)
            return
        parsed = BaseFile.parse(self.partition_path, self.file_name, 0)
        if parsed is None or parsed.file_id != self.file_id:
            raise MetadataDecodeError(
                f"HoodieSliceInfo.dataFilePath {self.data_file_path!r} is not a base file of file group "
                f"{self.file_id!r} (expected <fileId>_<writeToken>_<instantTime>.parquet, or empty with log files)")
        object.__setattr__(self, "base_instant", parsed.instant_time)

    @property
    def log_file_names(self) -> frozenset[str]:
        """The names of the slice's log files."""
        return frozenset(p.rsplit("/", 1)[-1] for p in self.delta_file_paths)

    @property
    def group_id(self) -> FileGroupId:
        return (self.partition_path, self.file_id)

    @property
    def file_name(self) -> str:
        return self.data_file_path.rsplit("/", 1)[-1]

    def to_avro(self) -> dict[str, Any]:
        return {
            "dataFilePath": self.data_file_path,
            "deltaFilePaths": list(self.delta_file_paths),
            "fileId": self.file_id,
            "partitionPath": self.partition_path,
            "bootstrapFilePath": self.bootstrap_file_path,
            "version": self.version,
        }

    @classmethod
    def from_avro(cls, d: Mapping[str, Any]) -> SliceInfo:
        return cls(
            file_id=_req_str(d, "fileId", "HoodieSliceInfo"),
            partition_path=optional_str(d, "partitionPath", "HoodieSliceInfo"),
            data_file_path=optional_str(d, "dataFilePath", "HoodieSliceInfo"),
            delta_file_paths=tuple(_str_item(p, "deltaFilePaths") for p in (d.get("deltaFilePaths") or ())),
            bootstrap_file_path=optional_str(d, "bootstrapFilePath", "HoodieSliceInfo"),
            version=int(d.get("version") or 1),
        )


@dataclass(frozen=True, slots=True)
class ClusteringGroup:
    """HoodieClusteringGroup: slices of one partition rewritten together into ``num_output_file_groups`` groups."""

    slices: tuple[SliceInfo, ...]
    num_output_file_groups: int = 1
    metrics: Mapping[str, float] = field(default_factory=dict)
    extra_metadata: Mapping[str, str] | None = None
    version: int = 1

    @property
    def partition_path(self) -> str:
        return self.slices[0].partition_path if self.slices else ""

    def group_ids(self) -> list[FileGroupId]:
        return [s.group_id for s in self.slices]

    @property
    def input_bytes(self) -> int:
        return int(self.metrics.get(METRIC_IO_READ_MB, 0.0) * 1024 * 1024)

    def to_avro(self) -> dict[str, Any]:
        return {
            "slices": [s.to_avro() for s in self.slices],
            "metrics": dict(self.metrics),
            "numOutputFileGroups": self.num_output_file_groups,
            "extraMetadata": dict(self.extra_metadata) if self.extra_metadata is not None else None,
            "version": self.version,
        }

    @classmethod
    def from_avro(cls, d: Mapping[str, Any]) -> ClusteringGroup:
        extra = d.get("extraMetadata")
        return cls(
            slices=tuple(SliceInfo.from_avro(s) for s in (d.get("slices") or ())),
            num_output_file_groups=int(d.get("numOutputFileGroups") or 1),
            metrics={str(k): float(v) for k, v in (d.get("metrics") or {}).items()},
            extra_metadata=None if extra is None else {str(k): str(v) for k, v in extra.items()},
            version=int(d.get("version") or 1),
        )


K = ClusteringKey
_WORK_ORDER_KEYS = (K.SORT_COLUMNS, K.LAYOUT_STRATEGY, K.CURVE_BUILD_METHOD, K.CURVE_SAMPLE_SIZE,
                    K.TARGET_FILE_MAX_BYTES, K.BLOOM_FILTER_TYPE, K.BLOOM_NUM_ENTRIES, K.BLOOM_FPP,
                    K.BLOOM_DYNAMIC_MAX_ENTRIES)


def _param(params: Mapping[str, str], key: ClusteringKey) -> Any:
    """One strategy parameter parsed and range-checked as the configuration key of the same name is (its
    default when absent); ``PlanError`` naming the key otherwise."""
    spec = KEY_SPECS[key]
    raw = params.get(key.value)
    text = (spec.default or "") if raw is None else raw
    try:
        value = spec.parse(text)
    except ValueError as e:
        raise PlanError(f"strategyParams {key.value}: {e}") from None
    if spec.minimum is not None and value < spec.minimum:
        raise PlanError(f"strategyParams {key.value}: must be >= {spec.minimum}, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class WorkOrder:
    """What execution needs besides the groups: the row order, the size of the files to write and the bloom
    filter to put in their footers.

    Saved in ``strategyParams`` under Hudi's own configuration keys when the plan is scheduled; a plan without
    them (scheduled by Hudi, which writes only the sort columns) executes with Hudi's defaults for the rest."""

    sort_columns: tuple[str, ...] = ()
    layout_strategy: LayoutStrategy = LayoutStrategy.LINEAR
    curve_build_method: CurveBuildMethod = CurveBuildMethod.DIRECT
    curve_sample_size: int = 200_000
    target_file_max_bytes: int = 1024 * 1024 * 1024
    bloom_filter_type: str = "DYNAMIC_V0"
    bloom_num_entries: int = 60_000
    bloom_fpp: float = 0.000000001
    bloom_dynamic_max_entries: int = 100_000

    def to_params(self) -> dict[str, str]:
        """``strategyParams``: the sort columns when set (as Hudi writes them), then the rest."""
        out: dict[str, str] = {}
        if self.sort_columns:
            out[K.SORT_COLUMNS.value] = ",".join(self.sort_columns)
        out[K.LAYOUT_STRATEGY.value] = self.layout_strategy.name
        out[K.CURVE_BUILD_METHOD.value] = self.curve_build_method.name
        out[K.CURVE_SAMPLE_SIZE.value] = str(self.curve_sample_size)
        out[K.TARGET_FILE_MAX_BYTES.value] = str(self.target_file_max_bytes)
        out[K.BLOOM_FILTER_TYPE.value] = self.bloom_filter_type
        out[K.BLOOM_NUM_ENTRIES.value] = str(self.bloom_num_entries)
        out[K.BLOOM_FPP.value] = repr(self.bloom_fpp)
        out[K.BLOOM_DYNAMIC_MAX_ENTRIES.value] = str(self.bloom_dynamic_max_entries)
        return out

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> WorkOrder:
        """Parse ``strategyParams`` with the configuration's own parsers; ``PlanError`` naming a bad key."""
        values = [_param(params, key) for key in _WORK_ORDER_KEYS]
        return cls(*values)


@dataclass(frozen=True, slots=True)
class ClusteringStrategy:
    """HoodieClusteringStrategy: the *execution* strategy class and its parameters (the work order)."""

    class_name: str
    params: Mapping[str, str] = field(default_factory=dict)
    version: int = 1

    @property
    def work_order(self) -> WorkOrder:
        """The parameters as a `WorkOrder`; ``PlanError`` when one cannot be used."""
        return WorkOrder.from_params(self.params)

    @property
    def sort_columns(self) -> tuple[str, ...]:
        return self.work_order.sort_columns

    def to_avro(self) -> dict[str, Any]:
        return {"strategyClassName": self.class_name, "strategyParams": dict(self.params), "version": self.version}

    @classmethod
    def from_avro(cls, d: Mapping[str, Any]) -> ClusteringStrategy:
        return cls(
            class_name=optional_str(d, "strategyClassName", "HoodieClusteringStrategy"),
            params={str(k): str(v) for k, v in (d.get("strategyParams") or {}).items()},
            version=int(d.get("version") or 1),
        )


@dataclass(frozen=True, slots=True)
class ClusteringPlan:
    """HoodieClusteringPlan."""

    input_groups: tuple[ClusteringGroup, ...]
    strategy: ClusteringStrategy
    extra_metadata: Mapping[str, str] = field(default_factory=dict)
    version: int = PLAN_VERSION
    preserve_hoodie_metadata: bool = True

    def group_ids(self) -> list[FileGroupId]:
        return [gid for g in self.input_groups for gid in g.group_ids()]

    @property
    def num_slices(self) -> int:
        return sum(len(g.slices) for g in self.input_groups)

    @property
    def input_bytes(self) -> int:
        return sum(g.input_bytes for g in self.input_groups)

    @property
    def reads_log_files(self) -> bool:
        """Whether any slice has log files (read merged with its base file)."""
        return any(s.delta_file_paths for g in self.input_groups for s in g.slices)

    def to_avro(self) -> dict[str, Any]:
        return {
            "inputGroups": [g.to_avro() for g in self.input_groups],
            "strategy": self.strategy.to_avro(),
            "extraMetadata": dict(self.extra_metadata),
            "version": self.version,
            "preserveHoodieMetadata": self.preserve_hoodie_metadata,
        }

    @classmethod
    def from_avro(cls, d: Mapping[str, Any]) -> ClusteringPlan:
        strategy = d.get("strategy")
        preserve = d.get("preserveHoodieMetadata")
        return cls(
            input_groups=tuple(ClusteringGroup.from_avro(g) for g in (d.get("inputGroups") or ())),
            strategy=ClusteringStrategy.from_avro(strategy) if strategy else ClusteringStrategy(""),
            extra_metadata={str(k): str(v) for k, v in (d.get("extraMetadata") or {}).items()},
            version=int(d.get("version") or PLAN_VERSION),
            preserve_hoodie_metadata=True if preserve is None else bool(preserve),
        )


@dataclass(frozen=True, slots=True)
class RequestedReplaceMetadata:
    """HoodieRequestedReplaceMetadata: the content of ``<T>.replacecommit.requested``."""

    operation_type: str | None
    clustering_plan: ClusteringPlan | None
    extra_metadata: Mapping[str, str] = field(default_factory=dict)
    version: int = 1

    @property
    def is_clustering(self) -> bool:
        """Hudi treats a requested replacecommit as clustering iff operationType is CLUSTER (and a plan exists)."""
        return self.operation_type == CLUSTER_OPERATION and self.clustering_plan is not None

    @classmethod
    def for_plan(cls, plan: ClusteringPlan) -> RequestedReplaceMetadata:
        return cls(CLUSTER_OPERATION, plan, {}, 1)

    def to_avro(self) -> dict[str, Any]:
        return {
            "operationType": self.operation_type,
            "clusteringPlan": self.clustering_plan.to_avro() if self.clustering_plan else None,
            "extraMetadata": dict(self.extra_metadata),
            "version": self.version,
        }

    @classmethod
    def from_avro(cls, d: Mapping[str, Any]) -> RequestedReplaceMetadata:
        plan = d.get("clusteringPlan")
        operation = d.get("operationType")
        if operation is not None:
            operation = optional_str(d, "operationType", "HoodieRequestedReplaceMetadata")
        return cls(
            operation_type=operation,
            clustering_plan=ClusteringPlan.from_avro(plan) if plan else None,
            extra_metadata={str(k): str(v) for k, v in (d.get("extraMetadata") or {}).items()},
            version=int(d.get("version") or 1),
        )


def optional_str(d: Mapping[str, Any], key: str, record: str) -> str:
    """A string field that may be null or absent (read as ""); any other type is a decode error."""
    value = d.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MetadataDecodeError(f"{record}.{key} must be a string, got {type(value).__name__}")
    return value


def _str_item(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise MetadataDecodeError(f"{key} must hold strings, got {type(value).__name__}")
    return value


def _req_str(d: Mapping[str, Any], key: str, record: str) -> str:
    value = d.get(key)
    if not isinstance(value, str) or not value:
        raise MetadataDecodeError(f"{record}.{key} is missing or empty")
    return value


@dataclass(frozen=True, slots=True)
class PendingPlan:
    """A pending (requested or inflight) clustering instant with its decoded plan."""

    instant: Instant
    plan: ClusteringPlan

    @property
    def time(self) -> str:
        return self.instant.time
