"""A clustering's whole life on tables of timeline layout 2 (table versions 8 and 9): plan, claim, commit and
rollback write exactly the files Hudi 1.x writes, and a table upgraded underneath a running plan is followed."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.instant import Action, Instant, State, format_instant_time, parse_instant_time
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.errors import ExecutionError, TimelineError
from hudi_clusterd.formats.avro import REQUESTED_REPLACE_WRITER_SCHEMA_V2, _schema_text, encode_commit_metadata_v2
from hudi_clusterd.ops.commit import complete, rollback_clustering
from hudi_clusterd.ops.events import Outcome
from hudi_clusterd.ops.execute import execute_pending
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import FakeClock, TableGen, make_policy, scheduled_plan


def _timeline_files(base: Path, prefix: str = "") -> list[str]:
    return sorted(p.name for p in (base / ".hoodie" / "timeline").iterdir() if p.name.startswith(prefix))


def _avro(path: Path) -> tuple[dict[str, object], str]:
    with path.open("rb") as f:
        reader = fastavro.reader(f)
        records = list(reader)
        schema = reader.metadata["avro.schema"]
        codec = reader.metadata.get("avro.codec", "null")
    assert codec == "null" and len(records) == 1
    assert isinstance(records[0], dict)
    return records[0], schema


def test_a_new_version_9_table_has_the_properties_hudi_1_2_writes(tmp_path: Path) -> None:
    cfg = TableConfig.for_new_table(name="t", record_key_fields=["id"], partition_fields=["part"],
                                    precombine_field="ts", table_version=9)
    assert cfg.raw["hoodie.table.version"] == "9" and cfg.raw["hoodie.timeline.layout.version"] == "2"
    assert cfg.raw["hoodie.table.ordering.fields"] == "ts" and "hoodie.table.precombine.field" not in cfg.raw
    assert cfg.raw["hoodie.table.keygenerator.type"] == "SIMPLE" and "hoodie.table.keygenerator.class" not in cfg.raw
    assert cfg.raw["hoodie.table.format"] == "native" and cfg.raw["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    table = HoodieTable.create(str(tmp_path / "t"), cfg, clock=FakeClock())
    assert (tmp_path / "t/.hoodie/timeline/history").is_dir() and not (tmp_path / "t/.hoodie/archived").exists()
    assert table.timeline_store.folder == ".hoodie/timeline" and len(table.timeline()) == 0


@pytest.mark.parametrize("version", [6, 9])
def test_a_new_instant_time_waits_out_the_clock_skew_on_layout_2_through_the_tables_clock(tmp_path: Path,
                                                                                          version: int) -> None:
    clock = FakeClock()
    gen = TableGen(tmp_path / "t", table_version=version, clock=clock)
    with gen.table.lock():
        first = gen.table.new_instant_time()
        assert clock.sleeps == ([0.2] if version == 9 else [])
        # a time followed by a later one in the same hold of the lock skips it
        second = gen.table.new_instant_time(skew_wait=False)
    assert clock.sleeps == ([0.2] if version == 9 else []) and second >= first


@pytest.mark.parametrize("version", [8, 9])
def test_plan_claim_and_commit_write_layout_2s_files(tmp_path: Path, version: int) -> None:
    gen, t, plan, stats = scheduled_plan(tmp_path, version, clock=FakeClock())
    # The plan is T.clustering.requested in Avro with Hudi 1.x's writer schema; the claim an empty inflight
    assert _timeline_files(gen.base, t) == [f"{t}.clustering.inflight", f"{t}.clustering.requested"]
    record, schema = _avro(gen.base / ".hoodie/timeline" / f"{t}.clustering.requested")
    assert schema == _schema_text(REQUESTED_REPLACE_WRITER_SCHEMA_V2)
    assert record["operationType"] == "CLUSTER"
    assert record["clusteringPlan"]["missingSchedulePartitions"] == []  # type: ignore[index]
    assert (gen.base / ".hoodie/timeline" / f"{t}.clustering.inflight").stat().st_size == 0
    assert not [p for p in (gen.base / ".hoodie").iterdir() if p.name[:1].isdigit()]
    # The commit adds T_C.replacecommit (Avro), C after every time on the timeline; requested and inflight stay
    before = gen.table.timeline().last_time()
    committed = complete(gen.table, t, plan, stats, {}, undecided_wait_s=0)
    names = _timeline_files(gen.base, t)
    assert names[:2] == [f"{t}.clustering.inflight", f"{t}.clustering.requested"] and len(names) == 3
    done = names[2]
    completion = done.split("_", 1)[1].removesuffix(".replacecommit")
    assert done == f"{t}_{completion}.replacecommit" and before is not None and completion > before >= t
    record, _ = _avro(gen.base / ".hoodie/timeline" / done)
    assert record["operationType"] == "CLUSTER" and record["compacted"] is False
    assert set(record["partitionToReplaceFileIds"]) == {"p1", "p2"}  # type: ignore[arg-type]
    assert committed.metadata.schema
    timeline = HoodieTable.open(str(gen.base)).timeline()
    inst = timeline.find(t)
    assert inst is not None and inst.action is Action.REPLACE_COMMIT and inst.completion_time == completion
    # Never a second completed file for one instant
    with gen.table.lock(), pytest.raises(TimelineError, match="completed already"):
        gen.table.timeline_store.create(Instant(t, Action.REPLACE_COMMIT, State.COMPLETED), b"")


def test_an_upsert_declared_in_an_avro_workload_profile_is_left_out(tmp_path: Path) -> None:
    gen, t, plan, stats = scheduled_plan(tmp_path, 9, clock=FakeClock())
    p1_group = plan.input_groups[0].group_ids()[0]
    # Given a Hudi 1.x upsert whose inflight state (Avro) declares an update of a planned p1 file group
    u = gen.next_time()
    store = gen.table.timeline_store
    store.create(Instant(u, Action.COMMIT, State.REQUESTED))
    profile = CommitMetadata({"p1": (WriteStat(p1_group[1], None, "p1", prev_commit="20240101000000000"),)},
                             {}, Operation.UPSERT)
    store.create(Instant(u, Action.COMMIT, State.INFLIGHT), store.serde.encode_commit(profile))
    assert (gen.base / ".hoodie/timeline" / f"{u}.inflight").read_bytes()[:4] == b"Obj\x01"
    # When our clustering commits, the p1 group is left out
    committed = complete(gen.table, t, plan, stats, {}, undecided_wait_s=0)
    assert committed.dropped_groups == (0,)
    assert set(committed.metadata.partition_to_replace_file_ids or {}) == {"p2"}


def test_rollback_writes_an_avro_plan_an_empty_inflight_and_a_completed_rollback(tmp_path: Path) -> None:
    gen, t, _plan, stats = scheduled_plan(tmp_path, 9, clock=FakeClock())
    result = rollback_clustering(gen.table, t)
    assert result is not None
    r = result.rollback_time
    names = _timeline_files(gen.base, r)
    assert names[:2] == [f"{r}.rollback.inflight", f"{r}.rollback.requested"] and len(names) == 3
    assert names[2].startswith(f"{r}_") and names[2].endswith(".rollback")
    assert (gen.base / ".hoodie/timeline" / names[0]).stat().st_size == 0
    requested, _ = _avro(gen.base / ".hoodie/timeline" / names[1])
    assert requested["instantToRollback"] == {"commitTime": t, "action": "clustering"}
    completed, _ = _avro(gen.base / ".hoodie/timeline" / names[2])
    assert completed["instantsRollback"] == [{"commitTime": t, "action": "clustering"}]
    # The plan stays requested for a retry; the inflight state and the written files are gone
    assert _timeline_files(gen.base, t) == [f"{t}.clustering.requested"]
    assert not any((gen.base / ws.path).exists() for group in stats for ws in group if ws.path)


def _upgrade_to_version_9(base: Path) -> None:
    """What Apache Hudi 1.x's upgrade does to a version-6 table's active timeline: every instant file moves to
    .hoodie/timeline; completed commits become <requested>_<completion>.<action> in Avro; a pending
    replacecommit that is a clustering becomes clustering; the properties say version 9, layout 2."""
    old = HoodieTable.open(str(base))
    hoodie = base / ".hoodie"
    timeline_dir = hoodie / "timeline"
    (timeline_dir / "history").mkdir(parents=True)
    states = old.timeline_store
    for f in sorted(p for p in hoodie.iterdir() if p.is_file() and p.name[:1].isdigit()):
        inst = states.layout.parse(f.name)
        assert inst is not None
        if inst.is_completed:
            meta = CommitMetadata.from_json_bytes(f.read_bytes(), f.name)
            completion = str(int(inst.time) + 1)
            (timeline_dir / f"{inst.time}_{completion}.{inst.action.value}").write_bytes(
                encode_commit_metadata_v2(meta))
        elif inst.action is Action.REPLACE_COMMIT:
            (timeline_dir / f"{inst.time}.clustering.{inst.state.value}").write_bytes(f.read_bytes())
        else:
            shutil.copy(f, timeline_dir / f.name)
        f.unlink()
    props = hoodie / "hoodie.properties"
    text = props.read_text().replace("hoodie.table.version=6", "hoodie.table.version=9") \
        .replace("hoodie.timeline.layout.version=1", "hoodie.timeline.layout.version=2")
    props.write_text(text + "hoodie.timeline.path=timeline\nhoodie.table.initial.version=6\n")


def test_a_plan_claimed_on_version_6_commits_in_layout_2_after_an_upgrade_underneath(tmp_path: Path) -> None:
    # Given a plan of ours claimed and executed on a version-6 table
    gen, t, plan, stats = scheduled_plan(tmp_path, 6, clock=FakeClock())
    assert (gen.base / ".hoodie" / f"{t}.replacecommit.inflight").exists()
    # When a Hudi 1.x writer upgrades the table to version 9 before our commit
    _upgrade_to_version_9(gen.base)
    committed = complete(gen.table, t, plan, stats, {}, undecided_wait_s=0)
    # Then the commit follows the plan into .hoodie/timeline and completes it there, in Avro
    assert committed.dropped_groups == ()
    names = _timeline_files(gen.base, t)
    assert names[:2] == [f"{t}.clustering.inflight", f"{t}.clustering.requested"]
    assert names[2].endswith(".replacecommit") and "_" in names[2]
    assert not list((gen.base / ".hoodie").glob(f"{t}*"))
    reopened = HoodieTable.open(str(gen.base))
    view = reopened.file_system_view()
    replaced = {g for group in plan.input_groups for g in group.group_ids()}
    assert not replaced & {(b.partition_path, b.file_id) for b in view.latest_base_files()}
    assert len(view.latest_base_files()) == 2
    assert reopened.timeline_store.commit_metadata(reopened.timeline().find(t)).operation_type == "CLUSTER"  # type: ignore[arg-type]
    # (a JSON commit would break Hudi 1.x's readers of layout 2)
    with pytest.raises(ValueError):
        json.loads((gen.base / ".hoodie/timeline" / names[2]).read_bytes())


@pytest.mark.parametrize("version", [6, 9])
def test_a_plan_of_ours_too_old_to_complete_within_a_day_is_purged_not_run(tmp_path: Path, version: int) -> None:
    # Given a plan of ours requested 25 hours ago (the daemon was down since), never started
    gen = TableGen(tmp_path / "t", table_version=version, clock=FakeClock())
    for i in range(4):
        gen.commit({"p1": [float(i)], "p2": [float(i)]})
    scheduled = schedule(gen.table, make_policy(), force=True)
    assert scheduled.pending is not None
    store = gen.table.timeline_store
    old = format_instant_time(datetime.now(gen.table.timeline_tz) - timedelta(hours=25))
    requested = scheduled.pending.instant
    (gen.base / store.path(Instant(old, Action.CLUSTERING, State.REQUESTED))).write_bytes(
        (gen.base / store.path(requested)).read_bytes())
    (gen.base / store.path(requested)).unlink()
    # When it is executed: on version 9 (whose readers assume an instant completes within a day) it is purged,
    # and on version 6 it runs
    if version == 9:
        result = execute_pending(gen.table, _NoRunner(), old)
        assert result.outcome == Outcome.SKIPPED and "purged" in result.message
        assert gen.table.timeline().find(old) is None
        assert not list((gen.base / ".hoodie/timeline").glob(f"{old}.*"))
    else:
        with pytest.raises(ExecutionError, match="no runner here"):
            execute_pending(gen.table, _NoRunner(), old)


class _NoRunner:
    def run_group(self, *args: object) -> object:
        raise RuntimeError("no runner here")

    def cancel(self, *args: object) -> None:
        return None

    def close(self) -> None:
        return None


def test_a_write_requested_before_the_plan_and_completed_after_it_wins_its_file_group(tmp_path: Path) -> None:
    # Given our plan T, and a Hudi 1.x upsert that took its instant time u just before T, updated a planned p1
    # file group and completed after T (its completion time is after T; its requested time is not)
    gen, t, plan, stats = scheduled_plan(tmp_path, 9, clock=FakeClock())
    table = gen.table
    u = format_instant_time(parse_instant_time(t, table.timeline_tz) - timedelta(milliseconds=1))
    partition, file_id = plan.input_groups[0].group_ids()[0]
    name = f"{file_id}_0-9-9_{u}.parquet"
    pq.write_table(pa.table({"x": [2.0]}), gen.base / partition / name)
    store = table.timeline_store
    with table.lock():
        store.create(Instant(u, Action.COMMIT, State.REQUESTED))
        store.create(Instant(u, Action.COMMIT, State.INFLIGHT))
        done = store.create(Instant(u, Action.COMMIT, State.COMPLETED), store.serde.encode_commit(CommitMetadata(
            {partition: (WriteStat(file_id, f"{partition}/{name}", partition, prev_commit="x", num_writes=1),)},
            {}, Operation.UPSERT)))
    assert done.completion_time is not None and done.completion_time > t > u
    # When our clustering commits, that group is left out: ingestion wins
    committed = complete(table, t, plan, stats, {}, undecided_wait_s=0)
    assert committed.dropped_groups == (0,)
    assert "newer slice" in committed.conflicts[0] and u in committed.conflicts[0]
    view = HoodieTable.open(str(gen.base)).file_system_view()
    assert (partition, file_id) in {(b.partition_path, b.file_id) for b in view.latest_base_files()}
