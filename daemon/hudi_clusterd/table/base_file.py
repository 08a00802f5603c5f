"""One Hudi base file as a task writes it: the write spec shared by a task's files, the file being written
(row groups, record-key range, bloom filter, footers) and what is reported once it is closed."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hudi_clusterd.domain.commit import NULL_COMMIT, RuntimeStats, WriteStat
from hudi_clusterd.domain.file_group import base_file_name, join_partition, write_token
from hudi_clusterd.errors import BloomFilterError, ExecutionError
from hudi_clusterd.formats.avro_schema import (
    FILE_NAME_FIELD,
    META_FIELDS,
    RECORD_KEY_FIELD,
    meta_arrow_fields,
)
from hudi_clusterd.formats.bloom import (
    DEFAULT_DYNAMIC_MAX_ENTRIES,
    DEFAULT_FPP,
    DEFAULT_NUM_ENTRIES,
    BloomFilterType,
    HudiBloomFilter,
)
from hudi_clusterd.storage import Storage, StorageSpec
from hudi_clusterd.table.markers import IOType, create_marker
from hudi_clusterd.table.partition_metadata import ensure_partition_metadata

DEFAULT_MAX_FILE_BYTES = 120 * 1024 * 1024  # hoodie.parquet.max.file.size
DEFAULT_ROW_GROUP_BYTES = 64 * 1024 * 1024  # in-memory Arrow bytes buffered per row group
DEFAULT_COMPRESSION = "gzip"  # hoodie.parquet.compression.codec (Hudi 0.14 default)
MIN_RECORD_KEY_FOOTER = "hoodie_min_record_key"
MAX_RECORD_KEY_FOOTER = "hoodie_max_record_key"
AVRO_SCHEMA_FOOTER = "parquet.avro.schema"
WRITER_MODEL_FOOTER = "writer.model.name"
BALANCE_TOLERANCE = 1.05
"""How far over the target a file may grow when a task's output is balanced over equal files."""
FILE_ID_COLUMN = "__hudi_file_id"  # optional input column: write these rows as a new slice of this file group


@dataclass(frozen=True, slots=True)
class BaseFileWriteSpec:
    """Everything a task needs to write base files of one instant (picklable; shipped to executors)."""

    storage: StorageSpec | str  # the table's storage as the task opens it (`open_storage`): a spec, a path or a URI
    instant_time: str
    data_schema: pa.Schema  # the table's data columns (no meta columns), in file order
    avro_schema_json: str  # the Avro schema *with* meta fields, for ``parquet.avro.schema``
    populate_meta_fields: bool = True
    preserve_meta_fields: bool = False  # clustering, upsert merges: keep commit time, seqno (null: generate)
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES
    compression: str = DEFAULT_COMPRESSION
    partition_path: str | None = None  # every row's partition, for rows without a partition-path column
    expected_task_rows: int | None = None  # rows each task should receive (an estimate): balances file sizes
    dictionary_columns: tuple[str, ...] | None = None  # leaf columns (dotted paths) to dictionary-encode; None: all
    # the record-key bloom filter (written only with populate_meta_fields), Hudi's settings and defaults:
    bloom_filter_enabled: bool = True  # hoodie.parquet.bloom.filter.enabled (0.15+; always on with a BLOOM index)
    bloom_filter_type: str = BloomFilterType.DYNAMIC_V0.value  # hoodie.bloom.index.filter.type
    bloom_num_entries: int = DEFAULT_NUM_ENTRIES  # hoodie.index.bloom.num_entries
    bloom_fpp: float = DEFAULT_FPP  # hoodie.index.bloom.fpp
    bloom_dynamic_max_entries: int = DEFAULT_DYNAMIC_MAX_ENTRIES  # hoodie.bloom.index.filter.dynamic.max.entries

    @property
    def file_schema(self) -> pa.Schema:
        return pa.schema(meta_arrow_fields() + list(self.data_schema))


@dataclass(frozen=True, slots=True)
class TaskIds:
    """The Spark task writing: its partition id, stage id and attempt id (Hudi's write token)."""

    partition_id: int
    stage_id: int
    attempt_id: int

    @property
    def token(self) -> str:
        return write_token(self.partition_id, self.stage_id, self.attempt_id)


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """One finished base file."""

    file_id: str
    path: str  # relative to the base path
    partition_path: str
    num_rows: int
    size: int
    create_time_ms: int

    def to_write_stat(self) -> WriteStat:
        """A new file group's write stat, as Hudi records inserts."""
        return WriteStat(
            file_id=self.file_id, path=self.path, partition_path=self.partition_path, prev_commit=NULL_COMMIT,
            num_writes=self.num_rows, num_inserts=self.num_rows, total_write_bytes=self.size,
            file_size_in_bytes=self.size, runtime_stats=RuntimeStats(total_create_time=self.create_time_ms),
        )


def constant_strings(value: str, n: int) -> pa.Array:
    """A string array of ``n`` copies of ``value`` built from buffers (no Python loop)."""
    raw = value.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int64) * len(raw)
    if offsets[-1] >= 2**31:
        return pa.array([value] * n, type=pa.string())
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32).tobytes()), pa.py_buffer(raw * n))


