"""``hudi-clusterd ingest`` end to end on the test session (its session factory returns the running session)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.commands import ingest
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.harness.hudi_rs_checks import assert_meta_consistent, assert_table_layout, hudi_rs_rows

pytestmark = pytest.mark.spark


@pytest.fixture
def session_conf_restored(spark: Any) -> Iterator[Any]:
    saved = spark.conf.get("spark.sql.shuffle.partitions")
    yield spark
    spark.conf.set("spark.sql.shuffle.partitions", saved)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    ingest.register(parser.add_subparsers())
    return parser.parse_args(["ingest", *argv])


@pytest.mark.parametrize("version", ["6", "9"])
def test_ingest_commit_per_file_creates_table_and_reports(session_conf_restored: Any, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str], version: str) -> None:
    # Given three parquet files
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        ids = list(range(i * 10, i * 10 + 10))
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "dt": [f"2024-01-0{1 + x % 2}" for x in ids]}),
                       src / f"f{i}.parquet")
    base = tmp_path / "t"
    # When ingested with one commit per file into a new hive-style table
    args = _args("--base-path", str(base), "--source", str(src / "*.parquet"), "--record-key", "id",
                 "--partition-by", "dt", "--hive-style", "--commit-per-file", "--spark-master", "local[2]",
                 "--table-version", version)
    assert args.func(args) == 0
    # Then each file was one commit, reported as it went
    out = capsys.readouterr().out.splitlines()
    progress = [line for line in out if line.startswith("[")]
    assert [line.split()[0] for line in progress] == ["[1/3]", "[2/3]", "[3/3]"]
    assert all(line.endswith("(10 rows, 1 file)") for line in progress)
    assert out[-1] == "done: 3 commits, 30 rows"
    assert [r["id"] for r in hudi_rs_rows(base, ["id"], "id")] == list(range(30))
    assert assert_meta_consistent(base) == 30
    assert_table_layout(base)
    assert {p.name for p in base.iterdir() if not p.name.startswith(".")} == {"dt=2024-01-01", "dt=2024-01-02"}
    # When appended again with a disagreeing flag, the table's own key wins with a warning
    more = tmp_path / "more.parquet"
    pq.write_table(pa.table({"id": pa.array([100], pa.int64()), "dt": ["2024-01-03"]}), more)
    args = _args("--base-path", str(base), "--source", str(more), "--record-key", "dt")
    assert args.func(args) == 0
    captured = capsys.readouterr()
    assert "warning: --record-key dt differs from the existing table's id" in captured.err
    assert captured.out.startswith("committed ") and captured.out.strip().endswith("(1 row, 1 file)")
    assert len(hudi_rs_rows(base, ["id"], "id")) == 31
    assert HoodieTable.open(str(base)).config.version == int(version)


def test_ingest_new_table_without_record_key_fails_in_one_line(session_conf_restored: Any, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    pq.write_table(pa.table({"id": [1]}), tmp_path / "a.parquet")
    args = _args("--base-path", str(tmp_path / "t"), "--source", str(tmp_path / "a.parquet"))
    assert args.func(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--record-key is required" in err and err.count("\n") == 1
