"""Layout sorting on Spark: linear / Z-order / Hilbert order within partitions, ranges across them, every type."""

from __future__ import annotations

import datetime as dt
import itertools
import random
from collections import Counter
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hudi_clusterd.domain.row_order import CurveBuildMethod, LayoutStrategy
from hudi_clusterd.engine.clustering.sorting import (
    KEY_COLUMN,
    exchange_layout,
    plan_curve_partitioning,
    sort_for_layout,
    with_layout_key,
)
from hudi_clusterd.errors import PlanError

pytestmark = pytest.mark.spark

SCHEMA = (
    "id long, i int, l long, d double, f float, dec decimal(12,3), wide decimal(30,4), s string, "
    "dt date, ts timestamp, ntz timestamp_ntz, b boolean, bin binary, payload string"
)
TYPED = ["i", "l", "d", "f", "dec", "wide", "s", "dt", "ts", "ntz", "b", "bin"]
CURVES = [LayoutStrategy.ZORDER, LayoutStrategy.HILBERT]
BUILDS = [CurveBuildMethod.DIRECT, CurveBuildMethod.SAMPLE]


def typed_rows(n: int = 240, seed: int = 3) -> list[tuple[Any, ...]]:
    """Rows with every sortable type, about 10 % nulls per column, and one row null in every sort column."""
    rng = random.Random(seed)

    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.1 else value

    rows: list[tuple[Any, ...]] = []
    for k in range(n):
        rows.append((
            k,
            maybe(rng.randint(-1000, 1000)),
            maybe(rng.randint(-(2**62), 2**62)),
            maybe(rng.uniform(-1e3, 1e3)),
            maybe(float(rng.randint(-500, 500)) / 4),
            maybe(Decimal(rng.randint(-10**9, 10**9)) / 1000),
            maybe(Decimal(rng.randint(-10**25, 10**25)) / 10000),
            maybe(rng.choice(["", "a", "ab", "b", "é", "zz", "日本"]) + str(rng.randint(0, 99))),
            maybe(dt.date(2000, 1, 1) + dt.timedelta(days=rng.randint(0, 9000))),
            maybe(dt.datetime(2020, 1, 1) + dt.timedelta(seconds=rng.randint(0, 10**8))),
            maybe(dt.datetime(1990, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**15))),
            maybe(rng.random() < 0.5),
            maybe(bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 5)))),
            f"p{k}",
        ))  # fmt: skip
    rows.append((n, *[None] * len(TYPED), "all-null"))
    return rows


@pytest.fixture(scope="module")
def typed_df(spark: Any) -> Any:
    return spark.createDataFrame(typed_rows(), SCHEMA).repartition(3)


def hashable(row: Any) -> tuple[Any, ...]:
    return tuple(bytes(v) if isinstance(v, bytearray) else v for v in row)


def collect_partitions(df: Any) -> dict[int, pa.Table]:
    """The DataFrame's rows per non-empty Spark partition, in order, as Arrow tables (the UDF's types)."""
    from pyspark.sql import functions as F

    table = df.withColumn("_pid", F.spark_partition_id()).toArrow()
    pids = table.column("_pid").to_numpy()
    assert np.all(np.diff(pids) >= 0), "partitions must come back in order"
    return {int(p): table.filter(pc.equal(table.column("_pid"), p)).drop(["_pid"]) for p in np.unique(pids)}


def assert_same_rows(before: Any, after: Any) -> None:
    assert after.schema == before.schema
    assert Counter(map(hashable, after.collect())) == Counter(map(hashable, before.collect()))


def linear_key(row: dict[str, Any], columns: list[str]) -> tuple[Any, ...]:
    return tuple((row[c] is not None, row[c]) for c in columns)


