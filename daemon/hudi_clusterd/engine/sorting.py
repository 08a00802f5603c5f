"""Order a clustering group's rows for layout: linear, Z-order or Hilbert, range-partitioned for the writer.

`sort_for_layout` returns the input DataFrame range-partitioned into ``num_partitions`` Spark partitions
(one per output file group) and sorted within each partition, with exactly the input columns.

Curve layouts, and linear ones computed in a scan (below), first draw one uniform sample of at most
``sample_size`` rows (Bernoulli on the row count, capped; only the sort columns are read). A single executor
task turns it into small arrays: for the ``SAMPLE`` curve build, each column's quantile boundaries; always,
the ``num_partitions - 1`` layout keys that split the sample into equal parts. Only those arrays reach the
driver (a few KiB per column); they travel to the executors in the closures that compute each row's key and
range partition (a binary search among the split keys). The rows then move with ``repartitionById`` +
``sortWithinPartitions``: range partitioning as ``repartitionByRange`` would do it, minus its own sampling
job, which would read the whole input a second time.

* ``ZORDER`` / ``HILBERT``: the key is the curve key (`curves`), as ``int64`` words (one for two sampled
  dimensions, so Spark can radix-sort it); rows sort by those words.
* ``LINEAR`` — and any single sort column, whatever the strategy, since a curve over one dimension is that
  dimension's order (Hudi does the same): the key (`curves.linear_keys`) only places rows in partitions; rows
  sort by the columns themselves, nulls first. Columns whose keys may tie on a shared prefix (strings,
  binaries, decimals wider than 18 digits) keep Spark's ``repartitionByRange`` instead: no Python runs.

Where the keys are computed: given a `scan.GroupScan` (clustering always gives one), the Python workers read
the group's files themselves and add the key on the way, one hand-over of the rows into the JVM. Without one
(any DataFrame), a scalar Arrow UDF that receives only the sort columns computes the curve key.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import structlog

from hudi_clusterd.domain.layout import CurveBuildMethod, LayoutStrategy
from hudi_clusterd.errors import PlanError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

    from hudi_clusterd.engine.scan import GroupScan

log = structlog.get_logger(__name__)

KEY_COLUMN = "_hoodie_clusterd_layout_key"
SAMPLE_SEED = 42
"""Seed of the row sample (a fixed input gives fixed boundaries and split keys)."""


@dataclass(frozen=True, slots=True, eq=False)
class CurvePartitioning:
    """What the sample taught: coordinate boundaries (``SAMPLE`` build; None for ``DIRECT``) and split keys.

    ``split_keys`` are ascending; partition ``p`` receives the keys in ``(split_keys[p-1], split_keys[p]]``.
    """

    strategy: LayoutStrategy
    boundaries: tuple[np.ndarray, ...] | None
    split_keys: tuple[bytes, ...]
    sample_rows: int

    def keys(self, columns: Sequence[pa.Array]) -> np.ndarray:
        """Curve keys of a batch of sort-column values, ``(n, width)`` ``uint8``."""
        from hudi_clusterd.engine import curves

        return curves.curve_keys(columns, self.strategy, self.boundaries)

    def partitions(self, keys: np.ndarray) -> np.ndarray:
        """Range partition of each key (``int32``)."""
        if not self.split_keys:
            return np.zeros(keys.shape[0], np.int32)
        width = keys.shape[1]
        splits = np.array(self.split_keys, dtype=f"S{width}")
        # Equal-width byte strings compare lexicographically as numpy "S" values do.
        as_strings = np.ascontiguousarray(keys).view(f"S{width}").reshape(-1)
        return np.searchsorted(splits, as_strings, side="left").astype(np.int32)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _column(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(_quoted(name))


def _validate(df: DataFrame, sort_columns: Sequence[str], sample_size: int, num_partitions: int) -> None:
    """Every sort column must exist at the top level and have a type we can order by."""
    from pyspark.sql import types as T

    if num_partitions < 1:
        raise PlanError(f"number of output partitions must be >= 1, got {num_partitions}")
    if sample_size < 1:
        raise PlanError(f"sample size must be >= 1, got {sample_size}")
    if not sort_columns:
        raise PlanError("no sort columns given for a layout sort")
    if len(set(sort_columns)) != len(sort_columns):
        raise PlanError(f"sort columns repeat a column: {list(sort_columns)}")
    supported = (
        T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType,
        T.StringType, T.BinaryType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType,
    )  # fmt: skip
    nested = (T.StructType, T.ArrayType, T.MapType)
    fields = {f.name: f for f in df.schema.fields}
    for name in sort_columns:
        field = fields.get(name)
        if field is None:
            raise PlanError(f"sort column {name!r} is not a top-level column of the data ({sorted(fields)})")
        dtype = field.dataType
        if isinstance(dtype, nested):
            raise PlanError(f"sort column {name!r} has nested type {dtype.simpleString()}; only scalars sort")
        if not isinstance(dtype, supported):
            raise PlanError(f"sort column {name!r} has unsupported type {dtype.simpleString()}")


def _split_keys(keys: np.ndarray, num_partitions: int) -> tuple[bytes, ...]:
    """``num_partitions - 1`` keys cutting the sorted sample keys into equal parts."""
    if keys.shape[0] == 0 or num_partitions == 1:
        return ()
    width = keys.shape[1]
    ordered = np.sort(np.ascontiguousarray(keys).view(f"S{width}").reshape(-1))
    m = ordered.size
    cuts = [-(-(p * m) // num_partitions) - 1 for p in range(1, num_partitions)]  # ceil(p*m/n) - 1
    return tuple(ordered[c].ljust(width, b"\0") for c in cuts)


def plan_curve_partitioning(
    df: DataFrame,
    sort_columns: Sequence[str],
    strategy: LayoutStrategy,
    build_method: CurveBuildMethod,
    sample_size: int,
    num_partitions: int,
    rows: int | None = None,
) -> CurvePartitioning:
    """Sample ``df`` once and derive coordinate boundaries (``SAMPLE``) and range-partition split keys.

    The sample is ``min(sample_size, rows)`` rows at most, drawn uniformly (Bernoulli with a fixed seed on
    the row count). One executor task reduces it; the driver receives only the small arrays. ``rows`` is
    ``df``'s row count when the caller knows it already (one job fewer).
    """
    from hudi_clusterd.engine import curves

    names = list(sort_columns)
    count = len(names)
    sample_build = build_method is CurveBuildMethod.SAMPLE and strategy is not LayoutStrategy.LINEAR
    rows = df.count() if rows is None else rows
    empty = tuple(np.zeros(0, np.uint64) for _ in names) if sample_build else None
    if rows == 0:
        return CurvePartitioning(strategy, empty, (), 0)
    fraction = min(1.0, sample_size / rows)
    sample = (
        df.select(*[_column(c).alias(f"c{i}") for i, c in enumerate(names)])
        .sample(withReplacement=False, fraction=fraction, seed=SAMPLE_SEED)
        .limit(sample_size)
        .coalesce(1)
    )

    def summarise(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = [b for b in batches if b.num_rows]
        n = sum(b.num_rows for b in received)
        bounds: list[np.ndarray] = []
        splits: tuple[bytes, ...] = ()
        if n:
            table = pa.Table.from_batches(received)
            columns = [table.column(i).combine_chunks() for i in range(count)]
            if sample_build:
                bounds = [curves.sample_boundaries(curves.direct_coordinates(c)) for c in columns]
            splits = _split_keys(curves.curve_keys(columns, strategy, bounds or None), num_partitions)
        elif sample_build:
            bounds = [np.zeros(0, np.uint64) for _ in range(count)]
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([[b.view(np.int64) for b in bounds]], pa.list_(pa.list_(pa.int64()))),
                pa.array([list(splits)], pa.list_(pa.binary())),
                pa.array([n], pa.int64()),
            ],
            names=["bounds", "splits", "rows"],
        )

    result = sample.mapInArrow(summarise, "bounds array<array<long>>, splits array<binary>, rows long").collect()
    if not result:  # the input has no partitions at all
        return CurvePartitioning(strategy, empty, (), 0)
    if len(result) != 1:
        raise PlanError(f"sampling {names} for a {strategy.value} layout returned {len(result)} summaries")
    row = result[0]
    boundaries = None
    if sample_build:
        boundaries = tuple(np.asarray(b, dtype=np.int64).view(np.uint64) for b in row["bounds"])
    return CurvePartitioning(strategy, boundaries, tuple(bytes(s) for s in row["splits"]), int(row["rows"]))


def key_fields(dims: int, partitioning: CurvePartitioning) -> list[str]:
    """Names of the ``int64`` key words in the layout-key struct (``k0``, ``k1``, …), most significant first."""
    from hudi_clusterd.engine import curves

    if partitioning.strategy is LayoutStrategy.LINEAR:  # rows sort by their own columns; only the partition counts
        return []
    width = curves.key_width(dims, partitioning.boundaries is not None)
    return [f"k{i}" for i in range(-(-width // 8))]


def key_struct_type(dims: int, partitioning: CurvePartitioning) -> StructType:
    """Spark type of the layout key: ``struct<partition: int, k0: long, …>``."""
    from pyspark.sql import types as T

    words = key_fields(dims, partitioning)
    return T.StructType(
        [T.StructField("partition", T.IntegerType(), False)] + [T.StructField(w, T.LongType(), False) for w in words]
    )


def key_arrays(partitioning: CurvePartitioning, columns: Sequence[pa.Array]) -> pa.StructArray:
    """The layout key of a batch of sort-column values: its range partition and its ``int64`` key words."""
    from hudi_clusterd.engine import curves

    keys = partitioning.keys(columns)
    arrays = [pa.array(partitioning.partitions(keys), pa.int32())]
    words = key_fields(len(columns), partitioning)
    if words:  # none for a linear layout
        word_columns = curves.keys_to_words(keys)
        arrays += [pa.array(word_columns[:, i]) for i in range(len(words))]
    return pa.StructArray.from_arrays(arrays, names=["partition", *words])


def with_layout_key(
    df: DataFrame, sort_columns: Sequence[str], partitioning: CurvePartitioning, key_column: str = KEY_COLUMN
) -> DataFrame:
    """``df`` plus a ``struct<partition: int, k0: long, …>`` layout-key column computed from ``sort_columns``
    by a scalar Arrow UDF.

    Sorting by ``k0, k1, …`` is sorting by the curve key (see `curves.keys_to_words`); ``partition`` is
    the key's range partition.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.functions import arrow_udf

    count = len(sort_columns)

    def layout_key(columns: pa.Array) -> pa.Array:
        return key_arrays(partitioning, [columns.field(i) for i in range(count)])

    # The hints on `layout_key` (resolved against this module's `pa`) make it a scalar Arrow UDF.
    key_udf: Any = arrow_udf(layout_key, key_struct_type(count, partitioning))  # type: ignore[call-overload]
    packed = F.struct(*[_column(c).alias(f"c{i}") for i, c in enumerate(sort_columns)])
    return df.withColumn(key_column, key_udf(packed))


