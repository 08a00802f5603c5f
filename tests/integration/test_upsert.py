"""Upserts (copy-on-write merge) on Spark, read back by hudi-rs; conflicts with clustering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.engine.ingest.sink import HudiStreamingSink
from hudi_clusterd.engine.ingest.upsert import upsert
from hudi_clusterd.engine.ingest.writer import insert
from hudi_clusterd.errors import CommitConflictError
from hudi_clusterd.ops.execute import execute_pending
from hudi_clusterd.ops.ports import GroupRunner
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import make_policy
from tests.harness.hudi_rs_checks import assert_meta_consistent, hudi_rs_incremental, hudi_rs_rows

pytestmark = pytest.mark.spark

SCHEMA = "id long, region string, amount double, ts long"


def _table(tmp_path: Path, precombine: str | None = "ts") -> tuple[Path, HoodieTable]:
    base = tmp_path / "t"
    return base, HoodieTable.create(str(base), TableConfig.for_new_table(
        name="t", record_key_fields=["id"], partition_fields=["region"], precombine_field=precombine))


def _rows(ids: range, amount: float = 1.0, ts: int = 1) -> list[tuple[int, str, float, int]]:
    return [(i, ["eu", "us"][i % 2], amount * i, ts) for i in ids]


def _commit(base: Path, instant: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((base / ".hoodie" / f"{instant}.commit").read_text())
    return data


def _meta(base: Path) -> dict[int, tuple[str, str]]:
    """Record key → (commit time, seqno) in the latest snapshot."""
    rows = hudi_rs_rows(base, ["id", "_hoodie_commit_time", "_hoodie_commit_seqno"], "id")
    return {r["id"]: (r["_hoodie_commit_time"], r["_hoodie_commit_seqno"]) for r in rows}


def _amounts(base: Path, as_of: str | None = None) -> dict[int, float]:
    return {r["id"]: r["amount"] for r in hudi_rs_rows(base, ["id", "amount"], "id", as_of=as_of)}


def _incremental(base: Path, start: str, end: str) -> list[int]:
    return sorted(i for b in hudi_rs_incremental(base, start, end) for i in b.column("id").to_pylist())


def test_upsert_updates_and_inserts_read_by_hudi_rs(spark: Any, tmp_path: Path) -> None:
    # Given a table with 30 rows in two partitions
    base, table = _table(tmp_path)
    c1 = insert(spark, table, spark.createDataFrame(_rows(range(30)), SCHEMA), parallelism=1)
    before = _meta(base)
    groups_before = {p.name.split("_")[0] for p in base.rglob("*.parquet") if ".hoodie" not in p.parts}
    # When ids 20..39 are upserted with new amounts
    c2 = upsert(spark, table, spark.createDataFrame(_rows(range(20, 40), amount=10.0, ts=2), SCHEMA))
    # Then hudi-rs reads the updated values, the old ones and the new keys
    assert _amounts(base) == {**{i: 1.0 * i for i in range(20)}, **{i: 10.0 * i for i in range(20, 40)}}
    assert assert_meta_consistent(base) == 40
    # And rows carried over keep their commit time and seqno; updated and new rows carry the upsert's
    after = _meta(base)
    assert all(after[i] == before[i] for i in range(20))
    assert all(after[i][0] == c2 and after[i][1].startswith(c2 + "_") for i in range(20, 40))
    assert len({after[i][1] for i in range(20, 40)}) == 20
    # And every updated file group got a new slice of the same file id, with update write stats
    commit = _commit(base, c2)
    assert commit["operationType"] == "UPSERT"
    stats = [ws for wss in commit["partitionToWriteStats"].values() for ws in wss]
    updates = [ws for ws in stats if ws["numUpdateWrites"]]
    assert {ws["fileId"] for ws in updates} <= groups_before and len(updates) == 2
    assert sum(ws["numUpdateWrites"] for ws in updates) == 10
    for ws in stats:
        path = base / ws["path"]
        assert path.name.startswith(ws["fileId"] + "_") and path.name.endswith(f"_{c2}.parquet")
        assert ws["numWrites"] == pq.read_metadata(path).num_rows
        assert ws["fileSizeInBytes"] == path.stat().st_size
        if ws["fileId"] in groups_before:
            assert ws["prevCommit"] == c1 and ws["numWrites"] == 15 and ws["numInserts"] == 0
        else:
            assert ws["prevCommit"] == "null" and ws["numWrites"] == ws["numInserts"]
        footer = pq.read_metadata(path).metadata
        keys = pq.read_table(path, columns=["_hoodie_record_key"]).column(0).to_pylist()
        assert footer[b"hoodie_min_record_key"].decode() == min(keys)
        assert footer[b"hoodie_max_record_key"].decode() == max(keys)
    assert sum(ws["numInserts"] for ws in stats) == 10
    # And time travel to before the upsert gives the old values; incremental gives exactly the changed rows
    assert _amounts(base, as_of=c1) == {i: 1.0 * i for i in range(30)}
    assert _incremental(base, c1, c2) == list(range(20, 40))
    # And no markers, heartbeats or pending instants are left
    assert not list((base / ".hoodie" / ".temp").glob("*/*"))
    assert not [i for i in table.timeline() if i.is_pending]


def test_upsert_precombine_picks_the_winner_within_a_batch(spark: Any, tmp_path: Path) -> None:
    # Given a table with ids 0..3
    base, table = _table(tmp_path)
    insert(spark, table, spark.createDataFrame(_rows(range(4)), SCHEMA))
    # When one batch holds several versions of ids 1 and 5 (greatest ts wins; equal ts: the last one)
    batch = [(1, "us", 100.0, 7), (1, "us", 200.0, 9), (1, "us", 300.0, 8),
             (5, "us", 1.0, 3), (5, "us", 2.0, 3)]
    upsert(spark, table, spark.createDataFrame(batch, SCHEMA).coalesce(1))
    # Then one row per key, the winner's values
    assert _amounts(base) == {0: 0.0, 1: 200.0, 2: 2.0, 3: 3.0, 5: 2.0}
    assert assert_meta_consistent(base) == 5


def test_upsert_small_file_limit_pads_small_file_groups(spark: Any, tmp_path: Path) -> None:
    # Given a table with one small file group per partition
    base, table = _table(tmp_path)
    insert(spark, table, spark.createDataFrame(_rows(range(10)), SCHEMA), parallelism=1)
    groups = {p.name.split("_")[0] for p in base.rglob("*.parquet") if ".hoodie" not in p.parts}
    # When new keys are upserted with a small-file limit above those files' size
    c2 = upsert(spark, table, spark.createDataFrame(_rows(range(10, 20), ts=2), SCHEMA), small_file_limit=1 << 20)
    # Then the inserts went into the existing groups as new slices, and every row reads back
    stats = [ws for wss in _commit(base, c2)["partitionToWriteStats"].values() for ws in wss]
    assert {ws["fileId"] for ws in stats} == groups
    assert all(ws["numInserts"] == 5 and ws["numWrites"] == 10 and ws["numUpdateWrites"] == 0 for ws in stats)
    assert sorted(_amounts(base)) == list(range(20))
    assert assert_meta_consistent(base) == 20


def test_sink_upsert_merges_micro_batches(spark: Any, tmp_path: Path) -> None:
    # Given an upserting streaming sink on a new table
    base = tmp_path / "t"
    sink = HudiStreamingSink(str(base), record_key="id", partition_by=["region"], precombine="ts",
                             operation="upsert", identifier="q1")
    # When two micro-batches update the same keys (and the second is replayed after a "crash")
    sink(spark.createDataFrame(_rows(range(6)), SCHEMA), 0)
    sink(spark.createDataFrame(_rows(range(3, 9), amount=5.0, ts=2), SCHEMA), 1)
    sink(spark.createDataFrame(_rows(range(3, 9), amount=7.0, ts=3), SCHEMA), 1)
    # Then the table holds the latest value of each key once, the replay skipped
    assert _amounts(base) == {**{i: 1.0 * i for i in range(3)}, **{i: 5.0 * i for i in range(3, 9)}}
    assert assert_meta_consistent(base) == 9


# --- clustering conflicts -----------------------------------------------------------------------------------


SMALL_FILES = {"hoodie.clustering.plan.strategy.small.file.limit": str(1 << 20),
               "hoodie.clustering.plan.strategy.target.file.max.bytes": str(1 << 20)}


@pytest.fixture(scope="module")
def runner(spark: Any) -> GroupRunner:
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner

    return SparkGroupRunner(spark, owns_session=False)


def _clusterable(spark: Any, tmp_path: Path) -> tuple[Path, HoodieTable]:
    """Three commits of small files in two partitions."""
    base, table = _table(tmp_path)
    for k in range(3):
        insert(spark, table, spark.createDataFrame(_rows(range(10 * k, 10 * k + 10)), SCHEMA), parallelism=1)
    return base, table


def _planned_group_of(table: HoodieTable, instant: str, key: int) -> str:
    """The file id of a planned file group that holds record ``key``."""
    plan = table.pending_clustering_plans()[0].plan
    assert table.pending_clustering_plans()[0].instant.time == instant
    for group in plan.input_groups:
        for s in group.slices:
            path = table.storage.full_path(f"{s.partition_path}/{s.file_name}")
            if str(key) in pq.read_table(path, columns=["_hoodie_record_key"]).column(0).to_pylist():
                return s.file_id
    raise AssertionError(f"record {key} is in no planned file group")


def test_upsert_into_pending_plan_wins_then_next_plan_leaves_hot_groups_out(spark: Any, tmp_path: Path,
                                                                          runner: GroupRunner) -> None:
    # Given a pending clustering plan over every file group
    base, table = _clusterable(spark, tmp_path)
    pol = make_policy(**SMALL_FILES)
    planned = schedule(table, pol, force=True).instant
    assert planned is not None
    hot = _planned_group_of(table, planned, 4)
    # When an upsert updates record 4 in a planned file group (ingestion wins: it goes ahead)
    c = upsert(spark, table, spark.createDataFrame([(4, "eu", -1.0, 9)], SCHEMA))
    # Then executing the plan commits every group but the one holding the updated file group, which it leaves out
    result = execute_pending(table, runner, planned, parallelism=pol.max_parallelism)
    assert result.outcome == "completed" and hot in result.message and "groups left out" in result.message
    assert table.pending_clustering_plans() == []
    committed = json.loads((base / ".hoodie" / f"{planned}.replacecommit").read_text())
    assert hot not in {f for ids in committed["partitionToReplaceFileIds"].values() for f in ids}
    # And the update is kept: no lost update, every row once
    assert _amounts(base)[4] == -1.0 and assert_meta_consistent(base) == 30
    assert c in _meta(base)[4][0]
    # And the next plan leaves the hot file group out, and clustering it loses nothing
    again = schedule(table, pol, force=True)
    assert again.instant is not None and again.plan is not None
    assert hot not in {s.file_id for g in again.plan.input_groups for s in g.slices}
    assert execute_pending(table, runner, again.instant, parallelism=pol.max_parallelism).outcome == "completed"
    assert _amounts(base)[4] == -1.0 and assert_meta_consistent(base) == 30


def test_upsert_rejected_by_pending_plan_changes_nothing(spark: Any, tmp_path: Path) -> None:
    # Given a pending clustering plan
    base, table = _clusterable(spark, tmp_path)
    planned = schedule(table, make_policy(**SMALL_FILES), force=True).instant
    assert planned is not None
    hot = _planned_group_of(table, planned, 4)
    instants = sorted(p.name for p in (base / ".hoodie").iterdir() if p.is_file())
    files = sorted(str(p) for p in base.rglob("*.parquet"))
    # When an upsert with the reject option updates a planned file group
    with pytest.raises(CommitConflictError, match=f"pending clustering plan {planned}.*{hot}"):
        upsert(spark, table, spark.createDataFrame([(4, "eu", -1.0, 9), (99, "us", 1.0, 9)], SCHEMA),
               reject_updates_to_pending_clustering=True)
    # Then nothing was written or committed
    assert sorted(p.name for p in (base / ".hoodie").iterdir() if p.is_file()) == instants
    assert sorted(str(p) for p in base.rglob("*.parquet")) == files
    assert _amounts(base)[4] == 4.0 and 99 not in _amounts(base)


def test_upsert_fails_rather_than_lose_a_write_when_its_group_was_clustered_meanwhile(
        spark: Any, tmp_path: Path, runner: GroupRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given an upsert that reads the file groups, and a clustering that completes before the upsert commits
    base, table = _clusterable(spark, tmp_path)
    pol = make_policy(**SMALL_FILES)
    from hudi_clusterd.table.write_client import start_commit as real_start

    def start_after_clustering(*args: Any, **kw: Any) -> Any:
        planned = schedule(table, pol, force=True).instant
        assert execute_pending(table, runner, planned, parallelism=pol.max_parallelism).outcome == "completed"
        return real_start(*args, **kw)

    monkeypatch.setattr("hudi_clusterd.engine.ingest.upsert.start_commit", start_after_clustering)
    # When the upsert tries to commit its new slices of the replaced file groups
    with pytest.raises(CommitConflictError, match="was replaced"):
        upsert(spark, table, spark.createDataFrame([(4, "eu", -1.0, 9)], SCHEMA))
    # Then it was rolled back (the caller retries) and the table is consistent
    assert not [i for i in table.timeline() if i.is_pending]
    assert _amounts(base)[4] == 4.0 and assert_meta_consistent(base) == 30
    monkeypatch.undo()
    upsert(spark, table, spark.createDataFrame([(4, "eu", -1.0, 9)], SCHEMA))
    assert _amounts(base)[4] == -1.0 and assert_meta_consistent(base) == 30


def test_clustering_completing_while_an_upsert_is_inflight_loses_to_it(
        spark: Any, tmp_path: Path, runner: GroupRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a pending plan, and an upsert into one of its file groups that has written its files (markers)
    base, table = _clusterable(spark, tmp_path)
    pol = make_policy(**SMALL_FILES)
    planned = schedule(table, pol, force=True).instant
    assert planned is not None
    hot = _planned_group_of(table, planned, 4)
    from hudi_clusterd.table.write_client import complete_commit as real_complete
    outcomes: list[str] = []

    def complete_after_clustering(*args: Any, **kw: Any) -> Any:
        result = execute_pending(table, runner, planned, parallelism=pol.max_parallelism)
        outcomes.append(result.outcome)
        assert hot in result.message and "is being written by a pending instant" in result.message
        committed = json.loads((base / ".hoodie" / f"{planned}.replacecommit").read_text())
        assert hot not in {f for ids in committed["partitionToReplaceFileIds"].values() for f in ids}
        return real_complete(*args, **kw)

    monkeypatch.setattr("hudi_clusterd.engine.ingest.upsert.complete_commit", complete_after_clustering)
    # When the clustering tries to complete before the upsert commits
    upsert(spark, table, spark.createDataFrame([(4, "eu", -1.0, 9)], SCHEMA))
    # Then the clustering saw the inflight upsert's markers and left that group out; the update is kept
    assert outcomes == ["completed"] and table.pending_clustering_plans() == []
    assert _amounts(base)[4] == -1.0 and assert_meta_consistent(base) == 30


def test_upsert_into_golden_table_written_by_apache_hudi(spark: Any, golden_copy: Any) -> None:
    # Given a copy of a table written by Apache Hudi (nested columns, decimals, dates)
    from pyspark.sql import functions as F

    from hudi_clusterd.engine.ingest.snapshot import snapshot

    base = golden_copy("v6_simplekeygen_nonhivestyle")
    table = HoodieTable.open(str(base))
    before = {r["id"]: r for r in hudi_rs_rows(base, ["id", "name", "_hoodie_commit_time", "_hoodie_commit_seqno",
                                                      "_hoodie_file_name"], "id")}
    last = max(r["_hoodie_commit_time"] for r in before.values())
    carol = snapshot(spark, table).filter("id = 3").withColumn("name", F.lit("Caroline"))
    # When Carol's row is upserted with a new name
    c = upsert(spark, table, carol)
    # Then hudi-rs reads the new name; Alice, in the same file group, is carried over unchanged
    after = {r["id"]: r for r in hudi_rs_rows(base, ["id", "name", "_hoodie_commit_time", "_hoodie_commit_seqno",
                                                     "_hoodie_file_name"], "id")}
    assert {i: r["name"] for i, r in after.items()} == {1: "Alice", 2: "Bob", 3: "Caroline", 4: "Diana"}
    assert after[1]["_hoodie_commit_time"] == before[1]["_hoodie_commit_time"]
    assert after[1]["_hoodie_commit_seqno"] == before[1]["_hoodie_commit_seqno"]
    assert after[3]["_hoodie_commit_time"] == c
    assert after[1]["_hoodie_file_name"].split("_")[0] == before[1]["_hoodie_file_name"].split("_")[0]
    assert after[1]["_hoodie_file_name"].endswith(f"_{c}.parquet")
    assert assert_meta_consistent(base) == 4
    # And time travel and incremental reads see the change exactly
    assert {r["id"]: r["name"] for r in hudi_rs_rows(base, ["id", "name"], "id", as_of=last)}[3] == "Carol"
    assert _incremental(base, last, c) == [3]
