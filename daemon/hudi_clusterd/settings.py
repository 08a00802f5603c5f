"""Daemon-wide settings: one Java ``.properties`` file, parsed once into frozen values.

File format: UTF-8 text in Java ``.properties`` syntax (``key=value`` or ``key: value``; a line whose first
non-blank character is ``#`` or ``!`` is a comment, but ``#`` later in a line is part of the value; a trailing
``\\`` continues a line; a backslash escapes the next character, so write ``\\\\`` for a literal one)::

    # Every hoodie.* key is the default clustering policy of every table (Hudi's own keys and defaults, so
    # a clusteringjob.properties written for Hudi's HoodieClusteringJob is a valid settings file as it is).
    hoodie.clustering.plan.strategy.target.file.max.bytes=268435456

    # The daemon's own keys live under clusterd. (never under hoodie.); an unknown clusterd.* key is an error.
    clusterd.tables=orders,events
    clusterd.table.orders.base.path=/data/lake/orders
    clusterd.table.events.base.path=s3a://bucket/lake/events
    # Per-table policy: clusterd.table.<name>. followed by a hoodie.* key overrides that default.
    clusterd.table.events.hoodie.clustering.plan.strategy.sort.columns=event_type,ts

    # host:port of the Prometheus endpoint ("off" disables it)
    clusterd.metrics.address=127.0.0.1:9464
    clusterd.spark.master=local[*]
    # clusterd.spark.conf.<key> is passed to Spark as <key>
    clusterd.spark.conf.spark.executor.memory=4g

Table names are letters, digits, ``_`` and ``-``. A relative ``base.path`` is resolved against the folder of
the settings file; ``--base-path`` tables (``extra_base_paths``) are resolved against the working directory,
named after their last path segment, and use the default policy. Two tables may not share a name or a base
path. ``overrides`` (``--conf key=value``) replace keys of the file before anything is interpreted (a relative
``base.path`` given there is resolved against the working directory). Keys outside ``hoodie.*`` and
``clusterd.*`` are ignored with a warning, as are duplicate keys (the last one wins).

Every problem (bad values in any table, unknown ``clusterd.*`` keys, missing base paths) is reported in one
:class:`ConfigError`; per-table problems are prefixed with ``table <name>:`` and problems of the shared
``hoodie.*`` defaults with ``hoodie.* defaults:``. See :func:`settings_reference` for every ``clusterd.*`` key
and its default, and :func:`hudi_clusterd.domain.policy.policy_reference` for the ``hoodie.*`` keys.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hudi_clusterd.domain.keys import KeyReader
from hudi_clusterd.domain.merging import DEFAULT_RELEASE, Release
from hudi_clusterd.domain.policy import ClusteringPolicy, parse_policy
from hudi_clusterd.errors import ConfigError, MetadataDecodeError
from hudi_clusterd.formats.java_properties import parse_properties_document
from hudi_clusterd.lock.base_path_id import s3a_to_s3
from hudi_clusterd.lock.registry import lock_problems, lock_properties
from hudi_clusterd.settings_keys import DAEMON_KEYS, TABLES, LogFormat, ObjectStoreReader, WatchMode, settings_reference

__all__ = [
    "LogFormat",
    "ObjectStoreReader",
    "Settings",
    "TableSpec",
    "WatchMode",
    "load_settings",
    "settings_from_properties",
    "settings_reference",
]

_PREFIX = "clusterd."
_TABLE_PREFIX = "clusterd.table."
_SPARK_CONF_PREFIX = "clusterd.spark.conf."
_TABLE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One table the daemon serves: a unique name, its base path, its clustering policy and its writers' lock
    (the ``hoodie.write.lock.*`` keys, see :mod:`hudi_clusterd.lock.registry`)."""

    name: str
    base_path: str
    policy: ClusteringPolicy
    lock_properties: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may hold credentials
    merge_semantics: Release = DEFAULT_RELEASE
    """Whose semantics a version-6 merge-on-read table is merged with (``clusterd.merge.semantics``)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the daemon needs, validated; swap the whole object on reload."""

    tables: tuple[TableSpec, ...]
    default_policy: ClusteringPolicy
    metrics_address: tuple[str, int] | None
    spark_master: str
    spark_conf: tuple[tuple[str, str], ...]
    object_store_reader: ObjectStoreReader
    poll_interval_seconds: float
    watch_mode: WatchMode
    shutdown_grace_seconds: float
    log_level: str
    log_format: LogFormat
    lock_timeout_seconds: float
    lock_stale_seconds: float
    commit_wait_seconds: float
    merge_semantics: Release
    source: str | None = None

    def table(self, name: str) -> TableSpec:
        """The table called ``name``; raise :class:`ConfigError` listing the known names otherwise."""
        for spec in self.tables:
            if spec.name == name:
                return spec
        known = ", ".join(t.name for t in self.tables) or "(none)"
        raise ConfigError(f"no table named {name!r} (tables: {known})")

    @property
    def spark_conf_dict(self) -> dict[str, str]:
        """``clusterd.spark.conf.*`` as a fresh dict of Spark keys."""
        return dict(self.spark_conf)


