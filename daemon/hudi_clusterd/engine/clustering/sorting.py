"""Order a clustering group's rows for layout: linear, Z-order or Hilbert, range-partitioned for the writer.

Two ways, one order:

* `exchange_layout` (clustering): the group's files are read in the Python workers (`scan.GroupScan`), every
  row gets its range and layout key on the way, and the rows travel to the writer as sorted Arrow runs
  (`exchange`). Used for every curve, and for linear layouts whose columns order exactly through their 64-bit
  coordinates (numbers, dates, timestamps, booleans, decimals up to 18 digits).
* `sort_for_layout` (any DataFrame): the same ranges and keys in Spark: a scalar Arrow UDF computes the curve
  key, and ``repartitionById`` + ``sortWithinPartitions`` move and sort the rows; linear layouts use Spark's
  ``repartitionByRange`` (also the clustering path for strings, binaries and wide decimals, whose keys can tie
  on a shared prefix and pile rows into one range).

Both first draw one uniform sample of at most ``sample_size`` rows (Bernoulli on the row count, capped; only
the sort columns are read; `plan_curve_partitioning`). A single executor task turns it into small arrays: for
the ``SAMPLE`` curve build, each column's quantile boundaries; always, the split keys that cut the sample into
equal ranges. Only those arrays reach the driver (a few KiB per column); they travel to the executors in the
closures that compute each row's key and range (a binary search among the split keys).

* ``ZORDER`` / ``HILBERT``: the key is the curve key (`curves`).
* ``LINEAR`` — and any single sort column, whatever the strategy, since a curve over one dimension is that
  dimension's order (Hudi does the same): the columns' order, nulls first (`curves.linear_keys`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import structlog

from hudi_clusterd.domain.policy_keys import ClusteringKey
from hudi_clusterd.domain.row_order import CurveBuildMethod, LayoutStrategy
from hudi_clusterd.domain.sort_columns import ColumnKind, sort_column_problems
from hudi_clusterd.errors import PlanError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from hudi_clusterd.engine.clustering.exchange import RangeKeys, SortedRuns
    from hudi_clusterd.engine.clustering.scan import GroupScan

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
        from hudi_clusterd.ordering import curves

        return curves.curve_keys(columns, self.strategy, self.boundaries)

    def partitions(self, keys: np.ndarray, words: np.ndarray | None = None) -> np.ndarray:
        """Range partition of each key (``int32``). ``words``: the keys' `curves.keys_to_words`, when the caller
        has them. Keys of one word (up to 8 bytes: two to four sampled dimensions) are searched among ``int64``
        split words, several times faster than among byte strings, in the same order."""
        from hudi_clusterd.ordering import curves

        if not self.split_keys:
            return np.zeros(keys.shape[0], np.int32)
        width = keys.shape[1]
        if width <= 8:
            splits = np.frombuffer(b"".join(self.split_keys), np.uint8).reshape(len(self.split_keys), width)
            words = curves.keys_to_words(keys) if words is None else words
            return np.searchsorted(curves.keys_to_words(splits)[:, 0], words[:, 0], side="left").astype(np.int32)
        splits = np.array(self.split_keys, dtype=f"S{width}")
        # Equal-width byte strings compare lexicographically as numpy "S" values do.
        as_strings = np.ascontiguousarray(keys).view(f"S{width}").reshape(-1)
        return np.searchsorted(splits, as_strings, side="left").astype(np.int32)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _column(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(_quoted(name))


def spark_column_kinds(df: DataFrame) -> dict[str, ColumnKind]:
    """Top-level column kinds of a DataFrame, for the sort-column rule of ``domain.sort_columns``."""
    from pyspark.sql import types as T

    scalars = (
        T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType,
        T.StringType, T.BinaryType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType,
    )  # fmt: skip
    nested = (T.StructType, T.ArrayType, T.MapType)
    kinds: dict[str, ColumnKind] = {}
    for f in df.schema.fields:
        if isinstance(f.dataType, nested):
            kinds[f.name] = ColumnKind.NESTED
        else:
            kinds[f.name] = ColumnKind.SCALAR if isinstance(f.dataType, scalars) else ColumnKind.UNSUPPORTED
    return kinds


def _validate(df: DataFrame, sort_columns: Sequence[str], sample_size: int, num_partitions: int) -> None:
    """The sort columns follow the one rule of ``domain.sort_columns`` against the data's schema."""
    if num_partitions < 1:
        raise PlanError(f"number of output partitions must be >= 1, got {num_partitions}")
    if sample_size < 1:
        raise PlanError(f"sample size must be >= 1, got {sample_size}")
    if not sort_columns:
        raise PlanError("no sort columns given for a layout sort")
    problems = sort_column_problems(sort_columns, spark_column_kinds(df), key=ClusteringKey.SORT_COLUMNS.value)
    if problems:
        raise PlanError("; ".join(problems))


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
    scan: GroupScan | None = None,
) -> CurvePartitioning:
    """Sample ``df`` once and derive coordinate boundaries (``SAMPLE``) and range-partition split keys.

    The sample is ``min(sample_size, rows)`` rows at most, drawn uniformly (Bernoulli with a fixed seed on
    the row count). One executor task reduces it; the driver receives only the small arrays. ``rows`` is
    ``df``'s row count when the caller knows it already (one job fewer). ``scan``: the files ``df`` reads,
    to draw the sample from the sort columns read with pyarrow (`_scan_sample`) instead of Spark's reader.
    """
    from hudi_clusterd.ordering import curves

    names = list(sort_columns)
    count = len(names)
    sample_build = build_method is CurveBuildMethod.SAMPLE and strategy is not LayoutStrategy.LINEAR
    rows = df.count() if rows is None else rows
    empty = tuple(np.zeros(0, np.uint64) for _ in names) if sample_build else None
    if rows == 0:
        return CurvePartitioning(strategy, empty, (), 0)
    fraction = min(1.0, sample_size / rows)
    if scan is None:
        drawn = df.select(*[_column(c).alias(f"c{i}") for i, c in enumerate(names)]).sample(
            withReplacement=False, fraction=fraction, seed=SAMPLE_SEED)
    else:
        drawn = _scan_sample(scan, names, fraction)
    sample = drawn.limit(sample_size).coalesce(1)

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


