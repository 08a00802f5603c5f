"""The timeline's Avro files (fastavro underneath), encoded exactly as Hudi encodes them.

Hudi stores an Avro timeline payload as an Object Container File with codec ``null``, one record, and the writer
schema under ``avro.schema`` (its only metadata entry): `encode_ocf` writes that, and `decode_ocf` reads such a
file with the writer schema it embeds. The schema string embedded is:

- for clustering plans (``encode_requested_replace`` for table version 6, ``encode_requested_replace_v2`` for 8
  and 9; `decode_requested_replace` reads both) and for the commit files of versions 8 and 9
  (``encode_commit_metadata_v2``: ``HoodieCommitMetadata``, or ``HoodieReplaceCommitMetadata`` when the commit
  replaces file groups), the exact string Apache Hudi embeds, copied byte for byte from its timeline files
  (``schemas/*.writer-schema.json``, and ``schemas/v2/`` for Hudi 1.x), so readers resolve them as Hudi's own;
- for any other record (``encode_record``: rollback plans and rollback metadata), a self-contained schema built
  from the shipped ``.avsc`` files, each named type defined at its first use.

Version 6 keeps commit metadata as JSON (``formats.timeline`` picks the encoding per layout). The metadata
table's records are encoded by ``formats.metadata.records``. Schemas ship as package data and are parsed once.
"""

from __future__ import annotations

import io
import json
import os
import re
from functools import cache
from importlib import resources
from typing import Any

import fastavro
from fastavro import schemaless_writer

from hudi_clusterd.domain.commit import CommitMetadata
from hudi_clusterd.domain.compaction import CompactionPlan
from hudi_clusterd.domain.plan import RequestedReplaceMetadata
from hudi_clusterd.errors import MetadataDecodeError

_MAGIC = b"Obj\x01"
_COMMENT_RE = re.compile(r"/\*.*?\*/", re.DOTALL)
REQUESTED_REPLACE_WRITER_SCHEMA = "HoodieRequestedReplaceMetadata.writer-schema.json"
# the writer schemas Apache Hudi 1.x embeds in the timeline files of table versions 8 and 9
REQUESTED_REPLACE_WRITER_SCHEMA_V2 = "v2/HoodieRequestedReplaceMetadata.writer-schema.json"
COMMIT_WRITER_SCHEMA_V2 = "v2/HoodieCommitMetadata.writer-schema.json"
REPLACE_COMMIT_WRITER_SCHEMA_V2 = "v2/HoodieReplaceCommitMetadata.writer-schema.json"
_COMMIT_RECORD = "HoodieCommitMetadata"
_REPLACE_COMMIT_RECORD = "HoodieReplaceCommitMetadata"


def _schema_text(file_name: str) -> str:
    """A shipped schema file; ``file_name`` may name a subfolder (``v2/...``)."""
    folder = resources.files("hudi_clusterd.formats").joinpath("schemas")
    return folder.joinpath(*file_name.split("/")).read_text(encoding="utf-8")


_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


def _index_named(node: Any, out: dict[str, Any]) -> None:
    if isinstance(node, list):
        for n in node:
            _index_named(n, out)
    elif isinstance(node, dict):
        if node.get("type") in ("record", "enum", "fixed") and "name" in node:
            out.setdefault(str(node["name"]).rsplit(".", 1)[-1], node)
        for key in ("type", "items", "values", "fields"):
            if key in node:
                _index_named(node[key], out)


@cache
def _raw_schemas() -> dict[str, Any]:
    """Every named type of the shipped .avsc files as JSON, keyed by short name (nested ones included)."""
    out: dict[str, Any] = {}
    folder = resources.files("hudi_clusterd.formats").joinpath("schemas")
    files = sorted((e for e in folder.iterdir() if e.name.endswith(".avsc")), key=lambda e: e.name)
    for entry in files:
        node = json.loads(_COMMENT_RE.sub("", entry.read_text(encoding="utf-8")))
        out[entry.name[: -len(".avsc")]] = node
    for name in list(out):
        _index_named(out[name], out)
    return out


