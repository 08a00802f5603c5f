"""Spark jobs that write Hudi base files, shared by ingestion and clustering.

``write_file_groups(df, spec)`` is the core: ``df`` is already partitioned and ordered the way files should be
laid out (each Spark partition holds rows grouped by partition path) and carries ``_hoodie_partition_path`` and
``_hoodie_record_key`` (plus ``_hoodie_commit_time``/``_hoodie_commit_seqno`` when
``spec.preserve_meta_fields``). Every Spark task writes its rows into new file groups with ``mapInArrow``
(``hudi_clusterd.table.base_file_writer``); data never passes through the driver, only one small stat row per file
comes back, and the result is the write stats. The helpers beside it name paths and schemas as Spark sees them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.formats.avro_schema import normalize_arrow_schema
from hudi_clusterd.table.base_file_writer import BaseFileTaskWriter, BaseFileWriteSpec, TaskIds, WrittenFile

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

BatchFunction = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
"""A function over one Spark task's Arrow batches (what ``mapInArrow`` runs)."""

_STAT_FIELDS = [("file_id", pa.string()), ("path", pa.string()), ("partition_path", pa.string()),
                ("num_rows", pa.int64()), ("size", pa.int64()), ("create_time_ms", pa.int64())]
_STAT_SCHEMA = pa.schema(_STAT_FIELDS)
_STAT_DDL = "file_id string, path string, partition_path string, num_rows long, size long, create_time_ms long"


# --- schemas -----------------------------------------------------------------------------------------------


def write_file_groups(df: DataFrame, spec: BaseFileWriteSpec, decode: BatchFunction | None = None
                      ) -> list[WriteStat]:
    """Write ``df`` into new file groups of instant ``spec.instant_time``; returns one write stat per file.

    The caller owns the instant (requested/inflight before, commit or rollback after) and the layout of ``df``:
    rows of one partition path must be contiguous within each Spark partition, in the order to be stored.
    ``decode``, when given, turns each task's batches of ``df`` into those rows first (`exchange`'s runs)."""

    def write_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        ids = TaskIds(ctx.partitionId(), ctx.stageId(), ctx.taskAttemptId()) if ctx else TaskIds(0, 0, 0)
        rows = batches if decode is None else decode(batches)
        for written in BaseFileTaskWriter(spec, ids).write(rows):
            yield pa.RecordBatch.from_pylist([{
                "file_id": written.file_id, "path": written.path, "partition_path": written.partition_path,
                "num_rows": written.num_rows, "size": written.size, "create_time_ms": written.create_time_ms,
            }], schema=_STAT_SCHEMA)

    rows = df.mapInArrow(write_task, _STAT_DDL).collect()
    return [WrittenFile(r["file_id"], r["path"], r["partition_path"], int(r["num_rows"]), int(r["size"]),
                        int(r["create_time_ms"])).to_write_stat() for r in rows]


def spark_arrow_schema(df: DataFrame) -> pa.Schema:
    """The normalised Arrow schema of a DataFrame (what its rows become in a base file)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return normalize_arrow_schema(to_arrow_schema(df.schema, timezone="UTC"))


_GLOB_CHARS = frozenset("\\[]{}*?")


def literal_read_path(path: str) -> str:
    """``path`` escaped so that Spark's reader, which expands Hadoop glob patterns, reads exactly that file
    (partition values may hold ``[``, ``{``, ``*``, ``?`` or ``\\``)."""
    return "".join("\\" + c if c in _GLOB_CHARS else c for c in path)


_OUR_ERROR = re.compile(r"^hudi_clusterd\.errors\.\w+: (.+)$")


def spark_error_message(e: BaseException) -> str:
    """The useful line of a Spark failure: the message of one of our errors raised in a Python worker (a log file
    that cannot be merged, naming the file), our ``raise_error`` messages, else the first line, or for a bare
    Py4J wrapper ("An error occurred while calling ...") the innermost Java cause, which names the file."""
    text = str(e)
    lines = text.splitlines()
    ours = [m.group(1).strip() for ln in lines if (m := _OUR_ERROR.match(ln.strip()))]
    if ours:
        return ours[-1]
    for line in lines:
        if "USER_RAISED_EXCEPTION" in line or "record key" in line:
            return line.strip()
    first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    if first.startswith("An error occurred while calling"):
        causes = [ln.strip()[len("Caused by:"):].strip() for ln in lines if ln.strip().startswith("Caused by:")]
        if causes:
            return causes[-1]
    return first
