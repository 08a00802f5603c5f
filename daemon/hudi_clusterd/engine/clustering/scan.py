"""A clustering group's base files read inside Spark tasks with pyarrow, in the Python workers.

Why not Spark's own parquet reader: its rows live in the JVM, and every step a clustering adds in Python (the
layout key, the sorted runs of `exchange`, the writer) would convert them into Arrow and back. Reading the files
in the Python workers keeps the rows Arrow from the files to the writer.

`GroupScan.map_files` returns the DataFrame ``spark.range(tasks)`` → ``mapInArrow``: task ``i`` reads the files
`assign_files` gives it, in plan order, in batches of `BATCH_ROWS`, conforms every batch to the group's merged
Spark schema (`conform`: columns in schema order, missing ones null, types cast, INT96 read as microseconds) and
passes them to the caller's function. The file slices with log files are read by tasks of their own after those
(`merged_tasks`: at most `TASKS_PER_CORE` per core, the slices dealt to them in turn): each reads its slices'
base and log files merged, one slice after the other (`merged`, under the `SliceMerge` in the closure; one
slice's merge in a task's memory at a time), and conforms the merged rows the same way. The assignment is fixed
in the closure, so a retried task reads exactly what the failed attempt read. Data never passes through the
driver.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from hudi_clusterd.engine.clustering.merged import MergedSlice, merged_batches
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.formats.log import SliceMerge
from hudi_clusterd.formats.log.arrow_blocks import arrow_schema_of
from hudi_clusterd.storage import Storage, StorageSpec, open_storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

    from hudi_clusterd.engine.files import BatchFunction

BATCH_ROWS = 10_000
"""Rows per batch read from a file (Spark's own ``arrow.maxRecordsPerBatch`` default)."""
SPLIT_BYTES = 128 * 1024 * 1024
"""Input bytes one task reads at most when the files allow it (Spark's ``files.maxPartitionBytes`` default)."""
TASKS_PER_CORE = 2
"""At least this many tasks per core, so a task that draws larger files does not leave a core idle at the end."""

"""A ``mapInArrow`` function: what a task does with its batches (runs in the Python workers)."""


@dataclass(frozen=True, slots=True)
class ScanFile:
    """A base file of the group: its path relative to the table and its size in bytes."""

    path: str
    size: int


def scan_tasks(sizes: Sequence[int], parallelism: int) -> int:
    """How many tasks read files of these sizes: enough to keep every core busy (`TASKS_PER_CORE`) and to keep
    each under `SPLIT_BYTES`, never more than one per file (one for no files: an empty DataFrame)."""
    if not sizes:
        return 1
    wanted = max(TASKS_PER_CORE * max(1, parallelism), math.ceil(sum(sizes) / SPLIT_BYTES))
    return max(1, min(len(sizes), wanted))


def merged_tasks(slices: int, parallelism: int) -> list[list[int]]:
    """Indices of the slices with log files each of their tasks merges: as many tasks as `scan_tasks` allows for
    cores (never more than one per slice), the slices dealt in turn (sizes are not known before the merge),
    each task's in plan order. Every slice is assigned exactly once."""
    tasks = min(slices, TASKS_PER_CORE * max(1, parallelism))
    return [list(range(t, slices, tasks)) for t in range(tasks)]


def assign_files(sizes: Sequence[int], tasks: int) -> list[list[int]]:
    """Indices of the files each of ``tasks`` tasks reads, balanced by bytes (largest file first to the least
    loaded task); each task's files stay in their original order. Every file is assigned exactly once."""
    if tasks < 1:
        raise ValueError(f"tasks must be >= 1, got {tasks}")
    loads = [0] * tasks
    assigned: list[list[int]] = [[] for _ in range(tasks)]
    for index in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        task = min(range(tasks), key=lambda t: (loads[t], t))
        assigned[task].append(index)
        loads[task] += sizes[index]
    return [sorted(files) for files in assigned]


def conform(batch: pa.RecordBatch, schema: pa.Schema, source: str) -> pa.RecordBatch:
    """``batch`` with exactly ``schema``'s columns, in its order: missing columns null (a file written before the
    column was added), others cast where the file's type differs. Raises `ExecutionError` naming ``source`` and
    the column when a cast is impossible."""
    arrays: list[pa.Array] = []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        if index < 0:
            arrays.append(pa.nulls(batch.num_rows, field.type))
            continue
        column = batch.column(index)
        if not column.type.equals(field.type):
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise ExecutionError(
                    f"{source}: column {field.name!r} of type {column.type} cannot be read as {field.type}: {e}"
                ) from e
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_conformed(storage: Storage, rel: str, schema: pa.Schema, batch_rows: int = BATCH_ROWS
                   ) -> Iterator[pa.RecordBatch]:
    """The rows of base file ``rel`` in batches conformed to ``schema`` (only its columns are read)."""
    source = storage.full_path(rel)
    try:
        with storage.open_input_file(rel) as f:
            parquet = pq.ParquetFile(f, coerce_int96_timestamp_unit="us")
            present = set(parquet.schema_arrow.names)
            columns = [name for name in schema.names if name in present]
            for batch in parquet.iter_batches(batch_size=batch_rows, columns=columns):
                yield conform(batch, schema, source)
    except ExecutionError:
        raise
    except (OSError, pa.ArrowException) as e:
        raise ExecutionError(f"{source}: cannot read the base file: {e}") from e


@dataclass(frozen=True, slots=True)
class GroupScan:
    """The files of one clustering group and the merged Spark schema of their rows (as Spark's reader sees
    them, minus the columns the caller dropped): ``files`` are the base files of the slices without log files,
    ``merged`` the slices with log files, read merged under ``merge``."""

    spark: SparkSession
    storage: StorageSpec | str  # the table's storage, as tasks open it (`open_storage`)
    files: tuple[ScanFile, ...]
    schema: StructType
    frame: DataFrame | None = None
    """The same rows as Spark's own reader gives them (Hadoop's S3A connector): `map_files` then takes its
    batches from this DataFrame (``mapInArrow``) instead of reading the files in the Python workers (never
    for a group with ``merged`` slices)."""
    merged: tuple[MergedSlice, ...] = ()
    merge: SliceMerge | None = None

    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema every batch is conformed to (`conform`): ``schema`` as Spark hands it to Python."""
        from pyspark.sql.pandas.types import to_arrow_schema

        large = str(self.spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")).lower() == "true"
        return to_arrow_schema(self.schema, timezone="UTC", prefers_large_types=large)

    def map_files(self, fn: BatchFunction, schema: StructType | str, columns: Sequence[str] | None = None
                  ) -> DataFrame:
        """A DataFrame of ``schema``: each task's conformed batches, in file order, through ``fn``. ``columns``:
        read only these (the others are not decoded at all)."""
        from hudi_clusterd.engine.session import default_parallelism

        merged, merge = self.merged, self.merge
        if merged and merge is None:
            raise ExecutionError(f"{merged[0].source}: a file slice with log files and no merge rule to read it")
        if self.frame is not None and not merged:
            source = self.frame if columns is None else self.frame.select(*columns)
            return source.mapInArrow(fn, schema)
        arrow_schema = self.arrow_schema()
        if columns is not None:
            arrow_schema = pa.schema([arrow_schema.field(name) for name in columns])
        sizes = [f.size for f in self.files]
        parallelism = default_parallelism(self.spark)
        base_tasks = scan_tasks(sizes, parallelism) if sizes or not merged else 0
        assignment = [[self.files[i].path for i in files] for files in assign_files(sizes, base_tasks)] \
            if base_tasks else []
        merged_assignment = merged_tasks(len(merged), parallelism)
        tasks = base_tasks + len(merged_assignment)
        spec = self.storage

        def read_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            storage = open_storage(spec)

            def conformed() -> Iterator[pa.RecordBatch]:
                for batch in batches:  # one row per task: its index in `assignment`, then in `merged_assignment`
                    for task in batch.column(0).to_pylist():
                        if task < len(assignment):
                            for rel in assignment[task]:
                                yield from read_conformed(storage, rel, arrow_schema)
                            continue
                        for index in merged_assignment[task - len(assignment)]:
                            piece = merged[index]
                            source = storage.full_path(piece.source)
                            for rows in merged_batches(storage, piece, merge, BATCH_ROWS):  # type: ignore[arg-type]
                                yield conform(rows, arrow_schema, source)

            return fn(conformed())

        return self.spark.range(0, tasks, 1, tasks).mapInArrow(read_task, schema)


def footer_schema(storage: Storage, files: Sequence[ScanFile], also: pa.Schema | None = None
                  ) -> tuple[StructType, int]:
    """The merged Spark schema of ``files`` read from their footers, as Spark's Parquet reader gives it with
    ``mergeSchema`` (the union of the columns, a type that differs between files being an `ExecutionError`;
    every column nullable, INT96 columns as timestamps, other timestamps by their ``isAdjustedToUTC``), with the
    columns of ``also`` that no file has appended, and their rows."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType, TimestampType

    schemas: list[pa.Schema] = []
    int96: set[str] = set()
    rows = 0
    for f in files:
        try:
            with storage.open_input_file(f.path) as src:
                parquet = pq.ParquetFile(src, coerce_int96_timestamp_unit="us")
                schemas.append(parquet.schema_arrow)
                rows += parquet.metadata.num_rows
                columns = [parquet.schema.column(i) for i in range(len(parquet.schema))]
                int96 |= {c.path for c in columns if c.physical_type == "INT96" and "." not in c.path}
        except (OSError, pa.ArrowException) as e:
            raise ExecutionError(f"{storage.full_path(f.path)}: cannot read the footer: {e}") from e
    try:
        merged = pa.unify_schemas(schemas)
    except pa.ArrowException as e:
        raise ExecutionError(f"{storage.full_path(files[0].path) if files else storage.base_uri} and the other "
                             f"files of the group: their schemas do not merge: {e}") from e
    if also is not None:
        merged = pa.schema([*merged, *(f for f in also if f.name not in merged.names)])
    return StructType([StructField(f.name, TimestampType() if f.name in int96 else _nullable(from_arrow_type(f.type)),
                                   True) for f in merged]), rows


def _nullable(data_type: DataType) -> DataType:
    """``data_type`` with every nested field and element nullable (Spark's Parquet reader reads them so)."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(data_type, StructType):
        return StructType([StructField(f.name, _nullable(f.dataType), True) for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return ArrayType(_nullable(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(_nullable(data_type.keyType), _nullable(data_type.valueType), True)
    return data_type


def read_through_storage(spark: SparkSession, storage: Storage, files: Sequence[ScanFile]) -> tuple[DataFrame, int]:
    """The rows of ``files`` as a DataFrame read in the Python workers through the storage (`GroupScan`), for a
    storage Spark's own readers cannot open (`Storage.spark_readable`), and how many there are (from the footers:
    counting the DataFrame would read every file once more); its schema is `footer_schema`'s."""
    schema, rows = footer_schema(storage, files)
    return GroupScan(spark, storage.spec, tuple(files), schema).map_files(lambda batches: batches, schema), rows


def read_merged(spark: SparkSession, storage: Storage, files: Sequence[ScanFile], merged: Sequence[MergedSlice],
                bases: Sequence[ScanFile], merge: SliceMerge) -> tuple[DataFrame, int]:
    """The rows of a group with ``merged`` slices (whose base files are ``bases``) beside the base-only
    ``files``, read in the Python workers (`GroupScan`), and how many there are (the merge decides it: counting
    runs the read once); the schema is `footer_schema`'s over every base file, with the columns of the table's
    latest schema that only log records have (a nullable column added since the base files were written)."""
    latest = arrow_schema_of(merge.table_schema) if merge.table_schema else None
    schema, _ = footer_schema(storage, [*files, *bases], latest)
    df = GroupScan(spark, storage.spec, tuple(files), schema, merged=tuple(merged), merge=merge
                   ).map_files(lambda batches: batches, schema)
    return df, df.count()
