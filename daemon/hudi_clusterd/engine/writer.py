"""Spark jobs that write new file groups of a Hudi v6 copy-on-write table.

Two levels:

- ``write_file_groups(df, spec)``: the core, shared with clustering. ``df`` is already partitioned and ordered
  the way files should be laid out (each Spark partition holds rows grouped by partition path) and carries
  ``_hoodie_partition_path`` and ``_hoodie_record_key`` (plus ``_hoodie_commit_time``/``_hoodie_commit_seqno``
  when ``spec.preserve_meta_fields``). Every Spark task writes its rows into new file groups with
  ``mapInArrow`` (``hudi_clusterd.io.base_file_writer``); data never passes through the driver, only one small
  stat row per file comes back, and the result is the commit's write stats.
- ``insert(spark, table, df, operation=...)``: an ingestion commit. Computes record keys and partition paths
  (``hudi_clusterd.engine.keygen``), casts the data to the table's schema (or refuses it, naming the column),
  deduplicates by record key for ``insert``, sorts by partition path (``bulk_insert``: and record key), and
  runs the commit protocol of ``hudi_clusterd.io.write_client`` around the write.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, NoReturn

import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from hudi_clusterd.domain.commit import Operation, WriteStat
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.errors import ClusterdError, ExecutionError, TableError
from hudi_clusterd.io.avro_schema import (
    META_FIELDS,
    PARTITION_PATH_FIELD,
    RECORD_KEY_FIELD,
    arrow_to_avro_json,
    avro_to_arrow,
    check_writable_as,
    normalize_arrow_schema,
    strip_meta_fields,
)
from hudi_clusterd.io.base_file_writer import (
    DEFAULT_COMPRESSION,
    DEFAULT_MAX_FILE_BYTES,
    BaseFileTaskWriter,
    BaseFileWriteSpec,
    TaskIds,
    WrittenFile,
)
from hudi_clusterd.io.storage import Storage
from hudi_clusterd.io.table import PROPERTIES_FILE, HoodieTable
from hudi_clusterd.io.write_client import WriteHandle, abort, complete_commit, start_commit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from hudi_clusterd.engine.scan import BatchFunction

log = structlog.get_logger(__name__)

OPERATIONS = {"insert": Operation.INSERT, "bulk_insert": Operation.BULK_INSERT}
_STAT_FIELDS = [("file_id", pa.string()), ("path", pa.string()), ("partition_path", pa.string()),
                ("num_rows", pa.int64()), ("size", pa.int64()), ("create_time_ms", pa.int64())]
_STAT_SCHEMA = pa.schema(_STAT_FIELDS)
_STAT_DDL = "file_id string, path string, partition_path string, num_rows long, size long, create_time_ms long"


def executor_base_path(storage: Storage) -> str:
    """The base path as executors should open it: absolute for local tables, the URI otherwise."""
    return storage.full_path() if storage.is_local else storage.base_uri


# --- the core: one file group per task (and per partition path), rolled over at the size target --------------

def write_file_groups(df: DataFrame, spec: BaseFileWriteSpec, decode: BatchFunction | None = None
                      ) -> list[WriteStat]:
    """Write ``df`` into new file groups of instant ``spec.instant_time``; returns one write stat per file.

    The caller owns the instant (requested/inflight before, commit or rollback after) and the layout of ``df``:
    rows of one partition path must be contiguous within each Spark partition, in the order to be stored.
    ``decode``, when given, turns each task's batches of ``df`` into those rows first (`exchange`'s runs)."""

    def write_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        ids = TaskIds(ctx.partitionId(), ctx.stageId(), ctx.taskAttemptId()) if ctx else TaskIds(0, 0, 0)
        rows = batches if decode is None else decode(batches)
        for written in BaseFileTaskWriter(spec, ids).write(rows):
            yield pa.RecordBatch.from_pylist([{
                "file_id": written.file_id, "path": written.path, "partition_path": written.partition_path,
                "num_rows": written.num_rows, "size": written.size, "create_time_ms": written.create_time_ms,
            }], schema=_STAT_SCHEMA)

    rows = df.mapInArrow(write_task, _STAT_DDL).collect()
    return [WrittenFile(r["file_id"], r["path"], r["partition_path"], int(r["num_rows"]), int(r["size"]),
                        int(r["create_time_ms"])).to_write_stat() for r in rows]


# --- schemas -----------------------------------------------------------------------------------------------

def spark_arrow_schema(df: DataFrame) -> pa.Schema:
    """The normalised Arrow schema of a DataFrame (what its rows become in a base file)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return normalize_arrow_schema(to_arrow_schema(df.schema, timezone="UTC"))


