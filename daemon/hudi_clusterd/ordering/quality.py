"""Layout quality of a set of parquet files, from their footers only (min/max statistics, never data pages).

**Files-scanned ratio** (the project's yardstick; the shared reference script is `bench/layout.py`): a fixed
workload of 600 range queries (seed 1), each a window 5 % of a column's domain wide; the ratio is the mean, over
queries, of the share of files whose min/max box intersects the query. 1.0 means every query reads every file;
lower is better. The same figure over row groups is the *row-groups-scanned ratio*.

Generalisation of the workload to ``k`` sort columns: query ``i`` draws one window start per column,
uniformly in ``[low, high - width]`` of that column's domain, then constrains only column ``i % (k + 1)``
when that is ``< k``, and every column when it equals ``k``. For two columns this is the reference
workload exactly (a third ``lat`` only, a third ``lon`` only, a third both, the same random draws); for one
column every query constrains it.

Query domain of a column (``domains`` overrides it per column):

* numeric, date and timestamp columns (dates in days, timestamps in microseconds since the epoch, decimals as
  floats): the column's global [min, max] over all footers, *rounded to the coarsest power-of-ten step that
  moves neither end by more than 10 % of the range*. The reference data spans about [0, 106] x [-5, 100]
  and rounds to [0, 100] x [0, 100], the domain the reference script hard-codes, so both agree exactly
  there (width 5, starts in [0, 95]); a column spanning [149, 251] gets [150, 250] and windows of 5.
* string and binary columns: bounds are replaced by their rank among all distinct bound values in the
  footers, scaled to [0, 100]; windows are then 5 % of the distinct bounds ("rank-normalised bounds").

A row group without statistics for a column counts as covering everything (it must be read); a row group
whose values are all null, or a file lacking the column (schema evolution), covers nothing for it.

**Overlap depth** of a column: over the files' [min, max] ranges, the maximum number of files that contain
one point, and the mean depth weighted by length over the union of the ranges (on the axis above: values,
or ranks for strings); when every file holds a single value, the mean over the distinct values. Files
without statistics for the column are left out and counted in ``files_without_stats``.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hudi_clusterd.errors import StorageError, TableError
from hudi_clusterd.formats.parquet_stats import column_chunks, leaf_columns

QUERY_COUNT = 600
QUERY_SEED = 1
WINDOW_PERCENT = 5.0
RANK_DOMAIN = (0.0, 100.0)
_MAX_SHIFT = 0.10  # how far (share of the range) rounding may move either end of a domain
_QUERY_CHUNK = 64
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)

Domain = tuple[float, float]


class _Unknown:
    """Marker: a row group with no usable statistics for a column."""


class _Empty:
    """Marker: a row group with no non-null value for a column."""


_UNKNOWN = _Unknown()
_EMPTY = _Empty()
_Bound = tuple[Any, Any] | _Unknown | _Empty


@dataclass(frozen=True, slots=True)
class ColumnOverlap:
    """How many files' [min, max] ranges overlap, for one column."""

    column: str
    max_depth: int
    mean_depth: float
    files_without_stats: int


@dataclass(frozen=True, slots=True)
class FooterBoxes:
    """Per-file and per-row-group min/max boxes on the normalised axes, one column of each per sort column."""

    columns: tuple[str, ...]
    domains: tuple[Domain, ...]
    file_low: np.ndarray
    file_high: np.ndarray
    group_low: np.ndarray
    group_high: np.ndarray


@dataclass(frozen=True, slots=True)
class LayoutReport:
    """Layout quality of a set of parquet files for some sort columns (lower is better everywhere)."""

    columns: tuple[str, ...]
    files: int
    row_groups: int
    files_scanned_ratio: float
    row_groups_scanned_ratio: float
    overlap: tuple[ColumnOverlap, ...]
    domains: tuple[Domain, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "columns": list(self.columns),
            "files": self.files,
            "row_groups": self.row_groups,
            "files_scanned_ratio": self.files_scanned_ratio,
            "row_groups_scanned_ratio": self.row_groups_scanned_ratio,
            "overlap": {
                o.column: {
                    "max_depth": o.max_depth,
                    "mean_depth": o.mean_depth,
                    "files_without_stats": o.files_without_stats,
                }
                for o in self.overlap
            },
            "domains": {c: list(d) for c, d in zip(self.columns, self.domains, strict=True)},
        }


FooterReader = Callable[[str], Any]
"""Reads the parquet footer (``pyarrow.parquet.FileMetaData``) of a path; the default opens local paths."""


def _read_metadata(path: str, read_footer: FooterReader | None) -> Any:
    try:
        return pq.read_metadata(path) if read_footer is None else read_footer(path)
    except OSError as exc:
        raise StorageError(f"cannot read the parquet footer of {path}: {exc}") from exc
    except (pa.ArrowException, ValueError) as exc:
        raise TableError(f"{path} is not a readable parquet file: {exc}") from exc