def _expand(node: Any, raw: dict[str, Any], defined: set[str]) -> Any:
    """Inline named references to other shipped records (first use defines, later uses refer by name)."""
    if isinstance(node, str):
        short = node.rsplit(".", 1)[-1]
        if node not in _PRIMITIVES and short in raw and short not in defined:
            defined.add(short)
            return _expand(raw[short], raw, defined)
        return node
    if isinstance(node, list):
        return [_expand(n, raw, defined) for n in node]
    if isinstance(node, dict):
        if node.get("type") == "record" and "name" in node:
            defined.add(str(node["name"]).rsplit(".", 1)[-1])
        return {k: (_expand(v, raw, defined) if k in ("type", "items", "values", "fields") else v)
                for k, v in node.items()}
    return node


@cache
def schema_json(name: str) -> str:
    """A self-contained JSON schema for a shipped record (named dependencies inlined)."""
    raw = _raw_schemas()
    return json.dumps(_expand(raw[name], raw, set()), separators=(",", ":"))


@cache
def schema(name: str) -> Any:
    """A parsed schema by short record name, e.g. ``HoodieRollbackPlan``."""
    return fastavro.parse_schema(json.loads(schema_json(name)))


@cache
def _writer(file_name: str) -> tuple[str, Any]:
    """A verbatim writer schema (the ``avro.schema`` string to embed) and its parsed form."""
    text = _schema_text(file_name).strip()
    return text, fastavro.parse_schema(json.loads(text))


def _requested_replace_writer() -> tuple[str, Any]:
    return _writer(REQUESTED_REPLACE_WRITER_SCHEMA)


def _zigzag_long(n: int) -> bytes:
    value = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _avro_bytes(data: bytes) -> bytes:
    return _zigzag_long(len(data)) + data


def encode_ocf(schema_json: str, parsed_schema: Any, record: dict[str, Any]) -> bytes:
    """One record in an Object Container File with codec null and only ``avro.schema`` in the header."""
    body = io.BytesIO()
    schemaless_writer(body, parsed_schema, record)
    payload = body.getvalue()
    sync = os.urandom(16)
    out = io.BytesIO()
    out.write(_MAGIC)
    out.write(_zigzag_long(1))  # metadata map: one entry
    out.write(_avro_bytes(b"avro.schema"))
    out.write(_avro_bytes(schema_json.encode("utf-8")))
    out.write(_zigzag_long(0))  # end of map
    out.write(sync)
    out.write(_zigzag_long(1))  # one object in the block
    out.write(_zigzag_long(len(payload)))
    out.write(payload)
    out.write(sync)
    return out.getvalue()


def _read_ocf(data: bytes, source: str) -> tuple[str, dict[str, Any]]:
    """The short name of the writer schema's record and the single record of an Avro container file."""
    if not data.startswith(_MAGIC):
        raise MetadataDecodeError(f"{source}: not an Avro container file (bad magic {data[:4]!r})")
    try:
        reader = fastavro.reader(io.BytesIO(data))
        records = list(reader)
        writer_schema = reader.writer_schema
    except Exception as e:  # fastavro raises many types on corrupt input
        raise MetadataDecodeError(f"{source}: corrupt Avro content ({type(e).__name__}: {e})") from e
    if len(records) != 1 or not isinstance(records[0], dict):
        raise MetadataDecodeError(f"{source}: expected exactly one Avro record, found {len(records)}")
    name = writer_schema.get("name") if isinstance(writer_schema, dict) else None
    return str(name or "").rsplit(".", 1)[-1], records[0]


def decode_ocf(data: bytes, source: str) -> dict[str, Any]:
    """The single record of an Avro container file, resolved with its embedded writer schema."""
    return _read_ocf(data, source)[1]


def encode_requested_replace(meta: RequestedReplaceMetadata) -> bytes:
    """``<T>.replacecommit.requested`` bytes, with Hudi's own embedded writer schema."""
    text, parsed = _requested_replace_writer()
    return encode_ocf(text, parsed, meta.to_avro())