class OpenBaseFile:
    """One base file being written: buffered batches become row groups."""

    def __init__(self, storage: Storage, spec: BaseFileWriteSpec, partition: str, file_id: str, token: str,
                 io_type: IOType = IOType.CREATE, fixed: bool = False) -> None:
        self.started = time.monotonic()
        self.storage = storage
        self.spec = spec
        self.bloom: HudiBloomFilter | None = None
        if spec.populate_meta_fields and spec.bloom_filter_enabled:  # before the marker: bad settings leave nothing
            try:
                self.bloom = HudiBloomFilter.create(spec.bloom_filter_type, spec.bloom_num_entries, spec.bloom_fpp,
                                                    spec.bloom_dynamic_max_entries)
            except BloomFilterError as e:
                raise ExecutionError(f"write of {spec.instant_time}: {e}") from e
        self.partition = partition
        self.file_id = file_id
        self.name = base_file_name(file_id, token, spec.instant_time)
        self.rel = join_partition(partition, self.name)
        ensure_partition_metadata(storage, partition, spec.instant_time)
        self.fixed = fixed  # a new slice of an existing file group: never rolled over
        create_marker(storage, spec.instant_time, partition, self.name, io_type)
        self.stream = storage.open_output(self.rel)
        dictionary = True if spec.dictionary_columns is None else list(spec.dictionary_columns)
        self.writer = pq.ParquetWriter(self.stream, spec.file_schema, compression=spec.compression,
                                       store_schema=False, use_dictionary=dictionary)
        self.pending: list[pa.RecordBatch] = []
        self.pending_bytes = 0
        self.flushed_arrow_bytes = 0
        self.rows = 0
        self.row_groups = 0
        self.min_key: str | None = None
        self.max_key: str | None = None

    @property
    def written_bytes(self) -> int:
        """Bytes written so far plus the footer the file will end with (a file's size is both)."""
        return int(self.stream.tell()) + self.footer_bytes

    @property
    def footer_bytes(self) -> int:
        """An estimate of the footer: the Avro schema and record-key footers, and the metadata of every column
        chunk (about 100 bytes each). Noise for files of megabytes, but a sixth of a file of 40 KB.

        The bloom filter footer is left out, as Hudi leaves it out of its file sizing: with Hudi's defaults it is a
        fixed 431 KB (862 KB past 60,000 keys), under 1% of a 120 MB file but larger than any small target."""
        chunks = (self.row_groups + 1) * len(self.spec.file_schema)
        return len(self.spec.avro_schema_json) + 2 * len(self.max_key or "") + 100 * chunks

    def add(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.pending_bytes += arrow_bytes(batch)
        self.rows += batch.num_rows
        if self.spec.populate_meta_fields:
            keys = batch.column(META_FIELDS.index(RECORD_KEY_FIELD))
            mm = pc.min_max(keys)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if lo is not None:
                self.min_key = lo if self.min_key is None else min(self.min_key, lo)
                self.max_key = hi if self.max_key is None else max(self.max_key, hi)
            if self.bloom is not None:  # null keys are left out, as they are of the min/max footers
                try:
                    self.bloom.add(pc.drop_null(keys) if keys.null_count else keys)
                except BloomFilterError as e:
                    raise ExecutionError(f"write of {self.spec.instant_time}, file {self.rel}: {e}") from e

    def flush(self) -> None:
        if not self.pending:
            return
        table = pa.Table.from_batches(self.pending, schema=self.spec.file_schema)
        self.writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self.row_groups += 1
        self.flushed_arrow_bytes += self.pending_bytes
        self.pending = []
        self.pending_bytes = 0

    def close(self) -> WrittenFile:
        self.flush()
        footers = {AVRO_SCHEMA_FOOTER: self.spec.avro_schema_json, WRITER_MODEL_FOOTER: "avro"}
        if self.spec.populate_meta_fields and self.min_key is not None and self.max_key is not None:
            footers = {MIN_RECORD_KEY_FOOTER: self.min_key, MAX_RECORD_KEY_FOOTER: self.max_key, **footers}
        if self.bloom is not None:
            footers = {**self.bloom.footers(), **footers}
        self.writer.add_key_value_metadata(footers)
        self.writer.close()
        self.stream.close()
        info = self.storage.info(self.rel)
        size = info.size if info is not None else 0
        return WrittenFile(self.file_id, self.rel, self.partition, self.rows, size,
                           int((time.monotonic() - self.started) * 1000))

    def abandon(self) -> None:
        """Close quietly after a failure; the file stays behind with its marker for the rollback."""
        with contextlib.suppress(Exception):
            self.writer.close()
        with contextlib.suppress(Exception):
            self.stream.close()


def arrow_bytes(batch: pa.RecordBatch) -> int:
    """A file batch's Arrow bytes as sizes are reckoned here: without ``_hoodie_file_name``, one value repeated on
    every row, which parquet stores in a few bytes but Arrow holds in full (counted, it would shrink the row
    groups by a third on narrow tables)."""
    return int(batch.nbytes - batch.column(META_FIELDS.index(FILE_NAME_FIELD)).nbytes)
