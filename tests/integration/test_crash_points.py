"""Crash-point harness (issue #6): SIGKILL a real ``hudi-clusterd run`` at randomized points of its clustering cycle
while ingestion commits inserts and upserts, recover as a user would, and check the table after every kill.

Each point: start the daemon (which recovers whatever the previous kill left, when that point chose
``restart``), resume ingestion, wait for the point's anchor in the daemon's JSON log or on the timeline plus a
random delay, freeze the daemon's process tree, record the phase it was in, SIGKILL it, let ingestion finish
its commit, check that readers see exactly the expected rows, then recover: ``restart`` (the next daemon start
recovers; the table is checked once that daemon is idle) or ``execute`` (what ``hudi-clusterd execute`` runs, on
the test's SparkSession). After recovery: hudi-rs snapshot == expected rows (key -> latest value), no duplicate
keys, no orphan data file, no pending instant, marker, heartbeat or live lock, the lock takeable, no file group
in two plans.

Environment: ``CLUSTERD_CRASH_SEED`` (replay a run; the seed is printed and in every failure message),
``CLUSTERD_CRASH_POINTS`` (override the count), ``CLUSTERD_CRASH_ANCHORS`` (comma-separated subset of anchors),
``CLUSTERD_CRASH_REPORT`` (write the per-point records as JSON there).
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.exit_codes import EXIT_OK
from tests.harness.crash_harness import (
    ANCHORS,
    REQUIRED_PHASES,
    CrashableDaemon,
    Ingestor,
    KillPlan,
    assert_rows,
    check_at_rest,
    check_recovered,
    count_events,
    crash_anchors,
    crash_points,
    crash_policy,
    crash_seed,
    instant_times,
    kill_at,
    leftover_tmp_files,
    recover_with_execute,
    summarize,
    write_crash_props,
)
from tests.support import free_port

pytestmark = pytest.mark.spark

# One real SIGKILL per CI run (a new seed each run: a process tree killed at a random moment, its temporary files,
# heartbeat and lock left to a restart or an execute); every write boundary of schedule, execute, commit, recovery
# and rollback is enumerated in-process in every run (tests/unit/ops/test_crash_points_inprocess.py)
CI_POINTS = 1
SLOW_POINTS = 50
# recovery work the daemons logged, summed over every daemon run of the harness
RECOVERY_EVENTS = ("rolled back abandoned clustering", "removed markers and heartbeat left by a completed clustering",
                   "took over a dead table lock", "clustering lost to ingestion; committed empty",
                   "clustering completed")


def daemon_events(folder: Path) -> dict[str, int]:
    return count_events(sorted(folder.glob("daemon-*.log")), RECOVERY_EVENTS)


def run_crash_points(spark: Any, tmp_path: Path, points: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    print(f"\ncrash harness: seed={seed} points={points} (replay with CLUSTERD_CRASH_SEED={seed})", flush=True)
    base = tmp_path / "events"
    ingest = Ingestor(spark, base, seed)
    records: list[dict[str, Any]] = []
    deck: list[str] = []
    to_check: str | None = None  # a kill whose recovery is the next daemon start
    daemon: CrashableDaemon | None = None
    try:
        for i in range(points):
            if not deck:
                deck = crash_anchors(ANCHORS)
                rng.shuffle(deck)
            plan = KillPlan.draw(rng, deck.pop())
            parallelism = rng.choice([1, 2])
            recovery = rng.choice(["restart", "execute"])
            started = time.monotonic()
            props = tmp_path / f"clusterd-{i:02d}.properties"
            write_crash_props(props, base, free_port(), parallelism=parallelism)
            daemon = CrashableDaemon(props, tmp_path / f"daemon-{i:02d}.log")
            daemon.wait_event("daemon started", 240)
            startup_s = time.monotonic() - started
            if to_check is not None:
                records[-1]["tmp_left"] = check_at_rest(base, daemon, ingest.expected_rows(), to_check)
                records[-1]["recovery_seconds"] = round(time.monotonic() - started, 1)
            known = instant_times(base)
            ingest.start()
            armed = time.monotonic()
            state, fired = kill_at(base, daemon, plan, known)
            kill_s = time.monotonic() - armed
            ingest.pause()
            linger = daemon.wait_tree_gone(60)
            daemon.close()
            daemon = None
            what = f"seed={seed} point {i} (anchor {plan.anchor}, phase {state.phase}, instant {state.instant})"
            assert_rows(base, ingest.expected_rows(), what + ", readers before recovery")
            outcomes: list[str] = []
            to_check = None
            if recovery == "execute":
                t = time.monotonic()
                outcomes = recover_with_execute(spark, base, crash_policy(parallelism))
                tmp_left: list[str] | None = check_recovered(base, ingest.expected_rows(), what + ", after execute")
                recovery_s: float | None = round(time.monotonic() - t, 1)
            else:
                to_check = what + ", after a daemon restart"
                recovery_s = tmp_left = None
            record = {"point": i, "anchor": plan.anchor, "fired": fired, "delay_s": plan.delay_s,
                      "kill": plan.mode, "parallelism": parallelism, "recovery": recovery, "phase": state.phase,
                      "instant": state.instant, "states": list(state.states), "markers": state.markers,
                      "partial_files": state.partial_files, "groups": state.groups,
                      "groups_finished": state.groups_finished, "lock_held": state.lock_held_by_daemon,
                      "cycles_done": state.cycles_done, "completion_step": plan.completion_step,
                      "last_event": state.last_event, "linger_s": round(linger, 2), "execute": outcomes,
                      "recovery_seconds": recovery_s, "startup_s": round(startup_s, 1), "kill_s": round(kill_s, 1),
                      "seconds": round(time.monotonic() - started, 1),
                      "commits": ingest.stats.commits, "tmp_at_kill": len(leftover_tmp_files(base)),
                      "tmp_left": tmp_left}
            records.append(record)
            print(json.dumps(record), flush=True)
        if to_check is not None:
            props = tmp_path / "clusterd-final.properties"
            write_crash_props(props, base, free_port())
            daemon = CrashableDaemon(props, tmp_path / "daemon-final.log")
            daemon.wait_event("daemon started", 240)
            records[-1]["tmp_left"] = check_at_rest(base, daemon, ingest.expected_rows(), to_check)
            assert daemon.terminate(120) == EXIT_OK
    finally:
        ingest.pause(check=False)
        if daemon is not None:
            daemon.close()
    stats = ingest.stats
    logged = daemon_events(tmp_path)
    for r in records:
        if r["phase"] == "during_completion":
            r["phase_detail"] = "post_commit" if "completed" in r["states"] else "pre_commit"
    print(f"crash harness: seed={seed}; phases {summarize(records, 'phase')} (during_completion: "
          f"{summarize([r for r in records if 'phase_detail' in r], 'phase_detail')}); "
          f"anchors {summarize(records, 'anchor')}"
          f"; ingestion: {stats.commits} commits ({stats.inserts} inserts, {stats.upserts} upserts, "
          f"{stats.updated_keys} key updates, {stats.conflict_retries} conflict retries); daemons logged {logged}",
          flush=True)
    report = os.environ.get("CLUSTERD_CRASH_REPORT")
    if report:
        Path(report).write_text(json.dumps({"seed": seed, "points": records, "ingestion": vars(stats),
                                            "daemon_events": logged}, indent=1))
    return records


def test_crash_points_ci_sample_recovers_every_kill_exactly(spark: Any, tmp_path: Path) -> None:
    records = run_crash_points(spark, tmp_path, crash_points(CI_POINTS), crash_seed())
    assert len(records) == crash_points(CI_POINTS)


@pytest.mark.slow
def test_crash_points_randomized_run_recovers_and_covers_every_phase(spark: Any, tmp_path: Path) -> None:
    seed = crash_seed()
    records = run_crash_points(spark, tmp_path, crash_points(SLOW_POINTS), seed)
    hit = {r["phase"] for r in records}
    missing = [p for p in REQUIRED_PHASES if p not in hit]
    assert not missing, f"seed={seed}: phases never hit: {missing}; histogram {summarize(records, 'phase')}"
