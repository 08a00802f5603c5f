"""Column statistics (record type 3) and partition statistics (type 6) of the metadata table, computed from
parquet footers exactly as Apache Hudi's writers compute them: 0.15 for table version 6, 1.2 for 8 and 9.

Rules (sources: ``HoodieTableMetadataUtil``, ``HoodieMetadataPayload``, ``ParquetUtils``, ``stats/ValueType``,
``HoodieAvroWrapperUtils``, ``FileFormatUtils``, ``HoodieMetadataWriteUtils`` of each release):

- Index version: 1.x reads the ``version`` of the ``column_stats`` (else ``partition_stats``) definition in
  ``.hoodie/.index_defs/index.json``; without one, V2 from table version 9, V1 below (0.15 is V1 in effect).
- Indexed columns: see ``indexed_columns`` (0.15: the column list or every writer-schema field, meta fields
  first; 1.x: ``_hoodie_commit_time``, ``_hoodie_partition_path``, ``_hoodie_record_key``, then the index
  definition's ``sourceFields`` or the first 32 supported fields).
- A file's range per column comes from the footer only: every row group's chunk whose dotted path is an indexed
  column (1.x also matches Spark's ``.array`` list paths and names them ``.list.element``), merged over row
  groups. ``valueCount`` = the chunk's value count, ``totalSize``/``totalUncompressedSize`` = its sizes,
  ``nullCount`` = the statistics' null count, or the value count when the chunk has no statistics at all.
  Without min/max parquet-mr still hands back its primitive defaults (0, 0.0, false) for numeric and boolean
  chunks, and Hudi stores them; binary chunks give nulls. A float min/max of NaN is dropped (defaults again),
  a zero min becomes -0.0 and a zero max +0.0 (parquet-mr's reader).
- V2 (1.x, table version 9): the value type comes from the parquet annotation (or the physical type); values are
  stored in the wrapper of the type's primitive (dates in ``IntWrapper``, timestamps in ``LongWrapper``,
  decimals as their unscaled two's-complement bytes in ``BytesWrapper`` with ``"precision,scale"`` as
  ``additionalInfo``). An annotation Hudi has no value type for (``INT(8|16|…)``, unsigned, ``ENUM``, ``JSON``,
  ``BSON``, ``UUID`` values, ``INT96``…) makes Hudi drop the whole file's statistics (it logs and writes none).
- V1 (0.15, and 1.x below V2): no value type; strings ``StringWrapper``, dates ``DateWrapper``, decimals
  ``DecimalWrapper`` rescaled to 15, other binary ``BytesWrapper``, numbers their own wrappers; a non-decimal
  fixed or ``INT96`` value fails Hudi's whole commit.
- Partition statistics (1.x only, ``HoodieMetadataWriteUtils.convertMetadataToPartitionStatRecords``) are
  recomputed for every partition the commit writes: per column, the ranges of the commit's new files (from
  their footers) merged with the stored column statistics of the partition's other latest files: per file
  group not written by the commit, its latest file slice as of the commit, the groups replaced by earlier
  completed replacecommits left out. The groups the commit itself replaces stay in: Hudi 1.2 compares file
  *names* with the replaced file-group *ids*, so a clustering counts its rows twice (the golden clustering's
  partition value counts are the new files' plus the replaced files'). Merge: min of mins, max of maxes (nulls
  ignored, Java ``compareTo``), counts and sizes summed, V2 values first brought to the table schema's type;
  ``fileName`` is the partition path, ``isTightBound`` true (the ``column_stats`` partition exists), and the
  record replaces the stored one when merged.
"""

from __future__ import annotations

import datetime
import json
import math
import struct
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Context, Decimal
from enum import IntEnum
from typing import Any

import structlog

from hudi_clusterd.errors import MetadataTableError, UnsupportedTableError
from hudi_clusterd.formats.metadata.hash_id import file_id, name_id
from hudi_clusterd.formats.metadata.record_format import for_table_version
from hudi_clusterd.formats.metadata.records import NON_PARTITIONED_NAME, TYPE_COLUMN_STATS, TYPE_PARTITION_STATS

log = structlog.get_logger(__name__)

NAMESPACE = "org.apache.hudi.avro.model."

META_FIELDS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
               "_hoodie_file_name")
"""Hudi's meta fields, in the order ``addMetadataFields`` puts them first."""
ALWAYS_INDEXED_META_FIELDS = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")
"""1.x ``META_COLS_TO_ALWAYS_INDEX`` in the (sorted) order of its ``TreeMap``."""
OPERATION_FIELD = "_hoodie_operation"
DEFAULT_MAX_COLUMNS = 32
"""``hoodie.metadata.index.column.stats.max.columns.to.index`` (1.x)."""

