"""Curve keys computed by Spark SQL expressions in the JVM (sample build, numeric sort columns, 2-4 dimensions).

A scalar Arrow UDF (`sorting.with_layout_key`) hands every row's sort columns to a Python worker and back;
on numeric columns the same key costs far less as plain Spark expressions, which whole-stage codegen
compiles into the scan's loop. This module builds those expressions:

* each sort column, cast to double (dates as days, timestamps as microseconds since the epoch), becomes a
  coordinate by its estimated CDF: a branch-free binary search among at most `curves.VALUE_MAX_BOUNDARIES`
  quantile boundaries of the sample (one projection per step, reading an array literal), then linear
  interpolation between the two boundaries found (`curves.value_coordinates` is the numpy twin);
* the coordinates become one ``long`` key through `curves.curve_word`, the word program shared with numpy
  (Hilbert's per-level steps are separate projections, so no expression is re-expanded);
* the key's range partition is the same binary search among the split keys.

Whole-stage codegen fuses the projections into one loop; a ``CASE`` tree over the boundaries would be
shorter to evaluate but its generated code outgrows the JVM's 64 KiB method limit beyond a few columns.

The sample job runs numpy's twin of the same arithmetic on doubles that Spark itself cast, so the split keys
drawn from the sample are keys the JVM computes for those rows, bit for bit; the integration tests check
that equality.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from hudi_clusterd.domain.layout import CurveBuildMethod, LayoutStrategy
from hudi_clusterd.engine import curves
from hudi_clusterd.errors import PlanError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PREFIX = "_hoodie_clusterd_"
"""Prefix of the temporary columns (coordinates, key words, partition) added while sorting; underscores are
prepended while a column of the data starts with it."""

JVM_BITS = 16
"""Bits per dimension of JVM curve keys: 65,536 levels per column (far finer than the 256 boundaries of the
CDF resolve), so up to 4 columns fit one ``long`` and a 2-D Hilbert key takes 15 transform steps, not 31."""

_LONG_MIN = -(1 << 63)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def long_literal(value: int) -> str:
    """A SQL ``BIGINT`` literal for a signed 64-bit value (``-2**63`` has no literal of its own)."""
    if not _LONG_MIN <= value < (1 << 63):
        raise ValueError(f"{value} does not fit a signed 64-bit long")
    if value == _LONG_MIN:
        return f"({_LONG_MIN + 1}L - 1L)"
    return f"{value}L"


def double_literal(value: float) -> str:
    """A SQL ``DOUBLE`` literal that parses back to exactly ``value`` (finite values only)."""
    if not math.isfinite(value):
        raise ValueError(f"no SQL literal for the non-finite double {value!r}")
    text = repr(float(value)).upper()  # shortest round-trip form: digits, optional '.', optional 'E[+-]dd'
    return f"({text}D)" if text.startswith("-") else f"{text}D"


def _signed(word: int) -> int:
    """A 64-bit word in ``[0, 2**64)`` as a signed long."""
    return word - (1 << 64) if word >> 63 else word


class SqlWordOps:
    """`curves.WordOps` over SQL expression text; `stage` projects the words into columns of ``df``."""

    def __init__(self, df: DataFrame, keep: Sequence[str], prefix: str = PREFIX) -> None:
        self.df = df
        self.keep = [_quoted(c) for c in keep]
        self.prefix = prefix

    def const(self, value: int) -> str:
        return long_literal(_signed(value))

    def xor(self, a: str, b: str) -> str:
        return f"({a} ^ {b})"

    def and_(self, a: str, b: str) -> str:
        return f"({a} & {b})"

    def or_(self, a: str, b: str) -> str:
        return f"({a} | {b})"

    def shl(self, a: str, n: int) -> str:
        return f"shiftleft({a}, {n})"

    def shr(self, a: str, n: int) -> str:
        return f"shiftrightunsigned({a}, {n})"

    def sub(self, a: str, b: str) -> str:
        return f"({a} - {b})"

    def stage(self, words: list[str]) -> list[str]:
        names = [f"{self.prefix}w{i}" for i in range(len(words))]
        self.df = self.df.selectExpr(*self.keep, *[f"{w} AS {_quoted(n)}" for w, n in zip(words, names, strict=True)])
        return [_quoted(n) for n in names]


_NUMERIC = ("ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType",
            "BooleanType")  # fmt: skip


def as_double_sql(name: str, type_name: str) -> str | None:
    """SQL casting sort column ``name`` to a double in an order-preserving way; None if its type cannot be."""
    column = _quoted(name)
    if type_name in _NUMERIC:
        return f"CAST({column} AS DOUBLE)"
    if type_name == "DateType":
        return f"CAST(unix_date({column}) AS DOUBLE)"
    if type_name == "TimestampType":  # an instant: microseconds since the epoch, whatever the session zone
        return f"CAST(unix_micros({column}) AS DOUBLE)"
    return None  # strings, binaries, timestamp_ntz: the Arrow UDF keys them


def sql_eligible(df: DataFrame, sort_columns: Sequence[str], build_method: CurveBuildMethod) -> bool:
    """True when the JVM can key these columns: sample build, 2-4 columns, all numeric, dates or timestamps."""
    if build_method is not CurveBuildMethod.SAMPLE or not 2 <= len(sort_columns) <= 4:
        return False
    types = {f.name: type(f.dataType).__name__ for f in df.schema.fields}
    return all(c in types and as_double_sql(c, types[c]) is not None for c in sort_columns)


def search_stages(
    ops: SqlWordOps, probes: list[str], tables: list[list[str]], pad: str, strict: bool, carry: list[str]
) -> tuple[list[str], list[str], list[str]]:
    """For each probe, how many entries of its sorted table of literals are ``<= probe`` (``< probe`` if strict).

    A branch-free binary search over the table padded to ``2**k - 1`` entries with ``pad`` (a literal no
    probe exceeds, bar NaN and +inf, for which the count is clamped to the table's length), one projection per
    step, so each step reads the previous step's positions from columns. Returns ``(counts, probes, carry)``:
    column expressions for the counts, the probes and the ``carry`` expressions, carried through the stages.
    """
    longest = max((len(t) for t in tables), default=0)
    steps = max(longest, 1).bit_length()  # 2**steps - 1 >= longest
    size = (1 << steps) - 1
    arrays = [f"array({', '.join(t + [pad] * (size - len(t)))})" for t in tables]
    op = "<" if strict else "<="
    positions = ["0"] * len(probes)
    for step in (1 << k for k in range(steps - 1, -1, -1)):
        moved = [
            f"{pos} + CASE WHEN element_at({arr}, {pos} + {step}) {op} {probe} THEN {step} ELSE 0 END"
            if table else "0"
            for pos, arr, probe, table in zip(positions, arrays, probes, tables, strict=True)
        ]
        staged = ops.stage([*carry, *probes, *moved])
        carry, probes, positions = (staged[: len(carry)], staged[len(carry) : len(carry) + len(probes)],
                                    staged[len(carry) + len(probes) :])
    counts = [f"least({pos}, {len(t)})" for pos, t in zip(positions, tables, strict=True)]
    return counts, probes, carry


def coordinate_sql(x: str, j: str | None, boundaries: np.ndarray, bits: int) -> str:
    """SQL mapping double ``x`` to its CDF coordinate, the twin of `curves.value_coordinates`.

    ``j`` is `interval_sql`'s expression (or a column holding it), None when there are fewer than 2 boundaries.
    """
    top = (1 << bits) - 3
    m = int(boundaries.size)
    b = [double_literal(float(v)) for v in boundaries]
    if m == 0:
        cdf = "0.5D"
    elif m == 1:
        cdf = f"CASE WHEN {x} < {b[0]} THEN 0.0D WHEN {x} > {b[0]} THEN 1.0D ELSE 0.5D END"
    else:
        if j is None:
            raise ValueError("an interval expression is needed with 2 or more boundaries")
        knots = f"array({', '.join(b)})"
        low, high = f"element_at({knots}, {j} + 1)", f"element_at({knots}, {j} + 2)"
        frac = f"least(greatest(({x} - {low}) / ({high} - {low}), 0.0D), 1.0D)"
        cdf = f"((CAST({j} AS DOUBLE) + {frac}) / {double_literal(m - 1)})"
    return (f"CASE WHEN {x} IS NULL THEN 0L WHEN isnan({x}) THEN {(1 << bits) - 1}L "
            f"ELSE CAST(1.0D + rint({cdf} * {double_literal(top)}) AS BIGINT) END")


@dataclass(frozen=True, slots=True, eq=False)
class SqlCurvePartitioning:
    """What the sample taught, for JVM keys: each column's double boundaries and the split words."""

    strategy: LayoutStrategy
    boundaries: tuple[np.ndarray, ...]
    split_words: tuple[int, ...]
    sample_rows: int
    bits: int = JVM_BITS

    def words(self, doubles: Sequence[pa.Array]) -> np.ndarray:
        """numpy's twin of the JVM key: ``int64`` words of a batch of the sort columns cast to double."""
        coords = [curves.value_coordinates(v, b, self.bits) for v, b in zip(doubles, self.boundaries, strict=True)]
        word = curves.curve_word(coords, self.strategy, self.bits, curves.NumpyWordOps())
        out: np.ndarray = np.asarray(word, dtype=np.uint64).view(np.int64)
        return out

    def partitions(self, words: np.ndarray) -> np.ndarray:
        return np.searchsorted(np.array(self.split_words, np.int64), words, side="left").astype(np.int32)


def double_columns(df: DataFrame, sort_columns: Sequence[str]) -> list[str]:
    """SQL for each sort column as a double (raises `PlanError` for a column the JVM cannot key)."""
    types = {f.name: type(f.dataType).__name__ for f in df.schema.fields}
    out = []
    for c in sort_columns:
        sql = as_double_sql(c, types.get(c, ""))
        if sql is None:
            raise PlanError(f"sort column {c!r} of type {types.get(c)} has no JVM curve key")
        out.append(sql)
    return out


def split_words(words: np.ndarray, num_partitions: int) -> tuple[int, ...]:
    """``num_partitions - 1`` words cutting the sorted sample words into equal parts."""
    if words.size == 0 or num_partitions == 1:
        return ()
    ordered = np.sort(words)
    m = ordered.size
    return tuple(int(ordered[-(-(p * m) // num_partitions) - 1]) for p in range(1, num_partitions))


def plan_sql_curve_partitioning(
    df: DataFrame,
    sort_columns: Sequence[str],
    strategy: LayoutStrategy,
    sample_size: int,
    num_partitions: int,
    rows: int,
    seed: int,
) -> SqlCurvePartitioning:
    """Sample the sort columns (cast to double by Spark), derive boundaries and split words in one task."""
    count = len(sort_columns)
    if rows == 0:
        return SqlCurvePartitioning(strategy, tuple(np.zeros(0) for _ in sort_columns), (), 0)
    fraction = min(1.0, sample_size / rows)
    sample = (
        df.selectExpr(*[f"{sql} AS c{i}" for i, sql in enumerate(double_columns(df, sort_columns))])
        .sample(withReplacement=False, fraction=fraction, seed=seed)
        .limit(sample_size)
        .coalesce(1)
    )

    def summarise(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = [b for b in batches if b.num_rows]
        n = sum(b.num_rows for b in received)
        bounds = [np.zeros(0) for _ in range(count)]
        splits: tuple[int, ...] = ()
        if n:
            table = pa.Table.from_batches(received)
            columns = [table.column(i).combine_chunks() for i in range(count)]
            bounds = [curves.value_boundaries(c) for c in columns]
            planned = SqlCurvePartitioning(strategy, tuple(bounds), (), n)
            splits = split_words(planned.words(columns), num_partitions)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([[b.tolist() for b in bounds]], pa.list_(pa.list_(pa.float64()))),
                pa.array([list(splits)], pa.list_(pa.int64())),
                pa.array([n], pa.int64()),
            ],
            names=["bounds", "splits", "rows"],
        )

    result = sample.mapInArrow(summarise, "bounds array<array<double>>, splits array<long>, rows long").collect()
    if not result:
        return SqlCurvePartitioning(strategy, tuple(np.zeros(0) for _ in sort_columns), (), 0)
    if len(result) != 1:
        raise PlanError(f"sampling {list(sort_columns)} for a {strategy.value} layout returned {len(result)} summaries")
    row = result[0]
    boundaries = tuple(np.asarray(b, dtype=np.float64) for b in row["bounds"])
    return SqlCurvePartitioning(strategy, boundaries, tuple(int(s) for s in row["splits"]), int(row["rows"]))


def with_sql_layout_key(
    df: DataFrame, sort_columns: Sequence[str], partitioning: SqlCurvePartitioning
) -> tuple[DataFrame, str, str]:
    """``df`` plus its curve-key word and range-partition columns; returns ``(df, word column, partition column)``.

    Every column of ``df`` is kept as it is; the added ones start with `PREFIX` (or more underscores, so they
    never clash with a column of the data).
    """
    keep = list(df.columns)
    prefix = PREFIX
    while any(c.startswith(prefix) for c in keep):
        prefix = "_" + prefix
    ops = SqlWordOps(df, keep, prefix)
    xs = ops.stage(double_columns(df, sort_columns))  # each value cast once, then read by the search
    interiors = [[double_literal(float(v)) for v in b[1:-1]] if b.size >= 2 else [] for b in partitioning.boundaries]
    js, xs, _ = search_stages(ops, xs, interiors, "CAST('Infinity' AS DOUBLE)", strict=False, carry=[])
    staged = ops.stage([
        coordinate_sql(x, j if b.size >= 2 else None, b, partitioning.bits)
        for x, j, b in zip(xs, js, partitioning.boundaries, strict=True)
    ])
    word = curves.curve_word(staged, partitioning.strategy, partitioning.bits, ops)
    splits = [long_literal(w) for w in partitioning.split_words]
    (part,), (word,), _ = search_stages(ops, [word], [splits], long_literal((1 << 63) - 1), strict=True, carry=[])
    word_name, part_name = f"{prefix}key", f"{prefix}partition"
    keyed = ops.df.selectExpr(
        *ops.keep, f"{word} AS {_quoted(word_name)}", f"CAST({part} AS INT) AS {_quoted(part_name)}"
    )
    return keyed, word_name, part_name