# --- loading ---


def load_settings(
    path: str | Path | None,
    *,
    extra_base_paths: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
) -> tuple[Settings, list[str]]:
    """Read and validate the settings file; return the settings and warnings.

    ``path`` may be ``None`` to run on defaults plus ``extra_base_paths``. Raises :class:`ConfigError` (naming
    the file) when the file is missing, unreadable or invalid in any way; every problem is listed.
    """
    if path is None:
        return settings_from_properties({}, extra_base_paths=extra_base_paths, overrides=overrides)
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read settings file {file}: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"settings file {file} is not UTF-8 (byte {exc.start})") from exc
    try:
        document = parse_properties_document(text, str(file))
    except MetadataDecodeError as exc:
        raise ConfigError(str(exc)) from exc
    warnings = list(document.warnings)
    for key, lines in document.duplicate_keys().items():
        warnings.append(f"{file}: {key} is set on lines {', '.join(map(str, lines))}; the last one wins")
    settings, more = settings_from_properties(
        document.as_dict(),
        source=str(file),
        base_dir=file.parent,
        extra_base_paths=extra_base_paths,
        overrides=overrides,
    )
    return settings, warnings + more


def settings_from_properties(
    props: Mapping[str, str],
    *,
    source: str | None = None,
    base_dir: str | Path | None = None,
    extra_base_paths: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
) -> tuple[Settings, list[str]]:
    """Validate already-parsed properties (the file-free half of :func:`load_settings`)."""
    origin = source or "<settings>"
    merged = {**props, **(overrides or {})}
    from_overrides = set(overrides or {})
    problems: list[str] = []
    warnings: list[str] = []

    hoodie = {k: v for k, v in merged.items() if k.startswith("hoodie.")}
    for key in merged:
        if not key.startswith(("hoodie.", _PREFIX)):
            warnings.append(f"{key}: neither a hoodie.* nor a clusterd.* key; ignored")

    reader = KeyReader(merged)
    values: dict[str, Any] = reader.get_all(DAEMON_KEYS.values())
    problems.extend(reader.problems)

    spark_conf: list[tuple[str, str]] = []
    table_paths: dict[str, tuple[str, bool]] = {}
    table_overrides: dict[str, dict[str, str]] = {}
    table_semantics: dict[str, Release] = {}
    for key, value in merged.items():
        if not key.startswith(_PREFIX) or key in DAEMON_KEYS or key == TABLES.name:
            continue
        if key.startswith(_SPARK_CONF_PREFIX) and len(key) > len(_SPARK_CONF_PREFIX):
            spark_conf.append((key[len(_SPARK_CONF_PREFIX) :], value.strip()))
        elif key.startswith(_TABLE_PREFIX):
            name, _, sub = key[len(_TABLE_PREFIX) :].partition(".")
            if sub == "base.path":
                table_paths[name] = (value.strip(), key in from_overrides)
            elif sub.startswith("hoodie."):
                table_overrides.setdefault(name, {})[sub] = value
            elif sub == "merge.semantics":
                try:
                    table_semantics[name] = Release.parse(value)
                except ValueError as e:
                    problems.append(f"{key}: {e}")
            else:
                problems.append(f"{key}: unknown table key (expected clusterd.table.<name>.base.path, "
                                f".merge.semantics or .hoodie.<key>)")
        else:
            problems.append(f"{key}: unknown daemon key{_did_you_mean(key)}")

    default_policy: ClusteringPolicy | None = None
    default_problems: set[str] = set()
    try:
        default_policy, default_warnings = parse_policy(hoodie, source=f"{origin} (hoodie.* defaults)")
        warnings.extend(default_warnings)
    except ConfigError as exc:
        default_problems = set(exc.problems)
        problems.extend(f"hoodie.* defaults: {p}" for p in exc.problems)
        default_warnings = []
    default_lock_problems = lock_problems(hoodie)
    problems.extend(f"hoodie.* defaults: {p}" for p in default_lock_problems)

    listed: tuple[str, ...] = reader.get(TABLES)
    names = list(listed)
    tables: list[TableSpec] = []
    for name in _check_names(names, problems):
        policy = default_policy
        if name in table_overrides:
            try:
                policy, table_warnings = parse_policy(
                    {**hoodie, **table_overrides[name]}, source=f"{origin} (table {name})"
                )
                warnings.extend(f"table {name}: {w}" for w in table_warnings if w not in default_warnings)
            except ConfigError as exc:
                problems.extend(f"table {name}: {p}" for p in exc.problems if p not in default_problems)
                policy = None
        table_hoodie = {**hoodie, **table_overrides.get(name, {})}
        problems.extend(f"table {name}: {p}" for p in lock_problems(table_hoodie) if p not in default_lock_problems)
        raw_path, is_override = table_paths.get(name, ("", False))
        if not raw_path:
            problems.append(f"table {name}: clusterd.table.{name}.base.path is not set")
        elif policy is not None:
            tables.append(TableSpec(name, _normalise(raw_path, None if is_override else base_dir), policy,
                                    lock_properties(table_hoodie),
                                    table_semantics.get(name, values.get("merge_semantics", DEFAULT_RELEASE))))
    for orphan in sorted((set(table_paths) | set(table_overrides) | set(table_semantics)) - set(names)):
        problems.append(f"clusterd.table.{orphan}.*: table {orphan!r} is not listed in clusterd.tables")

    for raw_path in extra_base_paths:
        base = _normalise(raw_path, None)
        name = base.rstrip("/").rsplit("/", 1)[-1]
        if not name or name.endswith(":"):
            problems.append(f"--base-path {raw_path!r}: cannot name a table after this path")
        elif default_policy is not None:
            tables.append(TableSpec(name, base, default_policy, lock_properties(hoodie),
                                    values.get("merge_semantics", DEFAULT_RELEASE)))
    _check_unique(tables, problems)
    if not tables and not problems:
        problems.append("no tables: list them in clusterd.tables or pass --base-path")

    if problems or default_policy is None:
        raise ConfigError(f"invalid settings in {origin}", problems)
    settings = Settings(
        tables=tuple(tables),
        default_policy=default_policy,
        spark_conf=tuple(sorted(spark_conf)),
        source=source,
        **values,
    )
    return settings, warnings