def table_data_schema(table: HoodieTable, timeline: Timeline | None = None) -> pa.Schema | None:
    """The table's data schema (no meta columns): from the newest commit's ``extraMetadata.schema`` (or
    ``hoodie.table.create.schema``), else from the newest base file; None for a table never written."""
    timeline = timeline if timeline is not None else table.timeline()
    avro = table.latest_schema(timeline)
    if avro:
        return avro_to_arrow(avro)
    files = table.file_system_view(timeline).latest_base_files()
    if not files:
        return None
    newest = max(files, key=lambda f: (f.instant_time, f.relative_path))
    with table.storage.fs.open_input_file(table.storage.full_path(newest.relative_path)) as f:
        return normalize_arrow_schema(strip_meta_fields(pq.read_schema(f)))


def _has_column(schema: pa.Schema, dotted: str) -> bool:
    head, *rest = dotted.split(".")
    if head not in schema.names:
        return False
    t = schema.field(head).type
    for part in rest:
        if not pa.types.is_struct(t) or t.get_field_index(part) < 0:
            return False
        t = t.field(part).type
    return True


# --- ingestion ----------------------------------------------------------------------------------------------

def _estimated_bytes(df: DataFrame) -> int | None:
    try:
        return int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    except Exception:  # Spark Connect, or a plan without statistics
        return None


def _output_partitions(spark: SparkSession, df: DataFrame, max_file_bytes: int, parallelism: int | None) -> int:
    if parallelism is not None:
        return max(1, parallelism)
    upper = max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 1))
    estimate = _estimated_bytes(df)
    if estimate is None:
        return upper
    return max(1, min(upper, math.ceil(estimate / max_file_bytes)))


def prepare_insert(df: DataFrame, table: HoodieTable, target: pa.Schema | None) -> tuple[DataFrame, pa.Schema]:
    """Rows ready for ``write_file_groups``: record key, partition path, then the data columns in table order.

    Meta columns in ``df`` are dropped. Refuses data that does not fit ``target`` (the table's schema), and
    key or partition fields that are not columns."""
    from hudi_clusterd.engine.keygen import KeySpec, partition_path_column, record_key_column

    data = df.select(*[df[c] for c in df.columns if c not in META_FIELDS])
    incoming = spark_arrow_schema(data)
    schema = target if target is not None else incoming
    if target is not None:
        check_writable_as(incoming, target)
    spec = KeySpec.from_config(table.config)
    for name in spec.columns:
        if not _has_column(schema, name):
            raise TableError(f"record key or partition field {name!r} is not a column of the data "
                             f"(columns: {', '.join(schema.names)})")
    rows = data.select(record_key_column(data, spec).alias(RECORD_KEY_FIELD),
                       partition_path_column(data, spec).alias(PARTITION_PATH_FIELD),
                       *[data[name] for name in schema.names])
    return rows, schema


def _deduplicate(rows: DataFrame, precombine: str | None) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if precombine is None:
        return rows.dropDuplicates([RECORD_KEY_FIELD])
    order = F.col(precombine).desc_nulls_last()
    window = Window.partitionBy(RECORD_KEY_FIELD).orderBy(order)
    return rows.withColumn("__hudi_rank", F.row_number().over(window)).filter("__hudi_rank = 1").drop("__hudi_rank")


