"""``hudi-clusterd ingest``: load parquet files into a Hudi v6 copy-on-write table, creating it when absent.

    hudi-clusterd ingest --base-path /data/t --source '/landing/*.parquet' --record-key id --partition-by dt

One commit for everything, or with ``--commit-per-file`` one commit per source file (in one Spark session),
which is how a stream of small commits, and so small files, is produced for clustering to work on.
``--operation upsert`` updates rows whose record keys exist (new slices of their file groups) and inserts the
rest.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
from typing import Any

from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.table_config import LAYOUT_OF_VERSION, NEW_TABLE_VERSION, TableConfig
from hudi_clusterd.errors import ClusterdError, ConfigError, ExecutionError, TableError
from hudi_clusterd.exit_codes import EXIT_FAILURE, EXIT_TABLE
from hudi_clusterd.storage import Storage, open_storage
from hudi_clusterd.table.hoodie_table import PROPERTIES_FILE, HoodieTable

_GLOB_CHARS = frozenset("*?[")


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "ingest", help="load parquet files into a table (creating it when absent)",
        description="Write parquet files (a file, a folder, or a glob) into a Hudi table as new file groups. A "
                    "missing table is created from the flags; an existing table's own properties win.",
    )
    p.add_argument("--base-path", required=True, help="the table's base path (created when absent)")
    p.add_argument("--source", required=True, help="a parquet file, a folder of them, or a glob")
    p.add_argument("--record-key", help="record key column(s), comma-separated (required to create a table)")
    p.add_argument("--partition-by", help="partition column(s), comma-separated (default: not partitioned)")
    p.add_argument("--precombine", help="precombine column: with --operation insert or upsert, the row with its "
                                        "greatest value wins among rows of one record key")
    p.add_argument("--table-name", help="table name when creating (default: the base path's folder name)")
    p.add_argument("--table-version", type=int, choices=sorted(LAYOUT_OF_VERSION), default=NEW_TABLE_VERSION,
                   help="table version when creating: 6 (Hudi 0.14/0.15), 8 (Hudi 1.0) or 9 (Hudi 1.1 and later; "
                        "default: %(default)s)")
    p.add_argument("--operation", choices=("insert", "bulk_insert", "upsert"), default="insert",
                   help="insert (deduplicates by record key), bulk_insert (keeps every row) or upsert (updates "
                        "existing record keys, inserts the others; default: %(default)s)")
    p.add_argument("--reject-updates-to-pending-clustering", action="store_true",
                   help="with upsert: fail instead of updating file groups in a pending clustering plan (by default "
                        "ingestion wins and the clustering is rolled back)")
    p.add_argument("--small-file-limit", type=int, default=0,
                   help="with upsert: new records first fill file groups smaller than this many bytes "
                        "(hoodie.parquet.small.file.limit; default 0: always new file groups)")
    p.add_argument("--commit-per-file", action="store_true", help="one commit per source file")
    p.add_argument("--hive-style", action="store_true", help="hive-style partition folders (field=value)")
    p.add_argument("--max-file-bytes", type=int, default=None,
                   help="target base file size (hoodie.parquet.max.file.size; default 120 MiB)")
    p.add_argument("--spark-master", default=None, help="Spark master (default: local[*])")
    p.set_defaults(func=run)


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def resolve_sources(source: str) -> list[str]:
    """Parquet files named by ``source``: a file, a folder (every ``*.parquet`` below it, hidden and ``_``
    entries skipped), or a glob on the last path element; sorted, as URIs Spark can read (``file:/...`` for a
    local path)."""
    location = source.rstrip("/") if "://" in source else os.path.abspath(os.path.expanduser(source))
    parent, name = location.rsplit("/", 1) if "/" in location.split("://", 1)[-1] else (location, "")
    storage = open_storage(parent or "/")
    if _GLOB_CHARS & set(name):
        if _GLOB_CHARS & set(parent):
            raise ConfigError(f"--source {source}: only the last path element may contain a glob")
        found = [e.path for e in storage.list_dir() if not e.is_dir and fnmatch.fnmatch(e.name, name)]
    else:
        info = storage.info(name)
        if info is None:
            raise ConfigError(f"--source {source}: no such file or folder")
        found = [name] if not info.is_dir else _parquet_files_below(storage, name)
    if not found:
        raise ConfigError(f"--source {source}: no parquet files found")
    return [storage.uri(p) for p in sorted(found)]


def _parquet_files_below(storage: Storage, folder: str) -> list[str]:
    """Every ``*.parquet`` file below ``folder``, hidden and ``_`` entries (Spark's markers) skipped."""
    found: list[str] = []
    stack = [folder]
    while stack:
        for entry in storage.list_dir(stack.pop()):
            if entry.name.startswith((".", "_")):
                continue
            if entry.is_dir:
                stack.append(entry.path)
            elif entry.name.endswith(".parquet"):
                found.append(entry.path)
    return found


def _warn_disagreements(args: argparse.Namespace, config: TableConfig) -> None:
    checks = [
        ("--record-key", _split(args.record_key), list(config.record_key_fields)),
        ("--partition-by", _split(args.partition_by), list(config.partition_fields)),
        ("--precombine", [args.precombine] if args.precombine else [],
         [config.precombine_field] if config.precombine_field else []),
        ("--table-name", [args.table_name] if args.table_name else [], [config.name]),
    ]
    for flag, given, actual in checks:
        if given and given != actual:
            print(f"warning: {flag} {','.join(given)} differs from the existing table's "
                  f"{','.join(actual) or '(none)'}; the table's own setting is used", file=sys.stderr)
    if args.hive_style and not config.hive_style_partitioning:
        print("warning: --hive-style is ignored: the existing table does not use hive-style partitions",
              file=sys.stderr)


def _open_or_create(args: argparse.Namespace, spark: Any, first_source: str) -> HoodieTable:
    if HoodieTable.exists(args.base_path):
        table = HoodieTable.open(args.base_path)
        _warn_disagreements(args, table.config)
        return table
    record_key = _split(args.record_key)
    if not record_key:
        raise ConfigError(f"{args.base_path} is not a Hudi table yet; --record-key is required to create it")
    from hudi_clusterd.engine.files import spark_arrow_schema
    from hudi_clusterd.formats.avro_schema import arrow_to_avro_json, sanitize_name

    name = args.table_name or sanitize_name(os.path.basename(os.path.normpath(args.base_path)) or "hudi_table")
    schema = spark_arrow_schema(_read(spark, [first_source]))
    config = TableConfig.for_new_table(
        name=name, record_key_fields=record_key, partition_fields=_split(args.partition_by),
        precombine_field=args.precombine, hive_style=args.hive_style,
        create_schema=arrow_to_avro_json(schema, name), table_version=args.table_version,
    )
    table = HoodieTable.create(args.base_path, config)
    print(f"created table {name} at {table.base_path}")
    return table


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _rows_written(table: HoodieTable, instant_time: str) -> int:
    meta = table.timeline_store.commit_metadata(Instant(instant_time, Action.COMMIT, State.COMPLETED))
    return sum(ws.num_writes for ws in meta.write_stats())


def _read(spark: Any, paths: list[str]) -> Any:
    try:
        return spark.read.parquet(*paths)
    except Exception as e:  # AnalysisException and friends: unreadable or incompatible files
        from hudi_clusterd.engine.files import spark_error_message

        raise ExecutionError(f"cannot read {paths[0]}{' and others' if len(paths) > 1 else ''}: "
                             f"{spark_error_message(e)}") from e


def _ingest(args: argparse.Namespace) -> int:
    from hudi_clusterd.engine.ingest.upsert import upsert
    from hudi_clusterd.engine.ingest.writer import insert
    from hudi_clusterd.engine.session import DEFAULT_MASTER, get_or_create_session

    sources = resolve_sources(args.source)
    if HoodieTable.exists(args.base_path):  # refuse a table our writer cannot write before Spark starts
        existing = HoodieTable.open(args.base_path)
        existing.config.check_writable(existing.storage.full_path(PROPERTIES_FILE))
    spark = get_or_create_session(args.spark_master or DEFAULT_MASTER, app_name="hudi-clusterd-ingest")
    table = _open_or_create(args, spark, sources[0])
    batches = [[s] for s in sources] if args.commit_per_file else [sources]
    total_rows = 0
    for i, batch in enumerate(batches, 1):
        if args.operation == "upsert":
            instant = upsert(spark, table, _read(spark, batch), max_file_bytes=args.max_file_bytes,
                             small_file_limit=args.small_file_limit,
                             reject_updates_to_pending_clustering=args.reject_updates_to_pending_clustering)
        else:
            instant = insert(spark, table, _read(spark, batch), operation=args.operation,
                             max_file_bytes=args.max_file_bytes)
        rows = _rows_written(table, instant)
        total_rows += rows
        prefix = f"[{i}/{len(batches)}] " if args.commit_per_file else ""
        print(f"{prefix}committed {instant} ({_count(rows, 'row')}, {_count(len(batch), 'file')})", flush=True)
    if args.commit_per_file:
        print(f"done: {_count(len(batches), 'commit')}, {_count(total_rows, 'row')}")
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        return _ingest(args)
    except ClusterdError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_TABLE if isinstance(e, TableError) else EXIT_FAILURE
