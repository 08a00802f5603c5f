"""Builders of a merge-on-read data table's log blocks for tests, encoded here from Hudi's byte layouts: AVRO_DATA
blocks (fastavro's writer), PARQUET_DATA blocks (pyarrow's), DELETE blocks of version 3 (the Avro binary of
``HoodieDeleteRecordList`` written by hand), and a record schema with the five meta fields."""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from hudi_clusterd.formats.avro import decode_ocf
from hudi_clusterd.formats.log import BlockType, HeaderKey, LogBlock

META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name")


def record_schema(fields: Sequence[tuple[str, Any]], *, name: str = "t_record") -> dict[str, Any]:
    """An Avro record schema: the meta fields, then ``fields`` as (name, type) made nullable with a null
    default."""
    out = [{"name": n, "type": ["null", "string"], "default": None} for n in META]
    out += [{"name": n, "type": ["null", t], "default": None} for n, t in fields]
    return {"type": "record", "name": name, "namespace": "hoodie.t", "fields": out}


def avro_block(instant: str, schema: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
               **header: str) -> LogBlock:
    """An AVRO_DATA block of ``rows`` written with ``schema`` (its SCHEMA header), block version 3."""
    parsed = fastavro.parse_schema(dict(schema))
    parts = [struct.pack(">ii", 3, len(rows))]
    for row in rows:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, dict(row))
        parts += (struct.pack(">i", len(buffer.getvalue())), buffer.getvalue())
    headers = {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: json.dumps(schema)}
    headers.update({HeaderKey[k]: v for k, v in header.items()})
    return LogBlock(BlockType.AVRO_DATA, headers, b"".join(parts))


def parquet_block(instant: str, table: pa.Table, schema: Mapping[str, Any]) -> LogBlock:
    """A PARQUET_DATA block: ``table`` as a whole parquet file."""
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="gzip")
    return LogBlock(BlockType.PARQUET_DATA, {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: json.dumps(schema)},
                    sink.getvalue())


def zigzag(n: int) -> bytes:
    """An Avro long."""
    value = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def avro_string(s: str) -> bytes:
    raw = s.encode()
    return zigzag(len(raw)) + raw


def ordering_bytes(kind: str, value: Any) -> bytes:
    """The ``orderingVal`` union of a deleted record: branch index, then the wrapper's ``value``."""
    branches = ["null", "boolean", "int", "long", "float", "double", "bytes", "string", "date", "decimal",
                "time_micros", "timestamp_micros"]
    branch = zigzag(branches.index(kind))
    if kind == "null":
        return branch
    if kind == "boolean":
        return branch + (b"\x01" if value else b"\x00")
    if kind in ("int", "long", "date", "time_micros", "timestamp_micros"):
        return branch + zigzag(int(value))
    if kind == "float":
        return branch + struct.pack("<f", value)
    if kind == "double":
        return branch + struct.pack("<d", value)
    if kind == "string":
        return branch + avro_string(value)
    raw = bytes(value)  # bytes, or a decimal's unscaled big-endian two's complement
    return branch + zigzag(len(raw)) + raw


def delete_content(records: Sequence[tuple[str | None, str | None, bytes]], *, version: int = 3) -> bytes:
    """A DELETE block's content: version, length and ``HoodieDeleteRecordList`` with one array block of
    ``(record key, partition path, ordering value bytes)``."""
    def optional(s: str | None) -> bytes:
        return b"\x00" if s is None else b"\x02" + avro_string(s)

    body = b""
    if records:
        body = zigzag(len(records)) + b"".join(optional(k) + optional(p) + o for k, p, o in records)
    body += b"\x00"
    return struct.pack(">ii", version, len(body)) + body


def delete_block(instant: str, records: Sequence[tuple[str | None, str | None, bytes]]) -> LogBlock:
    """A DELETE block of version 3 of ``records`` (see ``delete_content``)."""
    return LogBlock(BlockType.DELETE, {HeaderKey.INSTANT_TIME: instant}, delete_content(records))


COMPLETED_V9 = re.compile(r"(\d+)_\d+\.[a-z]+")  # a completed instant's file name on timeline layout 2


def golden_compactions(table: Path) -> list[tuple[str, dict[str, Any], set[str]]]:
    """Every compaction operation of a version-9 table's compaction plans: (compaction instant, the operation as
    Hudi's plan holds it, the instants completed up to the compaction)."""
    timeline = table / ".hoodie" / "timeline"
    completed = {m.group(1) for p in timeline.iterdir() if (m := COMPLETED_V9.fullmatch(p.name))}
    out = []
    for requested in sorted(timeline.glob("*.compaction.requested")):
        instant = requested.name.split(".")[0]
        plan = decode_ocf(requested.read_bytes(), str(requested))
        out += [(instant, op, {i for i in completed if i <= instant}) for op in plan["operations"]]
    return out
