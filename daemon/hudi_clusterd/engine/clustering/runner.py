"""Clustering groups as Spark jobs on the one shared SparkSession.

Each group: a job group named after table, instant and group (visible in the Spark UI, cancellable), its own
FAIR scheduler pool (one long group does not starve the others), a read of exactly the plan's base files (a
slice with log files read merged, in tasks of their own, under the `SliceMerge` the caller gives: `merged`), the
layout sort of the plan's work order (linear, Z-order or Hilbert), and a write of new file groups near the
work order's target size: the tasks that write them are counted from a sample written as the output will be
(not from the plan's ``numOutputFileGroups``), and each task cuts its rows into files by their measured size.
Meta columns are preserved and ``_hoodie_file_name`` rewritten. Group data never reaches the driver.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import structlog

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.plan import ClusteringPlan, WorkOrder
from hudi_clusterd.engine.clustering.exchange import SortedRuns, ranges_per_partition
from hudi_clusterd.engine.clustering.merged import MergedSlice
from hudi_clusterd.engine.clustering.scan import GroupScan, ScanFile, read_merged, read_through_storage
from hudi_clusterd.engine.clustering.sizing import output_bytes_per_row, output_file_groups, writing_tasks
from hudi_clusterd.engine.clustering.sorting import exchange_layout, sort_for_layout
from hudi_clusterd.engine.files import (
    literal_read_path,
    spark_arrow_schema,
    spark_error_message,
    write_file_groups,
)
from hudi_clusterd.engine.s3a import s3a_session_conf
from hudi_clusterd.engine.session import (
    DEFAULT_MASTER,
    classic_session_running,
    get_or_create_session,
    is_connect_master,
    is_connect_session,
    scheduler_pool,
)
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.formats.avro_schema import (
    FILE_NAME_FIELD,
    PARTITION_PATH_FIELD,
    arrow_to_avro_json,
    strip_meta_fields,
)
from hudi_clusterd.formats.bloom import BloomSettings
from hudi_clusterd.formats.log import SliceMerge
from hudi_clusterd.storage import Storage
from hudi_clusterd.table.base_file_writer import DEFAULT_ROW_GROUP_BYTES, BaseFileWriteSpec
from hudi_clusterd.table.table_ref import TableRef

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = structlog.get_logger(__name__)

MIN_ROW_GROUP_BYTES = 1024 * 1024
# Clustering output is written with snappy, as Spark writes parquet by default: every Hudi, Spark and hudi-rs reader
# reads it, and it is about 3.5x faster to write than gzip (Hudi's default codec for ingestion) on the reference
# dataset (bench/bench_clustering.py --profile), at a modestly lower compression ratio.
CLUSTERING_COMPRESSION = "snappy"
MIN_PARQUET_BYTES = 12  # "PAR1", a 4-byte footer length, "PAR1"
MEMORY_PER_INPUT_BYTE = 4.0
"""Arrow bytes per byte of compressed parquet assumed when the output sample cannot be read (gzip base files of
the reference dataset take 2.3)."""


@dataclass(frozen=True, slots=True)
class OutputShape:
    """A group's output as sized from a sample: the tasks that write it (`sizing.writing_tasks`; each cuts its
    rows into files near the target), Arrow bytes per row, columns worth a dictionary (None: all)."""

    partitions: int
    memory_bytes_per_row: float
    dictionary_columns: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class GroupLayout:
    """A group's rows as the writer receives them (sorted runs, or a partitioned and sorted DataFrame), their
    count, the output's shape and the data schema (no meta columns)."""

    rows: DataFrame | SortedRuns
    count: int
    shape: OutputShape
    data_schema: pa.Schema


@dataclass(frozen=True, slots=True)
class GroupInput:
    """What a group reads: the base files of its slices without log files (``files``), its slices with log
    files (``merged``, whose base files are ``bases``) and how those are merged."""

    files: tuple[ScanFile, ...]
    merged: tuple[MergedSlice, ...] = ()
    bases: tuple[ScanFile, ...] = ()
    merge: SliceMerge | None = None

    @property
    def input_bytes(self) -> int:
        """The base files' bytes (log files not counted)."""
        return sum(f.size for f in (*self.files, *self.bases))


