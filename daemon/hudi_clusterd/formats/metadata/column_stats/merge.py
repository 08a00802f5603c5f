"""Merging column ranges as Hudi does: Java ``compareTo`` order, min of mins and max of maxes, and the
partition statistics of a partition from its files' ranges, V2 values first brought to the table schema's
type."""

from __future__ import annotations

import math
import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace
from decimal import Decimal
from typing import Any

from hudi_clusterd.errors import MetadataTableError, UnsupportedTableError
from hudi_clusterd.formats.metadata.column_stats.values import (
    INTEGRAL,
    UNIT_NANOS,
    ColumnRange,
    ValueInfo,
    ValueType,
    float32,
    round_precision,
    unscaled_to_decimal,
)

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
        if float32(float(text)) == value:
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
    if t is ValueType.FLOAT and s in (*INTEGRAL, ValueType.BOOLEAN, ValueType.DOUBLE):
        return float32(float(value))
    if t is ValueType.DOUBLE and s in (*INTEGRAL, ValueType.BOOLEAN):
        return float(value)
    if t is ValueType.DOUBLE and s is ValueType.FLOAT:
        return float(_java_float_string(value))  # Double.valueOf(val + "")
    if t is ValueType.STRING and s in (*INTEGRAL, ValueType.BOOLEAN):
        return ("true" if value else "false") if isinstance(value, bool) else str(value)
    if t in (ValueType.BYTES, ValueType.FIXED) and isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if t is ValueType.BYTES and isinstance(value, str):
        return value.encode("utf-8")
    if t is ValueType.DECIMAL and s in INTEGRAL:
        assert target.precision is not None and target.scale is not None
        return round_precision(unscaled_to_decimal(int(value), target.scale), target.precision)
    if t in UNIT_NANOS and s in UNIT_NANOS and (t.name.startswith("LOCAL") == s.name.startswith("LOCAL")):
        return int(value) * UNIT_NANOS[s] // UNIT_NANOS[t]
    if t in UNIT_NANOS and s is ValueType.LONG:
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
