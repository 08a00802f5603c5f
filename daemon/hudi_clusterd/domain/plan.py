"""Clustering plans as Hudi stores them in ``<T>.replacecommit.requested`` (HoodieRequestedReplaceMetadata).

The dataclasses mirror the Avro records field for field; ``to_avro`` / ``from_avro`` convert to and from the
plain dicts the Avro codec (``hudi_clusterd.io.avro``) reads and writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hudi_clusterd.domain.file_group import FileGroupId
from hudi_clusterd.errors import MetadataDecodeError

CLUSTER_OPERATION = "CLUSTER"
PLAN_VERSION = 1
SORT_COLUMNS_PARAM = "hoodie.clustering.plan.strategy.sort.columns"
# Group metrics Hudi writes (FileSliceMetricUtils); sizes in MB.
METRIC_IO_READ_MB = "TOTAL_IO_READ_MB"
METRIC_IO_WRITE_MB = "TOTAL_IO_WRITE_MB"
METRIC_IO_MB = "TOTAL_IO_MB"
METRIC_LOG_FILES_SIZE = "TOTAL_LOG_FILES_SIZE"
METRIC_LOG_FILES = "TOTAL_LOG_FILES"


@dataclass(frozen=True, slots=True)
class SliceInfo:
    """HoodieSliceInfo: one input file slice. ``data_file_path`` is the full base-file path with scheme."""

    file_id: str
    partition_path: str
    data_file_path: str
    delta_file_paths: tuple[str, ...] = ()
    bootstrap_file_path: str = ""
    version: int = 1

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
            partition_path=_opt_str(d, "partitionPath", "HoodieSliceInfo"),
            data_file_path=_opt_str(d, "dataFilePath", "HoodieSliceInfo"),
            delta_file_paths=tuple(_str_item(p, "deltaFilePaths") for p in (d.get("deltaFilePaths") or ())),
            bootstrap_file_path=_opt_str(d, "bootstrapFilePath", "HoodieSliceInfo"),
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


@dataclass(frozen=True, slots=True)
class ClusteringStrategy:
    """HoodieClusteringStrategy: the *execution* strategy class and its parameters (e.g. sort columns)."""

    class_name: str
    params: Mapping[str, str] = field(default_factory=dict)
    version: int = 1

    @property
    def sort_columns(self) -> tuple[str, ...]:
        raw = self.params.get(SORT_COLUMNS_PARAM, "")
        return tuple(c.strip() for c in raw.split(",") if c.strip())

    def to_avro(self) -> dict[str, Any]:
        return {"strategyClassName": self.class_name, "strategyParams": dict(self.params), "version": self.version}

    @classmethod
    def from_avro(cls, d: Mapping[str, Any]) -> ClusteringStrategy:
        return cls(
            class_name=_opt_str(d, "strategyClassName", "HoodieClusteringStrategy"),
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
            operation = _opt_str(d, "operationType", "HoodieRequestedReplaceMetadata")
        return cls(
            operation_type=operation,
            clustering_plan=ClusteringPlan.from_avro(plan) if plan else None,
            extra_metadata={str(k): str(v) for k, v in (d.get("extraMetadata") or {}).items()},
            version=int(d.get("version") or 1),
        )


def _opt_str(d: Mapping[str, Any], key: str, record: str) -> str:
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