def group_input(storage: Storage, plan: ClusteringPlan, index: int, files: Sequence[ScanFile],
                merge: SliceMerge | None) -> GroupInput:
    """Group ``index``'s slices split into base-only files and merged slices (their log paths from the plan's
    ``deltaFilePaths``). Raises `ExecutionError` for a slice with log files when no ``merge`` is given, for one
    whose base file is not among ``files`` and for a group of log-only slices alone (its schema is read from base
    files)."""
    by_path = {f.path: f for f in files}
    merged: list[MergedSlice] = []
    bases: list[ScanFile] = []
    for s in plan.input_groups[index].slices:
        if not s.delta_file_paths:
            continue
        logs = tuple(storage.rel_from_uri(p) for p in s.delta_file_paths)
        if merge is None:
            raise ExecutionError(f"{storage.full_path(logs[0])}: a log file of a clustering group, and no merge "
                                 "rule to read it with (merge-on-read tables are not served)")
        base = storage.rel_from_uri(s.data_file_path) if s.data_file_path else None
        if base is not None:
            if base not in by_path:
                raise ExecutionError(f"{storage.full_path(base)}: the base file of a slice with log files is not "
                                     "among the group's input files")
            bases.append(by_path.pop(base))
        merged.append(MergedSlice(base, logs))
    if merged and not bases and not by_path:
        raise ExecutionError(f"{storage.full_path(merged[0].source)}: a group of log-only file slices is not read "
                             "(its schema comes from base files)")
    return GroupInput(tuple(f for f in files if f.path in by_path), tuple(merged), tuple(bases), merge)


def job_group_id(table: TableRef, instant: str, index: int) -> str:
    return f"hudi-clusterd/{table.name}/{instant}/{index}"


