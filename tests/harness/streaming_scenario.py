"""The mission's scenario, shared by its local and its S3 tests (tests/interop/test_streaming_beside_daemon*.py): a
Structured Streaming query writing ``format("hudi")`` while a real ``hudi-clusterd run`` process clusters the same
table beside it, then exact reads by Hudi and hudi-rs and Hudi's metadata table checked against storage. The table
is copy-on-write (one ``commit`` per micro-batch) or, with :data:`MOR_WRITER_EXTRA`, merge-on-read (one
``deltacommit`` per micro-batch, updates appended as log files, Hudi's inline compaction every few deltacommits);
on a merge-on-read table :func:`log_clusterings` counts the clusterings whose plans merged log files.

The stream reads JSON-lines files dropped into its source folder, one file per micro-batch; each file inserts new
keys and upserts earlier ones across three partitions, so the expected key → latest value map after every batch is
known (:func:`make_batch`, :func:`apply`). :func:`run_stream_beside_daemon` runs the stream for at least the
asked micro-batches and completed clusterings, starting the daemon once the first batch committed;
:func:`check_scenario` makes the reads and checks of both tests. A table is a local folder (a ``Path``) or a
``StorageSpec`` (its URI, given to Hudi and to the daemon as it is, and the options that reach its store).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.harness.apache_hudi import HudiWorker
from tests.harness.daemon_harness import (
    DaemonProcess,
    Table,
    clusterings,
    completed,
    instant_files,
    instant_metadata,
    pending_clusterings,
    replacecommits,
    table_version,
    wait_for,
)
from tests.harness.hudi_rs_checks import hudi_rs_rows
from tests.harness.metadata_checks import metadata_partitions, validate_files

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("val", pa.int64()), ("ts", pa.int64())])
COLUMNS = ["id", "part", "val", "ts"]
PARTS = ("p0", "p1", "p2")
MAX_BATCHES = 60  # more batches only while fewer clusterings than asked for completed (a loaded machine)
# (micro-batches, completed clusterings) at least: the full scenario in the long run, a shorter one in every run
LONGEST = (20, 3)
LENGTHS = [pytest.param(LONGEST, marks=pytest.mark.slow, id="20-batches"), pytest.param((10, 2), id="10-batches")]
INSERTS_PER_BATCH = 9
RECENT_UPDATES_PER_BATCH = 4  # of keys the previous batch inserted (late updates of fresh records)
OLD_UPDATES_PER_BATCH = 1  # of any earlier key

# The stream's writer options beside the setup's (record key id, partition path part, precombine ts)
STREAM_WRITER_EXTRA: Mapping[str, str] = {
    "hoodie.datasource.write.streaming.checkpoint.identifier": "events-stream",  # required under OCC
    "hoodie.parquet.small.file.limit": "0",  # every insert makes new (small) file groups to cluster
    # keep every batch's file slices and instants, so time travel reaches back to the first batch
    "hoodie.cleaner.commits.retained": "60",
    "hoodie.keep.min.commits": "70",
    "hoodie.keep.max.commits": "80",
}
# The daemon's clustering policy: every 3 commits, about 3 files per group (each ~430 KB, mostly Hudi's bloom
# filter), so an update loses the clustering one small group, not a whole partition
CLUSTERING_POLICY: Mapping[str, str] = {
    "hoodie.clustering.async.max.commits": "3",
    "hoodie.clustering.plan.strategy.small.file.limit": "10485760",
    "hoodie.clustering.plan.strategy.max.bytes.per.group": "1400000",
    "hoodie.clustering.plan.strategy.target.file.max.bytes": "2097152",
}

# The stream's writer options on a merge-on-read table (beside STREAM_WRITER_EXTRA): updates go to log files, and
# Hudi compacts inline every 5 deltacommits (its streaming sink's async compaction off, so compaction runs in the
# micro-batch that schedules it, a "commit" on the timeline). Every 5, not 3: the daemon leaves out the file groups
# the last 2 deltacommits updated (hot), and a batch's groups are updated by the next batch, so compacting every 3
# deltacommits compacts (on table version 8 and 9, where a pending clustering does not hold compaction back) nearly
# every log file before the daemon may plan its group
MOR_WRITER_EXTRA: Mapping[str, str] = {
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.datasource.compaction.async.enable": "false",
    "hoodie.compact.inline": "true",
    "hoodie.compact.inline.max.delta.commits": "5",
}

State = dict[int, tuple[str, int, int]]


def write_action(options: Mapping[str, str]) -> str:
    """The action of an ingestion write with the writer ``options``: ``deltacommit`` on a merge-on-read table."""
    mor = options.get("hoodie.datasource.write.table.type", "COPY_ON_WRITE") == "MERGE_ON_READ"
    return "deltacommit" if mor else "commit"


def compactions(table: Table) -> list[str]:
    """Completed compactions of a merge-on-read table (its only ``commit`` instants)."""
    return completed(table, "commit")


def log_clusterings(table: Table) -> dict[str, int]:
    """Completed clusterings whose requested plan had slices with log files (``deltaFilePaths``) in file groups
    the clustering replaced: instant time -> how many such slices."""
    done = {t: meta for t, meta in replacecommits(table).items() if meta.get("operationType") == "CLUSTER"}
    out: dict[str, int] = {}
    for f in instant_files(table):
        if f.state != "requested" or f.time not in done:
            continue
        replaced = {(part, fid) for part, ids in (done[f.time].get("partitionToReplaceFileIds") or {}).items()
                    for fid in ids}
        plan = (instant_metadata(f).get("clusteringPlan") or {})
        merged = [s for g in plan.get("inputGroups") or [] for s in g.get("slices") or []
                  if s.get("deltaFilePaths") and (s.get("partitionPath") or "", s.get("fileId")) in replaced]
        if merged:
            out[f.time] = len(merged)
    return out


def make_batch(number: int, rng: random.Random, state: State) -> list[dict[str, Any]]:
    """Batch ``number``: new keys in every partition plus upserts of earlier keys (each in its own partition)."""
    first = number * INSERTS_PER_BATCH
    ids = list(range(first, first + INSERTS_PER_BATCH))
    if number > 0:
        recent = range(first - INSERTS_PER_BATCH, first)
        ids += rng.sample(recent, RECENT_UPDATES_PER_BATCH)
        older = [i for i in sorted(state) if i < first - INSERTS_PER_BATCH]
        ids += rng.sample(older, min(OLD_UPDATES_PER_BATCH, len(older)))
    return [{"id": i, "part": PARTS[i % len(PARTS)], "val": number * 1000 + i, "ts": number} for i in ids]


def apply(state: State, rows: list[dict[str, Any]]) -> State:
    out = dict(state)
    for r in rows:
        out[r["id"]] = (r["part"], r["val"], r["ts"])
    return out


def by_key(rows: list[dict[str, Any]]) -> State:
    out: State = {}
    for r in rows:
        assert r["id"] not in out, f"key {r['id']} appears twice"
        out[int(r["id"])] = (r["part"], r["val"], r["ts"])
    return out


def drop_file(source: Path, staging: Path, number: int, rows: list[dict[str, Any]]) -> None:
    """Write the batch as JSON lines beside the source folder, then move it in whole."""
    staged = staging / f"batch-{number:03d}.json"
    staged.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(staged, source / staged.name)


def hudi_path(table: Table) -> Path | str:
    """What Hudi (and the daemon) are given as the table's base path: the folder, or the URI as it is."""
    return table if isinstance(table, Path) else table.uri


