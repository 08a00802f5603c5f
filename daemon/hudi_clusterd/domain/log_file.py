"""Hudi's log files: their names, ``.<fileId>_<instant>.log.<version>_<writeToken>`` (Hudi 1.x
``FSUtils.LOG_FILE_PATTERN``; archive and CDC log names match the pattern but are not log files of a file group),
and one log file of a data table's partition.

The name's instant is the base instant of the file slice the log belongs to on table version 6, and the
deltacommit that wrote it on versions 8 and 9; which of the two it is, is the slicing rule's
(`domain.slicing`), never this module's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LOG_BASE_VERSION = 1
"""The version of a file group's first log file."""

# Hudi 1.x FSUtils.LOG_FILE_PATTERN (matched whole, ASCII digits, as Java's Matcher.matches does)
LOG_FILE_PATTERN = re.compile(r"\.([^._]+)_([^.]*)\.(log|archive)\.(\d+)(_((\d+)-(\d+)-(\d+))(\.cdc)?)?", re.ASCII)
_FILE_ID = re.compile(r"[^._]+")
_INSTANT = re.compile(r"[^.]*")
_WRITE_TOKEN = re.compile(r"\d+-\d+-\d+", re.ASCII)


@dataclass(frozen=True)
class LogFileName:
    """The name ``.<fileId>_<instant>.log.<version>_<writeToken>`` of a log file with a write token."""

    file_id: str
    base_instant: str
    version: int
    write_token: str

    def __post_init__(self) -> None:
        if not _FILE_ID.fullmatch(self.file_id) or not _INSTANT.fullmatch(self.base_instant):
            raise ValueError(f"not a log file id and instant: {self.file_id!r}, {self.base_instant!r}")
        log_version = self.version  # the log file's own version, not a table version
        if log_version < 0 or not _WRITE_TOKEN.fullmatch(self.write_token):
            raise ValueError(f"bad log version {self.version} or write token {self.write_token!r}")

    def __str__(self) -> str:
        return f".{self.file_id}_{self.base_instant}.log.{self.version}_{self.write_token}"

    @classmethod
    def parse(cls, name: str) -> LogFileName | None:
        """The parts of a ``.log`` file name with a write token (Hudi's LOG_FILE_PATTERN); None for any other
        name, archive and CDC log names included."""
        m = LOG_FILE_PATTERN.fullmatch(name)
        if m is None or m.group(3) != "log" or m.group(6) is None or m.group(10) is not None:
            return None
        return cls(m.group(1), m.group(2), int(m.group(4)), m.group(6))

    @property
    def sort_key(self) -> tuple[str, int, str]:
        """Hudi's order of log files in a slice (``HoodieLogFile.LogFileComparator``): the name's instant, then
        the version, then the write token."""
        return (self.base_instant, self.version, self.write_token)


@dataclass(frozen=True, slots=True)
class LogFile:
    """One log file of a data table's file group, as listed (``size`` in bytes)."""

    partition_path: str
    name: LogFileName
    size: int

    @classmethod
    def parse(cls, partition_path: str, file_name: str, size: int) -> LogFile | None:
        """A listed file's log file name; None for anything else (base files, CDC and archive logs, junk)."""
        name = LogFileName.parse(file_name)
        return None if name is None else cls(partition_path, name, size)

    @property
    def file_name(self) -> str:
        return str(self.name)

    @property
    def file_id(self) -> str:
        return self.name.file_id

    @property
    def instant(self) -> str:
        """The instant in the file's name (see the module docstring)."""
        return self.name.base_instant

    @property
    def group_id(self) -> tuple[str, str]:
        return (self.partition_path, self.name.file_id)

    @property
    def relative_path(self) -> str:
        """Path relative to the table's base path."""
        return f"{self.partition_path}/{self.file_name}" if self.partition_path else self.file_name
