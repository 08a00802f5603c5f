"""The mission's scenario on S3 (issue #27, must-show 1): Apache Hudi's Structured Streaming sink writes
``s3a://hudi/<unique>`` on the SeaweedFS server while a real ``hudi-clusterd run`` process clusters the same table
beside it, both under one shared lock: Hudi 0.15.0 (table version 6) with the DynamoDB lock (moto's server), Hudi
1.2.0 (table version 9) with the ZooKeeper lock on a merge-on-read table (and on a copy-on-write one in the long
run); the metadata table on (Hudi's default).

The stream, its batches, the daemon's clustering policy and the checks are those of the local test
(``tests/harness/streaming_scenario.py``): at least 10 micro-batches and 2 completed clusterings in every run, 20
and 3 in the long run (``-m slow``); no micro-batch failed; Hudi's snapshot, incremental and time-travel reads and
hudi-rs's reads from S3 are exact; Hudi's metadata table lists exactly what S3 holds. Only the table is on S3 (the
stream's source folder and checkpoint are local). The daemon is given the writers' lock keys in its properties
file, the S3 server's AWS variables (and the DynamoDB endpoint) in its environment, and the table's ``s3a://`` URI
exactly as the writer has it.

On a merge-on-read table (issue #34, must-show 3), Hudi 1.2.0 (table version 9) with the ZooKeeper lock: the
stream's updates go to log files, Hudi compacts inline every few deltacommits, and the daemon's plans merge slices
with their log files; beyond the checks above, at least 2 of its clusterings replaced file groups whose plan
slices had log files, and at least 1 compaction completed.

On DynamoDB and ZooKeeper no writer deletes a lock the daemon holds (the local test's lock-file case), so the
daemon must log no error at all. It must also show it took the shared lock: its log names the writers' lock (the
DynamoDB table and partition key, or the ZooKeeper lock path) at every acquisition, every completed clustering
held it, and a poller of the lock service saw the daemon's own item or node while it held the lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.storage import StorageSpec
from tests.harness.apache_hudi import HudiWorker
from tests.harness.daemon_harness import DaemonProcess, clusterings, write_props
from tests.harness.hudi_rs_checks import s3_storage_options
from tests.harness.hudi_s3 import (
    LOCK_TABLE,
    ZOOKEEPER_BASE_PATH,
    dynamodb_lock_options,
    dynamodb_lock_owners,
    lock_props,
    s3_writer_options,
    s3a_uri,
    zookeeper_lock_nodes,
    zookeeper_lock_options,
)
from tests.harness.hudi_versions import HUDI_0_15, HUDI_1_2_V9, HudiSetup
from tests.harness.streaming_scenario import (
    CLUSTERING_POLICY,
    LENGTHS,
    MOR_WRITER_EXTRA,
    STREAM_WRITER_EXTRA,
    check_scenario,
    compactions,
    log_clusterings,
    run_stream_beside_daemon,
)
from tests.support import free_port

pytestmark = [pytest.mark.hudi, pytest.mark.hudi_s3]

CASES = [pytest.param(HUDI_0_15, "dynamodb", False, id="hudi-0.15-dynamodb"),
         # the merge-on-read case covers Hudi 1.2 with ZooKeeper in every run; CI time
         pytest.param(HUDI_1_2_V9, "zookeeper", False, id="hudi-1.2-v9-zookeeper", marks=pytest.mark.slow),
         pytest.param(HUDI_1_2_V9, "zookeeper", True, id="hudi-1.2-v9-zookeeper-mor")]
LOCK_KEY = "events"  # Hudi's inferred DynamoDB partition key and ZooKeeper lock key: the table's name
POLL_S = 0.02


@dataclass
class LockPoller:
    """Reads the shared lock's state every ``POLL_S`` in a thread of its own: the owners of the DynamoDB item, or
    the names of the ZooKeeper lock nodes, seen at any moment."""

    read: Callable[[], set[str]]
    seen: set[str] = field(default_factory=set)
    reads: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.seen |= self.read()
            self.reads += 1
            self._stop.wait(POLL_S)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._loop, name="lock-poller", daemon=True)
        thread.start()
        return thread

    def stop(self, thread: threading.Thread) -> None:
        self._stop.set()
        thread.join(10)


@pytest.fixture
def lock_service(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    """The lock service of this case's lock: (``"dynamodb"``, DynamoServer) or (``"zookeeper"``, ZooKeeperServer)."""
    kind = request.node.callspec.params["lock"]
    yield kind, request.getfixturevalue(f"{kind}_server")


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize(("setup", "lock", "mor"), CASES)
def test_streaming_ingestion_and_the_daemon_share_a_table_on_s3(
        setup: HudiSetup, lock: str, mor: bool, length: tuple[int, int], s3_hudi: Callable[[HudiSetup], HudiWorker],
        s3_server: Any, lock_service: tuple[str, Any], tmp_path: Path) -> None:
    started = time.monotonic()
    worker = s3_hudi(setup)
    _, server = lock_service
    uri = s3a_uri(s3_server.fresh_uri("stream"))
    table = StorageSpec(uri, s3_server.storage_options())
    lock_options = dynamodb_lock_options(server) if lock == "dynamodb" else zookeeper_lock_options(server)
    options = s3_writer_options(setup, "events", lock_options,
                                extra={**STREAM_WRITER_EXTRA, **(MOR_WRITER_EXTRA if mor else {})})
    (tmp_path / "conf").mkdir()  # the folder the daemon watches for changes of its properties, not its log's
    props = tmp_path / "conf" / "clusterd.properties"
    # the writers' lock keys as the daemon's defaults; debug logging names the lock at every acquisition
    write_props(props, uri, free_port(), **CLUSTERING_POLICY, **lock_props(options, uri),
                **{"clusterd.log.level": "DEBUG"})
    env = {**s3_server.env(), **(server.env() if lock == "dynamodb" else {})}
    if lock == "dynamodb":
        client = server.client()
        poller = LockPoller(lambda: set(dynamodb_lock_owners(client, LOCK_KEY)))
    else:
        client = server.client()
        poller = LockPoller(lambda: set(zookeeper_lock_nodes(client, LOCK_KEY)))
    thread = poller.start()
    try:
        reached = (lambda: len(log_clusterings(table)) >= length[1] and len(compactions(table)) >= 1) if mor else None
        run = run_stream_beside_daemon(worker, table, tmp_path, options,
                                       lambda: DaemonProcess(props, tmp_path / "daemon.log", env=env), length, reached)
    finally:
        poller.stop(thread)
        if lock == "zookeeper":
            client.stop()
            client.close()
    stream_seconds = time.monotonic() - started
    assert run.daemon is not None
    logs = run.daemon.logs()

    # No writer deletes a DynamoDB item or a ZooKeeper node the daemon holds: no error at all
    errors = [r for r in logs if r.get("level") in ("error", "critical")]
    assert not errors, errors[:5]
    # The daemon took the writers' lock: every acquisition names it, ...
    if lock == "dynamodb":
        taken = [r for r in logs if r.get("event") == "took the DynamoDB table lock"]
        assert taken and all(r.get("lock") == LOCK_KEY and r.get("lock_table") == LOCK_TABLE for r in taken), taken[:3]
        ours = {str(r["owner"]) for r in taken}
    else:
        taken = [r for r in logs if r.get("event") == "table lock taken"]
        where = f"ZooKeeper {server.connect} {ZOOKEEPER_BASE_PATH}/{LOCK_KEY}"
        assert taken and all(r.get("lock") == where for r in taken), taken[:3]
        ours = {str(r["node"]) for r in taken}
    # ... every clustering it completed held it, ...
    finished = [r for r in logs if r.get("event") == "clustering completed"]
    assert finished and all(float(r.get("lock_held_s", 0)) > 0 for r in finished), finished[:3]
    # ... and the lock service showed its item or node while it held it (and the writer's, while it did)
    assert poller.seen & ours, (sorted(poller.seen)[:5], sorted(ours)[:5], poller.reads)
    assert poller.seen - ours, (sorted(poller.seen)[:5], poller.reads)

    done = check_scenario(worker, table, run, length[1], f"stream_s3_{lock}_{len(run.states)}_{int(started)}",
                          rs_options=s3_storage_options(s3_server))
    mor_figures = ""
    if mor:
        merged, compacted = log_clusterings(table), compactions(table)
        assert len(merged) >= length[1], (merged, done)
        assert compacted, "no compaction completed"
        mor_figures = (f" ({len(merged)} with log files, {sum(merged.values())} slices with logs; "
                       f"{len(compacted)} compactions)")
    print(f"{setup.name} + {lock} on S3{' (MOR)' if mor else ''}: {len(run.states)} batches, {len(done)} clusterings"
          f"{mor_figures} "
          f"(and {len(clusterings(table, replaced=False))} that lost every group), {len(run.states[-1])} keys, "
          f"{len(taken)} lock acquisitions by the daemon ({len(poller.seen & ours)} seen by the poller in "
          f"{poller.reads} reads), stream and daemon {run.seconds:.0f}s (with set-up {stream_seconds:.0f}s), "
          f"total {time.monotonic() - started:.0f}s")