@pytest.mark.parametrize("build", BUILDS, ids=lambda b: b.value)
@pytest.mark.parametrize("strategy", CURVES, ids=lambda s: s.value)
def test_sort_for_layout_curve_every_type_rows_follow_key_order(
    spark: Any, typed_df: Any, strategy: LayoutStrategy, build: CurveBuildMethod
) -> None:
    # Given rows of every supported type with nulls, sorted on all typed columns at once
    out = sort_for_layout(typed_df, TYPED, strategy, build, sample_size=100, num_partitions=4)
    # Then the columns and the rows are unchanged, in 4 partitions
    assert out.columns == typed_df.columns
    assert out.rdd.getNumPartitions() == 4
    assert_same_rows(typed_df, out)
    # And, recomputing the curve keys from the same (deterministic) sample: keys ascend within each
    # partition, partitions hold disjoint ascending key ranges, each row sits where the split keys say
    plan = plan_curve_partitioning(typed_df, TYPED, strategy, build, 100, 4)
    assert (plan.boundaries is None) == (build is CurveBuildMethod.DIRECT)
    previous_max = b""
    parts = collect_partitions(out)
    for pid, part in parts.items():
        keys = plan.keys([part.column(c).combine_chunks() for c in TYPED])
        as_bytes = [k.tobytes() for k in keys]
        assert as_bytes == sorted(as_bytes)
        assert as_bytes[0] >= previous_max
        previous_max = as_bytes[-1]
        assert plan.partitions(keys).tolist() == [pid] * part.num_rows
    # And the row null in every sort column comes first
    assert parts[min(parts)].column("payload")[0].as_py() == "all-null"


def test_sort_for_layout_linear_every_type_sorted_nulls_first(spark: Any, typed_df: Any) -> None:
    columns = ["s", "dec", "ts", "bin", "b", "f", "dt", "wide", "ntz", "i", "l", "d"]
    out = sort_for_layout(typed_df, columns, LayoutStrategy.LINEAR, CurveBuildMethod.DIRECT, 100, 3)
    assert out.columns == typed_df.columns
    assert_same_rows(typed_df, out)
    rows = [linear_key(r.asDict(), columns) for r in out.collect()]  # partition order, then row order
    assert rows == sorted(rows)
    assert rows[0][0] == (False, None)


@pytest.mark.parametrize("strategy", CURVES, ids=lambda s: s.value)
def test_sort_for_layout_single_column_curve_degrades_to_linear(
    spark: Any, typed_df: Any, strategy: LayoutStrategy
) -> None:
    out = sort_for_layout(typed_df, ["d"], strategy, CurveBuildMethod.SAMPLE, 100, 3)
    assert "ArrowEvalPython" not in out._jdf.queryExecution().executedPlan().toString()
    values = [r["d"] for r in out.collect()]
    nulls = sum(v is None for v in values)
    assert nulls > 0 and all(v is None for v in values[:nulls])
    assert values[nulls:] == sorted(values[nulls:])


def test_sort_for_layout_curve_partitions_are_balanced_and_local(spark: Any) -> None:
    # Given 4000 skewed 2-D points
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.normal(10, 1, 3000), rng.uniform(0, 100, 1000)])
    y = np.concatenate([rng.normal(80, 1, 3000), rng.uniform(0, 100, 1000)])
    df = spark.createDataFrame(list(zip(x.tolist(), y.tolist(), strict=True)), "x double, y double")
    # When Hilbert-sorted with the sample build into 8 partitions
    out = sort_for_layout(df, ["x", "y"], LayoutStrategy.HILBERT, CurveBuildMethod.SAMPLE, 2000, 8)
    sizes = [part.num_rows for part in collect_partitions(out).values()]
    # Then every partition holds close to an eighth of the rows (the split keys come from the sample)
    assert len(sizes) == 8 and sum(sizes) == 4000
    assert min(sizes) > 0.6 * 500 and max(sizes) < 1.4 * 500


def test_sort_for_layout_key_name_clash_keeps_input_columns(spark: Any) -> None:
    df = spark.createDataFrame([(3, 1.0, "k"), (1, 2.0, "j"), (2, None, "i")], f"a int, b double, {KEY_COLUMN} string")
    out = sort_for_layout(df, ["a", "b"], LayoutStrategy.ZORDER, CurveBuildMethod.DIRECT, 10, 2)
    assert out.columns == df.columns
    assert_same_rows(df, out)


def test_sort_for_layout_odd_column_names_are_quoted(spark: Any) -> None:
    df = spark.createDataFrame([(2, 1), (1, 2), (3, 0)], "`a b-c` int, `c``d` int")
    for strategy in (LayoutStrategy.LINEAR, LayoutStrategy.HILBERT):
        out = sort_for_layout(df, ["a b-c", "c`d"], strategy, CurveBuildMethod.SAMPLE, 10, 1)
        assert out.columns == df.columns
        assert_same_rows(df, out)


