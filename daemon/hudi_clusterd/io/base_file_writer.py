"""Writes Hudi base files from Arrow batches: the part of a write that runs inside one Spark task.

Given the rows of one task, already grouped by partition path (and ordered as they should be stored), it:

- opens one new file group per partition path: file id ``<prefix>-<n>`` (one random prefix per task, ``n``
  counting the files of the task), write token ``<taskPartitionId>-<stageId>-<taskAttemptId>``, file name
  ``<fileId>_<writeToken>_<instant>.parquet``;
- or, for rows whose ``FILE_ID_COLUMN`` (``__hudi_file_id``) is set, a new slice of that existing file group
  (an upsert's copy-on-write merge): one file per run of equal file ids, marker type MERGE, no roll-over;
- ensures ``.hoodie_partition_metadata`` and creates the file's DIRECT marker *before* the file;
- fills the five meta columns first: generated for ingestion (``_hoodie_commit_seqno`` =
  ``<instant>_<taskPartitionId>_<rowIndexInTask>``), or preserved for clustering and for rows an upsert carries
  over (only ``_hoodie_file_name`` is rewritten; a row whose commit time is null is new and gets generated
  values), or all null but the file name when the table does not populate meta fields (as Hudi does);
- casts the data columns to the table's file schema (by name, nested too);
- rolls over to a new file group once the file reaches ``max_file_bytes`` (estimated from the compression
  ratio observed so far, so files land close to the target); when told how many rows the task should get
  (``expected_task_rows``), it splits the task's predicted output into equal files instead, so a task whose
  output is 1.3 times the target writes two files of 0.65, not one full file and a small remainder;
- writes Hudi's footers: ``hoodie_min_record_key``/``hoodie_max_record_key`` (when meta fields are populated),
  ``parquet.avro.schema`` (the Avro schema with meta fields) and ``writer.model.name=avro``.

It is plain pyarrow over a ``Storage``, so it is tested without Spark; ``hudi_clusterd.engine.ingest.writer`` runs it
in ``mapInArrow`` tasks.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hudi_clusterd.domain.commit import NULL_COMMIT, RuntimeStats, WriteStat
from hudi_clusterd.domain.file_group import base_file_name, join_partition, write_token
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.io.avro_schema import (
    COMMIT_SEQNO_FIELD,
    COMMIT_TIME_FIELD,
    FILE_NAME_FIELD,
    META_FIELDS,
    PARTITION_PATH_FIELD,
    RECORD_KEY_FIELD,
    meta_arrow_fields,
)
from hudi_clusterd.io.markers import IOType, create_marker
from hudi_clusterd.io.partition_metadata import ensure_partition_metadata
from hudi_clusterd.io.storage import Storage

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

    base_path: str  # as ``Storage`` takes it on the executor (an absolute local path or a URI)
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


class _OpenFile:
    """One base file being written: buffered batches become row groups."""

    def __init__(self, storage: Storage, spec: BaseFileWriteSpec, partition: str, file_id: str, token: str,
                 io_type: IOType = IOType.CREATE, fixed: bool = False) -> None:
        self.started = time.monotonic()
        self.storage = storage
        self.spec = spec
        self.partition = partition
        self.file_id = file_id
        self.name = base_file_name(file_id, token, spec.instant_time)
        self.rel = join_partition(partition, self.name)
        ensure_partition_metadata(storage, partition, spec.instant_time)
        self.fixed = fixed  # a new slice of an existing file group: never rolled over
        create_marker(storage, spec.instant_time, partition, self.name, io_type)
        self.stream = storage.fs.open_output_stream(storage.full_path(self.rel))
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
        chunk (about 100 bytes each). Noise for files of megabytes, but a sixth of a file of 40 KB."""
        chunks = (self.row_groups + 1) * len(self.spec.file_schema)
        return len(self.spec.avro_schema_json) + 2 * len(self.max_key or "") + 100 * chunks

    def add(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.pending_bytes += arrow_bytes(batch)
        self.rows += batch.num_rows
        if self.spec.populate_meta_fields:
            mm = pc.min_max(batch.column(META_FIELDS.index(RECORD_KEY_FIELD)))
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if lo is not None:
                self.min_key = lo if self.min_key is None else min(self.min_key, lo)
                self.max_key = hi if self.max_key is None else max(self.max_key, hi)

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


class BaseFileTaskWriter:
    """Writes the rows of one task into rolling base files; ``write`` yields each file once it is closed."""

    def __init__(self, spec: BaseFileWriteSpec, task: TaskIds, storage: Storage | None = None,
                 file_id_prefix: str | None = None) -> None:
        self.spec = spec
        self.task = task
        self.storage = storage if storage is not None else Storage(spec.base_path)
        self.prefix = file_id_prefix or str(uuid.uuid4())
        self.files_opened = 0
        self.row_index = 0
        self.ratio = 1.0  # on-disk bytes per in-memory Arrow byte, learned as row groups are written
        self.flushed_rows = 0
        self.flushed_arrow_bytes = 0
        self.current: _OpenFile | None = None

    def write(self, batches: Iterable[pa.RecordBatch]) -> Iterator[WrittenFile]:
        try:
            for batch in batches:
                if batch.num_rows:
                    yield from self._write_batch(batch)
            if self.current is not None:
                yield self._close()
        except BaseException:
            if self.current is not None:
                self.current.abandon()
                self.current = None
            raise

    # --- internals -----------------------------------------------------------------------------------------

    def _write_batch(self, batch: pa.RecordBatch) -> Iterator[WrittenFile]:
        names = batch.schema.names
        if PARTITION_PATH_FIELD not in names and self.spec.partition_path is not None:
            batch = batch.append_column(PARTITION_PATH_FIELD,
                                        constant_strings(self.spec.partition_path, batch.num_rows))
            names = batch.schema.names
        if PARTITION_PATH_FIELD not in names:
            raise ExecutionError(f"write of {self.spec.instant_time}: the rows have no {PARTITION_PATH_FIELD} column")
        partitions = batch.column(names.index(PARTITION_PATH_FIELD))
        if partitions.null_count:
            raise ExecutionError(f"write of {self.spec.instant_time}: a row has a null partition path")
        file_ids = batch.column(names.index(FILE_ID_COLUMN)) if FILE_ID_COLUMN in names else None
        keys = partitions if file_ids is None else pc.binary_join_element_wise(
            partitions.cast(pa.string()), pc.fill_null(file_ids.cast(pa.string()), ""), "\x00")
        for start, end in _runs(keys):
            partition = str(partitions[start].as_py())
            file_id = None if file_ids is None else file_ids[start].as_py()
            current = self.current
            if current is not None and (current.partition != partition or current.fixed != (file_id is not None)
                                        or (file_id is not None and current.file_id != file_id)):
                yield self._close()
            rows = batch.slice(start, end - start)
            if file_id is None:
                yield from self._append(partition, self._file_batch(rows))
            else:
                self._append_to_slice(partition, str(file_id), self._file_batch(rows))

    def _append(self, partition: str, batch: pa.RecordBatch) -> Iterator[WrittenFile]:
        """Add rows to the current file, rolling over to a new file group at the file's size limit.

        When rows do not fit by the current estimate, the pending rows are written first so the compression
        ratio is measured, then the decision is made again; a file closes once less than 5% of it is left."""
        while batch.num_rows:
            if self.current is None:
                self._open(partition)
            current = self.current
            assert current is not None
            limit = self._file_limit()
            room = self._room(current, limit)
            size = arrow_bytes(batch)
            if size > room and current.pending:
                self._flush(current)
                limit = self._file_limit()
                room = self._room(current, limit)
            if current.rows and room <= self._slack() * limit / self.ratio:
                yield self._close()
                continue
            take = batch.num_rows
            if size > room:
                take = max(1, min(batch.num_rows, int(batch.num_rows * max(room, 0.0) / max(size, 1))))
            group_room = self.spec.row_group_bytes - current.pending_bytes
            if size > group_room:  # a batch larger than a row group is cut into row groups
                take = min(take, max(1, int(batch.num_rows * group_room / max(size, 1))))
            current.add(self._with_file_name(batch.slice(0, take), current.name))
            batch = batch.slice(take)
            if current.pending_bytes >= self.spec.row_group_bytes:
                self._flush(current)
                if current.written_bytes >= self._file_limit():
                    yield self._close()

    def _file_limit(self) -> float:
        """On-disk bytes at which the current file closes.

        ``max_file_bytes``, unless the spec tells how many rows the task should get: then, once a row group
        has taught the bytes per row, the task's predicted output is cut into the fewest equal files of at most
        ``BALANCE_TOLERANCE`` times the target (a prediction 2% over the target gives one file, not two halves),
        and the last of them takes whatever comes, up to that bound."""
        planned = self._planned_files()
        if planned is None:
            return self.spec.max_file_bytes
        bound = self.spec.max_file_bytes * BALANCE_TOLERANCE
        if self.files_opened >= planned:
            return bound
        return min(bound, self._predicted_bytes() / planned)

    def _predicted_bytes(self) -> float:
        assert self.spec.expected_task_rows
        per_row = self.flushed_arrow_bytes / self.flushed_rows * self.ratio
        return self.spec.expected_task_rows * per_row

    def _planned_files(self) -> int | None:
        """How many files this task's balanced output makes; None when not balancing (yet)."""
        if not self.spec.expected_task_rows or not self.flushed_rows:
            return None
        return max(1, math.ceil(self._predicted_bytes() / (self.spec.max_file_bytes * BALANCE_TOLERANCE)))

    def _slack(self) -> float:
        """Share of the limit left unused when a file closes early rather than take a sliver of a batch: 5%,
        but 1% for the last planned file of a balanced task, whose tail would otherwise start a tiny file."""
        planned = self._planned_files()
        return 0.01 if planned is not None and self.files_opened >= planned else 0.05

    def _append_to_slice(self, partition: str, file_id: str, batch: pa.RecordBatch) -> None:
        """Rows of the new slice of file group ``file_id``; every row of that slice must come to this task, in
        one run (possibly over several batches). The file is closed when the run ends."""
        if self.current is None:
            self.current = _OpenFile(self.storage, self.spec, partition, file_id, self.task.token, IOType.MERGE,
                                     fixed=True)
        current = self.current
        current.add(self._with_file_name(batch, current.name))
        if current.pending_bytes >= self.spec.row_group_bytes:
            self._flush(current)

    def _room(self, current: _OpenFile, limit: float) -> float:
        """In-memory Arrow bytes that still fit in the current file."""
        return (limit - current.written_bytes) / self.ratio - current.pending_bytes

    def _open(self, partition: str) -> None:
        file_id = f"{self.prefix}-{self.files_opened}"
        self.files_opened += 1
        self.current = _OpenFile(self.storage, self.spec, partition, file_id, self.task.token)

    def _flush(self, current: _OpenFile) -> None:
        before = current.written_bytes
        arrow = current.pending_bytes
        rows = sum(b.num_rows for b in current.pending)
        current.flush()
        if arrow > 0:
            observed = (current.written_bytes - before) / arrow
            self.ratio = max(observed, 0.01)
            self.flushed_rows += rows
            self.flushed_arrow_bytes += arrow

    def _close(self) -> WrittenFile:
        assert self.current is not None
        current, self.current = self.current, None
        self._flush(current)
        return current.close()

    def _file_batch(self, rows: pa.RecordBatch) -> pa.RecordBatch:
        """Rows in file schema order: meta columns (file name filled later), then data columns cast."""
        n = rows.num_rows
        spec = self.spec
        names = rows.schema.names

        def column(name: str) -> pa.Array:
            if name not in names:
                raise ExecutionError(f"write of {spec.instant_time}: the rows have no {name} column")
            arr = rows.column(names.index(name))
            return arr.cast(pa.string()) if arr.type != pa.string() else arr

        if not spec.populate_meta_fields:
            meta = [pa.nulls(n, pa.string())] * 4
        else:
            seq = pc.cast(pa.array(np.arange(self.row_index, self.row_index + n, dtype=np.int64)), pa.string())
            prefix = f"{spec.instant_time}_{self.task.partition_id}_"
            new_time, new_seqno = constant_strings(spec.instant_time, n), pc.binary_join_element_wise(prefix, seq, "")
            if spec.preserve_meta_fields:
                old_time, old_seqno = column(COMMIT_TIME_FIELD), column(COMMIT_SEQNO_FIELD)
                if old_time.null_count:  # rows new in this commit (an upsert's updates and inserts)
                    fresh = pc.is_null(old_time)
                    old_time = pc.if_else(fresh, new_time, old_time)
                    old_seqno = pc.if_else(fresh, new_seqno, old_seqno)
                new_time, new_seqno = old_time, old_seqno
            meta = [new_time, new_seqno, column(RECORD_KEY_FIELD), column(PARTITION_PATH_FIELD)]
        self.row_index += n
        data: list[pa.Array] = []
        for field in spec.data_schema:
            if field.name not in names:
                raise ExecutionError(f"write of {spec.instant_time}: column {field.name!r} is missing from the rows")
            arr = rows.column(names.index(field.name))
            if arr.type != field.type:
                try:
                    arr = arr.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise ExecutionError(f"column {field.name!r}: cannot convert {arr.type} to the table's "
                                         f"{field.type}: {e}") from e
            if not field.nullable and arr.null_count:
                raise ExecutionError(f"column {field.name!r} is required by the table's schema but has nulls")
            data.append(arr)
        return pa.RecordBatch.from_arrays([*meta, pa.nulls(n, pa.string()), *data], schema=spec.file_schema)

    @staticmethod
    def _with_file_name(batch: pa.RecordBatch, name: str) -> pa.RecordBatch:
        idx = META_FIELDS.index(FILE_NAME_FIELD)
        return batch.set_column(idx, batch.schema.field(idx), constant_strings(name, batch.num_rows))


def arrow_bytes(batch: pa.RecordBatch) -> int:
    """A file batch's Arrow bytes as sizes are reckoned here: without ``_hoodie_file_name``, one value repeated on
    every row, which parquet stores in a few bytes but Arrow holds in full (counted, it would shrink the row
    groups by a third on narrow tables)."""
    return int(batch.nbytes - batch.column(META_FIELDS.index(FILE_NAME_FIELD)).nbytes)


def _runs(values: pa.Array) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each run of equal consecutive values."""
    n = len(values)
    if n == 0:
        return
    if n == 1:
        yield 0, 1
        return
    changed = pc.not_equal(values.slice(1), values.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    bounds = [0, *(np.flatnonzero(changed) + 1).tolist(), n]
    yield from itertools.pairwise(bounds)
