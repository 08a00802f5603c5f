"""A clustering group's rows moved between Spark tasks as sorted Arrow runs instead of as Spark rows.

Why: a layout sort through Spark's own shuffle turns every row into a JVM row twice and back (pyarrow batches
from the reading Python workers into ``UnsafeRow``, the rows sorted one by one, then converted back into Arrow
for the Python writer). On the reference dataset (4M rows, two cores) those conversions and the row sort cost
more than reading, keying and writing together. Here the rows stay Arrow from the files to the writer; Spark's
shuffle only moves a few hundred large binary values, which is the part of the work it does well.

How (`exchange` builds the DataFrame, `SortedRuns.decode` undoes it in the writing tasks):

1. Each scan task (`scan.GroupScan.map_files`) reads its files, computes every row's range and key words
   (`RangeKeys`), buffers about `FLUSH_BYTES` of rows, sorts them by key (`key_order`) and cuts them into one
   *run* per range: an Arrow IPC stream, compressed with `RUN_CODEC`, of the rows and their key words
   (`cut_runs`). Rows of one range are contiguous in key order because ranges are cut by key.
2. One output row per run, ``(partition, range, run)`` with ``partition = range // ranges_per_partition``,
   goes through ``repartitionById``; within a partition the runs are sorted by range when a partition holds
   more than one range.
3. The writing task takes the runs of one range at a time (`merge_ranges`), merges them by key (each run is
   already sorted) and hands the rows on in order, key words dropped. It holds one range in memory: the caller
   picks ``ranges_per_partition`` so that a range stays near `RANGE_BYTES` (`ranges_per_partition`).

Every row is read once, compressed once and taken into order twice (in its run, then in its range). A retried
task recomputes the same runs (the scan's file assignment and the key function are fixed); Spark discards the
output of a failed attempt, so no row is lost or duplicated.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from hudi_clusterd.errors import ExecutionError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from hudi_clusterd.engine.clustering.scan import GroupScan
    from hudi_clusterd.engine.files import BatchFunction

MIB = 1024 * 1024
FLUSH_BYTES = 64 * MIB
"""Arrow bytes a scan task buffers before it sorts them and cuts them into runs (one run per range present)."""
RANGE_BYTES = 128 * MIB
"""Arrow bytes of one range, as the writing task holds it while merging (about three times this at peak)."""
RUN_CODEC = "zstd"
"""Compression of the runs: Spark moves every byte of them twice through a socket between a Python worker and
the JVM and once through its shuffle files, so halving them (zstd does on the reference dataset, at about a
fifth of a CPU second per 100 MB) saves more than it costs."""
KEY_PREFIX = "_hoodie_clusterd_key"
RUN_DDL = "partition int, range int, run binary"

RangeKeys = Callable[[pa.RecordBatch], tuple[np.ndarray, np.ndarray]]
"""For one batch of rows: each row's range (integers, non-decreasing in key order) and its key words, an
``(n, width)`` ``int64`` array whose lexicographic order is the layout order. Runs in the Python workers."""


def key_names(width: int) -> list[str]:
    """Names of the key-word columns carried inside runs."""
    return [f"{KEY_PREFIX}{i}" for i in range(width)]


def key_order(words: np.ndarray) -> np.ndarray:
    """The stable permutation that orders rows by their key words, most significant word first."""
    if words.ndim != 2 or words.shape[1] < 1:
        raise ValueError(f"key words must be an (n, width >= 1) array, got shape {words.shape}")
    if words.shape[1] == 1:
        return np.argsort(words[:, 0], kind="stable")  # timsort: merges presorted runs in O(n log runs)
    return np.lexsort(words.T[::-1])


def ranges_per_partition(rows: int, partitions: int, memory_bytes_per_row: float,
                         range_bytes: int = RANGE_BYTES) -> int:
    """Ranges each output partition is cut into so that one range holds about ``range_bytes`` of Arrow
    memory (at least one)."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    per_partition = rows / partitions * max(memory_bytes_per_row, 0.0)
    return max(1, math.ceil(per_partition / range_bytes))


def cut_runs(batches: Sequence[pa.RecordBatch], ranges: np.ndarray, words: np.ndarray
             ) -> list[tuple[int, pa.Buffer]]:
    """The rows of ``batches`` (one schema) with their key words appended, sorted by key and cut into one run
    per range: ``(range, IPC-serialized record batch)``, ranges ascending. ``ranges`` and ``words`` describe
    the rows of all batches in order."""
    n = sum(b.num_rows for b in batches)
    if ranges.shape != (n,) or words.shape[0] != n:
        raise ValueError(f"{n} rows but {ranges.shape[0]} ranges and {words.shape[0]} keys")
    if n == 0:
        return []
    table = pa.Table.from_batches(batches)
    for i, name in enumerate(key_names(words.shape[1])):
        table = table.append_column(name, pa.array(words[:, i], pa.int64()))
    order = key_order(words)
    ordered_ranges = np.asarray(ranges)[order]
    if np.any(ordered_ranges[1:] < ordered_ranges[:-1]):
        raise ExecutionError("layout keys and ranges disagree: a range is not contiguous in key order")
    batch = table.take(pa.array(order)).combine_chunks().to_batches()[0]
    starts = np.flatnonzero(np.diff(ordered_ranges)) + 1
    bounds = [0, *starts.tolist(), n]
    options = pa.ipc.IpcWriteOptions(compression=RUN_CODEC)
    return [(int(ordered_ranges[start]), _serialized(batch.slice(start, end - start), options))
            for start, end in itertools.pairwise(bounds)]


