"""The values of column and partition statistics: Hudi's value types (V2) and index versions, a column's
value type, the range of one column over one file or partition, and the decimal and float helpers every
concern of the package shares."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal
from enum import IntEnum
from typing import Any

NAMESPACE = "org.apache.hudi.avro.model."

DECIMAL_WRAPPER_SCALE = 15
DECIMAL_WRAPPER_PRECISION = 30


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


PRIMITIVE_WRAPPER = {
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

UNIT_NANOS = {
    ValueType.TIMESTAMP_MILLIS: 1_000_000, ValueType.TIMESTAMP_MICROS: 1_000, ValueType.TIMESTAMP_NANOS: 1,
    ValueType.LOCAL_TIMESTAMP_MILLIS: 1_000_000, ValueType.LOCAL_TIMESTAMP_MICROS: 1_000,
    ValueType.LOCAL_TIMESTAMP_NANOS: 1,
}
INTEGRAL = (ValueType.INT, ValueType.LONG)


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


class FileUnsupported(Exception):
    """Hudi's reader throws for this file; its catch-all then writes no statistics for the whole file."""


def float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def unscaled_to_decimal(unscaled: int, scale: int) -> Decimal:
    sign = 1 if unscaled < 0 else 0
    digits = tuple(int(d) for d in str(abs(unscaled)))
    return Decimal((sign, digits, -scale))


def decimal_from_raw(raw: Any, scale: int) -> Decimal:
    if isinstance(raw, (bytes, bytearray)):
        return unscaled_to_decimal(int.from_bytes(raw, "big", signed=True), scale)
    return unscaled_to_decimal(int(raw), scale)


def round_precision(value: Decimal, precision: int) -> Decimal:
    """``new MathContext(precision, HALF_UP)`` rounding (a no-op for values that fit)."""
    if len(value.as_tuple().digits) <= precision:
        return value
    return Context(prec=precision, rounding=ROUND_HALF_UP).create_decimal(value)