_DECIMAL_WRAPPER_SCALE = 15
_DECIMAL_WRAPPER_PRECISION = 30


class ValueType(IntEnum):
    """Hudi 1.x ``stats.ValueType``; the ordinal is the stored ``valueType.typeOrdinal``."""

    V1 = 0
    NULL = 1
    BOOLEAN = 2
    INT = 3
    LONG = 4
    FLOAT = 5
    DOUBLE = 6
    STRING = 7
    BYTES = 8
    FIXED = 9
    DECIMAL = 10
    UUID = 11
    DATE = 12
    TIME_MILLIS = 13
    TIME_MICROS = 14
    TIMESTAMP_MILLIS = 15
    TIMESTAMP_MICROS = 16
    TIMESTAMP_NANOS = 17
    LOCAL_TIMESTAMP_MILLIS = 18
    LOCAL_TIMESTAMP_MICROS = 19
    LOCAL_TIMESTAMP_NANOS = 20


class IndexVersion(IntEnum):
    """``HoodieIndexVersion`` of the column and partition statistics."""

    V1 = 1
    V2 = 2


_PRIMITIVE_WRAPPER = {
    ValueType.BOOLEAN: "BooleanWrapper", ValueType.INT: "IntWrapper", ValueType.LONG: "LongWrapper",
    ValueType.FLOAT: "FloatWrapper", ValueType.DOUBLE: "DoubleWrapper", ValueType.STRING: "StringWrapper",
    ValueType.BYTES: "BytesWrapper", ValueType.FIXED: "BytesWrapper", ValueType.DECIMAL: "BytesWrapper",
    ValueType.UUID: "StringWrapper", ValueType.DATE: "IntWrapper", ValueType.TIME_MILLIS: "IntWrapper",
    ValueType.TIME_MICROS: "LongWrapper", ValueType.TIMESTAMP_MILLIS: "LongWrapper",
    ValueType.TIMESTAMP_MICROS: "LongWrapper", ValueType.TIMESTAMP_NANOS: "LongWrapper",
    ValueType.LOCAL_TIMESTAMP_MILLIS: "LongWrapper", ValueType.LOCAL_TIMESTAMP_MICROS: "LongWrapper",
    ValueType.LOCAL_TIMESTAMP_NANOS: "LongWrapper",
}
"""V2: the Avro wrapper a value type is stored in (``ValueType.primitiveWrapperType``); NULL stores null."""

_UNIT_NANOS = {
    ValueType.TIMESTAMP_MILLIS: 1_000_000, ValueType.TIMESTAMP_MICROS: 1_000, ValueType.TIMESTAMP_NANOS: 1,
    ValueType.LOCAL_TIMESTAMP_MILLIS: 1_000_000, ValueType.LOCAL_TIMESTAMP_MICROS: 1_000,
    ValueType.LOCAL_TIMESTAMP_NANOS: 1,
}
_INTEGRAL = (ValueType.INT, ValueType.LONG)


@dataclass(frozen=True, slots=True)
class ValueInfo:
    """A column's value type as 1.x stores it (``valueType``): V1 means none is stored."""

    type: ValueType
    precision: int | None = None
    scale: int | None = None

    @property
    def additional_info(self) -> str | None:
        """``valueType.additionalInfo``: ``"precision,scale"`` for decimals."""
        return f"{self.precision},{self.scale}" if self.type is ValueType.DECIMAL else None

    def type_info(self) -> dict[str, Any] | None:
        """The stored ``HoodieValueTypeInfo`` (null for V1)."""
        if self.type is ValueType.V1:
            return None
        return {"typeOrdinal": int(self.type), "additionalInfo": self.additional_info}


V1_INFO = ValueInfo(ValueType.V1)
STRING_INFO = ValueInfo(ValueType.STRING)


@dataclass(frozen=True, slots=True)
class ColumnRange:
    """One column's statistics over one file (``file_path`` = file name) or, merged, over a partition
    (``file_path`` = partition path): Hudi's ``HoodieColumnRangeMetadata``.

    Values are held as Python values of the stored primitive: ``int`` for integers, dates (epoch days), times
    and timestamps (in the type's unit), ``float``, ``bool``, ``str``, ``bytes``, ``Decimal`` for decimals,
    ``uuid.UUID``. ``wrapper`` names the Avro wrapper of a V1 range's values (V2 derives it from the type)."""

    file_path: str
    column: str
    min_value: Any
    max_value: Any
    null_count: int
    value_count: int
    total_size: int
    total_uncompressed_size: int
    value_info: ValueInfo = V1_INFO
    wrapper: str | None = None