def scan_with_layout_key(
    scan: GroupScan, sort_columns: Sequence[str], partitioning: CurvePartitioning, key_column: str = KEY_COLUMN
) -> DataFrame:
    """The scanned group's rows plus the layout-key column, computed as the files are read (see `scan`)."""
    names = list(sort_columns)

    def layout_key(batch: pa.RecordBatch) -> pa.Array:
        return key_arrays(partitioning, [batch.column(name) for name in names])

    return scan.with_key(key_column, key_struct_type(len(names), partitioning), layout_key)


def _exact_linear_keys(df: DataFrame, sort_columns: Sequence[str]) -> bool:
    """True when `curves.linear_keys` order these columns exactly (numbers, dates, timestamps, booleans): range
    partitions cut on those keys are then as even as Spark's own. Strings, binaries and wide decimals tie on a
    shared prefix, which could pile rows into one partition, so those keep Spark's ``repartitionByRange``."""
    from pyspark.sql import types as T

    exact = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.BooleanType,
             T.DateType, T.TimestampType, T.TimestampNTZType)
    fields = {f.name: f.dataType for f in df.schema.fields}
    for name in sort_columns:
        dtype = fields[name]
        if not (isinstance(dtype, exact) or (isinstance(dtype, T.DecimalType) and dtype.precision <= 18)):
            return False
    return True


