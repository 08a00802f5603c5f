"""How many files a clustering group's output should make.

A plan fixes ``numOutputFileGroups`` from the input's bytes on disk, but the output does not weigh what the
input weighed. Sorting scatters the columns that compressed well because they followed the input's order
(commit time, sequence numbers, record keys and event times of an append-only table), and clustering may write
another codec (Hudi ingestion writes gzip by default; clustering writes snappy, several times faster to write
and somewhat larger). On the reference dataset the output is 1.46 times the input. Range partitions cut for
the input's bytes then each overshoot the target, and every partition rolls over into one full file and one
small remainder: twice the files planned.

`output_bytes_per_row` measures the output instead: one Spark task reads the first rows of up to
`SAMPLE_FILES` of the group's files spread over the group (so the sample mixes commits, as the output will),
sorts them by the sort columns (shuffles them when there are none) and writes them in memory with the
output's codec and row-group size; only two numbers reach the driver. `output_file_groups` sizes the output
from it.

The sample's rows are farther apart in sort order than an output file's neighbours are, so columns that follow
the sort order compress worse in the sample than in the output, and the larger the group, the more the sample
overstates: 2.2 times on 2 GB of the reference dataset. One writing task per estimated file would then write
files of half the target. So the estimate sets only how many tasks write (`writing_tasks`: one per
`FILES_PER_TASK` estimated files); each task measures its own output as it writes and cuts it into equal files
near the target (`hudi_clusterd.table.base_file_writer`).
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.storage import Storage, StorageSpec, open_storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = structlog.get_logger(__name__)

SAMPLE_ROWS = 20_000
"""Rows written to measure the output: a few MB of memory at most, enough for a stable figure."""
SAMPLE_FILES = 64
"""Input files the sample's rows come from (evenly spread over the group's files)."""

FILL = 0.9
"""Share of the target each estimated file aims at, so that an output predicted just over a whole number of
targets is not cut into one more file than it needs."""


def _spread(paths: Sequence[str], count: int) -> list[str]:
    """Up to ``count`` of ``paths``, evenly spaced, first and last included."""
    if len(paths) <= count:
        return list(paths)
    step = (len(paths) - 1) / (count - 1)
    return [paths[round(i * step)] for i in range(count)]


def _output_order(table: pa.Table, sort_columns: Sequence[str]) -> pa.Table:
    """The sample in the order clustering writes it: by the sort columns, else shuffled."""
    present = [c for c in sort_columns if c in table.column_names]
    if present:
        return table.sort_by([(c, "ascending") for c in present])
    return table.take(np.random.default_rng(0).permutation(table.num_rows))


@dataclass(frozen=True, slots=True)
class RowSize:
    """Bytes per output row, on disk (parquet, the output's codec) and in memory (Arrow), and the leaf columns
    worth dictionary-encoding (None: unknown, encode all, as parquet writers do by default)."""

    disk: float
    memory: float
    dictionary_columns: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class SampleSize:
    """What writing the sample taught: its rows, its bytes on disk and in Arrow memory, and the leaf columns
    (dotted parquet paths) that come out smaller dictionary-encoded than plain."""

    rows: int
    disk: int
    memory: int
    dictionary_columns: tuple[str, ...] = ()


def _column_bytes(parquet: bytes) -> dict[str, int]:
    """Compressed bytes per leaf column (dotted path) of a parquet file, over all its row groups."""
    metadata = pq.read_metadata(pa.BufferReader(parquet))
    out: dict[str, int] = {}
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            out[column.path_in_schema] = out.get(column.path_in_schema, 0) + column.total_compressed_size
    return out


def _written(table: pa.Table, codec: str, group_rows: int, dictionary: bool | list[str]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=codec, row_group_size=group_rows, use_dictionary=dictionary)
    return sink.getvalue()


def sample_bytes_per_row(storage: Storage, paths: Sequence[str], codec: str, row_group_bytes: int,
                         sort_columns: Sequence[str], drop_columns: Sequence[str] = (),
                         sample_rows: int = SAMPLE_ROWS) -> SampleSize:
    """The first ``sample_rows / len(paths)`` rows of each of ``paths`` (relative to ``storage``), in output
    order, written as parquet with ``codec`` in row groups of ``row_group_bytes`` of Arrow memory: once with
    dictionary encoding and once without, to choose it column by column (a dictionary that overflows, as it
    does on keys, sequence numbers and measurements, costs write time and bytes for nothing), then with that
    choice, whose size is the figure. Runs wherever it is called (inside a Spark task, in
    `output_bytes_per_row`)."""
    if not paths:
        return SampleSize(0, 0, 0)
    per_file = max(1, sample_rows // len(paths))
    tables = []
    for rel in paths:
        with storage.open_input_file(rel) as f:
            batch = next(pq.ParquetFile(f).iter_batches(batch_size=per_file), None)
        if batch is not None and batch.num_rows:
            table = pa.Table.from_batches([batch])
            tables.append(table.drop_columns([c for c in drop_columns if c in table.column_names]))
    if not tables:
        return SampleSize(0, 0, 0)
    sample = _output_order(pa.concat_tables(tables, promote_options="permissive"), sort_columns)
    group_rows = max(1, row_group_bytes * sample.num_rows // max(sample.nbytes, 1))
    encoded = _column_bytes(_written(sample, codec, group_rows, True))
    plain = _column_bytes(_written(sample, codec, group_rows, False))
    dictionary = tuple(path for path, size in encoded.items() if size <= plain.get(path, size))
    size = len(_written(sample, codec, group_rows, list(dictionary)))
    return SampleSize(sample.num_rows, size, sample.nbytes, dictionary)


def output_bytes_per_row(spark: SparkSession, storage: StorageSpec, paths: Sequence[str], codec: str,
                         row_group_bytes: int, sort_columns: Sequence[str],
                         drop_columns: Sequence[str] = ()) -> RowSize | None:
    """Estimated bytes per row of a clustering output, on disk and in memory (see the module's text); None
    when the sample could not be read (schemas that do not merge, unreadable files): the caller keeps the
    plan's figure."""
    chosen = _spread(list(paths), SAMPLE_FILES)
    columns, dropped = list(sort_columns), list(drop_columns)

    def measure(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:  # the one row of input only triggers the task
            pass
        sample = sample_bytes_per_row(open_storage(storage), chosen, codec, row_group_bytes, columns, dropped)
        yield pa.RecordBatch.from_arrays(
            [*(pa.array([v], pa.int64()) for v in (sample.rows, sample.disk, sample.memory)),
             pa.array([list(sample.dictionary_columns)], pa.list_(pa.string()))],
            names=["rows", "bytes", "memory", "dictionary"])

    try:
        result = spark.range(0, 1, 1, 1).mapInArrow(  # one partition: one task measures
            measure, "rows long, bytes long, memory long, dictionary array<string>").collect()
    except Exception as e:  # an estimate only: the plan's own figure still works
        log.warning("cannot sample the output size; keeping the plan's file count", error=str(e).splitlines()[0])
        return None
    rows = sum(int(r["rows"]) for r in result)
    size = sum(int(r["bytes"]) for r in result)
    memory = sum(int(r["memory"]) for r in result)
    if not rows or not size:
        return None
    return RowSize(size / rows, memory / rows, tuple(result[0]["dictionary"]))


FILES_PER_TASK = 4
"""Estimated output files per writing task. A task whose output comes to ``f`` target sizes writes
``ceil(f / 1.05)`` equal files, so the more files a task writes, the closer they land to the target whatever the
estimate's error; more tasks than the group's files would only add small ones."""


def writing_tasks(estimated_files: int) -> int:
    """Tasks that write a group's output of ``estimated_files`` files (see the module's text)."""
    return max(1, math.ceil(estimated_files / FILES_PER_TASK))


def output_file_groups(rows: int, bytes_per_row: float, target_file_bytes: int) -> int:
    """Files to cut ``rows`` into so that each lands at `FILL` of the target."""
    if target_file_bytes <= 0:
        raise ExecutionError(f"target file size must be positive, got {target_file_bytes}")
    return max(1, math.ceil(rows * bytes_per_row / (target_file_bytes * FILL)))