def _scan_sample(scan: GroupScan, names: Sequence[str], fraction: float) -> DataFrame:
    """A Bernoulli sample of the sort columns (as ``c0``, ``c1``, …) of the scanned files: each task reads only
    those columns and keeps each row with probability ``fraction``, from a generator seeded with `SAMPLE_SEED`
    and its task index (the same draw on a retry). About a third of the CPU of the same sample through Spark's
    reader, which turns every row of the sort columns into a JVM row to discard most of them."""
    from pyspark.sql.types import StructField, StructType

    fields = {f.name: f for f in scan.schema.fields}
    schema = StructType([StructField(f"c{i}", fields[n].dataType, True) for i, n in enumerate(names)])
    aliases = [f"c{i}" for i in range(len(names))]
    columns = list(names)

    def draw(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        rng = np.random.default_rng([SAMPLE_SEED, ctx.partitionId() if ctx is not None else 0])
        for batch in batches:
            keep = pa.array(rng.random(batch.num_rows) < fraction)
            yield pa.RecordBatch.from_arrays([batch.column(n).filter(keep) for n in columns], names=aliases)

    return scan.map_files(draw, schema, columns=columns)


def key_fields(dims: int, partitioning: CurvePartitioning) -> list[str]:
    """Names of the ``int64`` key words in the layout-key struct (``k0``, ``k1``, …), most significant first."""
    return [f"k{i}" for i in range(key_words(dims, partitioning))]


def with_layout_key(
    df: DataFrame, sort_columns: Sequence[str], partitioning: CurvePartitioning, key_column: str = KEY_COLUMN
) -> DataFrame:
    """``df`` plus a ``struct<partition: int, k0: long, …>`` layout-key column computed from ``sort_columns``
    by a scalar Arrow UDF.

    Sorting by ``k0, k1, …`` is sorting by the curve key (see `curves.keys_to_words`); ``partition`` is
    the key's range partition.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.pandas.functions import arrow_udf

    from hudi_clusterd.ordering import curves

    count = len(sort_columns)
    words = key_fields(count, partitioning)

    def layout_key(columns: pa.Array) -> pa.Array:
        keys = partitioning.keys([columns.field(i) for i in range(count)])
        word_columns = curves.keys_to_words(keys)
        arrays = [pa.array(partitioning.partitions(keys, word_columns), pa.int32()),
                  *(pa.array(word_columns[:, i]) for i in range(len(words)))]
        return pa.StructArray.from_arrays(arrays, names=["partition", *words])

    result_type = T.StructType(
        [T.StructField("partition", T.IntegerType(), False)] + [T.StructField(w, T.LongType(), False) for w in words]
    )
    # The hints on `layout_key` (resolved against this module's `pa`) make it a scalar Arrow UDF.
    key_udf: Any = arrow_udf(layout_key, result_type)  # type: ignore[call-overload]
    packed = F.struct(*[_column(c).alias(f"c{i}") for i, c in enumerate(sort_columns)])
    return df.withColumn(key_column, key_udf(packed))


def _exact_linear_keys(df: DataFrame, sort_columns: Sequence[str]) -> bool:
    """True when `curves.linear_keys` order these columns exactly (numbers, dates, timestamps, booleans, decimals
    up to 18 digits): sorting by the key is then sorting by the columns, and ranges cut on the keys are as even
    as Spark's own. Strings, binaries and wide decimals tie on a shared prefix, which would leave rows unsorted
    within a tie and could pile them into one range, so those keep Spark's ``repartitionByRange``."""
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
) -> DataFrame:
    """Range-partition ``df`` into ``num_partitions`` partitions, each sorted in the layout's order, in Spark.

    Returns exactly ``df``'s columns. Nulls sort first. ``rows``: ``df``'s row count, when known. Raises
    `PlanError` for a missing, nested or unsupported sort column, or non-positive ``num_partitions`` /
    ``sample_size``.
    """
    _validate(df, sort_columns, sample_size, num_partitions)
    columns = list(sort_columns)
    if strategy is LayoutStrategy.LINEAR or len(columns) == 1:
        by_columns = [_column(c).asc_nulls_first() for c in columns]
        log.debug("layout sort", strategy="linear", columns=columns, partitions=num_partitions)
        return df.repartitionByRange(num_partitions, *by_columns).sortWithinPartitions(*by_columns)
    partitioning = plan_curve_partitioning(df, columns, strategy, build_method, sample_size, num_partitions, rows)
    _log_curve(partitioning, columns, build_method, num_partitions)
    key = _key_name(df)
    keyed = with_layout_key(df, columns, partitioning, key)
    order = [_column(key).getField(w) for w in key_fields(len(columns), partitioning)]
    return (
        keyed.repartitionById(num_partitions, _column(key).getField("partition")).sortWithinPartitions(*order).drop(key)
    )