def _row_group_bounds(md: Any, index: int | None) -> list[_Bound]:
    if index is None:
        return [_EMPTY] * md.num_row_groups
    bounds: list[_Bound] = []
    for chunk in column_chunks(md, index):
        if not chunk.has_statistics:
            bounds.append(_UNKNOWN)
        elif chunk.has_min_max:
            bounds.append((chunk.min, chunk.max))
        elif chunk.null_count is not None and chunk.null_count == chunk.num_rows:
            bounds.append(_EMPTY)
        else:
            bounds.append(_UNKNOWN)
    return bounds


def _to_number(value: Any) -> float | None:
    """A numeric position for a statistics value, or None for strings/binaries."""
    if isinstance(value, bool | int | float | Decimal):
        return float(value)
    if isinstance(value, dt.datetime):  # before date: datetime is a date
        epoch = _EPOCH if value.tzinfo is None else _EPOCH_UTC
        return float((value - epoch) / _MICROSECOND)
    if isinstance(value, dt.date):
        return float((value - _EPOCH_DATE).days)
    return None


def _as_bytes(value: Any) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def nice_domain(low: float, high: float) -> Domain:
    """Round ``[low, high]`` to the coarsest power-of-ten step moving neither end by > 10 % of the range."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return RANK_DOMAIN
    if high <= low:
        return (low - 0.5, low + 0.5)
    span = high - low
    step = 10.0 ** math.floor(math.log10(span))
    while True:
        a = math.floor(low / step + 0.5) * step + 0.0
        b = math.floor(high / step + 0.5) * step + 0.0
        if b > a and abs(a - low) <= _MAX_SHIFT * span and abs(b - high) <= _MAX_SHIFT * span:
            return (a, b)
        step /= 10.0


def _normalise(column: str, bounds: list[_Bound], domain: Domain | None) -> tuple[np.ndarray, np.ndarray, Domain]:
    """Map one column's row-group bounds onto a float axis; unknown → (-inf, inf), empty → (inf, -inf)."""
    known = [b for b in bounds if isinstance(b, tuple)]
    values = [v for b in known for v in b]
    numbers = [_to_number(v) for v in values]
    low = np.full(len(bounds), np.inf)
    high = np.full(len(bounds), -np.inf)
    unknown = np.array([isinstance(b, _Unknown) for b in bounds], dtype=bool)
    low[unknown], high[unknown] = -np.inf, np.inf
    is_known = np.array([isinstance(b, tuple) for b in bounds], dtype=bool)
    if not values:
        return low, high, domain or RANK_DOMAIN
    if all(n is not None for n in numbers):
        positions = np.array(numbers, dtype=np.float64)
        if domain is None:
            domain = nice_domain(float(positions.min()), float(positions.max()))
    elif all(n is None for n in numbers):
        raw = [_as_bytes(v) for v in values]
        distinct = sorted(set(raw))
        rank = {v: i for i, v in enumerate(distinct)}
        scale = RANK_DOMAIN[1] / max(len(distinct) - 1, 1)
        positions = np.array([rank[v] * scale for v in raw], dtype=np.float64)
        domain = domain or RANK_DOMAIN
    else:
        raise TableError(f"column {column!r} mixes numeric and string statistics across files")
    low[is_known], high[is_known] = positions[0::2], positions[1::2]
    return low, high, domain


def read_boxes(
    paths: Sequence[str | os.PathLike[str]],
    columns: Sequence[str],
    *,
    domains: Mapping[str, Domain] | None = None,
    read_footer: FooterReader | None = None,
) -> FooterBoxes:
    """Read the footers of ``paths`` and build per-file and per-row-group boxes over ``columns``."""
    if not columns:
        raise ValueError("at least one column is needed")
    per_column: list[list[_Bound]] = [[] for _ in columns]
    group_file: list[int] = []
    found = [False] * len(columns)
    for f, path in enumerate(paths):
        md = _read_metadata(os.fspath(path), read_footer)
        leaf = leaf_columns(md)
        for k, column in enumerate(columns):
            index = leaf.get(column)
            found[k] = found[k] or index is not None
            per_column[k].extend(_row_group_bounds(md, index))
        group_file.extend([f] * md.num_row_groups)
    missing = [c for c, ok in zip(columns, found, strict=True) if not ok]
    if paths and missing:
        raise TableError(f"columns {missing} are in none of the {len(paths)} files (first: {os.fspath(paths[0])})")
    lows, highs, used = [], [], []
    for k, column in enumerate(columns):
        lo, hi, d = _normalise(column, per_column[k], (domains or {}).get(column))
        lows.append(lo)
        highs.append(hi)
        used.append(d)
    shape = (len(group_file), len(columns))
    group_low = np.stack(lows, axis=1) if group_file else np.zeros(shape)
    group_high = np.stack(highs, axis=1) if group_file else np.zeros(shape)
    owner = np.array(group_file, dtype=np.intp)
    file_low = np.full((len(paths), len(columns)), np.inf)
    file_high = np.full((len(paths), len(columns)), -np.inf)
    np.minimum.at(file_low, owner, group_low)
    np.maximum.at(file_high, owner, group_high)
    return FooterBoxes(tuple(columns), tuple(used), file_low, file_high, group_low, group_high)