def _layout(rows: DataFrame, operation: str, partitions: int) -> DataFrame:
    keys = [PARTITION_PATH_FIELD, RECORD_KEY_FIELD] if operation == Operation.BULK_INSERT else [PARTITION_PATH_FIELD]
    spread = rows.repartition(1) if partitions <= 1 else rows.repartitionByRange(
        partitions, PARTITION_PATH_FIELD, RECORD_KEY_FIELD)
    return spread.sortWithinPartitions(*keys)


_GLOB_CHARS = frozenset("\\[]{}*?")


def literal_read_path(path: str) -> str:
    """``path`` escaped so that Spark's reader, which expands Hadoop glob patterns, reads exactly that file
    (partition values may hold ``[``, ``{``, ``*``, ``?`` or ``\\``)."""
    return "".join("\\" + c if c in _GLOB_CHARS else c for c in path)


def abort_and_raise(table: HoodieTable, handle: WriteHandle, operation: str, e: BaseException) -> NoReturn:
    """Roll back a failed write's instant, then re-raise: our own errors (and interrupts) as they are, anything
    else as an ``ExecutionError`` that names the table, the instant and Spark's message."""
    try:
        abort(table, handle)
    except Exception as rollback_error:
        log.error("rollback after a failed write failed; it is retried by rollback_failed_writes",
                  instant=handle.instant_time, error=str(rollback_error))
    if isinstance(e, ClusterdError) or not isinstance(e, Exception):
        raise e
    raise ExecutionError(f"{operation} into {table.base_path} (instant {handle.instant_time}) failed and was "
                         f"rolled back: {spark_error_message(e)}") from e


def spark_error_message(e: BaseException) -> str:
    """The useful line of a Spark failure: our ``raise_error`` messages, else the first line, or for a bare
    Py4J wrapper ("An error occurred while calling ...") the innermost Java cause, which names the file."""
    text = str(e)
    lines = text.splitlines()
    for line in lines:
        if "USER_RAISED_EXCEPTION" in line or "record key" in line:
            return line.strip()
    first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    if first.startswith("An error occurred while calling"):
        causes = [ln.strip()[len("Caused by:"):].strip() for ln in lines if ln.strip().startswith("Caused by:")]
        if causes:
            return causes[-1]
    return first


def insert(spark: SparkSession, table: HoodieTable, df: DataFrame, *, operation: str = "insert",
           extra_metadata: Mapping[str, str] | None = None, max_file_bytes: int | None = None,
           parallelism: int | None = None, compression: str | None = None) -> str:
    """Write ``df`` into new file groups as one commit; returns its instant time.

    ``insert`` keeps one row per record key (the greatest precombine value when the table has a precombine
    field); ``bulk_insert`` keeps every row and also sorts by record key. ``extra_metadata`` lands in the
    inflight profile and in the commit's extraMetadata. On failure the instant is rolled back and the error
    re-raised (``ExecutionError`` for Spark failures)."""
    if operation not in OPERATIONS:
        raise TableError(f"unknown write operation {operation!r} (expected one of {', '.join(OPERATIONS)})")
    op = OPERATIONS[operation]
    config = table.config
    config.check_writable(table.storage.full_path(PROPERTIES_FILE))
    target = table_data_schema(table)
    rows, schema = prepare_insert(df, table, target)
    if op == Operation.INSERT:
        rows = _deduplicate(rows, config.precombine_field)
    max_bytes = max_file_bytes or DEFAULT_MAX_FILE_BYTES
    ordered = _layout(rows, op, _output_partitions(spark, df, max_bytes, parallelism))
    avro = arrow_to_avro_json(schema, config.name)
    handle = start_commit(table, extra=extra_metadata, operation=op)
    spec = BaseFileWriteSpec(
        base_path=executor_base_path(table.storage), instant_time=handle.instant_time, data_schema=schema,
        avro_schema_json=arrow_to_avro_json(schema, config.name, with_meta_fields=True),
        populate_meta_fields=config.populate_meta_fields, max_file_bytes=max_bytes,
        compression=compression or DEFAULT_COMPRESSION,
    )
    try:
        stats = write_file_groups(ordered, spec)
        complete_commit(table, handle, stats, op, avro)
    except BaseException as e:
        abort_and_raise(table, handle, operation, e)
    return handle.instant_time