def _key_name(df: DataFrame) -> str:
    name = KEY_COLUMN
    while name in df.columns:
        name = "_" + name
    return name


def sort_for_layout(
    df: DataFrame,
    sort_columns: Sequence[str],
    strategy: LayoutStrategy,
    build_method: CurveBuildMethod,
    sample_size: int,
    num_partitions: int,
    rows: int | None = None,
    scan: GroupScan | None = None,
) -> DataFrame:
    """Range-partition ``df`` into ``num_partitions`` partitions, each sorted in the layout's order.

    Returns exactly ``df``'s columns. Nulls sort first. ``rows``: ``df``'s row count, when known. ``scan``:
    the files ``df`` reads, for the layout to read them itself with the key computed on the way
    (`scan_with_layout_key`) instead of running a UDF over ``df`` (curves) or Spark's range partitioning
    (linear, on exactly ordered columns); its schema must be ``df``'s. Raises `PlanError` for a missing, nested
    or unsupported sort column, or non-positive ``num_partitions`` / ``sample_size``.
    """
    _validate(df, sort_columns, sample_size, num_partitions)
    columns = list(sort_columns)
    linear = strategy is LayoutStrategy.LINEAR or len(columns) == 1
    by_columns = [_column(c).asc_nulls_first() for c in columns]
    if linear:
        scanned = scan is not None and _exact_linear_keys(df, columns)
        log.debug("layout sort", strategy="linear", columns=columns, partitions=num_partitions, scan=scanned)
        if not scanned:
            return df.repartitionByRange(num_partitions, *by_columns).sortWithinPartitions(*by_columns)
        strategy, build_method = LayoutStrategy.LINEAR, CurveBuildMethod.DIRECT

    partitioning = plan_curve_partitioning(df, columns, strategy, build_method, sample_size, num_partitions, rows)
    if not linear:
        log.debug(
            "layout sort",
            strategy=strategy.value,
            build=build_method.value,
            columns=columns,
            partitions=num_partitions,
            sample_rows=partitioning.sample_rows,
            boundaries=None if partitioning.boundaries is None else [int(b.size) for b in partitioning.boundaries],
        )
    key = _key_name(df)
    if scan is not None:
        keyed = scan_with_layout_key(scan, columns, partitioning, key)
    else:
        keyed = with_layout_key(df, columns, partitioning, key)
    # a linear layout sorts by the columns themselves; a curve by its key's words
    order = by_columns if linear else [_column(key).getField(w) for w in key_fields(len(columns), partitioning)]
    return (
        keyed.repartitionById(num_partitions, _column(key).getField("partition")).sortWithinPartitions(*order).drop(key)
    )
