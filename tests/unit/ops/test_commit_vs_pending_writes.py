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
from collections.abc import Sequence
from pathlib import Path

from hudi_clusterd.domain.commit import CommitMetadata, WriteStat
from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import ClusteringPlan
from hudi_clusterd.ops.commit import complete
from hudi_clusterd.ops.events import Outcome
from hudi_clusterd.ops.execute import Executor, execute
from hudi_clusterd.ops.ownership import Ownership
from hudi_clusterd.ops.pending_writes import IngestionRhythm, declared_file_ids, ingestion_rhythm
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.ops.snapshot import TableSnapshot
from hudi_clusterd.table.heartbeat import heartbeat_path
from hudi_clusterd.table.table_ref import TableRef
from tests.builders import TableGen, clustering_output_file, commit_while, make_policy, scheduled_plan


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
    gen, t, plan, stats = scheduled_plan(tmp_path)
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
    gen, t, plan, stats = scheduled_plan(tmp_path)
    p2_group = plan.input_groups[1].group_ids()[0]
    # Given a Hudi upsert still only requested (looking its records up), alive, that declares a p2 group 1 s later
    upsert = _hudi_upsert(gen, inflight_updates=None)
    started = time.monotonic()
    # When our clustering commits
    committed = commit_while(1.0, lambda: _declare(gen, upsert, [p2_group]), gen, t, plan, stats)
    # Then it waited for the declaration and left the p2 group out
    assert time.monotonic() - started >= 1.0
    assert committed.dropped_groups == (1,)
    assert set(_replaced(gen, t)) == {"p1"}


def test_a_requested_instant_whose_writer_died_is_not_waited_for(tmp_path: Path) -> None:
    gen, t, plan, stats = scheduled_plan(tmp_path)
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
    gen, t, plan, stats = scheduled_plan(tmp_path)
    _hudi_upsert(gen, inflight_updates=None)  # alive, never declares
    started = time.monotonic()
    committed = complete(gen.table, t, plan, stats, {}, undecided_wait_s=0.5)
    assert 0.5 <= time.monotonic() - started < 10
    assert committed.dropped_groups == ()


def test_declared_file_ids_reads_hudis_workload_profile_and_skips_inserts() -> None:
    profile = {"partitionToWriteStats": {"p1": [{"fileId": ""}, {"fileId": "f1-0"}], "p2": [{"fileId": "f2-0"}]}}
    decoded = CommitMetadata.from_json_bytes(json.dumps(profile).encode(), "profile")
    assert declared_file_ids(decoded) == [("p1", "f1-0"), ("p2", "f2-0")]
    assert declared_file_ids(CommitMetadata.from_json_bytes(b"", "empty")) == []


# Right after a write completed, the writer's next write may already hold its instant time without having written
# its requested state (seen with Hudi 0.15's streaming sink: instant 56.918 s, our replacecommit completed at
# 56.991 s, its requested state at 57.000 s). Hudi counts every replacecommit completed after a write's instant
# time as a concurrent write, so that write failed as soon as it updated a record the clustering had moved.

def _in_rhythm(gen: TableGen, pause_s: float, *, last_completed_s_ago: float = 0.0, busy_s: float = 0.6) -> None:
    """Give the table's commits the file times of a writer that writes for ``busy_s`` and pauses ``pause_s``
    before its next write, its last write completed ``last_completed_s_ago``."""
    commits = sorted(p.name.split(".")[0] for p in (gen.base / ".hoodie").glob("*.commit"))
    step = busy_s + pause_s
    first = time.time() - last_completed_s_ago - busy_s - step * (len(commits) - 1)
    for n, t in enumerate(commits):
        requested = first + n * step
        for name, at in ((f"{t}.commit.requested", requested), (f"{t}.inflight", requested + 0.1),
                         (f"{t}.commit", requested + busy_s)):
            os.utime(gen.base / ".hoodie" / name, (at, at))


def test_right_after_a_write_completed_the_commit_waits_for_the_next_write_and_commits_while_it_runs(
        tmp_path: Path) -> None:
    gen, t, plan, stats = scheduled_plan(tmp_path)
    p2_group = plan.input_groups[1].group_ids()[0]
    # Given a writer that pauses 0.4 s between writes, whose last write completed just now
    _in_rhythm(gen, 0.4)
    # and whose next write shows up 0.4 s later and declares a p2 group 0.3 s after that
    upsert: list[str] = []

    def next_write() -> None:
        upsert.append(_hudi_upsert(gen, inflight_updates=None))
        time.sleep(0.3)
        _declare(gen, upsert[0], [p2_group])

    # When our clustering commits
    committed = commit_while(0.4, next_write, gen, t, plan, stats)
    # Then it committed after the write declared its file groups, without the group it writes
    hoodie = gen.base / ".hoodie"
    assert (hoodie / f"{t}.replacecommit").stat().st_mtime >= (hoodie / f"{upsert[0]}.inflight").stat().st_mtime
    assert committed.dropped_groups == (1,)
    assert set(_replaced(gen, t)) == {"p1"}


def test_when_no_next_write_comes_the_commit_waits_only_until_the_writers_are_idle(tmp_path: Path) -> None:
    gen, t, plan, stats = scheduled_plan(tmp_path)
    _in_rhythm(gen, 0.5)  # idle after 3 x 0.5 s without a new write
    started = time.monotonic()
    committed = complete(gen.table, t, plan, stats, {}, undecided_wait_s=30)
    waited = time.monotonic() - started
    assert 1.0 <= waited < 10
    assert committed.dropped_groups == ()


