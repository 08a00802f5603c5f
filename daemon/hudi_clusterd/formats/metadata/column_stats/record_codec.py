"""Column and partition statistics as metadata records: their keys, the ``HoodieMetadataRecord`` of each range
(min/max in their Avro wrappers, for the schema of the table version), and stored records decoded back into
ranges."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Mapping
from decimal import Context, Decimal
from typing import Any

from hudi_clusterd.errors import MetadataTableError, UnsupportedTableError
from hudi_clusterd.formats.metadata.column_stats.merge import partition_ranges
from hudi_clusterd.formats.metadata.column_stats.values import (
    DECIMAL_WRAPPER_PRECISION,
    DECIMAL_WRAPPER_SCALE,
    NAMESPACE,
    PRIMITIVE_WRAPPER,
    V1_INFO,
    ColumnRange,
    ValueInfo,
    ValueType,
    decimal_from_raw,
    float32,
    round_precision,
    unscaled_to_decimal,
)
from hudi_clusterd.formats.metadata.hash_id import file_id, name_id
from hudi_clusterd.formats.metadata.records import NON_PARTITIONED_NAME, TYPE_COLUMN_STATS, TYPE_PARTITION_STATS
from hudi_clusterd.formats.metadata.table_format import for_table_version


def partition_identifier(partition: str) -> str:
    return NON_PARTITIONED_NAME if partition == "" else partition


def column_stats_key(column: str, partition: str, file_name: str) -> str:
    """``HoodieMetadataPayload.getColumnStatsIndexKey``: column id + partition id (``.`` for ``""``) + file id."""
    return name_id(column) + name_id(partition_identifier(partition)) + file_id(file_name)


def partition_stats_key(column: str, partition: str) -> str:
    """``HoodieTableMetadataUtil.getPartitionStatsIndexKey``: column id + partition id."""
    return name_id(column) + name_id(partition_identifier(partition))


def column_stats_key_prefix(column: str, partition: str) -> str:
    """The prefix every column-stats key of ``column`` in ``partition`` starts with (Hudi's prefix lookup)."""
    return partition_stats_key(column, partition)


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
    scaled = value.quantize(Decimal(1).scaleb(-DECIMAL_WRAPPER_SCALE), context=Context(prec=200))
    if scaled != value:
        raise UnsupportedTableError(f"column {column!r}: decimal {value} cannot be stored at scale 15 "
                                    "(Hudi's commit fails)")
    if len(scaled.as_tuple().digits) > DECIMAL_WRAPPER_PRECISION:
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
    wrapper = PRIMITIVE_WRAPPER[info.type]
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
            value = unscaled_to_decimal(int.from_bytes(value, "big", signed=True), DECIMAL_WRAPPER_SCALE)
        elif wrapper == "TimeMicrosWrapper" and not isinstance(value, int):
            value = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        return value, wrapper
    expected = PRIMITIVE_WRAPPER.get(info.type)
    if wrapper is not None and wrapper != expected:
        raise MetadataTableError(f"column {column!r}: a {info.type.name} statistic stored in {wrapper}")
    if info.type is ValueType.DECIMAL:
        assert info.precision is not None and info.scale is not None
        return round_precision(decimal_from_raw(bytes(value), info.scale), info.precision), None
    if info.type is ValueType.UUID:
        return uuid.UUID(str(value)), None
    if info.type is ValueType.FLOAT:
        return float32(float(value)), None
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