class _FileUnsupported(Exception):
    """Hudi's reader throws for this file; its catch-all then writes no statistics for the whole file."""


# ---------------------------------------------------------------------------------------------------------
# keys


def _partition_identifier(partition: str) -> str:
    return NON_PARTITIONED_NAME if partition == "" else partition


def column_stats_key(column: str, partition: str, file_name: str) -> str:
    """``HoodieMetadataPayload.getColumnStatsIndexKey``: column id + partition id (``.`` for ``""``) + file id."""
    return name_id(column) + name_id(_partition_identifier(partition)) + file_id(file_name)


def partition_stats_key(column: str, partition: str) -> str:
    """``HoodieTableMetadataUtil.getPartitionStatsIndexKey``: column id + partition id."""
    return name_id(column) + name_id(_partition_identifier(partition))


def column_stats_key_prefix(column: str, partition: str) -> str:
    """The prefix every column-stats key of ``column`` in ``partition`` starts with (Hudi's prefix lookup)."""
    return partition_stats_key(column, partition)


# ---------------------------------------------------------------------------------------------------------
# index version and indexed columns


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
        if precision + (_DECIMAL_WRAPPER_SCALE - scale) > _DECIMAL_WRAPPER_PRECISION or \
                scale > _DECIMAL_WRAPPER_SCALE:
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


# ---------------------------------------------------------------------------------------------------------
# footers


_NUMERIC_DEFAULT: dict[str, Any] = {"BOOLEAN": False, "INT32": 0, "INT64": 0, "FLOAT": 0.0, "DOUBLE": 0.0}
"""What parquet-mr's ``genericGetMin``/``genericGetMax`` return for a chunk without min/max."""


def _canonical_path(path: str) -> str:
    """1.x ``convertArrayToListElement``: Spark's ``.array`` list paths named as ``.list.element``."""
    return path.replace(".array.", ".list.element.").replace(".array", ".list.element")


def _array_path(path: str) -> str:
    return path.replace(".list.element.", ".array.").replace(".list.element", ".array")


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _chunk_min_max(physical: str, stats: Any) -> tuple[Any, Any, bool]:
    """(min, max, has min/max) of a chunk as parquet-mr's footer reader gives them."""
    if stats is None or not stats.has_min_max or physical == "INT96":
        default = _NUMERIC_DEFAULT.get(physical)
        return default, default, False
    lo, hi = stats.min_raw, stats.max_raw
    if physical in ("FLOAT", "DOUBLE"):
        lo, hi = float(lo), float(hi)
        if math.isnan(lo) or math.isnan(hi):
            return 0.0, 0.0, False
        if lo == 0.0:
            lo = -0.0
        if hi == 0.0:
            hi = 0.0
    elif isinstance(lo, str):  # pyarrow may hand back UTF-8 text for byte arrays
        lo, hi = lo.encode("utf-8"), hi.encode("utf-8")
    return lo, hi, True


def _null_count(stats: Any, value_count: int, has_min_max: bool) -> int:
    """``stats.isEmpty() ? valueCount : stats.getNumNulls()`` (-1 when min/max are set but nulls are not)."""
    has_nulls = stats is not None and stats.has_null_count
    if not has_min_max and not has_nulls:
        return value_count
    return int(stats.null_count) if has_nulls else -1


def _logical(column_schema: Any) -> tuple[str, dict[str, Any]]:
    logical = column_schema.logical_type
    name = str(logical.type)
    if name == "NONE":
        return name, {}
    return name, json.loads(logical.to_json())


