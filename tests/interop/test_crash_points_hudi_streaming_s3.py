"""Crash points on S3 beside Apache Hudi 1.2's streaming writer with the ZooKeeper lock (issue #27): the run of
``tests/interop/test_crash_points_hudi_streaming.py`` (``tests/harness/crash_stream_run.py``) on a table at
``s3a://hudi/<unique>`` on the SeaweedFS server, Hudi 1.2.0 (table version 9, its default metadata table) writing
it through S3A with Hudi's ``ZookeeperBasedLockProvider``, and each ``hudi-clusterd run`` process given the S3
server's AWS variables and the writers' lock keys (as ``tests/interop/test_streaming_beside_daemon_s3.py`` does).

Each daemon of the run writes ``application_id=crash-<point>`` into its ZooKeeper lock node
(``hoodie.write.lock.app_id``), so the lock watch tells it from Hudi's writer and from the daemon killed before it;
a killed daemon's node lives until its ZooKeeper session expires (``DAEMON_SESSION_TIMEOUT_MS``), and meanwhile the
stream's next batch waits for the lock. The checks after every recovery are the local run's: exact rows through
Hudi's snapshot and hudi-rs read from S3, unique keys, no orphan data or metadata-table file, nothing pending, no
lock node left under ``<base_path>/<lock_key>``, plans disjoint, and Hudi's ``validate_metadata_table_files``
against the S3 listing. The files are checked in a local mirror of the bucket's objects refreshed at every poll
(``tests/harness/s3_mirror.py``); the moments shorter than such a refresh (a file being written: its marker there,
the object not yet; the metadata deltacommit completed before the replacecommit) are approached from the daemon's
log (``kill_at``).

CI runs one point aimed at ``metadata_committed``; ``-m slow`` runs 50 randomized points. Environment as for the
local run: ``CLUSTERD_CRASH_SEED``, ``CLUSTERD_CRASH_POINTS``, ``CLUSTERD_CRASH_ANCHORS``, ``CLUSTERD_CRASH_REPORT``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.apache_hudi import HudiWorker
from tests.harness.crash_harness import MDT_REQUIRED_PHASES, crash_points, crash_seed, summarize, write_crash_props
from tests.harness.crash_stream_run import DAEMON_OPTIONS, STREAM_OPTIONS, StreamCrashTarget, run_stream_crash_points
from tests.harness.crash_table import ZooKeeperLockWatch, s3_table
from tests.harness.hudi_s3 import lock_props, s3_writer_options, s3a_uri, zookeeper_lock_options
from tests.harness.hudi_versions import HUDI_1_2_V9
from tests.support import free_port

pytestmark = [pytest.mark.hudi, pytest.mark.hudi_s3, pytest.mark.integration, pytest.mark.spark]

CI_POINTS = 1  # aimed at metadata_committed (the randomized points are the long run's); CI time
SLOW_POINTS = 50
TABLE = "events"  # the table's name: Hudi's inferred ZooKeeper lock key
DAEMON_SESSION_TIMEOUT_MS = 10_000  # how long a killed daemon's lock node outlives it (ZooKeeper's tick is 2 s)
# A plan only requested lasts a few milliseconds on S3: the daemon logs it saved and claims it at once, in the same
# lock hold (see ``kill_at``); the anchor ``requested`` is drawn and tried, but its phase is not required here.
S3_REQUIRED_PHASES = tuple(p for p in MDT_REQUIRED_PHASES if p != "requested")


@pytest.fixture
def s3_target(s3_hudi: Callable[[Any], HudiWorker], s3_server: Any, zookeeper_server: Any,
              tmp_path: Path) -> Iterator[StreamCrashTarget]:
    worker = s3_hudi(HUDI_1_2_V9)
    uri = s3a_uri(s3_server.fresh_uri("crash-stream"))
    zk_base = f"/hudi/crash-{uuid.uuid4().hex[:8]}"  # a lock of this run's own
    options = s3_writer_options(HUDI_1_2_V9, TABLE, zookeeper_lock_options(zookeeper_server, base_path=zk_base),
                                extra=STREAM_OPTIONS)
    shared_lock = lock_props(options, uri)
    client = zookeeper_server.client()

    def props(path: Path, tag: str, parallelism: int) -> None:
        write_crash_props(path, uri, free_port(), parallelism=parallelism, **DAEMON_OPTIONS, **shared_lock,
                          **{"hoodie.write.lock.app_id": f"crash-{tag}",
                             "hoodie.write.lock.zookeeper.session_timeout_ms": str(DAEMON_SESSION_TIMEOUT_MS)})

    try:
        table = s3_table(s3_server, uri, tmp_path / "mirror", ZooKeeperLockWatch(client, f"{zk_base}/{TABLE}"))
        yield StreamCrashTarget(worker, table, options, props, env=s3_server.env(),
                                lock_identity=lambda tag: f"application_id=crash-{tag}",
                                label="hudi streaming crash points on S3 + ZooKeeper")
    finally:
        client.stop()
        client.close()


def test_hudi_streaming_crash_points_on_s3_ci_sample(s3_target: StreamCrashTarget, tmp_path: Path) -> None:
    seed = crash_seed()
    records = run_stream_crash_points(s3_target, tmp_path, crash_points(CI_POINTS), seed, {0: "metadata_committed"})
    assert len(records) == crash_points(CI_POINTS)


@pytest.mark.slow
def test_hudi_streaming_crash_points_on_s3_randomized_run(s3_target: StreamCrashTarget, tmp_path: Path) -> None:
    seed = crash_seed()
    records = run_stream_crash_points(s3_target, tmp_path, crash_points(SLOW_POINTS), seed, {})
    hit = {r["phase"] for r in records}
    missing = [p for p in S3_REQUIRED_PHASES if p not in hit]
    assert not missing, f"seed={seed}: phases never hit: {missing}; histogram {summarize(records, 'phase')}"
