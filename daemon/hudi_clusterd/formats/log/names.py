"""Hudi's log file names: ``.<fileId>_<baseInstant>.log.<version>_<writeToken>``. The name rule is the domain's
(`hudi_clusterd.domain.log_file`, which the file-system view shares); it is re-exported here for the log
format's readers and writers."""

from __future__ import annotations

from hudi_clusterd.domain.log_file import LOG_BASE_VERSION, LOG_FILE_PATTERN, LogFileName

__all__ = ["LOG_BASE_VERSION", "LOG_FILE_PATTERN", "LogFileName"]
