"""Spark jobs that write new file groups of a Hudi v6 copy-on-write table.

``insert(spark, table, df, operation=...)`` is one ingestion commit: it computes record keys and partition paths
(``hudi_clusterd.engine.ingest.keygen``), casts the data to the table's schema (or refuses it, naming the
column), deduplicates by record key for ``insert``, sorts by partition path (``bulk_insert``: and record key),
writes the files with ``hudi_clusterd.engine.files.write_file_groups`` and runs the commit protocol of
``hudi_clusterd.table.write_client`` around the write.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, NoReturn

import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from hudi_clusterd.domain.commit import Operation
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.engine.files import spark_arrow_schema, spark_error_message, write_file_groups
from hudi_clusterd.errors import ClusterdError, ExecutionError, TableError
from hudi_clusterd.formats.avro_schema import (
    META_FIELDS,
    PARTITION_PATH_FIELD,
    RECORD_KEY_FIELD,
    arrow_to_avro_json,
    avro_to_arrow,
    normalize_arrow_schema,
    strip_meta_fields,
)
from hudi_clusterd.formats.bloom import BloomSettings
from hudi_clusterd.formats.schema_fit import check_writable_as
from hudi_clusterd.table.base_file_writer import (
    DEFAULT_COMPRESSION,
    DEFAULT_MAX_FILE_BYTES,
    BaseFileWriteSpec,
)
from hudi_clusterd.table.hoodie_table import PROPERTIES_FILE, HoodieTable
from hudi_clusterd.table.write_client import WriteHandle, abort, complete_commit, start_commit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = structlog.get_logger(__name__)

OPERATIONS = {"insert": Operation.INSERT, "bulk_insert": Operation.BULK_INSERT}


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
    with table.storage.open_input_file(newest.relative_path) as f:
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
    from hudi_clusterd.engine.ingest.keygen import KeySpec, partition_path_column, record_key_column

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


def insert(spark: SparkSession, table: HoodieTable, df: DataFrame, *, operation: str = "insert",
           extra_metadata: Mapping[str, str] | None = None, max_file_bytes: int | None = None,
           parallelism: int | None = None, compression: str | None = None,
           bloom: BloomSettings | None = None) -> str:
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
        storage=table.storage.spec, instant_time=handle.instant_time, data_schema=schema,
        avro_schema_json=arrow_to_avro_json(schema, config.name, with_meta_fields=True),
        populate_meta_fields=config.populate_meta_fields, max_file_bytes=max_bytes,
        compression=compression or DEFAULT_COMPRESSION, **(bloom or BloomSettings()).spec_fields(),
    )
    try:
        stats = write_file_groups(ordered, spec)
        complete_commit(table, handle, stats, op, avro)
    except BaseException as e:
        abort_and_raise(table, handle, operation, e)
    return handle.instant_time

