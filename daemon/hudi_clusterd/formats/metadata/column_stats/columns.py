"""Which columns Hudi indexes, and in which index version: the ``column_stats`` index definition, the table
schema walked as Hudi's ``HoodieSchema`` walks it (records, ``list.element`` of arrays, ``key_value`` of maps),
and each indexed column's value type in the table schema."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hudi_clusterd.errors import UnsupportedTableError
from hudi_clusterd.formats.metadata.column_stats.values import (
    DECIMAL_WRAPPER_PRECISION,
    DECIMAL_WRAPPER_SCALE,
    STRING_INFO,
    V1_INFO,
    IndexVersion,
    ValueInfo,
    ValueType,
)
from hudi_clusterd.formats.metadata.table_format import for_table_version

META_FIELDS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
               "_hoodie_file_name")
"""Hudi's meta fields, in the order ``addMetadataFields`` puts them first."""
ALWAYS_INDEXED_META_FIELDS = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")
"""1.x ``META_COLS_TO_ALWAYS_INDEX`` in the (sorted) order of its ``TreeMap``."""
OPERATION_FIELD = "_hoodie_operation"
DEFAULT_MAX_COLUMNS = 32
"""``hoodie.metadata.index.column.stats.max.columns.to.index`` (1.x)."""


def _column_stats_definition(index_json: Mapping[str, Any] | None, name: str) -> Mapping[str, Any] | None:
    if not index_json:
        return None
    defs = index_json.get("indexDefinitions", index_json)
    found = defs.get(name) if isinstance(defs, Mapping) else None
    return found if isinstance(found, Mapping) else None


def index_version(table_version: int, index_json: Mapping[str, Any] | None = None) -> IndexVersion:
    """The column/partition-stats index version: the index definition's, else the table version's default
    (``HoodieIndexVersion.getCurrentVersion``: V2 from table version 9). Version 6 (0.15) is V1."""
    fmt = for_table_version(table_version)
    if fmt.index_definitions:
        for name in ("column_stats", "partition_stats"):
            definition = _column_stats_definition(index_json, name)
            if definition is not None and definition.get("version"):
                text = str(definition["version"]).upper()
                if text not in ("V1", "V2"):
                    raise UnsupportedTableError(f"index {name}: unknown index version {definition['version']!r}")
                return IndexVersion.V2 if text == "V2" else IndexVersion.V1
    return IndexVersion.V2 if fmt.value_types_by_default else IndexVersion.V1


def _load_schema(schema: str | Mapping[str, Any]) -> dict[str, Any]:
    node = json.loads(schema) if isinstance(schema, str) else dict(schema)
    if node.get("type") != "record":
        raise UnsupportedTableError("the table schema is not an Avro record")
    return node


def _non_null(node: Any) -> Any:
    if isinstance(node, list):
        rest = [n for n in node if n != "null"]
        return rest[0] if len(rest) == 1 else (node if rest else "null")
    return node


def _kind(node: Any) -> str:
    """The ``HoodieSchemaType`` of an Avro schema node (its non-null branch)."""
    node = _non_null(node)
    if isinstance(node, list):
        return "UNION"
    if isinstance(node, str):
        return node.upper()
    base = node.get("type")
    logical = node.get("logicalType")
    if isinstance(base, (dict, list)):
        return _kind(base)
    if logical == "decimal" and base in ("bytes", "fixed"):
        return "DECIMAL"
    if logical == "date" and base == "int":
        return "DATE"
    if logical in ("time-millis", "time-micros"):
        return "TIME"
    if logical in ("timestamp-millis", "timestamp-micros", "timestamp-nanos", "local-timestamp-millis",
                   "local-timestamp-micros", "local-timestamp-nanos"):
        return "TIMESTAMP"
    if logical == "uuid":
        return "UUID"
    return str(base).upper()


def _fields(node: Any) -> list[dict[str, Any]]:
    node = _non_null(node)
    if isinstance(node, dict) and node.get("type") == "record":
        return list(node.get("fields", []))
    return []


def _resolve(schema: Mapping[str, Any], path: str) -> tuple[str, Any] | None:
    """``HoodieSchema.getNestedField``: (canonical name, field schema) of a dotted path through records,
    ``list.element`` of arrays and ``key_value.key|value`` of maps; None when absent."""
    parts = path.split(".")
    node: Any = schema
    name: list[str] = []
    i = 0
    while i < len(parts):
        current = _non_null(node)
        kind = _kind(current)
        if kind == "RECORD":
            match = next((f for f in _fields(current) if f.get("name") == parts[i]), None)
            if match is None:
                return None
            node = match["type"]
            name.append(parts[i])
            i += 1
        elif i > 0 and kind == "ARRAY" and parts[i:i + 2] == ["list", "element"]:
            node = current["items"] if isinstance(current, dict) else None
            name.extend(["list", "element"])
            i += 2
        elif i > 0 and kind == "MAP" and len(parts) > i + 1 and parts[i] == "key_value" and \
                parts[i + 1] in ("key", "value"):
            node = "string" if parts[i + 1] == "key" else current["values"]
            name.extend(parts[i:i + 2])
            i += 2
            if parts[i - 1] == "key" and i < len(parts):
                return None
        else:
            return None
    return ".".join(name), node