def test_sort_for_layout_empty_input_returns_empty(spark: Any) -> None:
    df = spark.createDataFrame([], "x int, y string")
    for build in BUILDS:
        out = sort_for_layout(df, ["x", "y"], LayoutStrategy.HILBERT, build, 10, 3)
        assert out.columns == ["x", "y"] and out.count() == 0


def test_sort_for_layout_sample_build_spreads_skewed_column(spark: Any) -> None:
    # Given one column that is almost constant and one that is spread out
    rows = [(1000.0 + (k % 7) * 1e-9, float(k)) for k in range(2000)]
    df = spark.createDataFrame(rows, "skewed double, spread double")
    plan = plan_curve_partitioning(df, ["skewed", "spread"], LayoutStrategy.ZORDER, CurveBuildMethod.SAMPLE, 500, 4)
    # Then the sample found the skewed column's few distinct values as boundaries
    assert plan.boundaries is not None and plan.boundaries[0].size == 7
    assert len(plan.split_keys) == 3 and 0 < plan.sample_rows <= 500


@pytest.mark.parametrize(
    ("ddl", "column", "message"),
    [
        ("a int, st struct<x:int>", "st", "'st' holds nested values"),
        ("a int, arr array<int>", "arr", "'arr' holds nested values"),
        ("a int, m map<string,int>", "m", "'m' holds nested values"),
        ("a int, v interval day to second", "v", "'v' has a type rows cannot be ordered by"),
        ("a int", "missing", "'missing' is not in the table schema"),
    ],
)
def test_sort_for_layout_unsupported_column_raises_plan_error(spark: Any, ddl: str, column: str, message: str) -> None:
    df = spark.createDataFrame([], ddl)
    for strategy, build in itertools.product(LayoutStrategy, CurveBuildMethod):
        with pytest.raises(PlanError, match=message):
            sort_for_layout(df, ["a", column], strategy, build, 10, 2)


def test_sort_for_layout_bad_arguments_raise_plan_error(spark: Any, typed_df: Any) -> None:
    with pytest.raises(PlanError, match="partitions must be >= 1"):
        sort_for_layout(typed_df, ["i"], LayoutStrategy.LINEAR, CurveBuildMethod.DIRECT, 10, 0)
    with pytest.raises(PlanError, match="sample size must be >= 1"):
        sort_for_layout(typed_df, ["i", "d"], LayoutStrategy.HILBERT, CurveBuildMethod.SAMPLE, 0, 2)
    with pytest.raises(PlanError, match="no sort columns"):
        sort_for_layout(typed_df, [], LayoutStrategy.HILBERT, CurveBuildMethod.SAMPLE, 10, 2)
    with pytest.raises(PlanError, match="repeat"):
        sort_for_layout(typed_df, ["i", "i"], LayoutStrategy.ZORDER, CurveBuildMethod.DIRECT, 10, 2)


# --- the exchange: files read in the Python workers, rows moved as sorted Arrow runs ------------------------

@pytest.fixture(scope="module")
def scanned(spark: Any, typed_df: Any, tmp_path_factory: Any) -> tuple[Any, Any]:
    """The typed rows written as 5 parquet files, read back by Spark and described as a `GroupScan`."""
    from pathlib import Path

    from hudi_clusterd.engine.clustering.scan import GroupScan, ScanFile

    base = Path(tmp_path_factory.mktemp("scan"))
    typed_df.repartition(5).write.parquet(str(base / "data"))
    files = sorted((base / "data").glob("*.parquet"))
    assert len(files) == 5
    df = spark.read.parquet(*[str(f) for f in files])
    scan = GroupScan(spark, str(base), tuple(ScanFile(str(f.relative_to(base)), f.stat().st_size) for f in files),
                     df.schema)
    return df, scan