def _v2_value_info(physical: str, column_schema: Any) -> ValueInfo:
    """``ValueType.fromParquetPrimitiveType`` (annotation first, then the physical type)."""
    name, details = _logical(column_schema)
    if name == "NONE":
        by_physical = {"INT64": ValueType.LONG, "INT32": ValueType.INT, "BOOLEAN": ValueType.BOOLEAN,
                       "BYTE_ARRAY": ValueType.BYTES, "FLOAT": ValueType.FLOAT, "DOUBLE": ValueType.DOUBLE,
                       "FIXED_LEN_BYTE_ARRAY": ValueType.FIXED}
        if physical not in by_physical:
            raise _FileUnsupported(f"physical type {physical}")
        return ValueInfo(by_physical[physical])
    if name == "STRING":
        return STRING_INFO
    if name == "DECIMAL":
        return ValueInfo(ValueType.DECIMAL, int(details["precision"]), int(details["scale"]))
    if name == "DATE":
        return ValueInfo(ValueType.DATE)
    if name == "TIME":
        unit = details.get("timeUnit")
        if unit == "milliseconds":
            return ValueInfo(ValueType.TIME_MILLIS)
        if unit == "microseconds":
            return ValueInfo(ValueType.TIME_MICROS)
        raise _FileUnsupported(f"time unit {unit}")
    if name == "TIMESTAMP":
        utc = bool(details.get("isAdjustedToUTC"))
        unit = str(details.get("timeUnit"))
        table = {("milliseconds", True): ValueType.TIMESTAMP_MILLIS, ("microseconds", True): ValueType.TIMESTAMP_MICROS,
                 ("nanoseconds", True): ValueType.TIMESTAMP_NANOS,
                 ("milliseconds", False): ValueType.LOCAL_TIMESTAMP_MILLIS,
                 ("microseconds", False): ValueType.LOCAL_TIMESTAMP_MICROS,
                 ("nanoseconds", False): ValueType.LOCAL_TIMESTAMP_NANOS}
        if (unit, utc) not in table:
            raise _FileUnsupported(f"timestamp unit {unit}")
        return ValueInfo(table[(unit, utc)])
    if name == "UUID":
        return ValueInfo(ValueType.UUID)
    raise _FileUnsupported(f"logical type {name}")


def _unscaled_to_decimal(unscaled: int, scale: int) -> Decimal:
    sign = 1 if unscaled < 0 else 0
    digits = tuple(int(d) for d in str(abs(unscaled)))
    return Decimal((sign, digits, -scale))


def _decimal_from_raw(raw: Any, scale: int) -> Decimal:
    if isinstance(raw, (bytes, bytearray)):
        return _unscaled_to_decimal(int.from_bytes(raw, "big", signed=True), scale)
    return _unscaled_to_decimal(int(raw), scale)


def _round_precision(value: Decimal, precision: int) -> Decimal:
    """``new MathContext(precision, HALF_UP)`` rounding (a no-op for values that fit)."""
    if len(value.as_tuple().digits) <= precision:
        return value
    return Context(prec=precision, rounding=ROUND_HALF_UP).create_decimal(value)


def _v2_value(raw: Any, info: ValueInfo) -> Any:
    """``ValueType.standardizeJavaTypeAndPromote`` of a parquet statistics value, in this module's terms."""
    if raw is None:
        return None
    t = info.type
    if t is ValueType.STRING:
        return bytes(raw).decode("utf-8", errors="replace")
    if t in (ValueType.BYTES, ValueType.FIXED):
        return bytes(raw)
    if t is ValueType.DECIMAL:
        assert info.precision is not None and info.scale is not None
        return _round_precision(_decimal_from_raw(raw, info.scale), info.precision)
    if t is ValueType.UUID:
        raise _FileUnsupported("UUID statistics (castToUUID rejects parquet binaries)")
    if t is ValueType.TIME_MILLIS and not 0 <= int(raw) < 86_400_000:
        raise _FileUnsupported("time-millis value out of a day")
    if t is ValueType.TIME_MICROS and not 0 <= int(raw) < 86_400_000_000:
        raise _FileUnsupported("time-micros value out of a day")
    if t is ValueType.FLOAT:
        return _float32(float(raw))
    if t is ValueType.DOUBLE:
        return float(raw)
    if t is ValueType.BOOLEAN:
        return bool(raw)
    return int(raw)


def _v1_value(raw: Any, physical: str, column_schema: Any) -> tuple[Any, str | None]:
    """0.15 ``convertToNativeJavaType`` + ``wrapValueIntoAvro``: (value, wrapper)."""
    if raw is None:
        return None, None
    name, details = _logical(column_schema)
    if name == "DECIMAL":
        return _decimal_from_raw(raw, int(details["scale"])), "DecimalWrapper"
    if name == "DATE":
        return int(raw), "DateWrapper"
    if name == "STRING":
        return bytes(raw).decode("utf-8", errors="replace"), "StringWrapper"
    if physical == "BYTE_ARRAY":
        return bytes(raw), "BytesWrapper"
    if physical in ("FIXED_LEN_BYTE_ARRAY", "INT96"):
        raise UnsupportedTableError(f"column {column_schema.path}: Hudi cannot store statistics of {physical} "
                                    "values without a decimal type (its commit fails)")
    if physical == "BOOLEAN":
        return bool(raw), "BooleanWrapper"
    if physical == "INT32":
        return int(raw), "IntWrapper"
    if physical == "INT64":
        return int(raw), "LongWrapper"
    if physical == "FLOAT":
        return _float32(float(raw)), "FloatWrapper"
    return float(raw), "DoubleWrapper"


