"""Base files, file slices and file groups.

A file group is identified by ``(partition_path, file_id)`` and nothing else. A file slice is the group's state
as of one base instant: a base file ``<fileId>_<writeToken>_<instantTime>.parquet`` and, on a merge-on-read
table, the log files appended to it (`domain.log_file`). A slice may have no base file: a group that only log
files were written to, or the empty slice a pending compaction starts. Copy-on-write slices are base files only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hudi_clusterd.domain.log_file import LogFile
from hudi_clusterd.domain.paths import escape_reason

FileGroupId = tuple[str, str]
"""(partition path, file id)."""

BASE_FILE_EXTENSION = ".parquet"
_WRITE_TOKEN_RE = re.compile(r"^\d+-\d+-\d+$")
_INSTANT_RE = re.compile(r"\A[0-9]{14}(?:[0-9]{3})?\Z")


@dataclass(frozen=True, slots=True)
class BaseFile:
    """One base (parquet) file of a file slice."""

    partition_path: str
    file_name: str
    file_id: str
    write_token: str
    instant_time: str
    size: int

    @classmethod
    def parse(cls, partition_path: str, file_name: str, size: int) -> BaseFile | None:
        """Parse a base file name; None for anything else in a partition folder (partition metadata, logs, junk)."""
        if not file_name.endswith(BASE_FILE_EXTENSION) or file_name.startswith("."):
            return None
        stem = file_name[: -len(BASE_FILE_EXTENSION)]
        parts = stem.split("_")
        if len(parts) != 3:
            return None
        file_id, token, instant = parts
        if not file_id or not _INSTANT_RE.match(instant):
            return None
        return cls(partition_path, file_name, file_id, token, instant, size)

    @property
    def group_id(self) -> FileGroupId:
        return (self.partition_path, self.file_id)

    @property
    def relative_path(self) -> str:
        """Path relative to the table's base path, as write stats record it."""
        return join_partition(self.partition_path, self.file_name)


def base_file_name(file_id: str, write_token: str, instant_time: str) -> str:
    """``<fileId>_<writeToken>_<instantTime>.parquet``."""
    return f"{file_id}_{write_token}_{instant_time}{BASE_FILE_EXTENSION}"


def write_token(task_partition_id: int, stage_id: int, task_attempt_id: int) -> str:
    """Hudi's write token ``<taskPartitionId>-<stageId>-<taskAttemptId>``: distinct across task retries."""
    return f"{task_partition_id}-{stage_id}-{task_attempt_id}"


def check_relative_path(path: str, what: str) -> str:
    """``path`` when it is a normalised path inside a table: it stays below the table's root by the rule every
    storage applies (`domain.paths.escape_reason`: not absolute, no ``..`` segment, backslash, control character
    or URI), has no ``.`` or empty parts, and lies outside ``.hoodie``; ``""`` (the table's root) passes. Raises
    ``ValueError`` naming ``what``, the path and why otherwise: paths read from the timeline must never lead a read,
    a write or a delete out of the table."""
    if path == "":
        return path
    parts = path.split("/")
    reason = escape_reason(path)
    if reason is None and any(p in ("", ".") for p in parts):
        reason = "an empty or '.' segment"
    if reason is None and parts[0] == ".hoodie":
        reason = "in .hoodie"
    if reason is not None:
        raise ValueError(f"{what} {path!r} is not a path inside the table ({reason})")
    return path


def join_partition(partition_path: str, name: str) -> str:
    return f"{partition_path}/{name}" if partition_path else name


@dataclass(frozen=True, slots=True)
class FileSlice:
    """The state of a file group as of one base instant: its base file (None for a slice of log files only, or
    a pending compaction's slice) and its log files in Hudi's log order."""

    partition_path: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None = None
    log_files: tuple[LogFile, ...] = ()

    @classmethod
    def of(cls, base_file: BaseFile) -> FileSlice:
        """The slice of one base file and no log file."""
        return cls(base_file.partition_path, base_file.file_id, base_file.instant_time, base_file)

    @property
    def group_id(self) -> FileGroupId:
        return (self.partition_path, self.file_id)

    @property
    def size(self) -> int:
        """The base file's size (0 without one), as Hudi's plan strategies count a slice."""
        return self.base_file.size if self.base_file is not None else 0


@dataclass(frozen=True, slots=True)
class FileGroup:
    """All slices of one file group, newest base instant first."""

    partition_path: str
    file_id: str
    slices: tuple[FileSlice, ...]

    @property
    def group_id(self) -> FileGroupId:
        return (self.partition_path, self.file_id)
