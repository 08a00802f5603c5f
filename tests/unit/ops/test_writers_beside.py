"""What the daemon does about other writers on its table: their plans, their clocks, their instant times, and
their rollbacks of our plans (findings F6, F7, F9, F10 of the interop review)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.instant import Action, Instant, State, format_instant_time
from hudi_clusterd.domain.plan import ClusteringPlan, PendingPlan, RequestedReplaceMetadata
from hudi_clusterd.domain.planner import PLANNED_AGAINST_KEY, SCHEDULER_KEY, scheduled_by_us
from hudi_clusterd.errors import InstantCollisionError, PlanError, TimelineError
from hudi_clusterd.formats.avro import encode_requested_replace
from hudi_clusterd.ops.commit import complete, rollback_clustering, withdraw_collided
from hudi_clusterd.ops.ownership import Ownership
from hudi_clusterd.ops.recovery import recover
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.ops.snapshot import TableSnapshot
from hudi_clusterd.table.heartbeat import heartbeat_path
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.markers import create_marker
from tests.builders import TableGen, make_policy


def _table(tmp_path: Path, commits: int = 4) -> TableGen:
    gen = TableGen(tmp_path / "t")
    for i in range(commits):
        gen.commit({"p1": [float(i)], "p2": [float(i)]})
    return gen


def _foreign(gen: TableGen, inflight: bool) -> PendingPlan:
    """A plan as Apache Hudi schedules it: no hudi-clusterd stamp; inflight without a heartbeat when asked."""
    ours = schedule(gen.table, make_policy(), force=True, dry_run=True).plan
    assert ours is not None
    plan = ClusteringPlan(ours.input_groups, ours.strategy, {})
    t = gen.next_time()
    requested = Instant(t, Action.REPLACE_COMMIT, State.REQUESTED)
    gen.table.timeline_store.create(requested, encode_requested_replace(RequestedReplaceMetadata.for_plan(plan)))
    if inflight:
        gen.table.timeline_store.create(requested.with_state(State.INFLIGHT), b"")
    return PendingPlan(requested.with_state(State.INFLIGHT if inflight else State.REQUESTED), plan)


def _hoodie(gen: TableGen) -> list[str]:
    return sorted(p.name for p in (gen.base / ".hoodie").iterdir())


# --- F9: plans another writer scheduled -------------------------------------------------------------------------

def test_plans_we_schedule_are_stamped_and_foreign_ones_are_not_ours(tmp_path: Path) -> None:
    gen = _table(tmp_path)
    scheduled = schedule(gen.table, make_policy(), force=True)
    assert scheduled.plan is not None and scheduled.plan.extra_metadata[SCHEDULER_KEY] == "hudi-clusterd"
    assert scheduled_by_us(scheduled.plan)
    assert not scheduled_by_us(ClusteringPlan(scheduled.plan.input_groups, scheduled.plan.strategy, {}))
    legacy = ClusteringPlan(scheduled.plan.input_groups, scheduled.plan.strategy, {PLANNED_AGAINST_KEY: "1"})
    assert scheduled_by_us(legacy)  # what hudi-clusterd has always written


def test_recovery_leaves_a_foreign_inflight_plan_without_heartbeat_alone(tmp_path: Path) -> None:
    gen = _table(tmp_path)
    pending = _foreign(gen, inflight=True)  # Hudi executing its own plan: inflight, no heartbeat
    before = _hoodie(gen)
    assert recover(TableSnapshot.load(gen.table), Ownership()) == []
    assert _hoodie(gen) == before
    with pytest.raises(PlanError, match=f"clustering {pending.time} was scheduled by another writer and is inflight"):
        Ownership().claim(gen.table, pending)
    assert _hoodie(gen) == before


def test_a_foreign_requested_plan_can_be_claimed_when_asked(tmp_path: Path) -> None:
    gen = _table(tmp_path)
    pending = _foreign(gen, inflight=False)  # scheduled by Hudi (schedule-only), not running
    ownership = Ownership()
    claim = ownership.claim(gen.table, pending)
    assert claim is not None
    ownership.release(claim)


def test_the_daemon_executes_only_its_own_plans(tmp_path: Path) -> None:
    from hudi_clusterd.ops.events import NoObserver
    from hudi_clusterd.runtime.reload import SettingsHolder
    from hudi_clusterd.runtime.service import Daemon, TableWorker
    from hudi_clusterd.settings import settings_from_properties

    gen = _table(tmp_path)
    foreign = _foreign(gen, inflight=False)
    ours = schedule(gen.table, make_policy(), force=True)
    assert ours.pending is None  # the foreign plan claims every eligible file group
    settings = settings_from_properties({"clusterd.tables": "t", "clusterd.table.t.base.path": str(gen.base),
                                         "clusterd.metrics.address": "off"}, source="test")[0]
    worker = TableWorker("t", Daemon(SettingsHolder(settings), runner=None, observer=NoObserver()))  # type: ignore[arg-type]
    assert worker._runnable(TableSnapshot.load(gen.table)) == []
    assert [p.time for p in TableSnapshot.load(gen.table).pending] == [foreign.time]


# --- F6: clocks and time zones ------------------------------------------------------------------------------------

def test_scheduling_refuses_when_writers_name_instants_in_another_time_zone(tmp_path: Path) -> None:
    gen = _table(tmp_path)
    zone_behind = format_instant_time(datetime.now(gen.table.timeline_tz) - timedelta(hours=1))
    (gen.base / ".hoodie" / f"{zone_behind}.commit.requested").write_bytes(b"")  # written now, named an hour ago
    before = _hoodie(gen)
    with pytest.raises(TimelineError, match=r"instant \d+ was named in a time zone 1.00h behind"):
        schedule(gen.table, make_policy(), force=True)
    assert _hoodie(gen) == before


def test_an_old_table_copied_today_is_no_time_zone_mismatch(tmp_path: Path) -> None:
    gen = _table(tmp_path)
    (gen.base / ".hoodie" / "20240101000000001.commit.requested").write_bytes(b"")  # years old, file written now
    assert gen.table.check_writer_zones(gen.table.timeline_store.list_files()) is None


# --- F7: one instant time, two writers ----------------------------------------------------------------------------

def test_saving_a_plan_whose_time_another_writer_took_takes_the_next_time(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    gen = _table(tmp_path)
    taken = gen.next_time()
    (gen.base / ".hoodie" / f"{taken}.commit.requested").write_bytes(b"")  # ingestion took this time meanwhile
    real = HoodieTable.new_instant_time
    times = iter([taken])
    monkeypatch.setattr(HoodieTable, "new_instant_time",
                        lambda self, *a, **k: next(times, None) or real(self, *a, **k))
    scheduled = schedule(gen.table, make_policy(), force=True)
    assert scheduled.instant is not None and scheduled.instant != taken
    assert not (gen.base / ".hoodie" / f"{taken}.replacecommit.requested").exists()


def _parquet(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"x": [1]}), path)


def test_a_commit_whose_time_another_writer_took_withdraws_only_its_own_files(tmp_path: Path) -> None:
    gen = _table(tmp_path)
    ownership = Ownership()
    scheduled = schedule(gen.table, make_policy(), force=True, claim_with=ownership)
    assert scheduled.pending is not None and scheduled.claim is not None
    t = scheduled.pending.time
    ours = gen.base / "p1" / f"aaaa-0_0-1-1_{t}.parquet"
    theirs = gen.base / "p1" / f"bbbb-0_0-2-2_{t}.parquet"  # ingestion that took the same time
    for f in (ours, theirs):
        create_marker(gen.table.storage, t, "p1", f.name)
        _parquet(f)
    (gen.base / ".hoodie" / f"{t}.commit.requested").write_bytes(b"")
    stat = WriteStat("aaaa-0", f"p1/{ours.name}", "p1", num_writes=1)
    with pytest.raises(InstantCollisionError, match="took the same instant time for commit"):
        groups = len(scheduled.pending.plan.input_groups)
        complete(gen.table, t, scheduled.pending.plan, [[stat]] + [[] for _ in range(groups - 1)], {})
    ownership.release(scheduled.claim, delete_heartbeat=False)
    withdraw_collided(gen.table, t, [stat])
    assert not ours.exists() and theirs.exists()  # their file and the shared markers stay
    assert (gen.base / ".hoodie" / ".temp" / t).is_dir()
    assert not list((gen.base / ".hoodie").glob(f"{t}.replacecommit*"))


# --- F10: another writer rolls back our running plan -------------------------------------------------------------

def test_files_written_after_another_writer_rolled_back_our_plan_are_deleted(tmp_path: Path) -> None:
    gen = _table(tmp_path)
    ownership = Ownership()
    scheduled = schedule(gen.table, make_policy(), force=True, claim_with=ownership)
    assert scheduled.pending is not None and scheduled.claim is not None
    t = scheduled.pending.time
    late = gen.base / "p1" / f"cccc-0_0-1-1_{t}.parquet"  # written after Hudi read our markers
    create_marker(gen.table.storage, t, "p1", late.name)
    _parquet(late)
    for state in (State.INFLIGHT, State.REQUESTED):  # what Hudi's rollback of our plan leaves: no instant
        gen.table.timeline_store.delete(Instant(t, Action.REPLACE_COMMIT, state))
    ownership.release(scheduled.claim)
    assert rollback_clustering(gen.table, t, written=[WriteStat("cccc-0", f"p1/{late.name}", "p1")]) is None
    assert not late.exists()
    assert not (gen.base / ".hoodie" / ".temp" / t).exists()
    assert not (gen.base / heartbeat_path(t)).exists()


@pytest.mark.parametrize("version", [6, 9])
def test_a_compaction_whose_base_file_the_listing_missed_leaves_its_group_unsettled(tmp_path: Path,
                                                                                     version: int) -> None:
    """A compaction (a merge-on-read table's writer compacting a file slice) that completed between the daemon's
    listing and its read of the timeline wrote a base file the listing lacks: its file group is unsettled (left out
    of plans until the next listing), as for a commit's or a deltacommit's file. Table version 6 reads the completed
    compaction as a commit, versions 8 and 9 as a compaction."""
    gen = TableGen(tmp_path / "t", table_version=version)
    for i in range(2):
        gen.commit({"p1": [float(i)], "p2": [float(i)]})
    listing = gen.table.scan_files()
    group = next(bf for bf in listing.base_files if bf.partition_path == "p1")
    t = gen.next_time()
    store = gen.table.timeline_store
    store.create(Instant(t, Action.COMPACTION, State.REQUESTED))
    store.create(Instant(t, Action.COMPACTION, State.INFLIGHT))
    path = f"p1/{group.file_id}_0-1-2_{t}.parquet"
    stat = WriteStat(group.file_id, path, "p1", num_writes=1, num_update_writes=1, total_write_bytes=10,
                     file_size_in_bytes=10)
    meta = CommitMetadata({"p1": (stat,)}, {}, Operation.COMPACT)
    store.create(Instant(t, Action.COMPACTION, State.COMPLETED), store.serde.encode_commit(meta))
    snapshot = TableSnapshot.load(gen.table, listing)
    assert [i.time for i in snapshot.timeline.writes().completed()][-1] == t
    assert snapshot.unsettled == {("p1", group.file_id)}
