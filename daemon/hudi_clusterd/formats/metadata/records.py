"""``HoodieMetadataRecord``: the one record type of every metadata-table partition, and its schemas.

Three releases' writer schemas are known (``schemas/metadata/``, each the generated class's ``SCHEMA$`` of the
release's jar): Hudi 0.15's (``v6``: table version 6), Hudi 1.0.x's (``v8``: secondary-index records,
``isTightBound`` in column statistics) and Hudi 1.1/1.2's (``v9``: also ``valueType`` in column statistics and an
``ArrayWrapper`` branch in the min/max unions). Which one a table version uses by default is the business of
``table_format``; a file slice that already carries a schema keeps it (``schema_from_block``). Log blocks and
HFiles name the schema with Hudi's five meta fields put first, although the metadata table never fills them; a
record's bytes are the Avro binary of the record in that schema (meta fields null, fields the schema lacks
dropped) with ``key`` blanked: the real key is the HFile row key.
"""
from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import fastavro
from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import SchemaParseException

from hudi_clusterd.errors import MetadataDecodeError

FILES = "files"
COLUMN_STATS = "column_stats"
PARTITION_STATS = "partition_stats"
RECORD_INDEX = "record_index"
BLOOM_FILTERS = "bloom_filters"
SECONDARY_INDEX_PREFIX = "secondary_index_"
EXPRESSION_INDEX_PREFIX = "expr_index_"

ALL_PARTITIONS_KEY = "__all_partitions__"
NON_PARTITIONED_NAME = "."
"""The key of a non-partitioned table's only partition in the ``files`` partition."""

TYPE_PARTITION_LIST = 1
TYPE_FILE_LIST = 2
TYPE_COLUMN_STATS = 3
TYPE_PARTITION_STATS = 6

_META_FIELDS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
                "_hoodie_file_name")
SCHEMA_RELEASES = ("v6", "v8", "v9")
"""The known writer schemas: Hudi 0.15's, 1.0.x's and 1.1/1.2's, named after the table version each is the default
of."""
_BLOCK_SCHEMAS = {"v9": "HoodieMetadataRecord.v9.block-schema.json"}
"""Block schemas copied from a golden table (the others are made from the writer schema as Hudi makes them)."""


def _text(name: str) -> str:
    return resources.files("hudi_clusterd.formats").joinpath("schemas", "metadata", name).read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)
class RecordSchema:
    """The writer schema of one release: as text (``extraMetadata.schema``), with meta fields (log block and
    HFile headers), and parsed for fastavro."""

    text: str
    block_text: str
    parsed: Any
    """The block schema, parsed: stored records are written with it (their meta fields null)."""



@cache
def release_schema(release: str) -> RecordSchema:
    """The writer schema of one release (a name of ``SCHEMA_RELEASES``)."""
    if release not in SCHEMA_RELEASES:
        raise ValueError(f"unknown HoodieMetadataRecord schema {release!r}; known: {', '.join(SCHEMA_RELEASES)}")
    text = _text(f"HoodieMetadataRecord.{release}.writer-schema.json")
    block = _BLOCK_SCHEMAS.get(release)
    if block is not None:
        block_text = _text(block)
    else:
        node = json.loads(text)
        meta = [{"name": n, "type": ["null", "string"], "doc": "", "default": None} for n in _META_FIELDS]
        node["fields"] = meta + node["fields"]
        block_text = json.dumps(node, separators=(",", ":"))
    return RecordSchema(text, block_text, fastavro.parse_schema(json.loads(block_text)))


@cache
def schema_from_block(block_text: str) -> RecordSchema:
    """The record schema a log block header (``SCHEMA``) or a base HFile (file info ``schema``) names: one of the
    known releases' when it is that schema, else that text itself (its writer text without the meta fields).
    Raises ``MetadataDecodeError`` for text that is not a ``HoodieMetadataRecord`` schema."""
    try:
        node = json.loads(block_text)
        if not isinstance(node, dict) or node.get("name") != "HoodieMetadataRecord":
            raise ValueError("not a HoodieMetadataRecord schema")
        for release in SCHEMA_RELEASES:
            known = release_schema(release)
            if json.loads(known.block_text) == node:
                return known
        parsed = fastavro.parse_schema(node)
    except (ValueError, TypeError, KeyError, SchemaParseException) as e:
        raise MetadataDecodeError(f"metadata record schema cannot be used ({e}): {block_text[:120]!r}") from e
    writer = {**node, "fields": [f for f in node.get("fields", []) if f.get("name") not in _META_FIELDS]}
    return RecordSchema(json.dumps(writer, separators=(",", ":")), block_text, parsed)


