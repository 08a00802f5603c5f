"""A clustering's commit against Apache Hudi upserts still in flight (seen with Hudi's streaming sink beside the
daemon, tests/interop/test_streaming_beside_daemon.py).

Hudi upserts in three steps: ``T.commit.requested`` (then it looks its records up in the file groups as they
are), ``T.inflight`` holding its workload profile (the file ids it will write), then data files with markers. A
clustering that committed between the look-up and the markers replaced file groups the upsert then wrote, and
Hudi's own commit failed on the conflict (``HoodieWriteConflictException``: a failed micro-batch). The commit
now counts the file ids an inflight state declares as being written, and waits while a live writer's instant is
only requested.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import ClusteringPlan
from hudi_clusterd.io.heartbeat import heartbeat_path
from hudi_clusterd.io.markers import create_marker
from hudi_clusterd.ops.commit import complete, declared_file_ids
from hudi_clusterd.ops.ownership import Ownership
from hudi_clusterd.ops.schedule import schedule
from tests.builders import TableGen, make_policy


def _scheduled(tmp_path: Path) -> tuple[TableGen, str, ClusteringPlan, list[list[WriteStat]]]:
    """Four commits in p1 and p2, a claimed plan of ours (a group per partition) and its written output."""
    gen = TableGen(tmp_path / "t")
    for i in range(4):
        gen.commit({"p1": [float(i)], "p2": [float(i)]})
    scheduled = schedule(gen.table, make_policy(), force=True, claim_with=Ownership())
    assert scheduled.pending is not None
    t, plan = scheduled.pending.time, scheduled.pending.plan
    assert [g.group_ids()[0][0] for g in plan.input_groups] == ["p1", "p2"]
    stats = []
    for n, group in enumerate(plan.input_groups):
        partition = group.group_ids()[0][0]
        name = f"{n:04d}aaaa-0000-0000-0000-000000000000-0_0-1-1_{t}.parquet"
        create_marker(gen.table.storage, t, partition, name)
        pq.write_table(pa.table({"x": [1.0]}), gen.base / partition / name)
        stats.append([WriteStat(name.split("_", 1)[0], f"{partition}/{name}", partition, num_writes=1)])
    return gen, t, plan, stats


def _hudi_upsert(gen: TableGen, *, inflight_updates: list[tuple[str, str]] | None) -> str:
    """What Hudi's upsert leaves while it runs: requested (and a fresh heartbeat), and with ``inflight_updates``
    its inflight state with the workload profile naming those (partition, file id) pairs; no marker yet."""
    t = gen.next_time()
    gen.table.storage.write_bytes(heartbeat_path(t), b"", overwrite=True)
    gen.table.timeline_store.create(Instant(t, Action.COMMIT, State.REQUESTED))
    if inflight_updates is not None:
        _declare(gen, t, inflight_updates)
    return t


def _declare(gen: TableGen, t: str, updates: list[tuple[str, str]]) -> None:
    stats: dict[str, list[dict[str, object]]] = {}
    for partition, file_id in updates:
        stats.setdefault(partition, []).append({"fileId": "", "prevCommit": "null", "numInserts": 0})
        stats[partition].append({"fileId": file_id, "prevCommit": "20240101000000000", "numUpdateWrites": 1})
    profile = {"partitionToWriteStats": stats, "compacted": False, "extraMetadata": {}, "operationType": "UPSERT"}
    gen.table.timeline_store.create(Instant(t, Action.COMMIT, State.INFLIGHT), json.dumps(profile).encode())


def _replaced(gen: TableGen, t: str) -> dict[str, list[str]]:
    meta = json.loads((gen.base / ".hoodie" / f"{t}.replacecommit").read_text())
    return {p: sorted(ids) for p, ids in meta["partitionToReplaceFileIds"].items()}


def test_file_groups_an_inflight_upsert_declared_are_left_out(tmp_path: Path) -> None:
    gen, t, plan, stats = _scheduled(tmp_path)
    p1_group = plan.input_groups[0].group_ids()[1]
    # Given a Hudi upsert that looked its records up and declared a planned p1 file group, but wrote no file yet
    _hudi_upsert(gen, inflight_updates=[p1_group])
    # When our clustering commits
    committed = complete(gen.table, t, plan, stats, {}, undecided_wait_s=5)
    # Then the p1 group is left out (the upsert will write its new slice), and p2 is clustered
    assert committed.dropped_groups == (0,)
    assert _replaced(gen, t) == {"p2": sorted(f for _, f in plan.input_groups[1].group_ids())}
    assert not (gen.base / stats[0][0].path).exists()


def test_the_commit_waits_for_a_live_requested_upsert_to_declare_its_file_groups(tmp_path: Path) -> None:
    gen, t, plan, stats = _scheduled(tmp_path)
    p2_group = plan.input_groups[1].group_ids()[0]
    # Given a Hudi upsert still only requested (looking its records up), alive, that declares a p2 group 1 s later
    upsert = _hudi_upsert(gen, inflight_updates=None)
    timer = threading.Timer(1.0, _declare, (gen, upsert, [p2_group]))
    timer.start()
    started = time.monotonic()
    try:
        # When our clustering commits
        committed = complete(gen.table, t, plan, stats, {}, undecided_wait_s=30)
    finally:
        timer.join()
    # Then it waited for the declaration and left the p2 group out
    assert time.monotonic() - started >= 1.0
    assert committed.dropped_groups == (1,)
    assert set(_replaced(gen, t)) == {"p1"}


def test_a_requested_instant_whose_writer_died_is_not_waited_for(tmp_path: Path) -> None:
    gen, t, plan, stats = _scheduled(tmp_path)
    # Given a requested upsert whose heartbeat stopped long ago (its writer died before declaring anything)
    upsert = _hudi_upsert(gen, inflight_updates=None)
    old = time.time() - 3600
    os.utime(gen.base / heartbeat_path(upsert), (old, old))
    started = time.monotonic()
    # When our clustering commits, it does not wait, and clusters both groups
    committed = complete(gen.table, t, plan, stats, {}, undecided_wait_s=30)
    assert time.monotonic() - started < 10
    assert committed.dropped_groups == ()
    assert set(_replaced(gen, t)) == {"p1", "p2"}


def test_the_wait_is_bounded(tmp_path: Path) -> None:
    gen, t, plan, stats = _scheduled(tmp_path)
    _hudi_upsert(gen, inflight_updates=None)  # alive, never declares
    started = time.monotonic()
    committed = complete(gen.table, t, plan, stats, {}, undecided_wait_s=0.5)
    assert 0.5 <= time.monotonic() - started < 10
    assert committed.dropped_groups == ()


def test_declared_file_ids_reads_hudis_workload_profile_and_ignores_anything_else() -> None:
    profile = {"partitionToWriteStats": {"p1": [{"fileId": ""}, {"fileId": "f1-0"}], "p2": [{"fileId": "f2-0"}]}}
    assert declared_file_ids(json.dumps(profile).encode()) == [("p1", "f1-0"), ("p2", "f2-0")]
    for junk in (b"", b"{}", b"not json", b"\xff\xfe", b"[]", b'{"partitionToWriteStats": []}',
                 b'{"partitionToWriteStats": {"p": [1, {"fileId": 2}]}}'):
        assert declared_file_ids(junk) == []