def _log_curve(partitioning: CurvePartitioning, columns: Sequence[str], build_method: CurveBuildMethod,
               ranges: int) -> None:
    log.debug(
        "layout sort",
        strategy=partitioning.strategy.value,
        build=build_method.value,
        columns=list(columns),
        ranges=ranges,
        sample_rows=partitioning.sample_rows,
        boundaries=None if partitioning.boundaries is None else [int(b.size) for b in partitioning.boundaries],
    )


def range_keys(partitioning: CurvePartitioning, sort_columns: Sequence[str]) -> RangeKeys:
    """The `exchange.RangeKeys` of a layout: each row's range and its full layout key as ``int64`` words."""
    from hudi_clusterd.ordering import curves

    names = list(sort_columns)

    def keys(batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        layout = partitioning.keys([batch.column(name) for name in names])
        words = curves.keys_to_words(layout)
        return partitioning.partitions(layout, words), words

    return keys


def key_words(dims: int, partitioning: CurvePartitioning) -> int:
    """``int64`` words of a full layout key (`curves.keys_to_words`): linear keys take 8 bytes per column."""
    from hudi_clusterd.ordering import curves

    if partitioning.strategy is LayoutStrategy.LINEAR:
        return dims
    return -(-curves.key_width(dims, partitioning.boundaries is not None) // 8)


def exchange_layout(
    df: DataFrame,
    scan: GroupScan,
    sort_columns: Sequence[str],
    strategy: LayoutStrategy,
    build_method: CurveBuildMethod,
    sample_size: int,
    num_partitions: int,
    ranges_per_partition: int = 1,
    rows: int | None = None,
) -> SortedRuns | None:
    """The scanned group's rows in ``num_partitions`` partitions of the layout's order, as sorted Arrow runs
    (`exchange`); None for a linear layout over columns that do not order exactly through their keys (strings,
    binaries, wide decimals: use `sort_for_layout`). ``df`` reads the same files as ``scan`` (it is sampled
    and validated); each partition is cut into ``ranges_per_partition`` ranges, the unit the writer holds in
    memory. Raises `PlanError` as `sort_for_layout` does."""
    from hudi_clusterd.engine.clustering.exchange import exchange

    _validate(df, sort_columns, sample_size, num_partitions)
    if ranges_per_partition < 1:
        raise PlanError(f"ranges per partition must be >= 1, got {ranges_per_partition}")
    columns = list(sort_columns)
    if strategy is LayoutStrategy.LINEAR or len(columns) == 1:
        if not _exact_linear_keys(df, columns):
            return None
        strategy, build_method = LayoutStrategy.LINEAR, CurveBuildMethod.DIRECT
    ranges = num_partitions * ranges_per_partition
    partitioning = plan_curve_partitioning(df, columns, strategy, build_method, sample_size, ranges, rows, scan)
    _log_curve(partitioning, columns, build_method, ranges)
    return exchange(scan, range_keys(partitioning, columns), key_words(len(columns), partitioning),
                    num_partitions, ranges_per_partition)
