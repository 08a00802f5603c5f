"""Compaction and log compaction plans as Hudi stores them in ``<T>.compaction.requested`` and
``<T>.logcompaction.requested`` (HoodieCompactionPlan), and the file groups pending ones hold.

An operation names the slice it compacts: its base instant, the base file and the log files as **bare file
names** (the partition is ``partitionPath``). A pending compaction starts a new, empty file slice at its instant
in every group it names (`FileSystemView`); a group in a pending compaction or log compaction is not clustered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hudi_clusterd.domain.file_group import FileGroupId, check_relative_path
from hudi_clusterd.domain.plan import optional_str
from hudi_clusterd.errors import MetadataDecodeError, TimelineError


@dataclass(frozen=True, slots=True)
class CompactionOperation:
    """HoodieCompactionOperation: one file slice to compact."""

    file_id: str
    partition_path: str
    base_instant: str
    data_file_path: str = ""
    delta_file_paths: tuple[str, ...] = ()
    metrics: Mapping[str, float] = field(default_factory=dict)
    bootstrap_file_path: str = ""

    @property
    def group_id(self) -> FileGroupId:
        return (self.partition_path, self.file_id)

    def to_avro(self) -> dict[str, Any]:
        return {"baseInstantTime": self.base_instant, "deltaFilePaths": list(self.delta_file_paths),
                "dataFilePath": self.data_file_path or None, "fileId": self.file_id,
                "partitionPath": self.partition_path, "metrics": dict(self.metrics),
                "bootstrapFilePath": self.bootstrap_file_path or None}

    @classmethod
    def from_avro(cls, d: Mapping[str, Any]) -> CompactionOperation:
        file_id = _text(d, "fileId")
        if not file_id:
            raise MetadataDecodeError("HoodieCompactionOperation.fileId is missing or empty")
        partition = _text(d, "partitionPath")
        try:
            check_relative_path(partition, "HoodieCompactionOperation.partitionPath")
        except ValueError as e:
            raise MetadataDecodeError(str(e)) from None
        deltas = d.get("deltaFilePaths") or ()
        if not all(isinstance(p, str) for p in deltas):
            raise MetadataDecodeError("HoodieCompactionOperation.deltaFilePaths must hold strings")
        return cls(file_id, partition, _text(d, "baseInstantTime"), _text(d, "dataFilePath"), tuple(deltas),
                   {str(k): float(v) for k, v in (d.get("metrics") or {}).items()}, _text(d, "bootstrapFilePath"))


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """HoodieCompactionPlan (the fields the daemon reads; a log compaction's plan has the same shape)."""

    operations: tuple[CompactionOperation, ...]
    extra_metadata: Mapping[str, str] = field(default_factory=dict)
    version: int = 2

    def group_ids(self) -> list[FileGroupId]:
        return [op.group_id for op in self.operations]

    def to_avro(self) -> dict[str, Any]:
        return {"operations": [op.to_avro() for op in self.operations], "extraMetadata": dict(self.extra_metadata),
                "version": self.version}

    @classmethod
    def from_avro(cls, d: Mapping[str, Any]) -> CompactionPlan:
        return cls(tuple(CompactionOperation.from_avro(op) for op in (d.get("operations") or ())),
                   {str(k): str(v) for k, v in (d.get("extraMetadata") or {}).items()},
                   int(d.get("version") or 1))


@dataclass(frozen=True, slots=True)
class PendingCompaction:
    """File groups in pending compaction plans (group → compaction instant, which starts a new slice) and in
    pending log compaction plans (group → log compaction instant, which does not). A group may be in one
    compaction plan only."""

    compaction: Mapping[FileGroupId, str] = field(default_factory=dict)
    log_compaction: Mapping[FileGroupId, str] = field(default_factory=dict)

    @classmethod
    def from_plans(cls, compactions: Iterable[tuple[str, Iterable[FileGroupId]]],
                   log_compactions: Iterable[tuple[str, Iterable[FileGroupId]]] = ()) -> PendingCompaction:
        return cls(_by_group(compactions, "compaction"), _by_group(log_compactions, "log compaction"))

    def instant_for(self, group: FileGroupId) -> str | None:
        """The pending compaction or log compaction holding ``group``, if any."""
        return self.compaction.get(group) or self.log_compaction.get(group)


def _by_group(plans: Iterable[tuple[str, Iterable[FileGroupId]]], what: str) -> dict[FileGroupId, str]:
    out: dict[FileGroupId, str] = {}
    for time, groups in plans:
        for group in groups:
            other = out.get(group)
            if other is not None and other != time:
                raise TimelineError(f"file group {group[1]!r} in partition {group[0]!r} is in two pending {what} "
                                    f"plans ({other} and {time}); the timeline is corrupt")
            out[group] = time
    return out


def _text(d: Mapping[str, Any], key: str) -> str:
    return optional_str(d, key, "HoodieCompactionOperation")