def encode(schema: RecordSchema, record: Mapping[str, Any]) -> bytes:
    """The stored bytes of ``record`` (a ``HoodieMetadataRecord`` dict; its ``key`` is blanked) in ``schema``:
    fields the schema lacks (e.g. ``valueType`` in 1.0.x's) are dropped, fields the record lacks take the
    schema's defaults."""
    buf = io.BytesIO()
    try:
        schemaless_writer(buf, schema.parsed, {**record, "key": ""})
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise MetadataDecodeError(f"metadata record {record.get('key')!r} does not fit the record schema of its "
                                  f"file slice ({e})") from e
    return buf.getvalue()


@cache
def _reader_schema(block_schema: str) -> Any:
    return fastavro.parse_schema(json.loads(block_schema))


def decode(block_schema: str, key: str, data: bytes, source: str = "", *,
           return_record_name: bool = False) -> dict[str, Any]:
    """A stored record read with the writer schema of its block (``SCHEMA`` header or HFile ``schema`` entry),
    its ``key`` restored from the row key. ``return_record_name``: unions of records decode as
    ``(record name, value)`` (column statistics' wrappers)."""
    try:
        record = schemaless_reader(io.BytesIO(data), _reader_schema(block_schema), None,
                                   return_record_name=return_record_name)
    except Exception as e:  # fastavro raises many types on damaged input
        raise MetadataDecodeError(f"{source}: undecodable metadata record {key!r} ({e})") from e
    if not isinstance(record, dict):
        raise MetadataDecodeError(f"{source}: metadata record {key!r} is not a record")
    record["key"] = key
    return record


def partition_key(partition_path: str) -> str:
    """The key of a data-table partition in the ``files`` partition (``.`` for a non-partitioned table)."""
    return partition_path or NON_PARTITIONED_NAME


def _file_info(size: int, deleted: bool = False) -> dict[str, Any]:
    return {"size": size, "isDeleted": deleted}


def _empty(key: str, type_: int) -> dict[str, Any]:
    return {"key": key, "type": type_, "filesystemMetadata": None, "BloomFilterMetadata": None,
            "ColumnStatsMetadata": None, "recordIndexMetadata": None}


def files_records(new_files: Mapping[str, Mapping[str, int]]) -> list[dict[str, Any]]:
    """The ``files`` records of a commit: the partition list naming every written partition, then per partition
    its new files with their sizes (``new_files``: partition path → file name → size, every size > 0)."""
    out = [{**_empty(ALL_PARTITIONS_KEY, TYPE_PARTITION_LIST),
            "filesystemMetadata": {partition_key(p): _file_info(0) for p in sorted(new_files)}}]
    for partition in sorted(new_files):
        files = new_files[partition]
        bad = sorted(n for n, size in files.items() if size <= 0)
        if bad:
            raise MetadataDecodeError(f"partition {partition!r}: file {bad[0]} has no size; the metadata table "
                                      "lists every file with its size")
        out.append({**_empty(partition_key(partition), TYPE_FILE_LIST),
                    "filesystemMetadata": {n: _file_info(files[n]) for n in sorted(files)}})
    return out


def merge_files(older: Mapping[str, Any] | None, newer: Mapping[str, Any]) -> dict[str, Any]:
    """Two ``files`` records of one key merged as Hudi's payload merges them: per file the newer entry wins
    (sizes keep the larger), a tombstone removes the file (kept when the file is absent, for a later merge)."""
    if older is None:
        return dict(newer)
    if older.get("type") != newer.get("type"):
        raise MetadataDecodeError(f"metadata record {newer.get('key')!r}: type {newer.get('type')} cannot merge "
                                  f"with type {older.get('type')}")
    merged: dict[str, dict[str, Any]] = dict(older.get("filesystemMetadata") or {})
    for name, info in (newer.get("filesystemMetadata") or {}).items():
        if info["isDeleted"]:
            if name in merged and not merged[name]["isDeleted"]:
                del merged[name]
            else:
                merged[name] = info
        elif name in merged and not merged[name]["isDeleted"]:
            merged[name] = _file_info(max(int(merged[name]["size"]), int(info["size"])))
        else:
            merged[name] = info
    return {**newer, "filesystemMetadata": merged}


def live_files(record: Mapping[str, Any] | None) -> dict[str, int]:
    """File name → size of a merged ``files`` record, without tombstones."""
    if record is None:
        return {}
    return {n: int(i["size"]) for n, i in (record.get("filesystemMetadata") or {}).items() if not i["isDeleted"]}


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def file_group_index(key: str, groups: int) -> int:
    """The file group of a metadata partition a record key goes to (Hudi's ``mapRecordKeyToFileGroupIndex``)."""
    if groups <= 1:
        return 0
    h = java_string_hash(key)
    # Java: Math.abs(Math.abs(h) % n); Math.abs(MIN_VALUE) stays negative
    a = h if h == -(1 << 31) else abs(h)
    r = abs(int(a - groups * int(a / groups)))  # Java's % truncates toward zero
    return r
