"""Upserts into a copy-on-write table: Hudi's copy-on-write merge, with a Spark join as the index.

One ``upsert`` is one ``UPSERT`` commit:

1. The batch gets record keys and partition paths (as ``insert``) and is deduplicated by record key: the row with
   the greatest precombine value wins, and among equal values (or without a precombine field) the last one.
2. Index: the record keys of the latest committed slices of the batch's partitions are read (three columns of
   the base files, nothing else) and joined with the batch on (partition path, record key), as Hudi's SIMPLE
   index does. A match is an update of that file group; the rest are inserts. An update replaces the stored
   row whatever its precombine value (Hudi's default payload, ``OverwriteWithLatestAvroPayload``).
3. Every file group with an update gets a new slice of the same file id (base file
   ``<fileId>_<token>_<instant>.parquet``, marker MERGE): the rows of its latest slice that are not updated,
   meta columns kept (commit time and seqno included), plus the updated rows with this commit's time and new
   seqnos. One Spark task writes each such slice. Inserts go to new file groups, or with ``small_file_limit``
   > 0 first fill file groups whose latest slice is smaller than it (never ones in a pending clustering plan),
   up to ``max_file_bytes`` by the table's average record size.
4. Write stats: a merged group's stat has ``prevCommit`` = its previous slice's instant, ``numUpdateWrites``
   and ``numInserts`` as merged, ``numWrites`` = rows in the new slice.

Clustering conflicts: by default ingestion wins. An upsert into file groups of a pending clustering plan goes
ahead; the clustering's completion check sees this commit's markers (while it runs) or its newer slices (once
committed) and rolls the clustering back. With ``reject_updates_to_pending_clustering`` (Hudi's
``SparkRejectUpdateStrategy``) the upsert fails before writing anything. Either way no update is lost: right
before its commit point, under the table lock, the upsert checks that none of the file groups it merged was
given a newer slice or replaced since it read them, and fails (rolled back, to be retried) if one was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import structlog

from hudi_clusterd.domain.commit import Operation, WriteStat
from hudi_clusterd.domain.file_group import BaseFile, FileGroupId
from hudi_clusterd.domain.fs_view import FileSystemView
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.errors import CommitConflictError, ExecutionError, UnsupportedTableError
from hudi_clusterd.formats.avro_schema import (
    COMMIT_SEQNO_FIELD,
    COMMIT_TIME_FIELD,
    PARTITION_PATH_FIELD,
    RECORD_KEY_FIELD,
    arrow_to_avro_json,
)
from hudi_clusterd.formats.bloom import BloomSettings
from hudi_clusterd.table.base_file_writer import (
    DEFAULT_COMPRESSION,
    DEFAULT_MAX_FILE_BYTES,
    FILE_ID_COLUMN,
    BaseFileWriteSpec,
)
from hudi_clusterd.table.hoodie_table import PROPERTIES_FILE, HoodieTable
from hudi_clusterd.table.write_client import complete_commit, start_commit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

log = structlog.get_logger(__name__)

DEFAULT_AVERAGE_RECORD_BYTES = 1024  # hoodie.copyonwrite.record.size.estimate
_BROADCAST_KEYS_MAX = 2_000_000  # batches up to this many keys are broadcast into the index join


@dataclass(frozen=True, slots=True)
class MergedGroup:
    """A file group the upsert writes a new slice of: the slice it read, and what it merges in."""

    base_file: BaseFile
    updates: int
    inserts: int

    @property
    def group_id(self) -> FileGroupId:
        return self.base_file.group_id


def deduplicate_last(rows: DataFrame, precombine: str | None) -> DataFrame:
    """One row per (partition path, record key): greatest precombine value, then the last row, wins."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = [F.col("__hudi_pos").desc()]
    if precombine is not None:
        order.insert(0, F.col(precombine).desc_nulls_last())
    window = Window.partitionBy(PARTITION_PATH_FIELD, RECORD_KEY_FIELD).orderBy(*order)
    return (rows.withColumn("__hudi_pos", F.monotonically_increasing_id())
            .withColumn("__hudi_rank", F.row_number().over(window))
            .filter("__hudi_rank = 1").drop("__hudi_rank", "__hudi_pos"))