@pytest.mark.parametrize("ranges", [1, 3], ids=["one-range-per-partition", "three-ranges-per-partition"])
@pytest.mark.parametrize("strategy", CURVES, ids=lambda s: s.value)
def test_exchange_curve_every_type_rows_in_key_order_as_planned(spark: Any, scanned: tuple[Any, Any],
                                                                strategy: LayoutStrategy, ranges: int) -> None:
    # Given the typed rows in 5 files, laid out on every typed column through the exchange
    df, scan = scanned
    build = CurveBuildMethod.SAMPLE
    runs = exchange_layout(df, scan, TYPED, strategy, build, 100, 4, ranges_per_partition=ranges)
    assert runs is not None
    out = runs.rows()
    # Then the rows come back unchanged, in 4 partitions
    assert out.columns == df.columns
    assert out.rdd.getNumPartitions() == 4
    assert_same_rows(df, out)
    # And, recomputing keys from the same sample (drawn the same way, from the same files): keys ascend within
    # and across partitions, and each row's range belongs to its partition
    plan = plan_curve_partitioning(df, TYPED, strategy, build, 100, 4 * ranges, scan=scan)
    previous_max = b""
    parts = collect_partitions(out)
    for pid, part in parts.items():
        keys = plan.keys([part.column(c).combine_chunks() for c in TYPED])
        as_bytes = [k.tobytes() for k in keys]
        assert as_bytes == sorted(as_bytes) and as_bytes[0] >= previous_max
        previous_max = as_bytes[-1]
        assert set((plan.partitions(keys) // ranges).tolist()) == {pid}
    # And the row null in every sort column comes first
    assert parts[min(parts)].column("payload")[0].as_py() == "all-null"


def test_exchange_matches_the_spark_path_partition_for_partition(spark: Any, scanned: tuple[Any, Any]) -> None:
    # Given the same sample for both paths (split keys computed from the scan's draw, handed to the UDF path)
    from pyspark.sql import functions as F

    df, scan = scanned
    strategy, build = LayoutStrategy.HILBERT, CurveBuildMethod.SAMPLE
    runs = exchange_layout(df, scan, TYPED, strategy, build, 100, 4)
    assert runs is not None
    plan = plan_curve_partitioning(df, TYPED, strategy, build, 100, 4, scan=scan)
    keyed = with_layout_key(df, TYPED, plan).repartitionById(4, F.col(KEY_COLUMN).getField("partition"))
    # Then each partition holds the same rows
    ours, theirs = collect_partitions(runs.rows()), collect_partitions(keyed.drop(KEY_COLUMN))
    assert sorted(ours) == sorted(theirs)
    for pid in ours:
        assert Counter(tuple(r.values()) for r in ours[pid].to_pylist()) == \
            Counter(tuple(r.values()) for r in theirs[pid].to_pylist())


@pytest.mark.parametrize("columns", [["d", "i", "ts"], ["dt", "dec", "b", "ntz", "l", "f"]],
                         ids=["numbers-timestamp", "exact-types"])
def test_exchange_linear_orders_rows_across_and_within_partitions(spark: Any, scanned: tuple[Any, Any],
                                                                  columns: list[str]) -> None:
    df, scan = scanned
    runs = exchange_layout(df, scan, columns, LayoutStrategy.LINEAR, CurveBuildMethod.SAMPLE, 100, 3)
    assert runs is not None
    out = runs.rows()
    assert out.columns == df.columns
    assert out.rdd.getNumPartitions() == 3
    assert_same_rows(df, out)
    parts = collect_partitions(out)
    rows = [linear_key(r, columns) for t in parts.values() for r in t.to_pylist()]
    assert rows == sorted(rows)  # in partition order, then row order
    assert rows[0][0] == (False, None)
    assert min(t.num_rows for t in parts.values()) >= len(rows) // 6  # range partitions of similar size


@pytest.mark.parametrize("columns", [["s", "i"], ["wide", "d"], ["bin"]], ids=["string", "wide-decimal", "binary"])
def test_exchange_leaves_inexact_linear_columns_to_spark(spark: Any, scanned: tuple[Any, Any],
                                                         columns: list[str]) -> None:
    df, scan = scanned
    assert exchange_layout(df, scan, columns, LayoutStrategy.LINEAR, CurveBuildMethod.SAMPLE, 100, 3) is None
    assert exchange_layout(df, scan, columns[:1], LayoutStrategy.HILBERT, CurveBuildMethod.SAMPLE, 100, 3) is None


def test_exchange_bad_arguments_raise_plan_error(spark: Any, scanned: tuple[Any, Any]) -> None:
    df, scan = scanned
    with pytest.raises(PlanError, match="ranges per partition must be >= 1"):
        exchange_layout(df, scan, ["i", "d"], LayoutStrategy.HILBERT, CurveBuildMethod.SAMPLE, 10, 2, 0)
    with pytest.raises(PlanError, match="'nope' is not in the table schema"):
        exchange_layout(df, scan, ["nope", "d"], LayoutStrategy.HILBERT, CurveBuildMethod.SAMPLE, 10, 2)
