"""A file's column ranges from its parquet footer, as Hudi's ``ParquetUtils.readColumnStatsFromMetadata`` reads
them: the footer walked by ``formats.parquet_stats``, with Hudi's rules on top (parquet-mr's defaults for chunks
without min/max, NaN dropped, signed zeros, the null count of a chunk without statistics, V1 and V2 values)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from hudi_clusterd.errors import UnsupportedTableError
from hudi_clusterd.formats.metadata.column_stats.merge import merge_ranges
from hudi_clusterd.formats.metadata.column_stats.values import (
    STRING_INFO,
    V1_INFO,
    ColumnRange,
    FileUnsupported,
    IndexVersion,
    ValueInfo,
    ValueType,
    decimal_from_raw,
    float32,
    round_precision,
)
from hudi_clusterd.formats.metadata.table_format import for_table_version
from hudi_clusterd.formats.parquet_stats import ChunkStats, LogicalType, column_chunks, leaf_columns

_NUMERIC_DEFAULT: dict[str, Any] = {"BOOLEAN": False, "INT32": 0, "INT64": 0, "FLOAT": 0.0, "DOUBLE": 0.0}
"""What parquet-mr's ``genericGetMin``/``genericGetMax`` return for a chunk without min/max."""


def _canonical_path(path: str) -> str:
    """1.x ``convertArrayToListElement``: Spark's ``.array`` list paths named as ``.list.element``."""
    return path.replace(".array.", ".list.element.").replace(".array", ".list.element")


def _array_path(path: str) -> str:
    return path.replace(".list.element.", ".array.").replace(".list.element", ".array")


def _chunk_min_max(chunk: ChunkStats) -> tuple[Any, Any, bool]:
    """(min, max, has min/max) of a chunk as parquet-mr's footer reader gives them."""
    physical = chunk.physical_type
    if not chunk.has_min_max or physical == "INT96":
        default = _NUMERIC_DEFAULT.get(physical)
        return default, default, False
    lo, hi = chunk.min_raw, chunk.max_raw
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


def _null_count(chunk: ChunkStats, has_min_max: bool) -> int:
    """``stats.isEmpty() ? valueCount : stats.getNumNulls()`` (-1 when min/max are set but nulls are not)."""
    if not has_min_max and chunk.null_count is None:
        return chunk.value_count
    return chunk.null_count if chunk.null_count is not None else -1


def _v2_value_info(physical: str, logical: LogicalType) -> ValueInfo:
    """``ValueType.fromParquetPrimitiveType`` (annotation first, then the physical type)."""
    name, details = logical.name, logical.params
    if name == "NONE":
        by_physical = {"INT64": ValueType.LONG, "INT32": ValueType.INT, "BOOLEAN": ValueType.BOOLEAN,
                       "BYTE_ARRAY": ValueType.BYTES, "FLOAT": ValueType.FLOAT, "DOUBLE": ValueType.DOUBLE,
                       "FIXED_LEN_BYTE_ARRAY": ValueType.FIXED}
        if physical not in by_physical:
            raise FileUnsupported(f"physical type {physical}")
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
        raise FileUnsupported(f"time unit {unit}")
    if name == "TIMESTAMP":
        utc = bool(details.get("isAdjustedToUTC"))
        unit = str(details.get("timeUnit"))
        table = {("milliseconds", True): ValueType.TIMESTAMP_MILLIS, ("microseconds", True): ValueType.TIMESTAMP_MICROS,
                 ("nanoseconds", True): ValueType.TIMESTAMP_NANOS,
                 ("milliseconds", False): ValueType.LOCAL_TIMESTAMP_MILLIS,
                 ("microseconds", False): ValueType.LOCAL_TIMESTAMP_MICROS,
                 ("nanoseconds", False): ValueType.LOCAL_TIMESTAMP_NANOS}
        if (unit, utc) not in table:
            raise FileUnsupported(f"timestamp unit {unit}")
        return ValueInfo(table[(unit, utc)])
    if name == "UUID":
        return ValueInfo(ValueType.UUID)
    raise FileUnsupported(f"logical type {name}")


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
        return round_precision(decimal_from_raw(raw, info.scale), info.precision)
    if t is ValueType.UUID:
        raise FileUnsupported("UUID statistics (castToUUID rejects parquet binaries)")
    if t is ValueType.TIME_MILLIS and not 0 <= int(raw) < 86_400_000:
        raise FileUnsupported("time-millis value out of a day")
    if t is ValueType.TIME_MICROS and not 0 <= int(raw) < 86_400_000_000:
        raise FileUnsupported("time-micros value out of a day")
    if t is ValueType.FLOAT:
        return float32(float(raw))
    if t is ValueType.DOUBLE:
        return float(raw)
    if t is ValueType.BOOLEAN:
        return bool(raw)
    return int(raw)


