"""Layout quality from parquet footers: agreement with ../shared/bench/layout.py, types, overlap depth."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from types import ModuleType

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.errors import StorageError, TableError
from hudi_clusterd.ordering import quality as layout
from tests.support import require_shared


def load_shared_module(*parts: str) -> ModuleType:
    path = require_shared(*parts)
    spec = importlib.util.spec_from_file_location("shared_" + path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reference_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """Small reference datasets from the shared generator: as generated, and rewritten sorted by lat."""
    gen = load_shared_module("bench", "gen.py")
    root = tmp_path_factory.mktemp("reference")
    gen.make(str(root / "raw"), 24_000, 12, 7)
    raw = sorted((root / "raw").glob("*.parquet"))
    table = pa.concat_tables(pq.read_table(p, columns=["lat", "lon", "event_ts"]) for p in raw)
    table = table.sort_by([("lat", "ascending")])
    (root / "sorted").mkdir()
    for i in range(8):
        pq.write_table(table.slice(i * 3000, 3000), root / "sorted" / f"p{i}.parquet", row_group_size=1000)
    return {"raw": raw, "sorted": sorted((root / "sorted").glob("*.parquet"))}


@pytest.mark.parametrize("dataset", ["raw", "sorted"])
def test_layout_report_reference_data_equals_reference_script(
    reference_files: dict[str, list[Path]], dataset: str
) -> None:
    # Given the reference script and files laid out by it
    script = load_shared_module("bench", "layout.py")
    paths = reference_files[dataset]
    file_boxes, group_boxes = script.file_boxes(paths, ["lat", "lon"])
    queries = script.queries()
    # When measured by our module with default (automatic) domains
    report = layout.layout_report(paths, ["lat", "lon"])
    # Then every figure is exactly the script's
    assert report.domains == ((0.0, 100.0), (0.0, 100.0))
    assert report.files_scanned_ratio == script.scanned(file_boxes, queries)
    assert report.row_groups_scanned_ratio == script.scanned(group_boxes, queries)
    assert layout.files_scanned_ratio(paths, ["lat", "lon"]) == report.files_scanned_ratio
    assert layout.row_groups_scanned_ratio(paths, ["lat", "lon"]) == report.row_groups_scanned_ratio
    expected = script.report(paths)
    assert (report.files, report.row_groups) == (expected["files"], expected["row_groups"])
    assert round(report.files_scanned_ratio, 4) == expected["files_scanned"]
    assert round(report.row_groups_scanned_ratio, 4) == expected["rowgroups_scanned"]


def test_layout_report_sorted_reference_is_better_than_raw(reference_files: dict[str, list[Path]]) -> None:
    raw = layout.layout_report(reference_files["raw"], ["lat", "lon"])
    ordered = layout.layout_report(reference_files["sorted"], ["lat", "lon"])
    assert raw.files_scanned_ratio == 1.0
    assert ordered.files_scanned_ratio < 0.6
    assert ordered.overlap[0].max_depth <= 2 < raw.overlap[0].max_depth


def test_query_boxes_two_columns_equal_reference_queries() -> None:
    script = load_shared_module("bench", "layout.py")
    q_low, q_high = layout.query_boxes([(0.0, 100.0), (0.0, 100.0)])
    reference = script.queries()
    assert q_low.tolist() == [list(lo) for lo, _ in reference]
    assert q_high.tolist() == [list(hi) for _, hi in reference]


def test_query_boxes_one_column_constrains_every_query() -> None:
    q_low, q_high = layout.query_boxes([(10.0, 30.0)])
    assert q_low.shape == (600, 1)
    assert np.all((q_low >= 10.0) & (q_high <= 30.0))
    assert np.allclose(q_high - q_low, 1.0)  # 5 % of 20


def test_query_boxes_three_columns_cycle_singles_then_all() -> None:
    q_low, _ = layout.query_boxes([(0.0, 1.0), (0.0, 10.0), (-5.0, 5.0)], count=8)
    constrained = np.isfinite(q_low).tolist()
    assert constrained[:4] == [[True, False, False], [False, True, False], [False, False, True], [True] * 3]
    assert constrained[4:] == constrained[:4]


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (-0.6, 105.6, (0.0, 100.0)),
        (-5.6, 100.6, (0.0, 100.0)),
        (0.0, 100.0, (0.0, 100.0)),
        (149.0, 251.0, (150.0, 250.0)),
        (3.0, 47.0, (0.0, 50.0)),
        (7.0, 7.0, (6.5, 7.5)),
    ],
)
def test_nice_domain_rounds_to_coarsest_close_step(low: float, high: float, expected: tuple[float, float]) -> None:
    assert layout.nice_domain(low, high) == pytest.approx(expected)


def test_nice_domain_never_moves_an_end_by_more_than_a_tenth() -> None:
    rng = np.random.default_rng(5)
    for low, span in zip(rng.uniform(-1e6, 1e6, 200), 10 ** rng.uniform(-3, 6, 200), strict=True):
        a, b = layout.nice_domain(float(low), float(low + span))
        assert abs(a - low) <= 0.1 * span * (1 + 1e-9) and abs(b - (low + span)) <= 0.1 * span * (1 + 1e-9)


def write_files(root: Path, tables: list[pa.Table], **kwargs: object) -> list[Path]:
    paths = []
    for i, table in enumerate(tables):
        path = root / f"f{i}.parquet"
        pq.write_table(table, path, **kwargs)
        paths.append(path)
    return paths


TYPED_COLUMNS: dict[str, tuple[pa.DataType, Callable[[int], object]]] = {
    "i": (pa.int32(), lambda k: k),
    "d": (pa.float64(), lambda k: k / 10),
    "dt": (pa.date32(), lambda k: dt.date(2020, 1, 1) + dt.timedelta(days=k)),
    "ts": (pa.timestamp("us", tz="UTC"), lambda k: dt.datetime(2020, 1, 1) + dt.timedelta(minutes=k)),
    "ntz": (pa.timestamp("ms"), lambda k: dt.datetime(2020, 1, 1) + dt.timedelta(hours=k)),
    "dec": (pa.decimal128(12, 3), lambda k: Decimal(k) / 8),
    "s": (pa.string(), lambda k: f"key-{k:05d}"),
    "b": (pa.binary(), lambda k: k.to_bytes(4, "big")),
}


@pytest.mark.parametrize("column", sorted(TYPED_COLUMNS))
def test_layout_report_disjoint_files_every_type_scan_a_share(tmp_path: Path, column: str) -> None:
    # Given 10 files holding disjoint, increasing ranges of one column
    arrow_type, make = TYPED_COLUMNS[column]
    tables = [pa.table({column: pa.array([make(k) for k in range(f * 100, f * 100 + 100)], arrow_type)})
              for f in range(10)]  # fmt: skip
    paths = write_files(tmp_path, tables)
    # When measured
    report = layout.layout_report(paths, [column])
    # Then no two files overlap, and a 5 % window reads one or two of the ten files
    assert report.overlap[0].max_depth == 1
    assert report.overlap[0].mean_depth == pytest.approx(1.0)
    assert 0.05 <= report.files_scanned_ratio <= 0.2


def test_layout_report_overlapping_files_depths(tmp_path: Path) -> None:
    ranges = [(0.0, 10.0), (5.0, 15.0), (20.0, 30.0)]
    paths = write_files(tmp_path, [pa.table({"x": [lo, hi]}) for lo, hi in ranges])
    (overlap,) = layout.layout_report(paths, ["x"]).overlap
    # depth 2 on [5, 10], 1 elsewhere on a 25-long union: (5*1 + 5*2 + 5*1 + 10*1) / 25
    assert overlap.max_depth == 2
    assert overlap.mean_depth == pytest.approx(1.2)


def test_overlap_depth_touching_and_point_ranges() -> None:
    assert layout.overlap_depth(np.array([0.0, 10.0]), np.array([10.0, 20.0])) == (2, 1.0)
    assert layout.overlap_depth(np.array([3.0, 3.0, 4.0]), np.array([3.0, 3.0, 4.0])) == (2, 1.5)
    assert layout.overlap_depth(np.array([]), np.array([])) == (0, 0.0)


def test_layout_report_strings_rank_normalised(tmp_path: Path) -> None:
    # Given two files with interleaved string ranges and one apart
    tables = [pa.table({"s": ["apple", "melon"]}), pa.table({"s": ["banana", "cherry"]}), pa.table({"s": ["x", "z"]})]
    report = layout.layout_report(write_files(tmp_path, tables), ["s"])
    assert report.domains == (layout.RANK_DOMAIN,)
    assert report.overlap[0].max_depth == 2
    assert 0.3 < report.files_scanned_ratio < 0.7


def test_layout_report_all_null_group_skipped_missing_stats_scanned(tmp_path: Path) -> None:
    # Given one file with values, one whose column is all null, one written without statistics
    base = pa.table({"x": pa.array([0.0, 100.0])})
    nulls = pa.table({"x": pa.array([None, None], pa.float64())})
    paths = write_files(tmp_path, [base, nulls])
    no_stats = tmp_path / "nostats.parquet"
    pq.write_table(pa.table({"x": [40.0, 41.0]}), no_stats, write_statistics=False)
    report = layout.layout_report([*paths, no_stats], ["x"])
    # Then every query reads the full-range file and the stat-less one, never the all-null one
    assert report.files_scanned_ratio == pytest.approx(2 / 3)
    assert report.overlap[0].files_without_stats == 2


def test_layout_report_column_missing_from_some_files_counts_as_empty(tmp_path: Path) -> None:
    paths = write_files(tmp_path, [pa.table({"x": [0.0, 100.0]}), pa.table({"y": [1, 2]})])
    assert layout.files_scanned_ratio(paths, ["x"]) == pytest.approx(0.5)


def test_layout_report_column_missing_everywhere_raises(tmp_path: Path) -> None:
    paths = write_files(tmp_path, [pa.table({"x": [1.0]})])
    with pytest.raises(TableError, match=r"\['nope'\] are in none of the 1 files"):
        layout.layout_report(paths, ["x", "nope"])


def test_layout_report_unreadable_file_raises_table_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(TableError, match=r"bad\.parquet"):
        layout.layout_report([bad], ["x"])


def test_layout_report_missing_file_raises_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match=r"gone\.parquet"):
        layout.layout_report([tmp_path / "gone.parquet"], ["x"])


def test_layout_report_explicit_domain_overrides(tmp_path: Path) -> None:
    paths = write_files(tmp_path, [pa.table({"x": [0.0, 10.0]}), pa.table({"x": [10.0, 20.0]})])
    wide = layout.layout_report(paths, ["x"], domains={"x": (0.0, 1000.0)})
    assert wide.domains == ((0.0, 1000.0),)
    assert wide.files_scanned_ratio < layout.layout_report(paths, ["x"]).files_scanned_ratio


def test_layout_report_to_dict_is_json_ready(tmp_path: Path) -> None:
    paths = write_files(tmp_path, [pa.table({"a": [1, 5], "b": ["x", "y"]})], row_group_size=1)
    data = layout.layout_report(paths, ["a", "b"]).to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["files"] == 1 and data["row_groups"] == 2
    assert set(data["overlap"]) == {"a", "b"} and data["columns"] == ["a", "b"]


def test_layout_report_no_files_is_empty() -> None:
    report = layout.layout_report([], ["x"])
    assert (report.files, report.files_scanned_ratio) == (0, 0.0)