@dataclass
class StreamRun:
    """What a run of the stream beside the daemon left: the expected state after each micro-batch, each batch's
    commit instant, where the worker's log stood before it, and the daemon (stopped)."""

    states: list[State] = field(default_factory=list)
    commit_of: list[str] = field(default_factory=list)
    action: str = "commit"  # of each micro-batch's instant
    log_start: int = 0
    daemon: DaemonProcess | None = None
    seconds: float = 0.0


def run_stream_beside_daemon(worker: HudiWorker, table: Table, work: Path, options: Mapping[str, str],
                             start_daemon: Callable[[], DaemonProcess], length: tuple[int, int],
                             reached: Callable[[], bool] | None = None) -> StreamRun:
    """Stream micro-batches into ``table`` through ``worker`` with the writer ``options``, one commit (or
    deltacommit) each, the daemon (``start_daemon``, called once the first batch committed) clustering beside it,
    until at least ``length`` = (micro-batches, completed clusterings) were reached and ``reached`` (more the
    caller waits for) says so; then stop the stream, wait for the daemon's pending plans and stop it with SIGTERM
    (it must exit 0). ``work``: a folder for the source, the staging area, the checkpoint and the schema sample."""
    min_batches, min_clusterings = length

    def enough() -> bool:
        return len(clusterings(table, replaced=True)) >= min_clusterings and (reached is None or reached())

    started = time.monotonic()
    source, staging = work / "source", work / "staging"
    source.mkdir()
    staging.mkdir()
    sample = work / "schema.parquet"
    pq.write_table(pa.Table.from_pylist([], schema=SCHEMA), sample)
    run = StreamRun(log_start=worker.log_offset(), action=write_action(options))
    rng = random.Random(14)
    worker.stream_start("events", source_dir=source, schema_from=sample, base_path=hudi_path(table),
                        checkpoint_dir=work / "checkpoint", options=options, source_format="json")
    try:
        number = 0
        while number < min_batches or (not enough() and number < MAX_BATCHES):
            before = run.states[-1] if run.states else {}
            rows = make_batch(number, rng, before)
            run.states.append(apply(before, rows))
            drop_file(source, staging, number, rows)
            status = worker.stream_status("events", wait_for_batches=number + 1, timeout=120)
            assert status["exception"] is None, status["exception"]
            assert status["batches"] == number + 1, status
            new = [t for t in completed(table, run.action) if t not in run.commit_of]
            assert len(new) == 1, (number, new)  # one commit (deltacommit) per micro-batch
            run.commit_of.append(new[0])
            if run.daemon is None:  # the table exists once the first batch committed
                run.daemon = start_daemon()
            number += 1
        final = worker.stream_stop("events")
        assert final["exception"] is None, final["exception"]
        assert run.daemon is not None
        # the daemon finishes what it planned (or gives it up on a conflict), then stops on SIGTERM
        wait_for(lambda: not pending_clusterings(table), 180, "no pending clustering", run.daemon.proc, interval=1)
        run.daemon.signal(signal.SIGTERM)
        assert run.daemon.wait(120) == 0, run.daemon.log_file.read_text()[-3000:]
    finally:
        if run.daemon is not None:
            run.daemon.stop()
        if worker.alive:
            status = worker.request("stream_status", name="events")
            if status.get("active"):
                worker.stream_stop("events")
    run.seconds = time.monotonic() - started
    return run


