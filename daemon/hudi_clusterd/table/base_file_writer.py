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
- writes Hudi's footers: ``hoodie_min_record_key``/``hoodie_max_record_key`` and the record-key bloom filter
  ``org.apache.hudi.bloomfilter`` with ``hoodie_bloom_filter_type_code`` (``hudi_clusterd.formats.bloom``, built from
  the file's keys in row order, bit for bit as Hudi builds it), ``parquet.avro.schema`` (the Avro schema with meta
  fields) and ``writer.model.name=avro``. Without populated meta fields it writes neither key footers nor a bloom
  filter, as Hudi does (``HoodieFileWriterFactory.enableBloomFilter`` requires populated meta fields: Hudi's
  BLOOM indexes cannot be used on such tables).

It is plain pyarrow over a ``Storage``, so it is tested without Spark; ``hudi_clusterd.engine.ingest.writer`` runs it
in ``mapInArrow`` tasks.
"""

from __future__ import annotations

import itertools
import math
import uuid
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.formats.avro_schema import (
    COMMIT_SEQNO_FIELD,
    COMMIT_TIME_FIELD,
    FILE_NAME_FIELD,
    META_FIELDS,
    PARTITION_PATH_FIELD,
    RECORD_KEY_FIELD,
)
from hudi_clusterd.storage import Storage, open_storage
from hudi_clusterd.table.base_file import (
    AVRO_SCHEMA_FOOTER,
    BALANCE_TOLERANCE,
    DEFAULT_COMPRESSION,
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_ROW_GROUP_BYTES,
    FILE_ID_COLUMN,
    MAX_RECORD_KEY_FOOTER,
    MIN_RECORD_KEY_FOOTER,
    WRITER_MODEL_FOOTER,
    BaseFileWriteSpec,
    OpenBaseFile,
    TaskIds,
    WrittenFile,
    arrow_bytes,
    constant_strings,
)
from hudi_clusterd.table.markers import IOType

__all__ = [
    "AVRO_SCHEMA_FOOTER",
    "DEFAULT_COMPRESSION",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_ROW_GROUP_BYTES",
    "FILE_ID_COLUMN",
    "MAX_RECORD_KEY_FOOTER",
    "MIN_RECORD_KEY_FOOTER",
    "WRITER_MODEL_FOOTER",
    "BaseFileTaskWriter",
    "BaseFileWriteSpec",
    "TaskIds",
    "WrittenFile",
    "arrow_bytes",
    "constant_strings",
]


class BaseFileTaskWriter:
    """Writes the rows of one task into rolling base files; ``write`` yields each file once it is closed."""

    def __init__(self, spec: BaseFileWriteSpec, task: TaskIds, storage: Storage | None = None,
                 file_id_prefix: str | None = None) -> None:
        self.spec = spec
        self.task = task
        self.storage = storage if storage is not None else open_storage(spec.storage)
        self.prefix = file_id_prefix or str(uuid.uuid4())
        self.files_opened = 0
        self.row_index = 0
        self.ratio = 1.0  # on-disk bytes per in-memory Arrow byte, learned as row groups are written
        self.flushed_rows = 0
        self.flushed_arrow_bytes = 0
        self.current: OpenBaseFile | None = None

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
            self.current = OpenBaseFile(self.storage, self.spec, partition, file_id, self.task.token, IOType.MERGE,
                                     fixed=True)
        current = self.current
        current.add(self._with_file_name(batch, current.name))
        if current.pending_bytes >= self.spec.row_group_bytes:
            self._flush(current)

    def _room(self, current: OpenBaseFile, limit: float) -> float:
        """In-memory Arrow bytes that still fit in the current file."""
        return (limit - current.written_bytes) / self.ratio - current.pending_bytes

    def _open(self, partition: str) -> None:
        file_id = f"{self.prefix}-{self.files_opened}"
        self.files_opened += 1
        self.current = OpenBaseFile(self.storage, self.spec, partition, file_id, self.task.token)

    def _flush(self, current: OpenBaseFile) -> None:
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
