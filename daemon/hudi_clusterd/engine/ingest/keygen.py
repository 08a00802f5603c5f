"""Record keys and partition paths as Spark columns, computed the way Hudi's key generators compute them.

- Simple key generator (one record-key field): the value as a string; null or empty is an error.
- Complex key generator (several fields, or ``ComplexKeyGenerator`` configured): ``f1:v1,f2:v2``; a null value is
  written ``__null__`` and an empty one ``__empty__``; all of them null or empty is an error.
- Non-partitioned key generator: the key as above, partition path ``""``.
- Partition path: the partition fields' values joined with ``/``; hive style writes ``field=value``; with
  URL encoding (``hoodie.datasource.write.partitionpath.urlencode``) values are escaped like Hive path names;
  a null or empty value becomes ``__HIVE_DEFAULT_PARTITION__``.

Values become strings as Hudi's Avro path renders them: timestamps as their microseconds since the epoch,
dates as ``yyyy-MM-dd``, everything else as Spark's string cast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hudi_clusterd.domain.table_config import (
    COMPLEX_KEYGEN,
    KEYGEN_CLASS,
    NONPARTITIONED_KEYGEN,
    SIMPLE_KEYGEN,
    TableConfig,
)
from hudi_clusterd.errors import TableError, UnsupportedTableError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_KEY_PLACEHOLDER = "__null__"
EMPTY_KEY_PLACEHOLDER = "__empty__"
# Characters Hive (and Hudi's PartitionPathEncodeUtils) escape in path names, as %XX.
_ESCAPED_CHARS = "%" + "".join(chr(c) for c in range(1, 0x20)) + "\"#'*/:=?\\\x7f{[]^"
_SUPPORTED_KEYGENS = frozenset({"", SIMPLE_KEYGEN, COMPLEX_KEYGEN, NONPARTITIONED_KEYGEN,
                                "org.apache.hudi.keygen.SimpleAvroKeyGenerator",
                                "org.apache.hudi.keygen.ComplexAvroKeyGenerator",
                                "org.apache.hudi.keygen.NonpartitionedAvroKeyGenerator"})


@dataclass(frozen=True, slots=True)
class KeySpec:
    """How a table derives record keys and partition paths."""

    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    complex_keys: bool = False
    hive_style: bool = False
    url_encode: bool = False

    @classmethod
    def from_config(cls, config: TableConfig) -> KeySpec:
        """The key spec a table's ``hoodie.properties`` describes; refuses key generators we cannot mimic."""
        keygen = config.key_generator
        if keygen not in _SUPPORTED_KEYGENS:
            raise UnsupportedTableError(
                f"{KEYGEN_CLASS}={keygen}: writing with this key generator is not supported (simple, complex and "
                "non-partitioned key generators are)")
        fields = config.record_key_fields
        if not fields:
            raise TableError("the table has no record key fields (hoodie.table.recordkey.fields)")
        complex_keys = keygen.endswith(("ComplexKeyGenerator", "ComplexAvroKeyGenerator")) or len(fields) > 1
        return cls(fields, config.partition_fields, complex_keys, config.hive_style_partitioning,
                   config.url_encode_partitioning)

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column the key and partition path are built from."""
        return tuple(dict.fromkeys(self.record_key_fields + self.partition_fields))


def _string_value(df: DataFrame, name: str) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

    col = df[name] if "." not in name else F.col(name)
    dtype = df.select(col).schema.fields[0].dataType
    if isinstance(dtype, (TimestampType, TimestampNTZType)):
        return F.unix_micros(col.cast("timestamp")).cast("string")
    if isinstance(dtype, DateType):
        return F.date_format(col, "yyyy-MM-dd")
    return col.cast("string")


def record_key_column(df: DataFrame, spec: KeySpec) -> Column:
    """The ``_hoodie_record_key`` value of each row; a row without a usable key fails the Spark job with a
    message naming the field."""
    from pyspark.sql import functions as F

    if not spec.complex_keys:
        field = spec.record_key_fields[0]
        value = _string_value(df, field)
        return F.when(value.isNull() | (value == F.lit("")), F.raise_error(F.lit(
            f"record key field {field!r} is null or empty in a row; every row needs a record key"))
        ).otherwise(value)
    parts = []
    missing = F.lit(True)
    for field in spec.record_key_fields:
        value = _string_value(df, field)
        absent = value.isNull() | (value == F.lit(""))
        missing = missing & absent
        shown = F.when(value.isNull(), F.lit(NULL_KEY_PLACEHOLDER)).when(
            value == F.lit(""), F.lit(EMPTY_KEY_PLACEHOLDER)).otherwise(value)
        parts.append(F.concat(F.lit(f"{field}:"), shown))
    fields = ",".join(spec.record_key_fields)
    return F.when(missing, F.raise_error(F.lit(
        f"record key fields {fields!r} are all null or empty in a row; every row needs a record key"))
    ).otherwise(F.concat_ws(",", *parts))


def _escaped(value: Column) -> Column:
    from pyspark.sql import functions as F

    for ch in _ESCAPED_CHARS:  # '%' first, so escapes are not escaped again
        value = F.replace(value, F.lit(ch), F.lit(f"%{ord(ch):02X}"))
    return value


def partition_path_column(df: DataFrame, spec: KeySpec) -> Column:
    """The ``_hoodie_partition_path`` value of each row (``""`` for a non-partitioned table)."""
    from pyspark.sql import functions as F

    if not spec.partition_fields:
        return F.lit("")
    parts = []
    for field in spec.partition_fields:
        value = _string_value(df, field)
        encoded = _escaped(value) if spec.url_encode else value
        part = F.when(value.isNull() | (value == F.lit("")), F.lit(HIVE_DEFAULT_PARTITION)).otherwise(encoded)
        parts.append(F.concat(F.lit(f"{field}="), part) if spec.hive_style else part)
    return F.concat_ws("/", *parts)