def _v1_value(raw: Any, physical: str, logical: LogicalType, path: str) -> tuple[Any, str | None]:
    """0.15 ``convertToNativeJavaType`` + ``wrapValueIntoAvro``: (value, wrapper)."""
    if raw is None:
        return None, None
    name, details = logical.name, logical.params
    if name == "DECIMAL":
        return decimal_from_raw(raw, int(details["scale"])), "DecimalWrapper"
    if name == "DATE":
        return int(raw), "DateWrapper"
    if name == "STRING":
        return bytes(raw).decode("utf-8", errors="replace"), "StringWrapper"
    if physical == "BYTE_ARRAY":
        return bytes(raw), "BytesWrapper"
    if physical in ("FIXED_LEN_BYTE_ARRAY", "INT96"):
        raise UnsupportedTableError(f"column {path}: Hudi cannot store statistics of {physical} "
                                    "values without a decimal type (its commit fails)")
    if physical == "BOOLEAN":
        return bool(raw), "BooleanWrapper"
    if physical == "INT32":
        return int(raw), "IntWrapper"
    if physical == "INT64":
        return int(raw), "LongWrapper"
    if physical == "FLOAT":
        return float32(float(raw)), "FloatWrapper"
    return float(raw), "DoubleWrapper"


def file_column_ranges(metadata: Any, file_name: str, columns: Iterable[str], *, table_version: int,
                       version: IndexVersion, on_dropped: Callable[[str], None] | None = None) -> list[ColumnRange]:
    """Per indexed column present in the file, its range from the footer (``pyarrow.parquet.FileMetaData``),
    as Hudi's ``ParquetUtils.readColumnStatsFromMetadata`` reads it; in the order of ``columns``.

    Empty when Hudi would drop the file's statistics (V2 value types it cannot handle, or no row groups); for
    the former, ``on_dropped`` is told why. Raises ``UnsupportedTableError`` where Hudi's commit itself would
    fail (V1 fixed or INT96 values)."""
    wanted = list(dict.fromkeys(columns))
    lists = for_table_version(table_version).list_element_paths
    match: dict[str, str] = {}
    for column in wanted:
        match[column] = column
        if lists:
            match.setdefault(_array_path(column), column)
    if metadata.num_row_groups == 0:
        return []
    picked = [(i, _canonical_path(path) if lists else path) for path, i in leaf_columns(metadata).items()
              if path in match]
    ranges: dict[str, ColumnRange] = {}
    try:
        for index, name in picked:
            info: ValueInfo | None = None
            physical = ""
            for chunk in column_chunks(metadata, index, logical=True):
                assert chunk.logical_type is not None
                if info is None:
                    physical = chunk.physical_type
                    info = _v2_value_info(physical, chunk.logical_type) if version is IndexVersion.V2 else V1_INFO
                lo, hi, has_min_max = _chunk_min_max(chunk)
                wrapper: str | None = None
                if version is IndexVersion.V2:
                    lo, hi = _v2_value(lo, info), _v2_value(hi, info)
                else:
                    lo, w1 = _v1_value(lo, physical, chunk.logical_type, chunk.path)
                    hi, w2 = _v1_value(hi, physical, chunk.logical_type, chunk.path)
                    wrapper = w1 or w2
                piece = ColumnRange(file_name, name, lo, hi, _null_count(chunk, has_min_max), chunk.value_count,
                                    chunk.compressed_size, chunk.uncompressed_size, info, wrapper)
                ranges[name] = merge_ranges(ranges[name], piece) if name in ranges else piece
    except FileUnsupported as e:
        if on_dropped is not None:
            on_dropped(str(e))
        return []
    order = {(_canonical_path(c) if lists else c): n for n, c in enumerate(wanted)}
    return sorted(ranges.values(), key=lambda cr: order.get(cr.column, len(order)))