def row_group_bytes(target_file_bytes: int) -> int:
    """Row groups of about an eighth of the target file: files end close to the target, queries skip finely."""
    return max(MIN_ROW_GROUP_BYTES, min(DEFAULT_ROW_GROUP_BYTES, target_file_bytes // 8))


class SparkGroupRunner:
    """Runs clustering groups on a SparkSession; safe to call from many threads at once."""

    def __init__(self, spark: SparkSession, *, owns_session: bool = True, s3a_reader: bool = False) -> None:
        self.spark = spark
        self.owns_session = owns_session
        # groups on S3 read by Spark's Parquet reader through Hadoop's S3A connector (its jars on the session's
        # class path: `s3a.s3a_session_conf`) rather than in the Python workers
        self.s3a_reader = s3a_reader
        self.connect = is_connect_session(spark)
        self._active: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def scan_files(storage: Storage, files: Sequence[BaseFile]) -> list[ScanFile]:
        """The group's base files as the scan reads them; refuses an empty or truncated one, which Spark's
        reader would silently skip, dropping a damaged file group's rows."""
        out = []
        for bf in files:
            if bf.size < MIN_PARQUET_BYTES:
                raise ExecutionError(f"{storage.full_path(bf.relative_path)}: {bf.size} bytes, not a Parquet "
                                     "file (empty or truncated)")
            out.append(ScanFile(bf.relative_path, bf.size))
        return out

    def read_group(self, storage: Storage, files: Sequence[ScanFile] | GroupInput) -> tuple[DataFrame, int]:
        """The group's rows and their number, without the two meta columns the writer sets anyway
        (``_hoodie_file_name`` is rewritten, ``_hoodie_partition_path`` is the group's partition): they would only
        widen the shuffle. Read by Spark's Parquet reader, or in the Python workers where Spark cannot open the
        storage's URIs (an object store: `read_through_storage`); on S3 by Spark's reader through Hadoop's S3A
        connector when the runner is set to (`read_paths`). A group with merged slices is read in the Python
        workers, on every storage (`read_merged`)."""
        if isinstance(files, GroupInput):
            if files.merged and files.merge is not None:
                df, rows = read_merged(self.spark, storage, files.files, files.merged, files.bases, files.merge)
                return df.drop(FILE_NAME_FIELD, PARTITION_PATH_FIELD), rows
            files = files.files
        paths = self.read_paths(storage, files)
        if paths is None:
            df, rows = read_through_storage(self.spark, storage, files)
            return df.drop(FILE_NAME_FIELD, PARTITION_PATH_FIELD), rows
        df = self.spark.read.option("mergeSchema", "true").parquet(*paths)
        return df.drop(FILE_NAME_FIELD, PARTITION_PATH_FIELD), df.count()

    def read_paths(self, storage: Storage, files: Sequence[ScanFile]) -> list[str] | None:
        """The paths Spark's own Parquet reader reads ``files`` at; None where the Python workers read them. On
        S3 with the S3A reader: ``s3a://`` URIs, the bucket's S3A settings (`Storage.s3a_options`) set on the
        session first, so that S3A reaches the objects exactly where this process's client does."""
        if storage.spark_readable:
            return [literal_read_path(storage.uri(f.path)) for f in files]
        options = self._s3a_options(storage)
        if options is None:
            return None
        for key, value in options.items():
            if self.spark.conf.get(key, None) != value:
                self.spark.conf.set(key, value)
        return [literal_read_path(s3a_uri(storage.uri(f.path))) for f in files]

    def _s3a_options(self, storage: Storage) -> dict[str, str] | None:
        """The S3A settings of a storage this runner reads through S3A; None where the Python workers read it."""
        return storage.s3a_options() if self.s3a_reader and not storage.spark_readable else None

    def output_shape(self, storage: Storage, plan: ClusteringPlan, index: int, rows: int,
                     input_bytes: int = 0) -> OutputShape:
        """How many tasks write the group's ``rows`` (from the files they make at the target size), the Arrow
        bytes a row takes in memory and the columns worth a dictionary, from a sample written as the output will
        be (`sizing`); when the sample cannot be read: tasks for the plan's file count, `MEMORY_PER_INPUT_BYTE`
        times the input's bytes per row, and dictionaries everywhere."""
        group = plan.input_groups[index]
        planned = max(1, group.num_output_file_groups)
        order = plan.strategy.work_order
        target_file_bytes = order.target_file_max_bytes
        size = output_bytes_per_row(
            self.spark, storage.spec,
            [storage.rel_from_uri(s.data_file_path) for s in group.slices if s.data_file_path],
            CLUSTERING_COMPRESSION, row_group_bytes(target_file_bytes), order.sort_columns,
            (FILE_NAME_FIELD, PARTITION_PATH_FIELD))
        if size is None:
            return OutputShape(writing_tasks(planned), MEMORY_PER_INPUT_BYTE * input_bytes / max(rows, 1), None)
        n = output_file_groups(rows, size.disk, target_file_bytes)
        log.info("output sized from a sample", group=index, planned=planned,
                 estimated_files=n, writing_tasks=writing_tasks(n), bytes_per_row=round(size.disk, 1))
        dictionary = size.dictionary_columns
        if dictionary is not None:  # one value per file: always worth a dictionary
            dictionary = (*dictionary, FILE_NAME_FIELD, PARTITION_PATH_FIELD)
        return OutputShape(writing_tasks(n), size.memory, dictionary)

    def layout(self, storage: Storage, plan: ClusteringPlan, index: int, files: Sequence[ScanFile] | GroupInput
               ) -> GroupLayout:
        """The group's rows laid out for the writer: sorted runs from a scan of the files (`exchange_layout`)
        where the layout allows, else a Spark DataFrame partitioned and sorted."""
        order: WorkOrder = plan.strategy.work_order
        read = files if isinstance(files, GroupInput) else GroupInput(tuple(files))
        df, rows = self.read_group(storage, read)
        data_schema = strip_meta_fields(spark_arrow_schema(df))
        shape = self.output_shape(storage, plan, index, rows, read.input_bytes)
        n_out = shape.partitions
        columns = order.sort_columns
        if not columns:
            return GroupLayout(df.repartition(n_out), rows, shape, data_schema)
        # S3A's rows, else the files in Python (a group with merged slices: always in Python)
        frame = df if self._s3a_options(storage) is not None and not read.merged else None
        scan = GroupScan(self.spark, storage.spec, read.files, df.schema, frame, read.merged, read.merge)
        runs = exchange_layout(df, scan, columns, order.layout_strategy, order.curve_build_method,
                               order.curve_sample_size, n_out,
                               ranges_per_partition(rows, n_out, shape.memory_bytes_per_row), rows=rows)
        if runs is not None:
            return GroupLayout(runs, rows, shape, data_schema)
        ordered = sort_for_layout(df, columns, order.layout_strategy, order.curve_build_method,
                                  order.curve_sample_size, n_out, rows=rows)
        return GroupLayout(ordered, rows, shape, data_schema)

    def _start_job(self, job_group: str, description: str, index: int) -> None:
        """Label this thread's Spark jobs: a cancellable job group and a FAIR pool on a classic session, an
        operation tag on Spark Connect (which has no SparkContext)."""
        if self.connect:
            self.spark.addTag(job_group)
            return
        sc = self.spark.sparkContext
        sc.setJobGroup(job_group, description, interruptOnCancel=True)
        sc.setLocalProperty("spark.scheduler.pool", scheduler_pool(index))

    def _end_job(self, job_group: str) -> None:
        if self.connect:
            self.spark.removeTag(job_group)
            return
        # the next group run on this pool thread sets its own job group; only the pool is reset here
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]

    def run_group(self, table: TableRef, instant: str, plan: ClusteringPlan, index: int,
                  files: Sequence[BaseFile], merge: SliceMerge | None = None) -> list[WriteStat]:
        """Write group ``index`` of ``plan`` (whose base files are ``files``) as new file groups of ``instant``;
        the group's slices with log files are read merged under ``merge`` (`ExecutionError` without one)."""
        group = plan.input_groups[index]
        job_group = job_group_id(table, instant, index)
        description = (f"cluster {table.name} {instant} group {index + 1}/{len(plan.input_groups)}: "
                       f"{len(group.slices)} files of {group.partition_path or '(root)'}")
        self._start_job(job_group, description, index)
        with self._lock:
            self._active.setdefault(instant, set()).add(job_group)
        try:
            order = plan.strategy.work_order
            target_file_bytes = order.target_file_max_bytes
            storage = table.open_storage()
            read = group_input(storage, plan, index, self.scan_files(storage, files), merge)
            laid_out = self.layout(storage, plan, index, read)
            rows = laid_out.count
            spec = BaseFileWriteSpec(
                storage=storage.spec, instant_time=instant,
                data_schema=laid_out.data_schema,
                avro_schema_json=arrow_to_avro_json(laid_out.data_schema, table.name, with_meta_fields=True),
                populate_meta_fields=table.config.populate_meta_fields, preserve_meta_fields=True,
                max_file_bytes=target_file_bytes,
                row_group_bytes=row_group_bytes(target_file_bytes),
                compression=CLUSTERING_COMPRESSION,
                partition_path=group.partition_path,
                expected_task_rows=-(-rows // laid_out.shape.partitions),
                dictionary_columns=laid_out.shape.dictionary_columns,
                **BloomSettings(order.bloom_filter_type, order.bloom_num_entries, order.bloom_fpp,
                                order.bloom_dynamic_max_entries).spec_fields(),
            )
            if isinstance(laid_out.rows, SortedRuns):
                stats = write_file_groups(laid_out.rows.frame, spec, decode=laid_out.rows.decode())
            else:
                stats = write_file_groups(laid_out.rows, spec)
            written = sum(s.num_writes for s in stats)
            if written != rows:  # the files are rolled back with the instant; nothing is lost or duplicated
                raise ExecutionError(f"{description}: wrote {written} rows but the input has {rows}; "
                                     "the clustering is not committed")
            return stats
        except ExecutionError:
            raise
        except Exception as e:
            raise ExecutionError(f"{description}: {spark_error_message(e)}") from e
        finally:
            with self._lock:
                self._active.get(instant, set()).discard(job_group)
            self._end_job(job_group)

    def cancel(self, table: TableRef, instant: str) -> None:
        with self._lock:
            groups = list(self._active.get(instant, ()))
        for job_group in groups:
            log.warning("cancelling spark jobs", job_group=job_group)
            if self.connect:
                self.spark.interruptTag(job_group)
            else:
                self.spark.sparkContext.cancelJobGroup(job_group)


    def close(self) -> None:
        """Stop the SparkSession when this runner owns it."""
        if self.owns_session:
            self.spark.stop()


def build_runner(master: str = DEFAULT_MASTER, conf: Mapping[str, str] | None = None, *,
                 s3a_reader: bool = False) -> SparkGroupRunner:
    """A runner on the process-wide SparkSession for ``master``. Closing it stops the session when the runner
    started it; a session the process already had (its host application's) is left running. ``s3a_reader``:
    groups on S3 are read through Hadoop's S3A connector, whose jars go on the class path (`ConfigError` naming
    the set-up command when they are missing)."""
    joined = not is_connect_master(master) and classic_session_running()
    session_conf = s3a_session_conf(conf or {}, master) if s3a_reader else dict(conf or {})
    return SparkGroupRunner(get_or_create_session(master, conf=session_conf), owns_session=not joined,
                            s3a_reader=s3a_reader)


def s3a_uri(uri: str) -> str:
    """An ``s3://`` URI as S3A names it (``s3a://``); other URIs unchanged."""
    return "s3a://" + uri[len("s3://"):] if uri.startswith("s3://") else uri
