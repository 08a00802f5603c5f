"""JVM curve keys (sample build, numeric columns): Spark's keys equal numpy's twin, bit for bit, and sort."""

from __future__ import annotations

import datetime as dt
import math
import random
from collections import Counter
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

from hudi_clusterd.domain.layout import CurveBuildMethod, LayoutStrategy
from hudi_clusterd.engine import curve_sql
from hudi_clusterd.engine.sorting import sort_for_layout

from .test_sorting import collect_partitions

pytestmark = pytest.mark.spark

SCHEMA = "id long, i int, l long, d double, f float, dec decimal(12,3), dt date, ts timestamp, b boolean, s string"
CURVES = [LayoutStrategy.ZORDER, LayoutStrategy.HILBERT]
SPECIAL = [float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 5e-324, 1.7976931348623157e308]


def numeric_rows(n: int = 400, seed: int = 5) -> list[tuple[Any, ...]]:
    """Every numeric type the JVM keys, ~10 % nulls, the special doubles, extreme longs, one all-null row."""
    rng = random.Random(seed)

    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.1 else value

    rows = []
    for k in range(n):
        rows.append((
            k,
            maybe(rng.randint(-1000, 1000)),
            maybe(rng.choice([-(2**63), 2**63 - 1, rng.randint(-(2**62), 2**62)])),
            maybe(SPECIAL[k % len(SPECIAL)] if k % 9 == 0 else rng.lognormvariate(0, 4)),
            maybe(float(rng.randint(-500, 500)) / 4),
            maybe(Decimal(rng.randint(-10**9, 10**9)) / 1000),
            maybe(dt.date(1900, 1, 1) + dt.timedelta(days=rng.randint(0, 60000))),
            maybe(dt.datetime(2020, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**14))),
            maybe(rng.random() < 0.5),
            f"s{k}",
        ))  # fmt: skip
    rows.append((n, *[None] * 8, "all-null"))
    return rows


@pytest.fixture(scope="module")
def numeric_df(spark: Any) -> Any:
    return spark.createDataFrame(numeric_rows(), SCHEMA).repartition(3)


def doubles_and(df: Any, columns: list[str], *extra: str) -> Any:
    """The sort columns as Spark casts them to double (``c0``, ``c1``, …), plus ``extra`` columns."""
    return df.selectExpr(*[f"{sql} AS c{i}" for i, sql in enumerate(curve_sql.double_columns(df, columns))], *extra)


def assert_same_rows(before: Any, after: Any) -> None:
    """Same schema and multiset of rows; NaN equals NaN here (it does not in a Counter of floats)."""

    def comparable(row: Any) -> tuple[Any, ...]:
        return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row)

    assert after.schema == before.schema
    assert Counter(map(comparable, after.collect())) == Counter(map(comparable, before.collect()))


def uses_python(df: Any) -> bool:
    return "ArrowEvalPython" in df._jdf.queryExecution().executedPlan().toString()


@pytest.mark.parametrize("strategy", CURVES, ids=lambda s: s.value)
@pytest.mark.parametrize("columns", [["d", "i"], ["l", "f", "dec"], ["dt", "ts", "b", "d"]], ids="-".join)
def test_jvm_keys_equal_numpy_twin_and_sort_by_them(
    spark: Any, numeric_df: Any, strategy: LayoutStrategy, columns: list[str]
) -> None:
    rows = numeric_df.count()
    # Given the sample's boundaries and split words
    plan = curve_sql.plan_sql_curve_partitioning(numeric_df, columns, strategy, 150, 4, rows, 42)
    assert 0 < plan.sample_rows <= 150 and len(plan.split_words) == 3
    # When Spark computes every row's key and partition
    keyed, word, part = curve_sql.with_sql_layout_key(numeric_df, columns, plan)
    assert not uses_python(keyed)
    table = doubles_and(keyed, columns, word, part).toArrow()
    doubles = [table.column(f"c{i}").combine_chunks() for i in range(len(columns))]
    # Then numpy's twin, given the same doubles, computes the same words and partitions
    twin = plan.words(doubles)
    assert np.array_equal(twin, table.column(word).to_numpy())
    assert np.array_equal(plan.partitions(twin), table.column(part).to_numpy())

    # And sort_for_layout takes this path: no Python in the plan, the same rows, 4 partitions in key order
    out = sort_for_layout(numeric_df, columns, strategy, CurveBuildMethod.SAMPLE, 150, 4)
    assert not uses_python(out)
    assert out.columns == numeric_df.columns
    assert_same_rows(numeric_df, out)
    previous = -(2**63)
    parts = collect_partitions(doubles_and(out, columns, "s"))
    for pid, chunk in parts.items():
        words = plan.words([chunk.column(f"c{i}").combine_chunks() for i in range(len(columns))])
        assert np.all(np.diff(words) >= 0)
        assert words[0] >= previous
        previous = int(words[-1])
        assert plan.partitions(words).tolist() == [pid] * chunk.num_rows
    # The row null in every sort column comes first
    assert parts[min(parts)].column("s")[0].as_py() == "all-null"


def test_non_numeric_or_direct_layouts_keep_the_arrow_udf(spark: Any, numeric_df: Any) -> None:
    udf_cases = [
        (["d", "s"], CurveBuildMethod.SAMPLE),  # a string column
        (["d", "i"], CurveBuildMethod.DIRECT),  # the direct build keys raw bits
        (["d", "i", "l", "f", "dec"], CurveBuildMethod.SAMPLE),  # five columns do not fit one long
    ]
    for columns, build in udf_cases:
        assert not curve_sql.sql_eligible(numeric_df, columns, build)
        assert uses_python(sort_for_layout(numeric_df, columns, LayoutStrategy.HILBERT, build, 50, 2))
    assert curve_sql.sql_eligible(numeric_df, ["d", "i"], CurveBuildMethod.SAMPLE)


def test_double_literals_parse_back_exactly(spark: Any) -> None:
    rng = np.random.default_rng(9)
    values = [v for v in SPECIAL if math.isfinite(v)] + [1e-05, 123.0, -1e300, 2.0**-1070]
    values += rng.standard_normal(50).tolist() + (rng.standard_normal(50) * 1e200).tolist()
    select = ", ".join(f"{curve_sql.double_literal(v)} AS v{i}" for i, v in enumerate(values))
    row = spark.sql(f"SELECT {select}").first()
    assert [float(x) for x in row] == values
    assert all(math.copysign(1, a) == math.copysign(1, b) for a, b in zip(row, values, strict=True))


def test_jvm_path_keeps_clashing_column_names_and_empty_input(spark: Any) -> None:
    clash = f"{curve_sql.PREFIX}w0"
    df = spark.createDataFrame([(3, 1.0, "k"), (1, 2.0, "j"), (2, None, "i")], f"a int, b double, {clash} string")
    out = sort_for_layout(df, ["a", "b"], LayoutStrategy.HILBERT, CurveBuildMethod.SAMPLE, 10, 2)
    assert out.columns == df.columns
    assert_same_rows(df, out)
    empty = spark.createDataFrame([], "x int, y double")
    out = sort_for_layout(empty, ["x", "y"], LayoutStrategy.ZORDER, CurveBuildMethod.SAMPLE, 10, 3)
    assert out.columns == ["x", "y"] and out.count() == 0
