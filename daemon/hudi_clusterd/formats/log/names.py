"""Hudi's log file names: ``.<fileId>_<baseInstant>.log.<version>_<writeToken>`` (Hudi 1.x
``FSUtils.LOG_FILE_PATTERN``; archive and CDC log names match the pattern but are not log files of a file
group)."""

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
        if self.version < 0 or not _WRITE_TOKEN.fullmatch(self.write_token):
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