def file_column_ranges(metadata: Any, file_name: str, columns: Iterable[str], *, table_version: int,
                       version: IndexVersion) -> list[ColumnRange]:
    """Per indexed column present in the file, its range from the footer (``pyarrow.parquet.FileMetaData``),
    as Hudi's ``ParquetUtils.readColumnStatsFromMetadata`` reads it; in the order of ``columns``.

    Empty when Hudi would drop the file's statistics (V2 value types it cannot handle, or no row groups).
    Raises ``UnsupportedTableError`` where Hudi's commit itself would fail (V1 fixed or INT96 values)."""
    wanted = list(dict.fromkeys(columns))
    lists = for_table_version(table_version).list_element_paths
    match: dict[str, str] = {}
    for column in wanted:
        match[column] = column
        if lists:
            match.setdefault(_array_path(column), column)
    if metadata.num_row_groups == 0:
        return []
    first = metadata.row_group(0)
    picked: list[tuple[int, str]] = []
    for i in range(metadata.num_columns):
        path = first.column(i).path_in_schema
        if path in match:
            picked.append((i, _canonical_path(path) if lists else path))
    ranges: dict[str, ColumnRange] = {}
    try:
        for index, name in picked:
            column_schema = metadata.schema.column(index)
            physical = str(column_schema.physical_type)
            info = _v2_value_info(physical, column_schema) if version is IndexVersion.V2 else V1_INFO
            for r in range(metadata.num_row_groups):
                chunk = metadata.row_group(r).column(index)
                stats = chunk.statistics if chunk.is_stats_set else None
                lo, hi, has_min_max = _chunk_min_max(physical, stats)
                value_count = int(chunk.num_values)
                wrapper: str | None = None
                if version is IndexVersion.V2:
                    lo, hi = _v2_value(lo, info), _v2_value(hi, info)
                else:
                    lo, w1 = _v1_value(lo, physical, column_schema)
                    hi, w2 = _v1_value(hi, physical, column_schema)
                    wrapper = w1 or w2
                piece = ColumnRange(file_name, name, lo, hi, _null_count(stats, value_count, has_min_max),
                                    value_count, int(chunk.total_compressed_size),
                                    int(chunk.total_uncompressed_size), info, wrapper)
                ranges[name] = merge_ranges(ranges[name], piece) if name in ranges else piece
    except _FileUnsupported as e:
        log.warning("hudi writes no column statistics for this file", file=file_name, reason=str(e))
        return []
    order = {(_canonical_path(c) if lists else c): n for n, c in enumerate(wanted)}
    return sorted(ranges.values(), key=lambda cr: order.get(cr.column, len(order)))


# ---------------------------------------------------------------------------------------------------------
# comparison and merge


_SIGN_FLIP = bytes((b ^ 0x80) for b in range(256))


def _sort_key(value: Any) -> Any:
    """A key ordering values as Java's ``compareTo`` of the in-memory type does."""
    if isinstance(value, str):
        return value.encode("utf-16-be", "surrogatepass")  # String.compareTo: UTF-16 code units
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).translate(_SIGN_FLIP)  # ByteBuffer.compareTo: signed bytes
    if isinstance(value, float):
        if math.isnan(value):
            return (1, 0.0, True)
        return (0, value, math.copysign(1.0, value) > 0)  # Float/Double.compareTo: -0.0 < 0.0 < NaN
    if isinstance(value, uuid.UUID):
        hi, lo = struct.unpack(">qq", value.bytes)
        return (hi, lo)
    return value


