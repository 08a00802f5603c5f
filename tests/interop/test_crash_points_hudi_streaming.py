"""Crash points beside Apache Hudi 1.2's streaming writer, metadata table on: SIGKILL a real ``hudi-clusterd run``
at randomized points of its clustering cycle while Hudi's Structured Streaming sink (``format("hudi")``, table
version 9, Hudi's default metadata table: files, column_stats, partition_stats) commits micro-batches of inserts
and upserts beside it, recover by restarting the daemon, and check the table after every kill.

Each point: start the daemon (which recovers what the previous kill left), check the table at rest, resume the
stream, wait for the point's anchor (the daemon's JSON log or the timeline, ``kill_at``; ``metadata_committed``
is the moment the clustering's metadata deltacommit is completed and its data replacecommit not yet), freeze the
daemon's process tree, record the phase, SIGKILL it. Then readers must see exactly the batches the timeline
holds (Hudi's snapshot, listing through the metadata table, and hudi-rs), and the stream goes on while the daemon
is down (a batch waits for the lock a killed daemon held, until the next daemon takes it over). At rest after
the recovery (feeding paused, the last batch committed, the daemon idle): exact rows through Hudi and hudi-rs,
unique keys, no orphan data file or metadata-table file, nothing pending in the table or its metadata table, the
lock takeable, no file group in two plans, and the metadata table listing exactly the files in storage
(``validate_files``). No micro-batch may fail for good (the query stays active, without an exception); the ones
Hudi's sink retried are reported.

The same on a merge-on-read table (issue #34, must-show 4): Hudi's stream appends its updates to log files (each
batch with updates also updates keys of the batch before, in the small file groups the daemon plans), compacts
inline every 3 deltacommits, and the daemon's plans merge slices with their log files; the checks are the same.

Environment, as for ``tests/integration/test_crash_points.py``: ``CLUSTERD_CRASH_SEED``, ``CLUSTERD_CRASH_POINTS``,
``CLUSTERD_CRASH_ANCHORS`` (of ``MDT_ANCHORS``), ``CLUSTERD_CRASH_REPORT`` (the per-point records as JSON).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.apache_hudi import HudiWorkers, hudi_write_options
from tests.harness.crash_harness import MDT_REQUIRED_PHASES, crash_points, crash_seed, summarize, write_crash_props
from tests.harness.crash_stream_run import DAEMON_OPTIONS, STREAM_OPTIONS, StreamCrashTarget, run_stream_crash_points
from tests.harness.crash_table import local_table
from tests.harness.hudi_versions import HUDI_1_2_V9
from tests.harness.streaming_scenario import MOR_WRITER_EXTRA, compactions, log_clusterings
from tests.support import free_port

pytestmark = [pytest.mark.hudi, pytest.mark.integration, pytest.mark.spark]

CI_POINTS = 1  # aimed at metadata_committed (the randomized points are the long run's); CI time
SLOW_POINTS = 50
# the merge-on-read sample: a kill while the merge runs in the Spark tasks (the randomized points, the metadata
# table's phases among them, are the long run's); CI time
MOR_CI_ANCHORS = {0: "writing"}
MOR_CI_POINTS = 1
MOR_RECENT_UPDATES = 3


def local_target(workers: HudiWorkers, tmp_path: Path, *, mor: bool = False) -> StreamCrashTarget:
    """Hudi 1.2 (table version 9) writing the folder ``events`` with the file-system lock, beside the daemon;
    ``mor``: a merge-on-read table, compacted inline."""
    base = tmp_path / "events"
    options = hudi_write_options(HUDI_1_2_V9, "events", record_key="id", partition_path="part", precombine="ts",
                                 extra={**STREAM_OPTIONS, **(MOR_WRITER_EXTRA if mor else {})})

    def props(path: Path, _tag: str, parallelism: int) -> None:
        write_crash_props(path, base, free_port(), parallelism=parallelism, **DAEMON_OPTIONS)

    return StreamCrashTarget(workers.for_setup(HUDI_1_2_V9), local_table(base), options, props,
                             label="hudi MOR streaming crash points" if mor else "hudi streaming crash points",
                             recent_updates=MOR_RECENT_UPDATES if mor else 0)


def report_mor(tmp_path: Path) -> tuple[dict[str, int], list[str]]:
    """The merge-on-read run's clusterings that merged log files (instant -> slices with logs) and compactions."""
    merged, compacted = log_clusterings(tmp_path / "events"), compactions(tmp_path / "events")
    print(f"MOR crash run: {len(merged)} clusterings merged {sum(merged.values())} slices with log files, "
          f"{len(compacted)} compactions", flush=True)
    return merged, compacted


def test_hudi_streaming_crash_points_ci_sample(hudi_workers: HudiWorkers, tmp_path: Path) -> None:
    seed = crash_seed()
    records = run_stream_crash_points(local_target(hudi_workers, tmp_path), tmp_path, crash_points(CI_POINTS), seed,
                                      {0: "metadata_committed"})
    assert len(records) == crash_points(CI_POINTS)


@pytest.mark.slow
def test_hudi_streaming_crash_points_randomized_run(hudi_workers: HudiWorkers, tmp_path: Path) -> None:
    seed = crash_seed()
    records = run_stream_crash_points(local_target(hudi_workers, tmp_path), tmp_path, crash_points(SLOW_POINTS),
                                      seed, {})
    hit = {r["phase"] for r in records}
    missing = [p for p in MDT_REQUIRED_PHASES if p not in hit]
    assert not missing, f"seed={seed}: phases never hit: {missing}; histogram {summarize(records, 'phase')}"


def test_hudi_streaming_crash_points_merge_on_read_ci_sample(hudi_workers: HudiWorkers, tmp_path: Path) -> None:
    seed = crash_seed()
    records = run_stream_crash_points(local_target(hudi_workers, tmp_path, mor=True), tmp_path,
                                      crash_points(MOR_CI_POINTS), seed, MOR_CI_ANCHORS)
    assert len(records) == crash_points(MOR_CI_POINTS)
    report_mor(tmp_path)


@pytest.mark.slow
def test_hudi_streaming_crash_points_merge_on_read_randomized_run(hudi_workers: HudiWorkers, tmp_path: Path) -> None:
    seed = crash_seed()
    records = run_stream_crash_points(local_target(hudi_workers, tmp_path, mor=True), tmp_path,
                                      crash_points(SLOW_POINTS), seed, {})
    hit = {r["phase"] for r in records}
    missing = [p for p in MDT_REQUIRED_PHASES if p not in hit]
    assert not missing, f"seed={seed}: phases never hit: {missing}; histogram {summarize(records, 'phase')}"
    merged, compacted = report_mor(tmp_path)
    assert merged, f"seed={seed}: no clustering merged log files"
    assert compacted, f"seed={seed}: no compaction completed"
