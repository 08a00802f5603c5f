"""Two ``hudi-clusterd run`` processes on one table (issue #6): they never both plan the same file group, they stop
cleanly on SIGTERM, and when one dies holding the table lock the other takes the lock over once it is stale,
recovers the dead one's clustering and carries on. Ingestion commits inserts and upserts throughout."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.exit_codes import EXIT_OK
from tests.harness.crash_harness import (
    LOCK_STALE_S,
    CrashableDaemon,
    Cycle,
    Event,
    Ingestor,
    assert_plans_disjoint,
    assert_rows,
    check_recovered,
    classify,
    clustering_plans,
    instant_times,
    lock_owner_pid,
    step_into_completion,
    wait_at_rest,
    write_crash_props,
)
from tests.harness.hudi_rs_checks import completed_clusterings
from tests.support import free_port

pytestmark = pytest.mark.spark

SEED = 6


def events(daemon: CrashableDaemon, name: str) -> list[Event]:
    return [e for e in daemon.poll_events() if e.get("event") == name]


def instants_of(daemon: CrashableDaemon, name: str) -> set[str]:
    return {str(e.get("instant")) for e in events(daemon, name)}


def wait_until(predicate: Any, timeout: float, what: str, *daemons: CrashableDaemon) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        for d in daemons:
            assert d.proc.poll() is None, f"daemon exited with {d.proc.returncode}; see {d.log_file}"
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f}s waiting for {what}"
        time.sleep(0.05)


def start_daemon(tmp_path: Path, base: Path, name: str) -> CrashableDaemon:
    props = tmp_path / f"{name}.properties"
    write_crash_props(props, base, free_port(), parallelism=2)
    return CrashableDaemon(props, tmp_path / f"{name}.log")


@pytest.mark.slow  # two daemons on one table, minutes each: the long run
def test_two_daemons_racing_never_plan_one_file_group_twice_and_stop_cleanly(spark: Any, tmp_path: Path) -> None:
    base = tmp_path / "events"
    ingest = Ingestor(spark, base, SEED)
    one = start_daemon(tmp_path, base, "one")
    two = start_daemon(tmp_path, base, "two")
    try:
        one.wait_event("daemon started", 240)
        two.wait_event("daemon started", 240)
        ingest.start()
        wait_until(lambda: len(completed_clusterings(base)) >= 3 and ingest.stats.commits >= 10, 420,
                   "three clusterings beside ingestion", one, two)
        ingest.pause()
        wait_at_rest(base, one)
        assert two.proc.poll() is None
        one.signal_term()
        two.signal_term()
        assert one.proc.wait(120) == EXIT_OK
        assert two.proc.wait(120) == EXIT_OK
    finally:
        ingest.pause(check=False)
        one.close()
        two.close()

    check_recovered(base, ingest.expected_rows(), f"seed={SEED} after two racing daemons")
    plans = clustering_plans(base)
    assert assert_plans_disjoint(base) == len(plans) >= 3
    saved = [instants_of(d, "clustering plan saved") for d in (one, two)]
    done = [instants_of(d, "clustering completed") for d in (one, two)]
    assert not saved[0] & saved[1], "one plan saved by both daemons"
    assert not done[0] & done[1], "one plan completed by both daemons"
    assert set(completed_clusterings(base)) <= done[0] | done[1]
    for d in (one, two):
        assert not events(d, "table lock was taken over while held")
    contention = sum(1 for d in (one, two) for e in events(d, "nothing to schedule")
                     if "concurrently" in str(e.get("reason")))
    print(f"\nrace: plans saved {len(saved[0])} + {len(saved[1])}, completed {len(done[0])} + {len(done[1])}, "
          f"plans emptied by the other daemon {contention}, ingestion {ingest.stats.commits} commits "
          f"({ingest.stats.conflict_retries} conflict retries)")


@pytest.mark.slow  # two daemons on one table, minutes each: the long run
def test_daemon_killed_holding_the_lock_is_taken_over_once_stale(spark: Any, tmp_path: Path) -> None:
    base = tmp_path / "events"
    ingest = Ingestor(spark, base, SEED + 1)
    one = start_daemon(tmp_path, base, "one")
    two = start_daemon(tmp_path, base, "two")
    try:
        one.wait_event("daemon started", 240)
        two.wait_event("daemon started", 240)
        known = instant_times(base)
        cycle = Cycle(base, one, known)
        caught: str | None = None
        for _ in range(6):  # until the first daemon is frozen inside a completion, holding the lock
            seen = cycle.plan()
            ingest.start()
            wait_until(lambda seen=seen: one.poll_events() is not None and cycle.plan() not in (None, seen), 300,
                       "a plan run by the first daemon", one, two)
            ingest.pause()  # from here on only the daemons want the lock
            wait_until(lambda: one.poll_events() is not None and cycle.last_group_running(), 120,
                       "the plan's last group", one)
            plan = cycle.plan()
            assert plan is not None
            held = step_into_completion(one, cycle, "pre_commit") and lock_owner_pid(base) == one.pid
            if held and not (base / ".hoodie" / f"{plan[0]}.replacecommit").exists():
                caught = plan[0]
                break
            one.thaw()
        assert caught is not None, "never caught the first daemon holding the lock before its commit"
        state = classify(base, one, known)
        assert state.lock_held_by_daemon and state.instant == caught and "completed" not in state.states
        one.kill("tree")
        one.wait_tree_gone(60)
        assert_rows(base, ingest.expected_rows(), "readers beside a dead daemon's lock and inflight plan")

        two.wait_event("took over a dead table lock", 120)
        takeover = events(two, "took over a dead table lock")[0]
        assert float(takeover["age_s"]) > LOCK_STALE_S
        wait_until(lambda: caught in instants_of(two, "rolled back abandoned clustering")
                   and caught in instants_of(two, "clustering completed"), 180,
                   "the second daemon to roll back and redo the dead one's clustering", two)
        after = ingest.stats.commits
        ingest.start()  # and ingestion goes on beside the survivor, for two more of its clustering triggers
        wait_until(lambda: ingest.stats.commits >= after + 4, 300, "more commits", two)
        ingest.pause()
        wait_at_rest(base, two)
        two.signal_term()
        assert two.proc.wait(120) == EXIT_OK
    finally:
        ingest.pause(check=False)
        one.close()
        two.close()
    check_recovered(base, ingest.expected_rows(), f"seed={SEED + 1} after a takeover")