def decode_requested_replace(data: bytes, source: str) -> RequestedReplaceMetadata | None:
    """Decode a requested replacecommit; None for an empty file (Hudi writes those for some operations)."""
    if not data:
        return None
    record = decode_ocf(data, source)
    try:
        return RequestedReplaceMetadata.from_avro(record)
    except (TypeError, ValueError, AttributeError, OverflowError, MetadataDecodeError) as e:
        raise MetadataDecodeError(f"{source}: not a HoodieRequestedReplaceMetadata record ({e})") from e


def decode_compaction_plan(data: bytes, source: str) -> CompactionPlan:
    """Decode ``<T>.compaction.requested`` or ``<T>.logcompaction.requested`` (HoodieCompactionPlan, read with the
    writer schema it embeds); ``MetadataDecodeError`` naming ``source`` for anything else, an empty file
    included."""
    if not data:
        raise MetadataDecodeError(f"{source}: empty compaction plan")
    name, record = _read_ocf(data, source)
    if name != "HoodieCompactionPlan":
        raise MetadataDecodeError(f"{source}: expected a HoodieCompactionPlan Avro record, found "
                                  f"{name or 'an unnamed schema'}")
    try:
        return CompactionPlan.from_avro(record)
    except (TypeError, ValueError, AttributeError, OverflowError, MetadataDecodeError) as e:
        raise MetadataDecodeError(f"{source}: not a HoodieCompactionPlan record ({e})") from e


def encode_requested_replace_v2(meta: RequestedReplaceMetadata) -> bytes:
    """``<T>.clustering.requested`` bytes of a version 8/9 table, with Hudi 1.x's embedded writer schema.

    The plan's ``missingSchedulePartitions`` (new in 1.x) is written as an empty list, as Hudi 1.2 writes it.
    `decode_requested_replace` reads these files too."""
    text, parsed = _writer(REQUESTED_REPLACE_WRITER_SCHEMA_V2)
    record = meta.to_avro()
    if record["clusteringPlan"] is not None:
        record["clusteringPlan"] = {**record["clusteringPlan"], "missingSchedulePartitions": []}
    return encode_ocf(text, parsed, record)


def encode_commit_metadata_v2(meta: CommitMetadata) -> bytes:
    """A version 8/9 commit file's bytes (``<T>_<C>.commit`` / ``.replacecommit``, or a workload profile):
    ``HoodieReplaceCommitMetadata`` when ``meta.partition_to_replace_file_ids`` is set, ``HoodieCommitMetadata``
    otherwise, each with Hudi 1.x's embedded writer schema."""
    name = COMMIT_WRITER_SCHEMA_V2 if meta.partition_to_replace_file_ids is None else REPLACE_COMMIT_WRITER_SCHEMA_V2
    text, parsed = _writer(name)
    return encode_ocf(text, parsed, meta.to_avro_dict())


def decode_commit_metadata_v2(data: bytes, source: str) -> CommitMetadata:
    """Decode a version 8/9 commit file (Avro ``HoodieCommitMetadata`` or ``HoodieReplaceCommitMetadata``).

    Empty content decodes to empty metadata, as Hudi's reader does. Anything else that is not one of those two
    Avro records (JSON included: Hudi 1.x reads only Avro for these instants) raises ``MetadataDecodeError``
    naming ``source``. A replace record always decodes with ``partition_to_replace_file_ids`` set (empty when
    null), so it encodes back as a replace record."""
    if not data:
        return CommitMetadata()
    name, record = _read_ocf(data, source)
    if name not in (_COMMIT_RECORD, _REPLACE_COMMIT_RECORD):
        raise MetadataDecodeError(f"{source}: expected a {_COMMIT_RECORD} or {_REPLACE_COMMIT_RECORD} Avro record, "
                                  f"found {name or 'an unnamed schema'}")
    if name == _REPLACE_COMMIT_RECORD and record.get("partitionToReplaceFileIds") is None:
        record = {**record, "partitionToReplaceFileIds": {}}
    return CommitMetadata.from_mapping(record, source)


def encode_record(record_name: str, record: dict[str, Any]) -> bytes:
    """Encode any shipped Hudi record (rollback plan, rollback metadata...) as a one-record container."""
    return encode_ocf(schema_json(record_name), schema(record_name), record)