def _file_id_of_file() -> Any:
    from pyspark.sql import functions as F

    return F.substring_index(F.col("_metadata.file_name"), "_", 1)


def tag_locations(spark: SparkSession, table: HoodieTable, rows: DataFrame, slices: list[BaseFile],
                  batch_rows: int) -> DataFrame:
    """``rows`` with ``FILE_ID_COLUMN``: the file group holding each record key now, null for new keys."""
    from pyspark.sql import functions as F

    if not slices:
        return rows.withColumn(FILE_ID_COLUMN, F.lit(None).cast("string"))
    stored = (spark.read.parquet(*[table.storage.uri(bf.relative_path) for bf in slices])
              .select(RECORD_KEY_FIELD, PARTITION_PATH_FIELD, _file_id_of_file().alias(FILE_ID_COLUMN)))
    wanted = rows.select(RECORD_KEY_FIELD, PARTITION_PATH_FIELD)
    if batch_rows <= _BROADCAST_KEYS_MAX:
        wanted = F.broadcast(wanted)
    hits = stored.join(wanted, [RECORD_KEY_FIELD, PARTITION_PATH_FIELD], "inner")
    return rows.join(hits, [RECORD_KEY_FIELD, PARTITION_PATH_FIELD], "left")


def average_record_bytes(table: HoodieTable, timeline: Timeline) -> int:
    """Bytes per record of the newest commit that wrote rows (Hudi's estimate for sizing inserts)."""
    for inst in reversed(timeline.commits().completed().instants):
        stats = table.timeline_store.commit_metadata(inst).write_stats()
        rows = sum(ws.num_writes for ws in stats)
        if rows > 0:
            return max(1, sum(ws.total_write_bytes for ws in stats) // rows)
    return DEFAULT_AVERAGE_RECORD_BYTES


def small_file_capacity(view: FileSystemView, partitions: list[str], small_file_limit: int, max_file_bytes: int,
                        record_bytes: int, exclude: set[FileGroupId]) -> dict[str, list[tuple[BaseFile, int]]]:
    """Per partition, the small file groups inserts may fill and how many records each takes."""
    out: dict[str, list[tuple[BaseFile, int]]] = {}
    for p in partitions:
        for sl in view.latest_file_slices(p):
            if sl.base_file is None or sl.size >= small_file_limit or view.is_pending_clustering(sl.group_id) \
                    or sl.group_id in exclude:
                continue
            room = (max_file_bytes - sl.size) // record_bytes
            if room > 0:
                out.setdefault(p, []).append((sl.base_file, room))
    return out


def _assign_small_files(spark: SparkSession, tagged: DataFrame,
                        capacity: dict[str, list[tuple[BaseFile, int]]]) -> DataFrame:
    """Give inserts of a partition the file ids of its small groups, in record-key order, up to each capacity."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ranges: list[tuple[str, int, int, str]] = []
    for p, groups in capacity.items():
        lo = 0
        for bf, room in sorted(groups, key=lambda g: (g[0].size, g[0].file_id)):
            ranges.append((p, lo, lo + room, bf.file_id))
            lo += room
    if not ranges:
        return tagged
    spans = spark.createDataFrame(ranges, "__p string, __lo long, __hi long, __fid string")
    inserts = tagged.filter(F.col(FILE_ID_COLUMN).isNull()).withColumn(
        "__n", F.row_number().over(Window.partitionBy(PARTITION_PATH_FIELD).orderBy(RECORD_KEY_FIELD)))
    cond = (inserts[PARTITION_PATH_FIELD] == spans["__p"]) & (inserts["__n"] > spans["__lo"]) & \
        (inserts["__n"] <= spans["__hi"])
    placed = (inserts.join(F.broadcast(spans), cond, "left")
              .withColumn(FILE_ID_COLUMN, F.col("__fid"))
              .drop("__p", "__lo", "__hi", "__fid", "__n"))
    return tagged.filter(F.col(FILE_ID_COLUMN).isNotNull()).unionByName(placed)


def _target_types(rows: DataFrame, schema: pa.Schema) -> dict[str, DataType]:
    from pyspark.sql.pandas.types import from_arrow_type

    out: dict[str, DataType] = {}
    for field in schema:
        try:
            out[field.name] = from_arrow_type(field.type)
        except (TypeError, ValueError):
            out[field.name] = rows.schema[field.name].dataType
    return out


def _merge_rows(spark: SparkSession, table: HoodieTable, tagged: DataFrame, merged: dict[FileGroupId, MergedGroup],
                schema: pa.Schema, partitions: int) -> DataFrame:
    """The new slices' rows: untouched rows of each merged group's latest slice plus its new rows, one Spark
    partition per file group (several groups may share one), ordered by partition path, file id, record key."""
    from pyspark.sql import functions as F

    types = _target_types(tagged, schema)
    old = (spark.read.option("mergeSchema", "true")
           .parquet(*[table.storage.uri(g.base_file.relative_path) for g in merged.values()])
           .withColumn(FILE_ID_COLUMN, _file_id_of_file()))
    new = tagged.filter(F.col(FILE_ID_COLUMN).isNotNull())
    kept = old.join(new.select(RECORD_KEY_FIELD, PARTITION_PATH_FIELD, FILE_ID_COLUMN),
                    [RECORD_KEY_FIELD, PARTITION_PATH_FIELD, FILE_ID_COLUMN], "left_anti")
    meta = [RECORD_KEY_FIELD, PARTITION_PATH_FIELD, FILE_ID_COLUMN]

    def data(df: DataFrame) -> list[Any]:
        cols = []
        for name, t in types.items():
            c = df[name] if name in df.columns else F.lit(None)
            cols.append(c.cast(t).alias(name))
        return cols

    kept_rows = kept.select(F.col(COMMIT_TIME_FIELD).cast("string"), F.col(COMMIT_SEQNO_FIELD).cast("string"),
                            *meta, *data(kept))
    new_rows = new.select(F.lit(None).cast("string").alias(COMMIT_TIME_FIELD),
                          F.lit(None).cast("string").alias(COMMIT_SEQNO_FIELD), *meta, *data(new))
    return (kept_rows.unionByName(new_rows)
            .repartition(max(1, min(partitions, len(merged))), PARTITION_PATH_FIELD, FILE_ID_COLUMN)
            .sortWithinPartitions(PARTITION_PATH_FIELD, FILE_ID_COLUMN, RECORD_KEY_FIELD))


def _insert_rows(tagged: DataFrame, schema: pa.Schema, partitions: int) -> DataFrame:
    from pyspark.sql import functions as F

    from hudi_clusterd.engine.ingest.writer import _layout

    inserts = tagged.filter(F.col(FILE_ID_COLUMN).isNull())
    laid_out = _layout(inserts, Operation.INSERT, partitions)
    types = _target_types(tagged, schema)
    return laid_out.select(F.lit(None).cast("string").alias(COMMIT_TIME_FIELD),
                           F.lit(None).cast("string").alias(COMMIT_SEQNO_FIELD),
                           RECORD_KEY_FIELD, PARTITION_PATH_FIELD, FILE_ID_COLUMN,
                           *[F.col(n).cast(t).alias(n) for n, t in types.items()])


def _check_pending_clustering(view: FileSystemView, groups: list[FileGroupId], reject: bool) -> None:
    pending: dict[str, list[FileGroupId]] = {}
    for gid in groups:
        inst = view.pending_clustering.instant_for(gid)
        if inst is not None:
            pending.setdefault(inst, []).append(gid)
    for inst, gids in sorted(pending.items()):
        names = ", ".join(f"{fid} ({p or 'root'})" for p, fid in sorted(gids)[:5])
        if reject:
            raise CommitConflictError(
                f"upsert refused: it updates {len(gids)} file group(s) in pending clustering plan {inst}: {names}"
                f"{' …' if len(gids) > 5 else ''} (updates to file groups under clustering are rejected; wait "
                "for the clustering to finish, or let ingestion win)")
        log.info("upsert updates file groups of a pending clustering plan; ingestion wins, the clustering will "
                 "roll back", clustering_instant=inst, file_groups=len(gids))


def _validator(table: HoodieTable, merged: dict[FileGroupId, MergedGroup], instant: str) -> Any:
    def validate() -> None:
        view = table.file_system_view(table.timeline())
        latest = {sl.group_id: sl.base_instant for sl in view.latest_file_slices()}
        for gid, g in merged.items():
            now = latest.get(gid)
            if now != g.base_file.instant_time:
                what = "was replaced (clustered)" if now is None else f"has a newer slice {now}"
                raise CommitConflictError(
                    f"upsert {instant}: file group {gid[1]} ({gid[0] or 'root'}) {what} since the upsert read "
                    f"slice {g.base_file.instant_time}; committing would lose that write, so the upsert is rolled "
                    "back; retry it")
    return validate


def upsert(spark: SparkSession, table: HoodieTable, df: DataFrame, *, extra_metadata: Mapping[str, str] | None = None,
           max_file_bytes: int | None = None, parallelism: int | None = None, compression: str | None = None,
           reject_updates_to_pending_clustering: bool = False, small_file_limit: int = 0,
           bloom: BloomSettings | None = None) -> str:
    """Update rows whose record keys exist and insert the others, as one UPSERT commit; returns its instant.

    See the module docstring. Raises ``CommitConflictError`` when rejected (nothing written) or when a merged
    file group was rewritten concurrently (rolled back); ``ExecutionError`` for Spark failures (rolled back)."""
    from pyspark import StorageLevel

    from hudi_clusterd.engine.files import write_file_groups
    from hudi_clusterd.engine.ingest.writer import (
        _output_partitions,
        abort_and_raise,
        prepare_insert,
        table_data_schema,
    )

    config = table.config
    config.check_writable(table.storage.full_path(PROPERTIES_FILE))
    if not table.storage.spark_readable:  # its index join reads the stored keys with Spark's own reader
        raise UnsupportedTableError(f"{table.base_path}: our writer upserts into tables Spark's readers can open "
                                    "(local, mounted, HDFS); on an object store it inserts only (use Apache "
                                    "Hudi's writer to upsert there)")
    if not config.populate_meta_fields:
        raise UnsupportedTableError(
            f"{table.base_path}: upsert needs the record keys stored in the files, but the table has "
            "hoodie.populate.meta.fields=false; use insert or bulk_insert")
    timeline = table.timeline()
    target = table_data_schema(table, timeline)
    rows, schema = prepare_insert(df, table, target)
    rows = deduplicate_last(rows, config.precombine_field).persist(StorageLevel.MEMORY_AND_DISK)
    tagged = None
    try:
        batch_rows = rows.count()
        partitions = sorted(str(r[0]) for r in rows.select(PARTITION_PATH_FIELD).distinct().collect())
        view = table.file_system_view(timeline)
        slices = [bf for p in partitions for bf in view.latest_base_files(p)]
        max_bytes = max_file_bytes or DEFAULT_MAX_FILE_BYTES
        tagged = tag_locations(spark, table, rows, slices, batch_rows).persist(StorageLevel.MEMORY_AND_DISK)
        counts = tagged.groupBy(PARTITION_PATH_FIELD, FILE_ID_COLUMN).count().collect()
        updated = {(str(r[0]), str(r[1])): int(r[2]) for r in counts if r[1] is not None}
        _check_pending_clustering(view, sorted(updated), reject_updates_to_pending_clustering)
        if small_file_limit > 0 and any(r[1] is None for r in counts):
            capacity = small_file_capacity(view, partitions, small_file_limit, max_bytes,
                                           average_record_bytes(table, timeline), set())
            if capacity:
                padded = _assign_small_files(spark, tagged, capacity).persist(StorageLevel.MEMORY_AND_DISK)
                tagged.unpersist()
                tagged = padded
                counts = tagged.groupBy(PARTITION_PATH_FIELD, FILE_ID_COLUMN).count().collect()
        by_id = {bf.group_id: bf for bf in slices}
        merged = {(str(r[0]), str(r[1])): MergedGroup(by_id[(str(r[0]), str(r[1]))], updated.get(
            (str(r[0]), str(r[1])), 0), int(r[2]) - updated.get((str(r[0]), str(r[1])), 0))
            for r in counts if r[1] is not None}
        n_inserts = sum(int(r[2]) for r in counts if r[1] is None)
        out_partitions = _output_partitions(spark, df, max_bytes, parallelism)
        parts: list[DataFrame] = []
        if merged:
            # a merge rewrites whole file groups: spread them over the cluster whatever the batch's size
            merge_tasks = parallelism or int(spark.conf.get("spark.sql.shuffle.partitions") or 1)
            parts.append(_merge_rows(spark, table, tagged, merged, schema, merge_tasks))
        if n_inserts:
            parts.append(_insert_rows(tagged, schema, out_partitions))
        handle = start_commit(table, extra=extra_metadata, operation=Operation.UPSERT)
        spec = BaseFileWriteSpec(
            storage=table.storage.spec, instant_time=handle.instant_time, data_schema=schema,
            avro_schema_json=arrow_to_avro_json(schema, config.name, with_meta_fields=True),
            populate_meta_fields=True, preserve_meta_fields=True, max_file_bytes=max_bytes,
            compression=compression or DEFAULT_COMPRESSION, **(bloom or BloomSettings()).spec_fields(),
        )
        try:
            stats: list[WriteStat] = []
            if parts:
                everything = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
                stats = _merge_stats(write_file_groups(everything, spec), merged, handle.instant_time)
            complete_commit(table, handle, stats, Operation.UPSERT, arrow_to_avro_json(schema, config.name),
                            validate=_validator(table, merged, handle.instant_time))
        except BaseException as e:
            abort_and_raise(table, handle, "upsert", e)
        log.info("upsert committed", instant=handle.instant_time, rows=batch_rows, file_groups_merged=len(merged),
                 updates=sum(updated.values()), inserts=batch_rows - sum(updated.values()))
        return handle.instant_time
    finally:
        if tagged is not None:
            tagged.unpersist()
        rows.unpersist()


def _merge_stats(stats: list[WriteStat], merged: dict[FileGroupId, MergedGroup], instant: str) -> list[WriteStat]:
    """Turn the stats of merged file groups into update stats; check each merged group got exactly one file."""
    out: list[WriteStat] = []
    seen: dict[FileGroupId, int] = {}
    for ws in stats:
        gid = (ws.partition_path or "", ws.file_id)
        g = merged.get(gid)
        if g is None:
            out.append(ws)
            continue
        seen[gid] = seen.get(gid, 0) + 1
        out.append(replace(ws, prev_commit=g.base_file.instant_time, num_update_writes=g.updates,
                           num_inserts=g.inserts))
    wrong = sorted(gid for gid in merged if seen.get(gid) != 1)
    if wrong:
        raise ExecutionError(f"upsert {instant}: file group {wrong[0][1]} ({wrong[0][0] or 'root'}) was written as "
                             f"{seen.get(wrong[0], 0)} files instead of one new slice")
    return out
