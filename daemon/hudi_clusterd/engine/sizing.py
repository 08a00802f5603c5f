"""How many files a clustering group's output should make.

A plan fixes ``numOutputFileGroups`` from the input's bytes on disk, but clustering may write with another
codec than the input's (Hudi ingestion writes gzip by default; clustering writes snappy, several times faster
to write and somewhat larger). Range partitions cut for the input's bytes then each overshoot the target a
little, and every partition rolls over into one full file and one small remainder: twice the files planned.

`codec_ratio` measures the change on a sample of the group's rows: one Spark task compresses the same rows
with both codecs (only two sizes reach the driver); `output_file_groups` sizes the output from it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from hudi_clusterd.errors import ExecutionError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = structlog.get_logger(__name__)

SAMPLE_ROWS = 20_000
"""Rows compressed to measure a codec change: a few MB at most, enough for a stable ratio."""

MIN_RATIO, MAX_RATIO = 0.1, 10.0

FILL = 0.9
"""Share of the target each re-sized output file aims at: the sample's ratio misses the output's by a few percent
(row order, row-group cuts), and a file predicted just over the target would be written as two halves."""

_CODEC_NAMES = {"uncompressed": "none", "none": "none", "gzip": "gzip", "snappy": "snappy", "zstd": "zstd",
                "lz4": "lz4", "lz4_raw": "lz4", "brotli": "brotli"}


def _codec(name: str) -> str:
    try:
        return _CODEC_NAMES[name.lower()]
    except KeyError:
        raise ExecutionError(f"parquet codec {name!r} is not one this writer can compare") from None


def _parquet_bytes(table: pa.Table, codec: str, row_group_rows: int | None = None) -> int:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=codec, row_group_size=row_group_rows)
    return sink.tell()


def codec_ratio(df: DataFrame, input_codec: str, output_codec: str, row_group_bytes: int,
                sample_rows: int = SAMPLE_ROWS) -> float:
    """Bytes written with ``output_codec`` (in row groups of ``row_group_bytes`` of Arrow memory, as the
    clustering writer cuts them) per byte written with ``input_codec`` (one row group), on the first
    ``sample_rows`` rows of ``df``; 1.0 when the codecs are the same, or ``df`` is empty."""
    src, dst = _codec(input_codec), _codec(output_codec)
    if src == dst:
        return 1.0

    def measure(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = [b for b in batches if b.num_rows]
        sizes = (0, 0)
        if received:
            table = pa.Table.from_batches(received)
            group_rows = max(1, row_group_bytes * table.num_rows // max(table.nbytes, 1))
            sizes = (_parquet_bytes(table, src), _parquet_bytes(table, dst, group_rows))
        yield pa.RecordBatch.from_arrays([pa.array([sizes[0]], pa.int64()), pa.array([sizes[1]], pa.int64())],
                                         names=["before", "after"])

    rows = df.limit(sample_rows).coalesce(1).mapInArrow(measure, "before long, after long").collect()
    before = sum(int(r["before"]) for r in rows)
    after = sum(int(r["after"]) for r in rows)
    if before <= 0 or after <= 0:
        return 1.0
    ratio = min(MAX_RATIO, max(MIN_RATIO, after / before))
    log.debug("codec ratio", input_codec=src, output_codec=dst, ratio=round(ratio, 3))
    return ratio


def output_file_groups(input_bytes: int, ratio: float, target_file_bytes: int) -> int:
    """Files to cut ``input_bytes`` into so that each lands below the target after a codec change."""
    if target_file_bytes <= 0:
        raise ExecutionError(f"target file size must be positive, got {target_file_bytes}")
    return max(1, math.ceil(input_bytes * ratio / (target_file_bytes * FILL)))