def test_idle_writers_and_running_writes_do_not_hold_the_commit(tmp_path: Path) -> None:
    gen, t, plan, stats = scheduled_plan(tmp_path)
    # Given writers whose last write completed a minute ago (idle), the commit does not wait
    _in_rhythm(gen, 0.5, last_completed_s_ago=60)
    started = time.monotonic()
    assert complete(gen.table, t, plan, stats, {}, undecided_wait_s=30).dropped_groups == ()
    assert time.monotonic() - started < 1.0


def test_a_running_write_right_after_a_completion_does_not_hold_the_commit(tmp_path: Path) -> None:
    gen, t, plan, stats = scheduled_plan(tmp_path)
    _in_rhythm(gen, 5.0)
    # Given the next write already running (declared, alive): the writer's write after it starts after its
    # completion, which our commit precedes
    _hudi_upsert(gen, inflight_updates=[])
    started = time.monotonic()
    assert complete(gen.table, t, plan, stats, {}, undecided_wait_s=30).dropped_groups == ()
    assert time.monotonic() - started < 5.0


def test_the_rhythm_is_the_median_recent_pause_between_a_completion_and_the_next_request() -> None:
    def states(*spec: tuple[str, str, float]) -> list[Instant]:
        kinds = {"r": State.REQUESTED, "i": State.INFLIGHT, "c": State.COMPLETED}
        return [Instant(f"2026010100000{n:04d}", Action.COMMIT if a != "x" else Action.REPLACE_COMMIT, kinds[k],
                        int(ms)) for n, (a, k, ms) in enumerate(spec)]

    assert ingestion_rhythm([]) is None
    assert ingestion_rhythm(states(("w", "r", 1000))) is None  # nothing completed
    one = ingestion_rhythm(states(("w", "r", 1000), ("w", "c", 2000)))
    assert one == IngestionRhythm(2000, 0) and one.settled_at_ms() == 2000
    rhythm = ingestion_rhythm(states(("w", "r", 1000), ("w", "c", 2000), ("w", "r", 2300), ("w", "c", 3000),
                                     ("w", "r", 3800), ("w", "c", 4000), ("x", "c", 9000)))
    # replacecommits are no ingestion; 4000 has no next request yet; the median of the pauses 300 and 800
    assert rhythm == IngestionRhythm(4000, 800)
    assert rhythm.settled_at_ms() == 4000 + 2400
    # only the last RHYTHM_PAIRS pauses count
    many = [("w", "r", 0.0)] + [("w", "c", n * 10_000.0 + 1) for n in range(10)]
    many += [("w", "r", n * 10_000.0 + 1 + (5_000 if n < 4 else 100)) for n in range(9)]
    assert ingestion_rhythm(states(*many)) == IngestionRhythm(90_001, 100)
    # a lull (writers stopped for a minute, twice) among the recent pauses is not the usual pause
    lull = [("w", "r", 0.0)] + [("w", "c", n * 100_000.0) for n in range(1, 7)]
    lull += [("w", "r", n * 100_000.0 + (60_000 if n in (2, 4) else 700)) for n in range(1, 6)]
    assert ingestion_rhythm(states(*lull)) == IngestionRhythm(600_000, 700)
    # and the wait is capped
    assert IngestionRhythm(0, 60_000).settled_at_ms() == 30_000


class _OneFilePerGroup:
    """A group runner that writes one small file per plan group."""

    def run_group(self, table: TableRef, instant: str, plan: ClusteringPlan, index: int,
                  files: Sequence[BaseFile], merge: object = None) -> list[WriteStat]:
        return [clustering_output_file(table.open_storage(), instant, plan.input_groups[index].partition_path,
                                       f"{index:04d}bbbb")]

    def cancel(self, table: TableRef, instant: str) -> None:
        return None

    def close(self) -> None:
        return None


def _execute_beside_a_requested_upsert(base: Path, commit_wait_s: float) -> set[str]:
    """Execute a plan (a group per partition) with ``commit_wait_s`` while a live Hudi upsert is only requested
    and declares a p2 group 1 s later; the partitions the clustering replaced."""
    gen = TableGen(base)
    for i in range(4):
        gen.commit({"p1": [float(i)], "p2": [float(i)]})
    scheduled = schedule(gen.table, make_policy(), force=True)
    assert scheduled.pending is not None
    upsert = _hudi_upsert(gen, inflight_updates=None)
    p2_group = scheduled.pending.plan.input_groups[1].group_ids()[0]
    timer = threading.Timer(1.0, _declare, (gen, upsert, [p2_group]))
    timer.start()
    try:
        result = execute(TableSnapshot.load(gen.table), scheduled.pending,
                         Executor(_OneFilePerGroup(), Ownership(), commit_wait_s=commit_wait_s))
    finally:
        timer.join()
    assert result.outcome is Outcome.COMPLETED, result.message
    return set(_replaced(gen, scheduled.pending.time))


def test_the_executors_commit_wait_bounds_the_wait_and_zero_commits_at_once(tmp_path: Path) -> None:
    # With the default-like wait, the commit waits for the upsert to declare its p2 group, and leaves it out
    assert _execute_beside_a_requested_upsert(tmp_path / "waits", 30.0) == {"p1"}
    # With clusterd.commit.wait.seconds=0 (or --commit-wait 0) it commits at once, clustering both partitions
    # (the upsert would then fail its own commit on the conflict, and retry)
    assert _execute_beside_a_requested_upsert(tmp_path / "at-once", 0.0) == {"p1", "p2"}
