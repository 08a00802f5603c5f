"""A file slice with log files read merged, in a Spark task (the Python worker), as Hudi's clustering reads it.

A clustering group's slices without log files are read as `scan` reads base files; the slices with log files are
read by tasks of their own (`scan.merged_tasks`), one slice after the other: the task reads the slice's base file
(none for a log-only slice) and its log files through the table's storage, decodes the logs (`read_data_log`) and
merges them into the base rows (`merge_file_slice`) under the `SliceMerge` given in the closure: the table's merge
rule, the instants completed up to the clustering instant, and the clustering instant as the merge's as-of. The
merged rows keep the winning record's ``_hoodie_commit_time`` and ``_hoodie_commit_seqno``; the writer rewrites
``_hoodie_file_name``. The merge is done where the task runs, never on the driver.

Memory: a task holds one slice's merge at a time: its base file read whole into Arrow, every block of its logs
decoded (applied or not), one dictionary entry per record key found in the logs and the merged table (at most
the base rows plus the log records), about twice the slice's decoded size at the peak: 125.6 MiB of Avro log files
(800,000 records) over a 9.4 MiB base file of 200,000 rows peak at about 500 MiB above the worker's own RSS
(`bench/bench_mor_vs_hudi.py`), four times the log bytes. Slices are not split and nothing spills to disk: the
planner leaves out a slice whose merge would take more than ``hoodie.memory.merge.max.size``, and a slice too
large for a worker's memory fails its task. Nothing is cached between passes: each pass of the group's
job over its rows (the count, the layout's sample and runs, or the sort) merges the slice again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.formats.log import DecodedBlock, SliceMerge, merge_file_slice, read_data_log
from hudi_clusterd.formats.log.arrow_blocks import arrow_schema_of
from hudi_clusterd.storage import Storage


@dataclass(frozen=True, slots=True)
class MergedSlice:
    """A file slice read merged: its base file (path relative to the table, None for a log-only slice) and its
    log files (relative paths, in Hudi's log order)."""

    base: str | None
    logs: tuple[str, ...]

    @property
    def source(self) -> str:
        """The slice's first file, naming it in messages."""
        return self.base if self.base is not None else self.logs[0]


def read_base(storage: Storage, rel: str) -> pa.Table:
    """A base file's rows whole (INT96 read as microseconds)."""
    try:
        with storage.open_input_file(rel) as f:
            return pq.ParquetFile(f, coerce_int96_timestamp_unit="us").read()
    except (OSError, pa.ArrowException) as e:
        raise ExecutionError(f"{storage.full_path(rel)}: cannot read the base file: {e}") from e


def read_logs(storage: Storage, logs: tuple[str, ...]) -> list[DecodedBlock]:
    """The decoded blocks of ``logs``, file after file (each block's records in its own writer schema)."""
    blocks: list[DecodedBlock] = []
    for rel in logs:
        try:
            data = storage.read_bytes(rel)
        except OSError as e:
            raise ExecutionError(f"{storage.full_path(rel)}: cannot read the log file: {e}") from e
        blocks += read_data_log(data, source=storage.full_path(rel))
    return blocks


def merge_slice(storage: Storage, piece: MergedSlice, merge: SliceMerge) -> pa.Table:
    """The live rows of ``piece`` as of ``merge.as_of``, in its base file's schema with the columns of the
    table's latest schema it lacks (a log-only slice: its first applied data block's)."""
    base = read_base(storage, piece.base) if piece.base is not None else None
    schema = None
    if base is not None and merge.table_schema:
        latest = arrow_schema_of(merge.table_schema)
        # nullable: the base file's rows have no value for it
        schema = pa.schema([*base.schema, *(f.with_nullable(True) for f in latest if f.name not in base.schema.names)])
    return merge_file_slice(base, read_logs(storage, piece.logs), completed=merge, rule=merge.rule,
                            as_of=merge.as_of, schema=schema)


def merged_batches(storage: Storage, piece: MergedSlice, merge: SliceMerge, batch_rows: int
                   ) -> Iterator[pa.RecordBatch]:
    """The merged rows of ``piece`` in batches of at most ``batch_rows`` (`merge_slice`'s schema)."""
    yield from merge_slice(storage, piece, merge).to_batches(max_chunksize=batch_rows)