def _serialized(batch: pa.RecordBatch, options: pa.ipc.IpcWriteOptions) -> pa.Buffer:
    """One run: an Arrow IPC stream of ``batch`` (its schema, then the batch, compressed)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=options) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


def pack_runs(runs: Sequence[tuple[int, pa.Buffer]], per_partition: int) -> pa.RecordBatch:
    """Runs as rows of `RUN_DDL`: the output partition of each range, the range and the run's bytes."""
    sink = pa.BufferOutputStream()
    offsets = np.zeros(len(runs) + 1, np.int64)
    for i, (_, run) in enumerate(runs):
        sink.write(run)
        offsets[i + 1] = offsets[i] + run.size
    if offsets[-1] >= 2**31:
        raise ExecutionError(f"{offsets[-1]} bytes of runs in one batch; FLUSH_BYTES must stay below 2 GiB")
    data = sink.getvalue()
    blobs = pa.BinaryArray.from_buffers(pa.binary(), len(runs), [None, pa.py_buffer(offsets.astype(np.int32)), data])
    range_ids = np.array([r for r, _ in runs], np.int32)
    return pa.RecordBatch.from_arrays(
        [pa.array(range_ids // per_partition, pa.int32()), pa.array(range_ids, pa.int32()), blobs],
        names=["partition", "range", "run"],
    )


def task_runs(batches: Iterable[pa.RecordBatch], keys: RangeKeys, per_partition: int,
              flush_bytes: int = FLUSH_BYTES) -> Iterator[pa.RecordBatch]:
    """A scan task's rows as packed runs (`pack_runs`), one packed batch per ``flush_bytes`` of input."""
    buffered: list[pa.RecordBatch] = []
    ranges: list[np.ndarray] = []
    words: list[np.ndarray] = []
    size = 0

    def flush() -> pa.RecordBatch:
        runs = cut_runs(buffered, np.concatenate(ranges), np.concatenate(words))
        buffered.clear()
        ranges.clear()
        words.clear()
        return pack_runs(runs, per_partition)

    for batch in batches:
        if not batch.num_rows:
            continue
        batch_ranges, batch_words = keys(batch)
        buffered.append(batch)
        ranges.append(np.asarray(batch_ranges))
        words.append(batch_words)
        size += batch.nbytes + batch_words.nbytes
        if size >= flush_bytes:
            yield flush()
            size = 0
    if buffered:
        yield flush()


def _run_buffers(column: pa.BinaryArray) -> list[pa.Buffer]:
    """Each value of a binary column as a zero-copy buffer."""
    offsets = np.frombuffer(column.buffers()[1], np.int32)[column.offset: column.offset + len(column) + 1]
    data = column.buffers()[2]
    if data is None:
        return [pa.py_buffer(b"") for _ in range(len(column))]
    return [data.slice(int(start), int(end - start)) for start, end in itertools.pairwise(offsets)]


def _merged(runs: list[pa.Table], width: int) -> Iterator[pa.RecordBatch]:
    table = pa.concat_tables(runs)
    names = key_names(width)
    words = np.column_stack([table.column(name).to_numpy() for name in names])
    order = key_order(words)
    yield from table.drop_columns(names).take(pa.array(order)).combine_chunks().to_batches()


def merge_ranges(batches: Iterable[pa.RecordBatch], width: int) -> Iterator[pa.RecordBatch]:
    """The rows of the runs in ``batches`` (`RUN_DDL` rows, ranges non-decreasing), in key order, one range at
    a time, without the ``width`` key words."""
    pending: list[pa.Table] = []
    current: int | None = None
    for batch in batches:
        range_ids = batch.column("range").to_numpy(zero_copy_only=False)
        for range_id, blob in zip(range_ids.tolist(), _run_buffers(batch.column("run")), strict=True):
            if current is not None and range_id != current:
                if range_id < current:
                    raise ExecutionError(f"runs arrived out of order: range {range_id} after range {current}")
                yield from _merged(pending, width)
                pending = []
            current = range_id
            try:
                pending.append(pa.ipc.open_stream(blob).read_all())
            except pa.ArrowException as e:
                raise ExecutionError(f"a run of range {range_id} cannot be read back: {e}") from e
    if pending:
        yield from _merged(pending, width)


@dataclass(frozen=True, slots=True)
class SortedRuns:
    """A group's rows as runs (`RUN_DDL`), one Spark partition per output partition, ranges ascending.

    A run holds rows of ``row_schema`` (Spark's) followed by ``width`` key words."""

    frame: DataFrame
    width: int
    row_schema: StructType

    def decode(self) -> BatchFunction:
        """A ``mapInArrow`` function turning this frame's partitions back into rows, in layout order."""
        width = self.width

        def rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return merge_ranges(batches, width)

        return rows

    def rows(self) -> DataFrame:
        """The rows as a DataFrame, partitioned and ordered as the writer receives them."""
        return self.frame.mapInArrow(self.decode(), self.row_schema)


def exchange(scan: GroupScan, keys: RangeKeys, width: int, partitions: int, per_partition: int = 1,
             flush_bytes: int = FLUSH_BYTES) -> SortedRuns:
    """The scanned group's rows in ``partitions`` Spark partitions of ``per_partition`` ranges each, as runs
    (see the module's text). ``keys`` gives ranges in ``[0, partitions * per_partition)`` and ``width`` key
    words per row."""
    from pyspark.sql import functions as F

    if partitions < 1 or per_partition < 1:
        raise ValueError(f"partitions and ranges per partition must be >= 1, got {partitions}, {per_partition}")
    def runs(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return task_runs(batches, keys, per_partition, flush_bytes)

    frame = scan.map_files(runs, RUN_DDL).repartitionById(partitions, F.col("partition"))
    if per_partition > 1:  # runs of a partition's ranges arrive from every task, in any order
        frame = frame.sortWithinPartitions("range")
    return SortedRuns(frame, width, scan.schema)