def _check_names(names: list[str], problems: list[str]) -> list[str]:
    good: list[str] = []
    for name in names:
        if not _TABLE_NAME.fullmatch(name):
            problems.append(f"clusterd.tables: {name!r} is not a valid table name (letters, digits, _ and -)")
        elif name in good:
            problems.append(f"clusterd.tables: {name!r} is listed twice")
        else:
            good.append(name)
    return good


def _check_unique(tables: list[TableSpec], problems: list[str]) -> None:
    by_name: dict[str, TableSpec] = {}
    by_path: dict[str, TableSpec] = {}
    for table in tables:
        other = by_name.setdefault(table.name, table)
        if other is not table:
            problems.append(
                f"table {table.name}: two tables share this name ({other.base_path} and {table.base_path}); "
                f"list them in clusterd.tables with distinct names"
            )
        key = _path_identity(table.base_path)
        other = by_path.setdefault(key, table)
        if other is not table:
            problems.append(f"table {table.name}: base path {table.base_path} is also table {other.name}")


def _normalise(raw: str, base_dir: str | Path | None) -> str:
    """Absolute local paths (relative to ``base_dir`` or the working directory); URIs lose trailing slashes."""
    if "://" in raw:
        return raw.rstrip("/") if not raw.endswith("://") else raw
    expanded = os.path.expanduser(raw)
    if base_dir is not None and not os.path.isabs(expanded):
        expanded = os.path.join(base_dir, expanded)
    return os.path.normpath(os.path.abspath(expanded))


def _path_identity(base_path: str) -> str:
    """Where a table is, whatever spelling names it: ``file://`` or a plain path, ``s3a://`` or ``s3://``."""
    if base_path.startswith("file://"):
        return os.path.normpath(base_path[len("file://") :] or "/")
    return s3a_to_s3(base_path)


def _did_you_mean(key: str) -> str:
    candidates = [*DAEMON_KEYS, TABLES.name]
    near = difflib.get_close_matches(key, candidates, n=1, cutoff=0.8)
    return f" (did you mean {near[0]}?)" if near else ""
