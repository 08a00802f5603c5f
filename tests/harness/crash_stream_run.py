"""The crash-point run beside Apache Hudi 1.2's streaming writer, wherever the table is: SIGKILL a real
``hudi-clusterd run`` at randomized points of its clustering cycle while Hudi's Structured Streaming sink commits
micro-batches beside it, recover by restarting the daemon, and check the table after every kill (see
``tests/interop/test_crash_points_hudi_streaming.py`` for the local table, ``..._s3.py`` for a table on S3 with the
ZooKeeper lock).

A :class:`StreamCrashTarget` says where: the worker, the watched table (``tests/harness/crash_table.py``), the
writer's options, and how each daemon of the run is configured (its properties file, environment and the identity
its lock holdings have in the table's ``LockWatch``). :func:`run_stream_crash_points` is the run.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hudi_clusterd.exit_codes import EXIT_OK
from tests.harness.apache_hudi import HudiWorker
from tests.harness.crash_harness import (
    MDT_ANCHORS,
    CrashableDaemon,
    KillPlan,
    count_events,
    crash_anchors,
    instant_times,
    kill_at,
    summarize,
)
from tests.harness.crash_stream import HudiStreamIngestor, check_stream_at_rest
from tests.harness.crash_table import WatchedTable

KILL_TIMEOUT_S = 300  # a micro-batch of Hudi 1.2 with its metadata table takes 5-15 s on two cores
# Hudi's writer settings beside the daemon with its metadata table on (added to the project's writer settings)
STREAM_OPTIONS: Mapping[str, str] = {
    "hoodie.metadata.enable": "true",  # Hudi's default, set explicitly: what this run is about
    "hoodie.datasource.write.streaming.checkpoint.identifier": "events-stream",  # required under OCC
    "hoodie.datasource.write.streaming.ignore.failed.batch": "false",  # a batch failing for good stops the query
    "hoodie.parquet.small.file.limit": "0",  # every insert makes new (small) file groups to cluster
    "hoodie.clean.max.commits": "4",  # Hudi's cleaner (and its metadata deltacommit) every 4 commits, not each one
    "hoodie.index.bloom.num_entries": "100",  # small bloom filters, as the daemon's own files (crash_policy)
    "hoodie.index.bloom.fpp": "0.01",
    # every commit stays on the active timeline (the orphan check reads the files each completed commit wrote)
    "hoodie.keep.min.commits": "2000",
    "hoodie.keep.max.commits": "2010",
}
# the daemon's policy is the crash harness's (crash_policy), sorting by a column of this table and planning after
# every commit (a micro-batch takes seconds)
DAEMON_OPTIONS: Mapping[str, str] = {"hoodie.clustering.plan.strategy.sort.columns": "val",
                                     "hoodie.clustering.async.max.commits": "1"}
# what the daemons logged about recovery and their commits, per point and summed
EVENTS = ("rolled back abandoned clustering", "metadata table rolled back", "metadata table updated",
          "removed markers and heartbeat left by a completed clustering", "took over a dead table lock",
          "clustering lost to ingestion; committed empty", "clustering committed without the groups ingestion moved",
          "clustering completed", "clustering failed", "table lock was taken or deleted by another writer while held")

DaemonProps = Callable[[Path, str, int], None]
"""Writes a daemon's properties file: (path, the daemon's tag, its clustering parallelism)."""


@dataclass
class StreamCrashTarget:
    """Where a run goes: ``worker`` writes ``table`` with ``options``; each daemon gets the properties
    ``write_props`` writes, ``env`` added to its environment, and ``lock_identity(tag)`` as the identity its lock
    holdings have in the table's lock watch (None: its pid, as for the file-system lock)."""

    worker: HudiWorker
    table: WatchedTable
    options: Mapping[str, str]
    write_props: DaemonProps
    env: Mapping[str, str] = field(default_factory=dict)
    lock_identity: Callable[[str], str | None] = lambda _tag: None
    label: str = "hudi streaming crash points"
    recent_updates: int = 0  # keys of the previous batch each batch with updates updates (HudiStreamIngestor)


def _events(daemon: CrashableDaemon) -> dict[str, int]:
    counts = {e: daemon.count(e) for e in EVENTS}
    return {e: n for e, n in counts.items() if n}


