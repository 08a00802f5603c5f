"""A Structured Streaming sink for ``foreachBatch``: one Hudi commit per non-empty micro-batch, exactly once.

    query = (spark.readStream.parquet(src)
             .writeStream.foreachBatch(HudiStreamingSink(base_path, record_key="id", partition_by=["dt"]))
             .option("checkpointLocation", ckpt).start())

Exactly-once across crashes rests on three things:

- every commit records the writer identifier (the streaming query id, stable across restarts from the same
  checkpoint, or a user-supplied one) and the batch id: Hudi's ``_hudi_streaming_sink_checkpoint``
  (``{"<identifier>": "<batchId>"}``) plus our own keys, in both the inflight profile and the commit;
- a batch whose id is not newer than the last committed one for this identifier is skipped (Spark replays the
  last batch after a crash that happened after our commit but before its own checkpoint);
- on the first batch after a (re)start, this writer's own pending instants are crash leftovers and are rolled
  back at once, so the replayed batch is written again cleanly.

The table is created on first use when absent (record key required then). ``operation="upsert"`` merges
each micro-batch into the table (``hudi_clusterd.engine.ingest.upsert``); with
``reject_updates_to_pending_clustering`` a batch that updates file groups under a pending clustering plan fails
(Hudi's default behaviour for streaming writers) instead of winning over the clustering.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import structlog

from hudi_clusterd.domain.instant import Action, Instant
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.errors import ConfigError, MetadataDecodeError, TableError
from hudi_clusterd.formats.avro_schema import arrow_to_avro_json, sanitize_name
from hudi_clusterd.formats.bloom import BloomSettings
from hudi_clusterd.lock import lock_provider_from_properties
from hudi_clusterd.storage import open_storage, table_storage_spec
from hudi_clusterd.table.hoodie_table import PROPERTIES_FILE, HoodieTable
from hudi_clusterd.table.write_client import rollback_failed_writes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = structlog.get_logger(__name__)

SINK_CHECKPOINT_KEY = "_hudi_streaming_sink_checkpoint"
QUERY_ID_KEY = "hudi_clusterd.streaming.query_id"
BATCH_ID_KEY = "hudi_clusterd.streaming.batch_id"
DEFAULT_IDENTIFIER = "default_single_writer"  # hoodie.datasource.write.streaming.checkpoint.identifier


def last_committed_batch(table: HoodieTable, identifier: str) -> int | None:
    """The newest batch id committed for ``identifier`` (from completed commits, newest first)."""
    for inst in reversed(table.timeline().of_actions([Action.COMMIT]).completed().instants):
        batch = _batch_of(table, inst, identifier)
        if batch is not None:
            return batch
    return None


def _batch_of(table: HoodieTable, inst: Instant, identifier: str) -> int | None:
    try:
        extra = table.timeline_store.commit_metadata(inst).extra_metadata
    except MetadataDecodeError:
        return None
    raw = extra.get(SINK_CHECKPOINT_KEY)
    if raw:
        try:
            value = json.loads(raw).get(identifier)
            if value is not None:
                return int(value)
        except (ValueError, AttributeError, TypeError):
            pass
    if extra.get(QUERY_ID_KEY) == identifier and extra.get(BATCH_ID_KEY, "").isdigit():
        return int(extra[BATCH_ID_KEY])
    return None


class HudiStreamingSink:
    """``foreachBatch`` target writing each micro-batch as one commit of a Hudi v6 copy-on-write table."""

    def __init__(
        self,
        base_path: str,
        *,
        record_key: str | Sequence[str] | None = None,
        partition_by: Sequence[str] = (),
        precombine: str | None = None,
        table_name: str | None = None,
        hive_style: bool = False,
        url_encode: bool = False,
        operation: str = "insert",
        identifier: str | None = None,
        max_file_bytes: int | None = None,
        parallelism: int | None = None,
        reject_updates_to_pending_clustering: bool = False,
        small_file_limit: int = 0,
        bloom: BloomSettings | None = None,
        lock_properties: Mapping[str, str] | None = None,
    ) -> None:
        if operation not in ("insert", "bulk_insert", "upsert"):
            raise ConfigError(f"unknown write operation {operation!r} (expected insert, bulk_insert or upsert)")
        self.base_path = base_path
        self.record_key = [record_key] if isinstance(record_key, str) else list(record_key or [])
        self.partition_by = list(partition_by)
        self.precombine = precombine
        self.table_name = table_name
        self.hive_style = hive_style
        self.url_encode = url_encode
        self.operation = operation
        self.identifier = identifier
        self.max_file_bytes = max_file_bytes
        self.parallelism = parallelism
        self.reject_updates_to_pending_clustering = reject_updates_to_pending_clustering
        self.small_file_limit = small_file_limit
        self.bloom = bloom
        self.lock_properties = dict(lock_properties or {})
        """The table's ``hoodie.write.lock.*`` keys (and ``hoodie.aws.*`` credentials): the lock this writer shares
        with the daemon and other writers; none means the file lock in the table's ``.hoodie``."""
        self._table: HoodieTable | None = None
        self._last_batch: dict[str, int | None] = {}

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        from hudi_clusterd.engine.ingest.upsert import upsert
        from hudi_clusterd.engine.ingest.writer import insert

        spark = batch_df.sparkSession
        identifier = self._identifier(spark)
        table = self._open_or_create(batch_df)
        if identifier not in self._last_batch:
            self._recover(table, identifier)
        last = self._last_batch.get(identifier)
        if last is not None and batch_id <= last:
            log.info("skipping a micro-batch already committed", base_path=self.base_path, batch_id=batch_id,
                     last_committed=last, identifier=identifier)
            return
        if batch_df.isEmpty():
            log.debug("empty micro-batch, nothing to commit", batch_id=batch_id)
            return
        extra = {
            SINK_CHECKPOINT_KEY: json.dumps({identifier: str(batch_id)}, separators=(",", ":")),
            QUERY_ID_KEY: identifier,
            BATCH_ID_KEY: str(batch_id),
        }
        if self.operation == "upsert":
            instant = upsert(spark, table, batch_df, extra_metadata=extra, max_file_bytes=self.max_file_bytes,
                             parallelism=self.parallelism, small_file_limit=self.small_file_limit,
                             reject_updates_to_pending_clustering=self.reject_updates_to_pending_clustering,
                             bloom=self.bloom)
        else:
            instant = insert(spark, table, batch_df, operation=self.operation, extra_metadata=extra,
                             max_file_bytes=self.max_file_bytes, parallelism=self.parallelism, bloom=self.bloom)
        self._last_batch[identifier] = batch_id
        log.info("micro-batch committed", base_path=self.base_path, batch_id=batch_id, instant=instant)

    # --- internals -----------------------------------------------------------------------------------------

    def _identifier(self, spark: SparkSession) -> str:
        if self.identifier:
            return self.identifier
        query_id = spark.sparkContext.getLocalProperty("sql.streaming.queryId")
        if query_id:
            return str(query_id)
        log.warning("no streaming query id visible and no identifier given; using Hudi's default",
                    identifier=DEFAULT_IDENTIFIER)
        return DEFAULT_IDENTIFIER

    def _recover(self, table: HoodieTable, identifier: str) -> None:
        """First batch of this writer in this process: roll back its own unfinished instants, then learn the
        last batch it committed."""
        leftovers = rollback_failed_writes(
            table, select=lambda _inst, extra: extra.get(QUERY_ID_KEY) == identifier, ignore_heartbeat=True)
        for r in leftovers:
            log.warning("rolled back an unfinished commit of this streaming query", instant=r.instant_time,
                        files=len(r.deleted_files), identifier=identifier)
        self._last_batch[identifier] = last_committed_batch(table, identifier)

    def _open_or_create(self, batch_df: DataFrame) -> HoodieTable:
        if self._table is not None:
            return self._table
        storage = open_storage(table_storage_spec(self.base_path, self.lock_properties))
        lock = lock_provider_from_properties(self.lock_properties, storage) if self.lock_properties else None
        if storage.exists(PROPERTIES_FILE):
            self._table = HoodieTable.open(self.base_path, storage, lock_provider=lock)
            return self._table
        if not self.record_key:
            raise ConfigError(f"{self.base_path}: the table does not exist yet; a record key is needed to create it")
        from hudi_clusterd.engine.files import spark_arrow_schema

        name = self.table_name or sanitize_name(os.path.basename(self.base_path.rstrip("/")) or "hudi_table")
        config = TableConfig.for_new_table(
            name=name, record_key_fields=self.record_key, partition_fields=self.partition_by,
            precombine_field=self.precombine, hive_style=self.hive_style, url_encode=self.url_encode,
            create_schema=arrow_to_avro_json(spark_arrow_schema(batch_df), name),
        )
        try:
            HoodieTable.create(self.base_path, config, storage)
        except TableError:
            if not storage.exists(PROPERTIES_FILE):
                raise
            # created concurrently by another writer
        self._table = HoodieTable.open(self.base_path, storage, lock_provider=lock)
        return self._table
