"""Scheduling on a real table on disk: trigger, plan file, hudi-rs compatibility, no group in two plans."""

from __future__ import annotations

import io
import json
from pathlib import Path

import fastavro
import pytest

from hudi_clusterd.cli import main
from hudi_clusterd.errors import ConfigError, LockError
from hudi_clusterd.lock import FileSystemLockProvider, LockOptions
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.storage import open_storage
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import TableGen, make_policy
from tests.harness.hudi_rs_checks import hudi_rs_rows
from tests.support import require_shared


def _table_with_commits(tmp_path: Path, n: int) -> TableGen:
    gen = TableGen(tmp_path / "t")
    for i in range(n):
        gen.commit({"p1": [float(i), float(i) + 0.5], "p2": [float(10 * i)]})
    return gen


def _timeline_files(base: Path) -> list[str]:
    return sorted(p.name for p in (base / ".hoodie").iterdir() if p.is_file())


def test_schedule_trigger_not_met_writes_nothing_and_says_why(tmp_path: Path) -> None:
    gen = _table_with_commits(tmp_path, 3)
    before = _timeline_files(gen.base)
    result = schedule(gen.table, make_policy())
    assert result.instant is None
    assert result.reason == "3 commits since the table was created (never clustered), 4 needed"
    assert _timeline_files(gen.base) == before


def test_a_schedule_that_finds_nothing_to_do_never_takes_the_table_lock(tmp_path: Path) -> None:
    """Another writer holds the lock: a call that plans nothing returns at once, one that would plan waits."""
    gen = _table_with_commits(tmp_path, 3)
    storage = open_storage(str(gen.base))
    table = HoodieTable.open(str(gen.base), storage,
                             lock_provider=FileSystemLockProvider(storage, LockOptions(timeout_s=0.3)))
    writer = FileSystemLockProvider(table.storage, LockOptions(timeout_s=1))
    with writer.held():
        assert schedule(table, make_policy()).reason.endswith("4 needed")  # trigger short
    gen.commit({"p1": [9.0]})
    with writer.held():
        fired = schedule(table, make_policy(**{"small.file.limit": "1"}))  # trigger met, no file small enough
        assert fired.trigger.fire and fired.plan is None
        with pytest.raises(LockError, match="timed out"):
            schedule(table, make_policy())  # a plan to save: only under the lock
    assert not [n for n in _timeline_files(gen.base) if "replacecommit" in n]
    assert schedule(table, make_policy()).instant is not None


def test_schedule_writes_plan_readable_with_hudi_writer_schema(tmp_path: Path) -> None:
    ref = require_shared("reference", "hudi-avro", "HoodieRequestedReplaceMetadata.writer-schema.json")
    gen = _table_with_commits(tmp_path, 4)
    newest_before = max(n for n in _timeline_files(gen.base) if n[0].isdigit())[:17]
    result = schedule(gen.table, make_policy())
    assert result.instant is not None and result.instant > newest_before
    data = (gen.base / ".hoodie" / f"{result.instant}.replacecommit.requested").read_bytes()
    (record,) = fastavro.reader(io.BytesIO(data), reader_schema=fastavro.parse_schema(json.loads(ref.read_text())))
    assert record["operationType"] == "CLUSTER"
    slices = [s for g in record["clusteringPlan"]["inputGroups"] for s in g["slices"]]
    assert len(slices) == 8  # 4 commits x 2 partitions, all small
    for s in slices:
        assert s["dataFilePath"].startswith("file:/") and Path(s["dataFilePath"][5:]).exists()
        assert s["partitionPath"] in ("p1", "p2")


def test_schedule_pending_plan_keeps_table_readable_by_hudi_rs(tmp_path: Path) -> None:
    gen = _table_with_commits(tmp_path, 4)
    assert schedule(gen.table, make_policy()).instant is not None
    rows = hudi_rs_rows(gen.base)
    keys = [r["_hoodie_record_key"] for r in rows]
    assert len(keys) == 12 and len(set(keys)) == 12


def test_schedule_pending_plan_counts_as_last_clustering_and_no_group_in_two_plans(tmp_path: Path) -> None:
    gen = _table_with_commits(tmp_path, 4)
    first = schedule(gen.table, make_policy())
    assert first.instant is not None and first.plan is not None
    again = schedule(gen.table, make_policy())
    assert again.instant is None and again.reason.startswith("0 commits since the last clustering")
    gen.commit({"p1": [99.0], "p2": [98.0]})
    forced = schedule(gen.table, make_policy(), force=True)
    assert forced.plan is not None and forced.instant is not None
    assert not set(first.plan.group_ids()) & set(forced.plan.group_ids())
    assert len(gen.table.pending_clustering_plans()) == 2


def test_schedule_missing_sort_column_fails_and_timeline_untouched(tmp_path: Path) -> None:
    gen = _table_with_commits(tmp_path, 4)
    before = _timeline_files(gen.base)
    with pytest.raises(ConfigError, match="'nope' is not in the table schema"):
        schedule(gen.table, make_policy(**{"hoodie.clustering.plan.strategy.sort.columns": "x,nope"}))
    assert _timeline_files(gen.base) == before


def test_schedule_sort_columns_group_overlapping_footer_ranges(tmp_path: Path) -> None:
    gen = TableGen(tmp_path / "t")
    for lo in (0.0, 5.0, 100.0, 105.0):  # two overlapping pairs, far apart
        gen.commit({"p1": [lo, lo + 10.0]})
    small_groups = {"hoodie.clustering.plan.strategy.sort.columns": "x",
                    "hoodie.clustering.plan.strategy.max.bytes.per.group": str(
                        2 * max(p.stat().st_size for p in (gen.base / "p1").glob("*.parquet")))}
    result = schedule(gen.table, make_policy(**small_groups))
    assert result.plan is not None
    groups = [sorted(s.file_id for s in g.slices) for g in result.plan.input_groups]
    assert len(groups) == 2 and all(len(g) == 2 for g in groups)


def test_cli_schedule_dry_run_and_json_write_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = _table_with_commits(tmp_path, 4)
    before = _timeline_files(gen.base)
    assert main(["schedule", "--base-path", str(gen.base), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dry run: would schedule") and "p1" in out and "output file groups" in out
    assert main(["schedule", "--base-path", str(gen.base), "--dry-run", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["scheduled"] is False and doc["dry_run"] is True and len(doc["groups"]) == 2
    assert _timeline_files(gen.base) == before


def test_cli_schedule_bad_props_lists_every_bad_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = _table_with_commits(tmp_path, 4)
    props = tmp_path / "bad.properties"
    props.write_text("hoodie.clustering.plan.strategy.target.file.max.bytes=-1\n"
                     "hoodie.clustering.plan.partition.filter.mode=SOMETIMES\n")
    before = _timeline_files(gen.base)
    assert main(["schedule", "--base-path", str(gen.base), "--props", str(props)]) == 3
    err = capsys.readouterr().err
    assert "target.file.max.bytes" in err and "-1" in err and "filter.mode" in err and "SOMETIMES" in err
    assert _timeline_files(gen.base) == before


def test_cli_plans_lists_pending_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = _table_with_commits(tmp_path, 4)
    instant = schedule(gen.table, make_policy()).instant
    assert main(["plans", "--base-path", str(gen.base), "--json"]) == 0
    (plan,) = json.loads(capsys.readouterr().out)
    assert plan["instant"] == instant and plan["state"] == "requested" and plan["slices"] == 8
