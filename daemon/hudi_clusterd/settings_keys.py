"""The daemon's own ``clusterd.*`` keys (:class:`~hudi_clusterd.domain.keys.Key`: default, parser, reference text and
the `Settings` attribute each fills; see ``hudi_clusterd.settings``)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from hudi_clusterd.domain.keys import Key, reference_rows
from hudi_clusterd.domain.merging import DEFAULT_RELEASE, Release
from hudi_clusterd.domain.values import csv

_LOG_LEVELS = {"DEBUG": "DEBUG", "INFO": "INFO", "WARN": "WARNING", "WARNING": "WARNING",
               "ERROR": "ERROR", "CRITICAL": "CRITICAL"}  # fmt: skip
_METRICS_OFF = frozenset({"", "off", "none", "disabled"})


class WatchMode(StrEnum):
    """How timeline changes are noticed: file-system events (with polling as a safety net) or polling only."""

    EVENTS = "events"
    POLLING = "polling"


class ObjectStoreReader(StrEnum):
    """Who reads a clustering group's files on S3: Spark's Python workers through the daemon's own object-store
    client, or Spark's Parquet reader through Hadoop's S3A connector (GCS and Azure: always the Python workers)."""

    PYTHON = "python"
    S3A = "s3a"


class LogFormat(StrEnum):
    """Log rendering: ``auto`` is console on a terminal and JSON otherwise."""

    AUTO = "auto"
    JSON = "json"
    CONSOLE = "console"




def _positive_seconds(raw: str) -> float:
    return _seconds(raw, allow_zero=False)


def _non_negative_seconds(raw: str) -> float:
    return _seconds(raw, allow_zero=True)


def _seconds(raw: str, *, allow_zero: bool) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError(f"must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"must be {'>= 0' if allow_zero else '> 0'}, got {raw.strip()}")
    return value


def _metrics_address(raw: str) -> tuple[str, int] | None:
    text = raw.strip()
    if text.lower() in _METRICS_OFF:
        return None
    match = re.fullmatch(r"\[([^\]]+)\]:(\d+)|([^:\[\]]+):(\d+)", text)
    if not match:
        raise ValueError(f"must be host:port, [ipv6]:port or off, got {raw!r}")
    host = match.group(1) or match.group(3)
    port = int(match.group(2) or match.group(4))
    if port > 65535:
        raise ValueError(f"port must be 0..65535, got {port}")
    return host, port


def _non_empty(raw: str) -> str:
    if not raw.strip():
        raise ValueError("must not be empty")
    return raw.strip()


def _log_level(raw: str) -> str:
    level = _LOG_LEVELS.get(raw.strip().upper())
    if level is None:
        raise ValueError(f"must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got {raw!r}")
    return level


def _enum(enum: type[StrEnum]) -> Callable[[str], Any]:
    def parse(raw: str) -> Any:
        for member in enum:
            if member.value == raw.strip().lower():
                return member
        raise ValueError(f"must be one of {', '.join(m.value for m in enum)}, got {raw!r}")

    return parse


_DAEMON_KEYS: tuple[Key[Any], ...] = (
    Key("clusterd.metrics.address", "127.0.0.1:9464", _metrics_address, field="metrics_address", description=(
        "host:port of the Prometheus /metrics endpoint ([ipv6]:port accepted; port 0 picks a free one); "
        "off disables it.")),
    Key("clusterd.spark.master", "local[*]", _non_empty, field="spark_master", description="Spark master URL."),
    Key("clusterd.spark.object.store.reader", "python", _enum(ObjectStoreReader), field="object_store_reader",
        description=(
        "Who reads a clustering group's files on S3: python (Spark's Python workers, through the daemon's own "
        "object-store client; nothing to install) or s3a (Spark's Parquet reader through Hadoop's S3A connector, "
        "fetched by python -m hudi_clusterd.engine.s3a and put on Spark's class path). GCS and Azure: always python.")),
    Key("clusterd.poll.interval.seconds", "10", _positive_seconds, field="poll_interval_seconds", description=(
        "Seconds between full timeline checks of every table (the safety net under file-system events).")),
    Key("clusterd.watch.mode", "events", _enum(WatchMode), field="watch_mode", description=(
        "events (file-system events plus the periodic check) or polling (the periodic check only).")),
    Key("clusterd.shutdown.grace.seconds", "60", _non_negative_seconds, field="shutdown_grace_seconds", description=(
        "On the first SIGTERM/SIGINT, how long running clustering groups may take to finish.")),
    Key("clusterd.log.level", "INFO", _log_level, field="log_level",
        description="DEBUG, INFO, WARNING, ERROR or CRITICAL."),
    Key("clusterd.log.format", "auto", _enum(LogFormat), field="log_format", description=(
        "auto (console on a terminal, JSON otherwise), json or console.")),
    Key("clusterd.lock.timeout.seconds", "60", _non_negative_seconds, field="lock_timeout_seconds", description=(
        "How long to wait for a table lock before giving up for this round.")),
    Key("clusterd.lock.stale.seconds", "120", _positive_seconds, field="lock_stale_seconds", description=(
        "A lock file of another hudi-clusterd process not refreshed for this long is taken over (its holder "
        "died); Apache Hudi writers' lock files follow hoodie.write.lock.filesystem.expire instead.")),
    Key("clusterd.merge.semantics", DEFAULT_RELEASE.value, Release.parse, field="merge_semantics", description=(
        "Whose semantics the file slices of a merge-on-read table of version 6 are merged with: hudi-0.15 or "
        "hudi-1.x (they disagree for OverwriteWithLatestAvroPayload: 0.15 keeps the larger ordering value among "
        "log records, 1.x the later record); the release that writes and reads the table. Per table: "
        "clusterd.table.<name>.merge.semantics.")),
    Key("clusterd.commit.wait.seconds", "60", _non_negative_seconds, field="commit_wait_seconds", description=(
        "How long, in all, a clustering's commit waits for the writers beside it: a write still only requested "
        "(its file groups not yet known) and, right after a write completed, the writer's next write. 0 commits "
        "at once: a writer may then fail its commit on the clustering (and retry); no data is lost either way.")),
)  # fmt: skip
DAEMON_KEYS: dict[str, Key[Any]] = {key.name: key for key in _DAEMON_KEYS}
"""The daemon's keys of one value each, by name (``field``: the `Settings` attribute each fills)."""
TABLES = Key("clusterd.tables", None, csv, "Comma-separated names of the tables to serve.")
_PATTERN_KEYS: tuple[tuple[str, str | None, str], ...] = (
    ("clusterd.table.<name>.base.path", None,
     "Base path of table <name> (a local path or a URI); relative paths are relative to the settings file."),
    ("clusterd.table.<name>.hoodie.<key>", None, "Overrides the default hoodie.<key> for table <name> only."),
    ("clusterd.table.<name>.merge.semantics", None, "Overrides clusterd.merge.semantics for table <name> only."),
    ("clusterd.spark.conf.<key>", None, "Passed to Spark as <key>."),
)  # fmt: skip


def settings_reference() -> list[tuple[str, str | None, str]]:
    """``(key, default, description)`` for every ``clusterd.*`` key (``None`` = no default)."""
    rows = [TABLES.reference(), *_PATTERN_KEYS]
    rows.extend(reference_rows(DAEMON_KEYS.values()))
    return rows
