"""Commit metadata of completed ``.commit`` / ``.replacecommit`` instants, with Hudi's field names and order.

HoodieCommitMetadata = partitionToWriteStats, compacted, extraMetadata, operationType; HoodieReplaceCommitMetadata
adds partitionToReplaceFileIds. Version-6 tables store it as JSON (`CommitMetadata.to_json_dict`); 1.x tables
(versions 8 and 9) as an Avro record of the 1.x schemas (`CommitMetadata.to_avro_dict`; the container is written by
``hudi_clusterd.formats.avro``). Both decoders go through `CommitMetadata.from_mapping`, which validates the paths.
Unknown fields are ignored on read, as Hudi's Jackson reader does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hudi_clusterd.domain.file_group import check_relative_path
from hudi_clusterd.errors import MetadataDecodeError

SCHEMA_KEY = "schema"
NULL_COMMIT = "null"  # prevCommit of a new file group


class Operation:
    """``WriteOperationType`` enum names as Hudi writes them in ``operationType``."""

    INSERT = "INSERT"
    UPSERT = "UPSERT"
    BULK_INSERT = "BULK_INSERT"
    DELETE = "DELETE"
    INSERT_OVERWRITE = "INSERT_OVERWRITE"
    INSERT_OVERWRITE_TABLE = "INSERT_OVERWRITE_TABLE"
    DELETE_PARTITION = "DELETE_PARTITION"
    CLUSTER = "CLUSTER"
    UPSERT_PREPPED = "UPSERT_PREPPED"
    COMPACT = "COMPACT"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class RuntimeStats:
    total_scan_time: int = 0
    total_upsert_time: int = 0
    total_create_time: int = 0

    def to_json(self) -> dict[str, int]:
        """The JSON object, and the 1.x ``HoodieRuntimeStats`` Avro record (same field names)."""
        return {
            "totalScanTime": self.total_scan_time,
            "totalUpsertTime": self.total_upsert_time,
            "totalCreateTime": self.total_create_time,
        }


@dataclass(frozen=True, slots=True)
class WriteStat:
    """HoodieWriteStat: what one task wrote into one file."""

    file_id: str
    path: str | None
    partition_path: str | None
    prev_commit: str = NULL_COMMIT
    num_writes: int = 0
    num_deletes: int = 0
    num_update_writes: int = 0
    num_inserts: int = 0
    total_write_bytes: int = 0
    total_write_errors: int = 0
    file_size_in_bytes: int = 0
    min_event_time: int | None = None
    max_event_time: int | None = None
    runtime_stats: RuntimeStats | None = None
    # a log-file write (HoodieDeltaWriteStat): the log file's version and start offset, the slice's base file
    # ("" when it has none) and the log files written
    log_version: int | None = None
    log_offset: int | None = None
    base_file: str | None = None
    log_files: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "fileId": self.file_id,
            "path": self.path,
            "cdcStats": None,
            "prevCommit": self.prev_commit,
            "numWrites": self.num_writes,
            "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_update_writes,
            "numInserts": self.num_inserts,
            "totalWriteBytes": self.total_write_bytes,
            "totalWriteErrors": self.total_write_errors,
            "tempPath": None,
            "partitionPath": self.partition_path,
            "totalLogRecords": 0,
            "totalLogFilesCompacted": 0,
            "totalLogSizeCompacted": 0,
            "totalUpdatedRecordsCompacted": 0,
            "totalLogBlocks": 0,
            "totalCorruptLogBlock": 0,
            "totalRollbackBlocks": 0,
            "fileSizeInBytes": self.file_size_in_bytes,
            "minEventTime": self.min_event_time,
            "maxEventTime": self.max_event_time,
            "runtimeStats": self.runtime_stats.to_json() if self.runtime_stats else None,
        }
        if self.log_files is not None:
            out.update(logVersion=self.log_version or 0, logOffset=self.log_offset or 0,
                       baseFile=self.base_file or "", logFiles=list(self.log_files))
        return out

    def to_avro(self) -> dict[str, Any]:
        """The 1.x ``HoodieWriteStat`` Avro record, every field in schema order: the counters we do not track
        are 0 and the rest null, as Hudi writes them for a copy-on-write base file."""
        return {
            "fileId": self.file_id,
            "path": self.path,
            "prevCommit": self.prev_commit,
            "numWrites": self.num_writes,
            "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_update_writes,
            "totalWriteBytes": self.total_write_bytes,
            "totalWriteErrors": self.total_write_errors,
            "partitionPath": self.partition_path,
            "totalLogRecords": 0,
            "totalLogFiles": None,
            "totalUpdatedRecordsCompacted": 0,
            "numInserts": self.num_inserts,
            "totalLogBlocks": 0,
            "totalCorruptLogBlock": 0,
            "totalRollbackBlocks": 0,
            "fileSizeInBytes": self.file_size_in_bytes,
            "logVersion": self.log_version,
            "logOffset": self.log_offset,
            "baseFile": self.base_file,
            "logFiles": None if self.log_files is None else list(self.log_files),
            "cdcStats": None,
            "prevBaseFile": None,
            "minEventTime": self.min_event_time,
            "maxEventTime": self.max_event_time,
            "runtimeStats": self.runtime_stats.to_json() if self.runtime_stats else None,
            "totalLogFilesCompacted": 0,
            "totalLogReadTimeMs": 0,
            "totalLogSizeCompacted": 0,
            "tempPath": None,
            "numUpdates": 0,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> WriteStat:
        """From the JSON object or the Avro record (the field names are the same)."""
        rs = d.get("runtimeStats")
        return cls(
            file_id=str(d.get("fileId") or ""),
            path=_opt_str(d, "path"),
            partition_path=_opt_str(d, "partitionPath"),
            prev_commit=str(d.get("prevCommit") or NULL_COMMIT),
            num_writes=int(d.get("numWrites") or 0),
            num_deletes=int(d.get("numDeletes") or 0),
            num_update_writes=int(d.get("numUpdateWrites") or 0),
            num_inserts=int(d.get("numInserts") or 0),
            total_write_bytes=int(d.get("totalWriteBytes") or 0),
            total_write_errors=int(d.get("totalWriteErrors") or 0),
            file_size_in_bytes=int(d.get("fileSizeInBytes") or 0),
            min_event_time=_opt_int(d, "minEventTime"),
            max_event_time=_opt_int(d, "maxEventTime"),
            runtime_stats=RuntimeStats(
                int(rs.get("totalScanTime") or 0), int(rs.get("totalUpsertTime") or 0),
                int(rs.get("totalCreateTime") or 0),
            ) if isinstance(rs, Mapping) else None,
            log_version=_opt_int(d, "logVersion"),
            log_offset=_opt_int(d, "logOffset"),
            base_file=_opt_str(d, "baseFile"),
            log_files=None if d.get("logFiles") is None else tuple(str(f) for f in d["logFiles"]),
        )


@dataclass(frozen=True, slots=True)
class CommitMetadata:
    """HoodieCommitMetadata, or HoodieReplaceCommitMetadata when ``partition_to_replace_file_ids`` is set."""

    partition_to_write_stats: Mapping[str, tuple[WriteStat, ...]] = field(default_factory=dict)
    extra_metadata: Mapping[str, str] = field(default_factory=dict)
    operation_type: str = Operation.UNKNOWN
    compacted: bool = False
    partition_to_replace_file_ids: Mapping[str, tuple[str, ...]] | None = None

    @property
    def schema(self) -> str | None:
        return self.extra_metadata.get(SCHEMA_KEY)

    def write_stats(self) -> list[WriteStat]:
        return [ws for stats in self.partition_to_write_stats.values() for ws in stats]

    def replaced_groups(self) -> set[tuple[str, str]]:
        return {(p, f) for p, fids in (self.partition_to_replace_file_ids or {}).items() for f in fids}

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "partitionToWriteStats": {
                p: [ws.to_json() for ws in stats] for p, stats in self.partition_to_write_stats.items()
            },
            "compacted": self.compacted,
            "extraMetadata": dict(self.extra_metadata),
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            out["partitionToReplaceFileIds"] = {p: list(f) for p, f in self.partition_to_replace_file_ids.items()}
        return out

    def to_avro_dict(self) -> dict[str, Any]:
        """The 1.x Avro record: ``HoodieReplaceCommitMetadata`` when ``partition_to_replace_file_ids`` is set,
        ``HoodieCommitMetadata`` otherwise (``version`` null, as Hudi writes it)."""
        out: dict[str, Any] = {
            "partitionToWriteStats": {
                p: [ws.to_avro() for ws in stats] for p, stats in self.partition_to_write_stats.items()
            },
            "compacted": self.compacted,
            "extraMetadata": dict(self.extra_metadata),
            "version": None,
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            out["partitionToReplaceFileIds"] = {p: list(f) for p, f in self.partition_to_replace_file_ids.items()}
        return out

    def to_json_bytes(self) -> bytes:
        """Pretty-printed JSON, the same field names and order as Hudi's serializer."""
        return json.dumps(self.to_json_dict(), indent=2).encode("utf-8")

    @classmethod
    def from_json_bytes(cls, data: bytes, source: str) -> CommitMetadata:
        """Decode a completed commit file; ``source`` (the file name) goes into any error message.

        Empty content decodes to empty metadata, as Hudi's reader does for empty files."""
        if not data.strip():
            return cls()
        try:
            d = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:  # RecursionError: deep nesting
            raise MetadataDecodeError(f"{source}: not valid commit metadata JSON ({e})") from e
        if not isinstance(d, dict):
            raise MetadataDecodeError(f"{source}: commit metadata must be a JSON object, got {type(d).__name__}")
        return cls.from_mapping(d, source)

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any], source: str) -> CommitMetadata:
        """Build and validate from the decoded JSON object or Avro record (same field names); every path must
        lead inside the table. ``MetadataDecodeError`` naming ``source`` otherwise."""
        try:
            p2ws = {
                check_relative_path(str(p), "partition"): tuple(WriteStat.from_json(ws) for ws in (stats or []))
                for p, stats in (d.get("partitionToWriteStats") or {}).items()
            }
            for ws in (w for stats in p2ws.values() for w in stats):
                check_relative_path(ws.partition_path or "", "write stat partitionPath")
                check_relative_path(ws.path or "", "write stat path")
            replace_ids = d.get("partitionToReplaceFileIds")
            return cls(
                partition_to_write_stats=p2ws,
                extra_metadata={str(k): str(v) for k, v in (d.get("extraMetadata") or {}).items()},
                operation_type=str(d.get("operationType") or Operation.UNKNOWN),
                compacted=bool(d.get("compacted", False)),
                partition_to_replace_file_ids=None if replace_ids is None else {
                    check_relative_path(str(p), "partitionToReplaceFileIds partition"):
                        tuple(str(f) for f in (fids or [])) for p, fids in replace_ids.items()
                },
            )
        except (AttributeError, TypeError, ValueError, OverflowError) as e:  # OverflowError: int(1e999)
            raise MetadataDecodeError(f"{source}: malformed commit metadata ({e})") from e


def _opt_str(d: Mapping[str, Any], key: str) -> str | None:
    value = d.get(key)
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{key} must be a string or null, got {type(value).__name__}")
    return value


def _opt_int(d: Mapping[str, Any], key: str) -> int | None:
    value = d.get(key)
    return None if value is None else int(value)