def query_boxes(
    domains: Sequence[Domain],
    count: int = QUERY_COUNT,
    window_percent: float = WINDOW_PERCENT,
    seed: int = QUERY_SEED,
) -> tuple[np.ndarray, np.ndarray]:
    """The mixed query workload over ``len(domains)`` columns as ``(count, k)`` low and high arrays."""
    k = len(domains)
    start = np.array([d[0] for d in domains], dtype=np.float64)
    end = np.array([d[1] for d in domains], dtype=np.float64)
    width = (end - start) * window_percent / 100.0
    rng = np.random.default_rng(seed)
    q_low = np.full((count, k), -np.inf)
    q_high = np.full((count, k), np.inf)
    for i in range(count):
        corner = rng.uniform(start, end - width)
        kind = i % (k + 1)
        constrained = slice(None) if kind == k else slice(kind, kind + 1)
        q_low[i, constrained] = corner[constrained]
        q_high[i, constrained] = (corner + width)[constrained]
    return q_low, q_high


def scanned_ratio(low: np.ndarray, high: np.ndarray, q_low: np.ndarray, q_high: np.ndarray) -> float:
    """Mean over queries of the share of boxes (rows of ``low``/``high``) that intersect the query."""
    if low.shape[0] == 0:
        return 0.0
    shares = np.empty(q_low.shape[0])
    for s in range(0, q_low.shape[0], _QUERY_CHUNK):
        ql, qh = q_low[s : s + _QUERY_CHUNK, None, :], q_high[s : s + _QUERY_CHUNK, None, :]
        hits = np.all((low[None, :, :] <= qh) & (high[None, :, :] >= ql), axis=2)
        shares[s : s + _QUERY_CHUNK] = hits.mean(axis=1)
    return float(np.mean(shares))


def overlap_depth(low: np.ndarray, high: np.ndarray) -> tuple[int, float]:
    """(max, length-weighted mean) number of ranges ``[low_i, high_i]`` covering a point; (0, 0.0) if none."""
    if low.size == 0:
        return 0, 0.0
    points = np.unique(np.concatenate([low, high]))
    lows, highs = np.sort(low), np.sort(high)
    started = np.searchsorted(lows, points, side="right")  # ranges with low <= p
    at_point = started - np.searchsorted(highs, points, side="left")  # ... minus those with high < p
    between = started[:-1] - np.searchsorted(highs, points[:-1], side="right")  # on (p_j, p_j+1)
    lengths = np.diff(points)
    covered = between > 0
    total = float(lengths[covered].sum())
    if total > 0:
        mean = float((between[covered] * lengths[covered]).sum() / total)
    else:
        mean = float(at_point[at_point > 0].mean())
    return int(at_point.max()), mean


def _column_overlap(boxes: FooterBoxes, k: int) -> ColumnOverlap:
    low, high = boxes.file_low[:, k], boxes.file_high[:, k]
    usable = np.isfinite(low) & np.isfinite(high)
    depth, mean = overlap_depth(low[usable], high[usable])
    return ColumnOverlap(boxes.columns[k], depth, mean, int((~usable).sum()))


def files_scanned_ratio(
    paths: Sequence[str | os.PathLike[str]],
    columns: Sequence[str],
    *,
    domains: Mapping[str, Domain] | None = None,
    read_footer: FooterReader | None = None,
) -> float:
    """The files-scanned ratio of ``paths`` for ``columns`` (see the module docstring)."""
    boxes = read_boxes(paths, columns, domains=domains, read_footer=read_footer)
    return scanned_ratio(boxes.file_low, boxes.file_high, *query_boxes(boxes.domains))


def row_groups_scanned_ratio(
    paths: Sequence[str | os.PathLike[str]],
    columns: Sequence[str],
    *,
    domains: Mapping[str, Domain] | None = None,
    read_footer: FooterReader | None = None,
) -> float:
    """The same ratio counted over row groups instead of files."""
    boxes = read_boxes(paths, columns, domains=domains, read_footer=read_footer)
    return scanned_ratio(boxes.group_low, boxes.group_high, *query_boxes(boxes.domains))


def layout_report(
    paths: Sequence[str | os.PathLike[str]],
    columns: Sequence[str],
    *,
    domains: Mapping[str, Domain] | None = None,
    read_footer: FooterReader | None = None,
) -> LayoutReport:
    """Every layout figure for ``paths`` and ``columns``, from one pass over the footers."""
    boxes = read_boxes(paths, columns, domains=domains, read_footer=read_footer)
    q_low, q_high = query_boxes(boxes.domains)
    return LayoutReport(
        columns=boxes.columns,
        files=int(boxes.file_low.shape[0]),
        row_groups=int(boxes.group_low.shape[0]),
        files_scanned_ratio=scanned_ratio(boxes.file_low, boxes.file_high, q_low, q_high),
        row_groups_scanned_ratio=scanned_ratio(boxes.group_low, boxes.group_high, q_low, q_high),
        overlap=tuple(_column_overlap(boxes, k) for k in range(len(boxes.columns))),
        domains=boxes.domains,
    )