def _supported(node: Any, version: IndexVersion) -> bool:
    """``isColumnTypeSupported``: V2 leaves out records, maps, arrays and enums; V1 (for Avro records) also
    decimals whose precision and scale do not fit ``DecimalWrapper`` (30, 15)."""
    kind = _kind(node)
    if kind in ("RECORD", "MAP", "ARRAY", "ENUM"):
        return False
    if version is IndexVersion.V1 and kind == "DECIMAL":
        inner = _non_null(node)
        precision, scale = int(inner.get("precision", 0)), int(inner.get("scale", 0))
        if precision + (DECIMAL_WRAPPER_SCALE - scale) > DECIMAL_WRAPPER_PRECISION or \
                scale > DECIMAL_WRAPPER_SCALE:
            return False
    return True


def _with_meta_fields(schema: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.get("name") for f in _fields(schema)}
    meta = [{"name": n, "type": ["null", "string"], "default": None} for n in META_FIELDS if n not in names]
    return {**schema, "fields": meta + _fields(schema)}


def indexed_columns(table_version: int, schema: str | Mapping[str, Any], *,
                    index_json: Mapping[str, Any] | None = None, populate_meta_fields: bool = True,
                    column_list: Sequence[str] | None = None,
                    max_columns: int = DEFAULT_MAX_COLUMNS) -> list[str]:
    """The columns whose statistics Hudi writes for a commit, in Hudi's order.

    Version 6 (0.15 ``getColumnsToIndex``): ``column_list`` (``hoodie.metadata.index.column.stats.column.list``)
    as given, else every top-level field of the writer schema, the five meta fields first when the table
    populates them. No type filter and no limit; only columns that are leaves of the file get statistics.

    Versions 8 and 9 (1.2): ``_hoodie_commit_time``, ``_hoodie_partition_path``, ``_hoodie_record_key`` when
    meta fields are populated, then the listed columns (``column_list``, else the ``sourceFields`` of the
    ``column_stats`` index definition, which Hudi's own upgrade path also turns into the column list) that
    resolve in the schema and have a supported type; without any list, the first ``max_columns`` supported
    top-level non-meta fields."""
    node = _load_schema(schema)
    if for_table_version(table_version).legacy_column_selection:
        if column_list:
            return list(column_list)
        names = [str(f["name"]) for f in _fields(node) if f.get("name") not in META_FIELDS]
        return (list(META_FIELDS) if populate_meta_fields else []) + names
    version = index_version(table_version, index_json)
    full = _with_meta_fields(node) if populate_meta_fields else node
    wanted: list[str] = list(column_list or [])
    if not wanted:
        definition = _column_stats_definition(index_json, "column_stats")
        if definition is not None:
            wanted = [str(c) for c in definition.get("sourceFields") or []]
    out: list[str] = list(ALWAYS_INDEXED_META_FIELDS) if populate_meta_fields else []
    if wanted:
        for column in wanted:
            if column in ALWAYS_INDEXED_META_FIELDS:
                continue
            found = _resolve(full, column)
            if found is not None and _supported(found[1], version) and found[0] not in out:
                out.append(found[0])
        return out
    skip = set(META_FIELDS) | {OPERATION_FIELD}
    picked = [str(f["name"]) for f in _fields(full) if _supported(f["type"], version) and f["name"] not in skip]
    return out + [c for c in picked[:max_columns] if c not in out]


def _value_info_of_schema(node: Any) -> ValueInfo:
    """``ValueType.fromSchema`` of a field schema (V2)."""
    kind = _kind(node)
    inner = _non_null(node)
    logical = inner.get("logicalType") if isinstance(inner, dict) else None
    if kind == "DECIMAL":
        return ValueInfo(ValueType.DECIMAL, int(inner["precision"]), int(inner.get("scale", 0)))
    if kind == "TIME":
        return ValueInfo(ValueType.TIME_MILLIS if logical == "time-millis" else ValueType.TIME_MICROS)
    if kind == "TIMESTAMP":
        local = str(logical).startswith("local-")
        millis = str(logical).endswith("millis")
        if local:
            return ValueInfo(ValueType.LOCAL_TIMESTAMP_MILLIS if millis else ValueType.LOCAL_TIMESTAMP_MICROS)
        return ValueInfo(ValueType.TIMESTAMP_MILLIS if millis else ValueType.TIMESTAMP_MICROS)
    simple = {"NULL": ValueType.NULL, "BOOLEAN": ValueType.BOOLEAN, "INT": ValueType.INT, "LONG": ValueType.LONG,
              "FLOAT": ValueType.FLOAT, "DOUBLE": ValueType.DOUBLE, "BYTES": ValueType.BYTES,
              "STRING": ValueType.STRING, "FIXED": ValueType.FIXED, "DATE": ValueType.DATE, "UUID": ValueType.UUID}
    if kind not in simple:
        raise UnsupportedTableError(f"column type {kind} has no Hudi value type")
    return ValueInfo(simple[kind])


def column_value_infos(schema: str | Mapping[str, Any], columns: Iterable[str],
                       version: IndexVersion) -> dict[str, ValueInfo]:
    """The table-schema value type of each indexed column (the type partition statistics are merged in, V2;
    meta fields are strings); all V1 for a V1 index."""
    node = _with_meta_fields(_load_schema(schema))
    out: dict[str, ValueInfo] = {}
    for column in columns:
        if version is IndexVersion.V1:
            out[column] = V1_INFO
        elif column in ALWAYS_INDEXED_META_FIELDS:
            out[column] = STRING_INFO
        else:
            found = _resolve(node, column)
            if found is None:
                raise UnsupportedTableError(f"indexed column {column!r} is not in the table schema")
            out[column] = _value_info_of_schema(found[1])
    return out