def run_stream_crash_points(target: StreamCrashTarget, tmp_path: Path, points: int, seed: int,
                            forced: Mapping[int, str]) -> list[dict[str, Any]]:
    """The run: ``points`` kills, ``forced`` maps a point to its anchor (the others draw theirs from a deck).

    Each point: start the daemon (which recovers what the previous kill left), check the table at rest, resume
    the stream, wait for the point's anchor, freeze the daemon's process tree, record the phase, SIGKILL it; the
    readers must then see exactly the batches the timeline holds while the stream goes on. Returns the per-point
    records (also written to ``CLUSTERD_CRASH_REPORT`` when set)."""
    rng = random.Random(seed)
    label = target.label
    print(f"\n{label}: seed={seed} points={points} (replay with CLUSTERD_CRASH_SEED={seed})", flush=True)
    run_started = time.monotonic()
    worker, table = target.worker, target.table
    stream = HudiStreamIngestor(worker, tmp_path / "stream", table, seed, target.options,
                                recent_updates=target.recent_updates)
    table_name = f"crash_stream_{seed}_{uuid.uuid4().hex[:8]}"
    records: list[dict[str, Any]] = []
    deck: list[str] = []
    to_check: str | None = None  # the kill whose recovery is the next daemon start
    daemon: CrashableDaemon | None = None

    def start_daemon(tag: str, parallelism: int) -> CrashableDaemon:
        props = tmp_path / "conf" / f"clusterd-{tag}.properties"
        props.parent.mkdir(exist_ok=True)
        target.write_props(props, tag, parallelism)
        return CrashableDaemon(props, tmp_path / f"daemon-{tag}.log", env=target.env,
                               lock_identity=target.lock_identity(tag))

    def recover(what: str, started: float) -> dict[str, Any]:
        """With the new daemon running: pause the stream (its last batch may wait for the lock the killed daemon
        left), wait until the daemon is idle, check everything."""
        assert daemon is not None
        while_down = stream.committed_batches() - records[-1]["batches_committed_at_kill"]
        stream.pause()
        checked = check_stream_at_rest(worker, table, daemon, table_name, stream.expected(), what)
        return {"batches_while_down": while_down, "recovery_events": _events(daemon),
                "recovery_seconds": round(time.monotonic() - started, 1), "checked": checked,
                "batches_at_check": len(stream.batches)}

    try:
        stream.feed_once()  # the table and its metadata table exist before the daemon starts
        setup_s = time.monotonic() - run_started
        stream.start()  # the stream runs while each daemon starts; it pauses only for the checks
        for i in range(points):
            if not deck:
                deck = crash_anchors(MDT_ANCHORS)
                rng.shuffle(deck)
            anchor = forced.get(i) or deck.pop()
            plan = KillPlan.draw(rng, anchor)
            parallelism = rng.choice([1, 2])
            started = time.monotonic()
            daemon = start_daemon(f"{i:02d}", parallelism)
            daemon.wait_event("daemon started", 240)
            startup_s = time.monotonic() - started
            if to_check is not None:
                recovered = recover(to_check, started)
                records[-1].update(recovered)
                print(json.dumps({"point": i - 1, **recovered}), flush=True)
                stream.start()
            known = instant_times(table.refresh())
            armed = time.monotonic()
            state, fired = kill_at(table, daemon, plan, known, timeout=KILL_TIMEOUT_S)
            kill_s = time.monotonic() - armed
            lock_left = table.lock.holder() == daemon.lock_identity
            linger = daemon.wait_tree_gone(60)
            daemon.close()
            daemon = None
            what = f"seed={seed} point {i} (anchor {plan.anchor}, phase {state.phase}, instant {state.instant})"
            # readers before recovery, the stream going on (a batch waits for the lock the killed daemon may have
            # left, until the next daemon takes it over or its session expires): exactly the batches the timeline
            # holds
            committed = stream.check_readers(what + ", readers before recovery")
            stream.status()
            to_check = what + ", after a daemon restart"
            record = {"point": i, "anchor": plan.anchor, "fired": fired, "delay_s": plan.delay_s, "kill": plan.mode,
                      "parallelism": parallelism, "phase": state.phase, "instant": state.instant,
                      "states": list(state.states), "mdt": state.mdt, "markers": state.markers,
                      "partial_files": state.partial_files, "groups": state.groups,
                      "groups_finished": state.groups_finished, "lock_held": state.lock_held_by_daemon,
                      "lock_left": lock_left, "cycles_done": state.cycles_done,
                      "completion_step": plan.completion_step, "last_event": state.last_event,
                      "linger_s": round(linger, 2), "startup_s": round(startup_s, 1), "kill_s": round(kill_s, 1),
                      "batches_committed_at_kill": committed, "seconds": round(time.monotonic() - started, 1)}
            records.append(record)
            print(json.dumps(record), flush=True)
        started = time.monotonic()
        daemon = start_daemon("final", 2)
        daemon.wait_event("daemon started", 240)
        if to_check is not None:
            recovered = recover(to_check, started)
            records[-1].update(recovered)
            print(json.dumps({"point": len(records) - 1, **recovered}), flush=True)
        assert daemon.terminate(120) == EXIT_OK
        final = stream.stop()
        assert final["exception"] is None, final["exception"]
    finally:
        stream.halt()
        if daemon is not None:
            daemon.close()
        if worker.alive and worker.request("stream_status", name=stream.name).get("active"):
            worker.stream_stop(stream.name)
    stats = stream.stats
    retried = stream.retried_batches()
    logged = count_events(sorted(tmp_path.glob("daemon-*.log")), EVENTS)
    total_s = time.monotonic() - run_started
    print(f"{label}: seed={seed}; phases {summarize(records, 'phase')}; anchors "
          f"{summarize(records, 'anchor')}; anchors fired {sum(1 for r in records if r['fired'])}/{len(records)}; "
          f"stream: {len(stream.batches)} micro-batches ({stats.insert_batches} inserts only, {stats.upsert_batches} "
          f"with updates, {stats.updated_keys} key updates), {len(retried)} retried by Hudi's sink, batch seconds "
          f"median {sorted(stats.batch_seconds)[len(stats.batch_seconds) // 2] if stats.batch_seconds else None}; "
          f"daemons logged {logged}; setup {setup_s:.0f}s, total {total_s:.0f}s", flush=True)
    for line in retried[:5]:
        print("retried micro-batch:", line.strip()[:500], flush=True)
    report = os.environ.get("CLUSTERD_CRASH_REPORT")
    if report:
        Path(report).write_text(json.dumps({"seed": seed, "points": records, "stream": vars(stats),
                                            "retried_batches": retried, "daemon_events": logged,
                                            "seconds": round(total_s, 1)}, indent=1))
    assert not stats.failures, f"seed={seed}: streaming ingestion failed: {stats.failures}"
    return records