def check_scenario(worker: HudiWorker, table: Table, run: StreamRun, min_clusterings: int, name: str,
                   rs_options: Mapping[str, str] | None = None) -> list[str]:
    """What both tests check after the run: no micro-batch failed, one commit per batch, at least
    ``min_clusterings`` completed; Hudi's snapshot and incremental reads give exactly the expected state, and so
    do its time travel and hudi-rs's (reaching the table with ``rs_options``) as of the last batch before each
    clustering; hudi-rs's snapshot agrees; the metadata table Hudi keeps (its default), which those reads listed
    files through, lists exactly what storage holds (registered as ``name`` for Hudi's procedure); the table keeps
    the setup's version. Returns the completed clusterings that replaced file groups."""
    path = str(hudi_path(table))
    # No micro-batch failed, not even once before a retry by Hudi's streaming sink
    failures = worker.failed_micro_batches(since=run.log_start)
    assert not failures, "\n".join(failures[:10])
    assert len(completed(table, run.action)) == len(run.states)
    done = clusterings(table, replaced=True)
    assert len(done) >= min_clusterings, (done, len(run.states))

    # Hudi's snapshot: exactly the expected key → latest value map
    expected = run.states[-1]
    assert by_key(worker.read(path, columns=COLUMNS).to_pylist()) == expected
    # Hudi's incremental query from the start: every key once, with its latest value
    assert by_key(worker.read(path, "incremental", begin="000", columns=COLUMNS).to_pylist()) == expected
    # Time travel as of the last batch before each clustering: the state after that batch
    for clustering in done:
        before = [i for i, t in enumerate(run.commit_of) if t < clustering]
        if not before:
            continue
        at = before[-1]
        as_of = worker.read(path, "time_travel", as_of=run.commit_of[at], columns=COLUMNS)
        assert by_key(as_of.to_pylist()) == run.states[at], (clustering, run.commit_of[at])
        rs = hudi_rs_rows(path, COLUMNS, "id", as_of=run.commit_of[at], storage_options=rs_options)
        assert by_key(rs) == run.states[at], ("hudi-rs", clustering, run.commit_of[at])
    # hudi-rs agrees with the snapshot
    assert by_key(hudi_rs_rows(path, COLUMNS, "id", storage_options=rs_options)) == expected
    # and the metadata table lists exactly what storage holds after every clustering of ours
    assert "files" in metadata_partitions(table)
    validate_files(worker, table, name).assert_clean()
    assert table_version(table) == worker.setup.table_version
    return done