def _min(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a if _sort_key(a) < _sort_key(b) else b


def _max(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a if _sort_key(a) > _sort_key(b) else b


def merge_ranges(left: ColumnRange, right: ColumnRange) -> ColumnRange:
    """``HoodieColumnRangeMetadata.merge``: the left's file path and type, min of mins and max of maxes (nulls
    ignored; on a tie the right value), counts and sizes summed."""
    if left.column != right.column:
        raise UnsupportedTableError(f"cannot merge statistics of {left.column!r} with {right.column!r}")
    if left.value_info.type is not right.value_info.type:
        raise UnsupportedTableError(f"column {left.column!r}: value types {left.value_info.type.name} and "
                                    f"{right.value_info.type.name} cannot merge")
    wrapper = left.wrapper or right.wrapper
    if left.wrapper and right.wrapper and left.wrapper != right.wrapper:
        raise UnsupportedTableError(f"column {left.column!r}: statistics in {left.wrapper} and {right.wrapper} "
                                    "cannot merge (the column's type changed)")
    return ColumnRange(left.file_path, left.column,
                       _min(left.min_value, right.min_value), _max(left.max_value, right.max_value),
                       left.null_count + right.null_count, left.value_count + right.value_count,
                       left.total_size + right.total_size,
                       left.total_uncompressed_size + right.total_uncompressed_size, left.value_info, wrapper)


def _java_float_string(value: float) -> str:
    """Shortest text that reads back as the same float32 (``Float.toString`` for ordinary values)."""
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if _float32(float(text)) == value:
            return text
    return repr(value)


def _standardize(value: Any, source: ValueInfo, target: ValueInfo, column: str) -> Any:
    """``standardizeJavaTypeAndPromote`` of a stored value into the table schema's type (V2)."""
    if value is None or source == target or target.type is ValueType.NULL:
        return value
    s, t = source.type, target.type
    if t is ValueType.DECIMAL and isinstance(value, Decimal):
        return value
    if t is ValueType.LONG and s in (ValueType.INT, ValueType.BOOLEAN):
        return int(value)
    if t is ValueType.INT and s is ValueType.BOOLEAN:
        return int(value)
    if t is ValueType.FLOAT and s in (*_INTEGRAL, ValueType.BOOLEAN, ValueType.DOUBLE):
        return _float32(float(value))
    if t is ValueType.DOUBLE and s in (*_INTEGRAL, ValueType.BOOLEAN):
        return float(value)
    if t is ValueType.DOUBLE and s is ValueType.FLOAT:
        return float(_java_float_string(value))  # Double.valueOf(val + "")
    if t is ValueType.STRING and s in (*_INTEGRAL, ValueType.BOOLEAN):
        return ("true" if value else "false") if isinstance(value, bool) else str(value)
    if t in (ValueType.BYTES, ValueType.FIXED) and isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if t is ValueType.BYTES and isinstance(value, str):
        return value.encode("utf-8")
    if t is ValueType.DECIMAL and s in _INTEGRAL:
        assert target.precision is not None and target.scale is not None
        return _round_precision(_unscaled_to_decimal(int(value), target.scale), target.precision)
    if t in _UNIT_NANOS and s in _UNIT_NANOS and (t.name.startswith("LOCAL") == s.name.startswith("LOCAL")):
        return int(value) * _UNIT_NANOS[s] // _UNIT_NANOS[t]
    if t in _UNIT_NANOS and s is ValueType.LONG:
        return int(value)
    if (t, s) in ((ValueType.DATE, ValueType.INT), (ValueType.TIME_MILLIS, ValueType.INT),
                  (ValueType.TIME_MICROS, ValueType.LONG)):
        return int(value)
    raise UnsupportedTableError(f"column {column!r}: statistics of type {s.name} cannot be read as {t.name}")


def partition_ranges(partition: str, file_ranges: Iterable[ColumnRange], *,
                     value_infos: Mapping[str, ValueInfo] | None = None) -> list[ColumnRange]:
    """Per column, the files' ranges merged into the partition's (``FileFormatUtils.getColumnRangeInPartition``):
    V2 values are first brought to the column's table-schema type (``value_infos``; default: the type of the
    column's first range). Columns in first-seen order."""
    grouped: dict[str, list[ColumnRange]] = {}
    for cr in file_ranges:
        grouped.setdefault(cr.column, []).append(cr)
    out: list[ColumnRange] = []
    for column, ranges in grouped.items():
        target = (value_infos or {}).get(column, ranges[0].value_info)
        merged: ColumnRange | None = None
        for cr in ranges:
            if target.type is not ValueType.V1:
                if cr.value_info.type is ValueType.V1:
                    raise MetadataTableError(f"column {column!r}: a version-1 statistic in a version-2 index")
                cr = replace(cr, min_value=_standardize(cr.min_value, cr.value_info, target, column),
                             max_value=_standardize(cr.max_value, cr.value_info, target, column),
                             value_info=target, wrapper=None)
            cr = replace(cr, file_path=partition)
            merged = cr if merged is None else merge_ranges(merged, cr)
        assert merged is not None
        out.append(merged)
    return out


# ---------------------------------------------------------------------------------------------------------
# records


def _unscaled_bytes(value: Decimal) -> bytes:
    """``BigInteger.toByteArray`` of the unscaled value: minimal two's complement, big-endian."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    return unscaled.to_bytes(((unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8) + 1, "big", signed=True)


def _decimal_wrapper_bytes(value: Decimal, column: str) -> bytes:
    """V1 ``DecimalWrapper``: the value rescaled to 15 exactly (``tryUpcastDecimal``), precision at most 30."""
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    scaled = value.quantize(Decimal(1).scaleb(-_DECIMAL_WRAPPER_SCALE), context=Context(prec=200))
    if scaled != value:
        raise UnsupportedTableError(f"column {column!r}: decimal {value} cannot be stored at scale 15 "
                                    "(Hudi's commit fails)")
    if len(scaled.as_tuple().digits) > _DECIMAL_WRAPPER_PRECISION:
        raise UnsupportedTableError(f"column {column!r}: decimal {value} has more than 30 digits at scale 15 "
                                    "(Hudi's commit fails)")
    return _unscaled_bytes(scaled)


def _wrap(value: Any, cr: ColumnRange) -> Any:
    """The stored union value of a min or max: ``(wrapper record name, {"value": …})`` or None."""
    if value is None:
        return None
    info = cr.value_info
    if info.type is ValueType.V1:
        wrapper = cr.wrapper
        if wrapper is None:
            raise UnsupportedTableError(f"column {cr.column!r}: no wrapper for a version-1 statistic")
        if wrapper == "DecimalWrapper":
            return (NAMESPACE + wrapper, {"value": _decimal_wrapper_bytes(value, cr.column)})
        return (NAMESPACE + wrapper, {"value": value})
    if info.type is ValueType.NULL:
        return None
    wrapper = _PRIMITIVE_WRAPPER[info.type]
    if info.type is ValueType.DECIMAL:
        return (NAMESPACE + wrapper, {"value": _unscaled_bytes(value)})
    if info.type is ValueType.UUID:
        return (NAMESPACE + wrapper, {"value": str(value)})
    return (NAMESPACE + wrapper, {"value": value})


def _stats_body(table_version: int, file_name: str, cr: ColumnRange, *, tight: bool | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "fileName": file_name, "columnName": cr.column, "minValue": _wrap(cr.min_value, cr),
        "maxValue": _wrap(cr.max_value, cr), "valueCount": cr.value_count, "nullCount": cr.null_count,
        "totalSize": cr.total_size, "totalUncompressedSize": cr.total_uncompressed_size, "isDeleted": False,
    }
    if for_table_version(table_version).hudi_1_fields:
        body["isTightBound"] = bool(tight)
        body["valueType"] = cr.value_info.type_info()
    elif cr.value_info.type is not ValueType.V1:
        raise UnsupportedTableError("version-6 tables store version-1 statistics only")
    return body


def _record(table_version: int, key: str, type_: int, body: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"key": key, "type": type_, "filesystemMetadata": None, "BloomFilterMetadata": None,
                              "ColumnStatsMetadata": body, "recordIndexMetadata": None}
    if for_table_version(table_version).hudi_1_fields:
        record["SecondaryIndexMetadata"] = None
    return record


def column_stats_records(table_version: int, partition: str, file_name: str,
                         stats: Iterable[ColumnRange]) -> list[tuple[str, dict[str, Any]]]:
    """(key, ``HoodieMetadataRecord``) per column range of one new file: type 3, ``isTightBound`` false (1.x),
    min/max unions in fastavro's ``(record name, value)`` notation, for the schema of the table version."""
    out = []
    for cr in stats:
        key = column_stats_key(cr.column, partition, file_name)
        out.append((key, _record(table_version, key, TYPE_COLUMN_STATS,
                                 _stats_body(table_version, file_name, cr, tight=False))))
    return out


def partition_stats_records(table_version: int, partition: str, file_ranges: Iterable[ColumnRange], *,
                            value_infos: Mapping[str, ValueInfo] | None = None,
                            tight_bound: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """(key, ``HoodieMetadataRecord``) of type 6 per column: the partition's statistics recomputed as Hudi 1.2
    does from ``file_ranges``: the commit's new files (``file_column_ranges``) plus, decoded with
    ``range_from_record``, the stored column statistics (keys starting ``column_stats_key_prefix``) of the
    partition's other latest files: the latest base file of every file group not written by the commit, as of
    the later of the commit's instant and the last completed instant, without the groups earlier completed
    replacecommits replaced but *with* the groups this commit replaces (see the module notes). ``value_infos``:
    ``column_value_infos`` of the table schema. ``tight_bound``: the ``column_stats`` partition exists (it
    always does when partition statistics do). Only table versions 8 and 9 have partition statistics."""
    if not for_table_version(table_version).partition_stats:
        raise UnsupportedTableError(f"table version {table_version} has no partition statistics")
    out = []
    for cr in partition_ranges(partition, file_ranges, value_infos=value_infos):
        key = partition_stats_key(cr.column, partition)
        out.append((key, _record(table_version, key, TYPE_PARTITION_STATS,
                                 _stats_body(table_version, cr.file_path, cr, tight=tight_bound))))
    return out


# ---------------------------------------------------------------------------------------------------------
# stored records back to ranges


_V1_BY_PYTHON = {bool: "BooleanWrapper", str: "StringWrapper", bytes: "BytesWrapper", Decimal: "DecimalWrapper",
                 datetime.time: "TimeMicrosWrapper"}
"""V1 wrappers a bare decoded value names unambiguously (ints and floats fit several)."""


def _unwrap(union: Any, info: ValueInfo, column: str) -> tuple[Any, str | None]:
    """(value, wrapper) of a stored min/max, given as fastavro decodes it: ``(name, {"value": v})`` with
    ``return_record_name=True``, or a bare ``{"value": v}``."""
    if union is None:
        return None, None
    if isinstance(union, tuple):
        name, body = union
        wrapper: str | None = str(name).rsplit(".", 1)[-1]
    else:
        name, body, wrapper = None, union, None
    value = body["value"] if isinstance(body, Mapping) else body
    if info.type is ValueType.V1:
        if wrapper is None:
            wrapper = _V1_BY_PYTHON.get(type(value))
            if wrapper is None:
                raise MetadataTableError(f"column {column!r}: a version-1 statistic must be decoded with its "
                                            "wrapper name (fastavro return_record_name=True)")
        if wrapper == "DecimalWrapper" and not isinstance(value, Decimal):
            value = _unscaled_to_decimal(int.from_bytes(value, "big", signed=True), _DECIMAL_WRAPPER_SCALE)
        elif wrapper == "TimeMicrosWrapper" and not isinstance(value, int):
            value = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        return value, wrapper
    expected = _PRIMITIVE_WRAPPER.get(info.type)
    if wrapper is not None and wrapper != expected:
        raise MetadataTableError(f"column {column!r}: a {info.type.name} statistic stored in {wrapper}")
    if info.type is ValueType.DECIMAL:
        assert info.precision is not None and info.scale is not None
        return _round_precision(_decimal_from_raw(bytes(value), info.scale), info.precision), None
    if info.type is ValueType.UUID:
        return uuid.UUID(str(value)), None
    if info.type is ValueType.FLOAT:
        return _float32(float(value)), None
    return value, None


def range_from_record(record: Mapping[str, Any]) -> ColumnRange:
    """A stored column-stats (or partition-stats) record, as fastavro decodes it, back to a range
    (``HoodieColumnRangeMetadata.fromColumnStats``): the input for recomputing partition statistics. Raises
    ``MetadataTableError`` for a record that holds no well-formed column statistics."""
    key = record.get("key")
    body = record.get("ColumnStatsMetadata", record)
    if isinstance(body, tuple):
        body = body[1]
    if not isinstance(body, Mapping):
        raise MetadataTableError(f"metadata record {key!r} holds no column statistics")
    try:
        column = str(body["columnName"])
        type_info = body.get("valueType")
        if isinstance(type_info, tuple):
            type_info = type_info[1]
        if type_info is None:
            info = V1_INFO
        else:
            vt = ValueType(int(type_info["typeOrdinal"]))
            precision = scale = None
            if vt is ValueType.DECIMAL:
                p, s = str(type_info["additionalInfo"]).split(",")
                precision, scale = int(p), int(s)
            info = ValueInfo(vt, precision, scale)
        lo, w1 = _unwrap(body.get("minValue"), info, column)
        hi, w2 = _unwrap(body.get("maxValue"), info, column)
        return ColumnRange(str(body["fileName"]), column, lo, hi, int(body["nullCount"]), int(body["valueCount"]),
                           int(body["totalSize"]), int(body["totalUncompressedSize"]), info, w1 or w2)
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        raise MetadataTableError(f"metadata record {key!r}: malformed column statistics ({e!r})") from e
