"""A daemon that loses its lease writes nothing more (issue #27, must-show 4): a real ``hudi-clusterd run`` process
clusters a table Apache Hudi writes on the S3 server, under the lock Hudi's writers share, and is frozen (SIGSTOP
of its whole process tree: driver, Spark JVM, Python workers) while it holds that lock to commit a clustering:
right after it took the lock, or (stepped on a few milliseconds at a time) once its metadata table's deltacommit
is completed and its replacecommit not yet; CI runs each lock service at one of the two moments, ``-m slow`` both.

- DynamoDB (Hudi 0.15.0, table version 6): the lease is ``hoodie.write.lock.wait_time_ms`` = 5 s on both sides;
  frozen, the daemon stops renewing it, and Hudi's ``DynamoDBBasedLockProvider`` takes the item over once its
  record version number stayed unchanged for a lease.
- ZooKeeper (Hudi 1.2.0, table version 9): the daemon's session (``session_timeout_ms`` = 4 s) expires while it
  is frozen, the server deletes its ephemeral lock node, and Hudi's Curator mutex gets the lock.

Either way Hudi's upsert (updates of keys of partition ``p0``, one of the three groups the daemon was clustering,
and new keys) commits while the daemon is frozen. Then Hudi's own lock provider takes the lock and holds it while
the daemon is resumed: the resumed daemon must find its lease lost (its log and its metrics say so) and write
nothing to the table, its timeline or its metadata table (the bucket's listing under the table, object by object
with ETags, is the same before and after; only the daemon's own heartbeat file of the attempt may go). Once
Hudi's lock is released the daemon recovers on its own: it takes the lock anew, checks the timeline again, and
commits the groups Hudi's upsert did not touch, leaving the moved one out. At rest Hudi's snapshot and hudi-rs
read exactly the expected rows, no data file or metadata-table file is orphaned, nothing is pending, and Hudi's
metadata table lists exactly what the bucket holds.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hudi_clusterd.exit_codes import EXIT_OK
from hudi_clusterd.storage import StorageSpec
from tests.harness.apache_hudi import HudiWorker
from tests.harness.crash_harness import CrashableDaemon, left_behind
from tests.harness.crash_stream import mdt_orphan_files, stream_pending_work
from tests.harness.daemon_harness import (
    clusterings,
    completed,
    metric,
    pending_clusterings,
    scrape,
    wait_for,
    write_props,
)
from tests.harness.hudi_rs_checks import assert_no_orphan_files, hudi_rs_rows, s3_storage_options
from tests.harness.hudi_s3 import (
    dynamodb_lock_options,
    dynamodb_lock_owners,
    lock_props,
    s3_writer_options,
    s3a_uri,
    zookeeper_lock_nodes,
    zookeeper_lock_options,
)
from tests.harness.hudi_versions import HUDI_0_15, HUDI_1_2_V9, HudiSetup
from tests.harness.metadata_checks import validate_files
from tests.harness.s3_mirror import S3Mirror
from tests.harness.streaming_scenario import CLUSTERING_POLICY, STREAM_WRITER_EXTRA
from tests.support import free_port

pytestmark = [pytest.mark.hudi, pytest.mark.hudi_s3]

DYNAMODB, ZOOKEEPER = "dynamodb", "zookeeper"
LOCK_TAKEN, METADATA_COMMITTED = "lock_taken", "metadata_committed"
CASES = [pytest.param(HUDI_0_15, DYNAMODB, LOCK_TAKEN, id="hudi-0.15-dynamodb-lock-taken"),
         pytest.param(HUDI_1_2_V9, ZOOKEEPER, METADATA_COMMITTED, id="hudi-1.2-v9-zookeeper-metadata-committed"),
         pytest.param(HUDI_0_15, DYNAMODB, METADATA_COMMITTED, id="hudi-0.15-dynamodb-metadata-committed",
                      marks=pytest.mark.slow),
         pytest.param(HUDI_1_2_V9, ZOOKEEPER, LOCK_TAKEN, id="hudi-1.2-v9-zookeeper-lock-taken",
                      marks=pytest.mark.slow)]
"""(release and lock, the moment of the commit the daemon is frozen at: right after it took the lock, or once its
metadata table's deltacommit is completed and its replacecommit not yet)"""
STEP_BUDGET_S = 3.0  # stepping from the lock to the metadata table's commit (within the 4 s the lease allows)
FAILED = "clustering failed; rolling back"
LEASE_MS = 5000
"""``hoodie.write.lock.wait_time_ms``: the DynamoDB lease of both sides (heartbeat every third)."""
SESSION_MS = 4000
"""``hoodie.write.lock.zookeeper.session_timeout_ms``: the ZooKeeper session of both sides."""
FROZEN_PAST_S = 3.0
"""How long past its lease or session the daemon stays frozen before Hudi's writer starts."""
RESUMED_S = 8.0
"""How long the resumed daemon runs while Hudi holds the lock (more than a lease) before the listing is compared."""
BATCHES = 3  # Hudi's inserts before the daemon starts: one clustering's worth (async.max.commits 3)
ROWS_PER_BATCH = 30
SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("val", pa.int64()), ("ts", pa.int64())])
COLUMNS = ["id", "part", "val", "ts"]
Rows = dict[int, tuple[str, int, int]]
FINISHED = ("clustering completed", "plan finished")  # the daemon's last line about a plan (completed, or not)


def _insert(batch: int) -> list[dict[str, Any]]:
    return [{"id": i, "part": f"p{i % 3}", "val": i, "ts": batch}
            for i in range(batch * ROWS_PER_BATCH, (batch + 1) * ROWS_PER_BATCH)]


def _upsert(batches: int) -> list[dict[str, Any]]:
    """After ``batches`` inserts: updates of every other key of partition ``p0`` of the last clustering's worth of
    them (its file groups are being clustered; the other partitions' are not touched), and ten new keys."""
    first, end = (batches - BATCHES) * ROWS_PER_BATCH, batches * ROWS_PER_BATCH
    updated = [{"id": i, "part": "p0", "val": 1000 + i, "ts": 100} for i in range(first, end, 6)]
    return updated + [{"id": i, "part": f"p{i % 3}", "val": i, "ts": 100} for i in range(end, end + 10)]


def _by_key(rows: list[dict[str, Any]]) -> Rows:
    out: Rows = {}
    for r in rows:
        assert r["id"] not in out, f"key {r['id']} read twice"
        out[r["id"]] = (r["part"], r["val"], r["ts"])
    return out


def _listing(s3: Any, uri: str) -> dict[str, str]:
    """Every object under the table: its key relative to the base path -> ETag."""
    bucket, _, prefix = uri.split("://", 1)[1].partition("/")
    out: dict[str, str] = {}
    for page in s3.boto3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for obj in page.get("Contents", []):
            out[obj["Key"][len(prefix) + 1:]] = str(obj["ETag"])
    return out


class LockService:
    """The shared lock as the lock service shows it: who holds it (the DynamoDB item's owner, or the ZooKeeper lock
    nodes' names), and the daemon's identity in it from the daemon's log."""

    def __init__(self, kind: str, server: Any, lock_key: str) -> None:
        self.kind = kind
        self.lock_key = lock_key
        self.client = server.client()

    def holders(self) -> set[str]:
        if self.kind == DYNAMODB:
            return set(dynamodb_lock_owners(self.client, self.lock_key))
        return set(zookeeper_lock_nodes(self.client, self.lock_key))

    @property
    def acquired_event(self) -> str:
        return "took the DynamoDB table lock" if self.kind == DYNAMODB else "table lock taken"

    def identity(self, event: Mapping[str, Any]) -> str:
        """The daemon's owner name or lock node in the lock service, from its log line of an acquisition."""
        return str(event["owner"]) if self.kind == DYNAMODB else str(event["node"]).rsplit("/", 1)[-1]

    lost_event = "table lock lost while held"
    """The daemon's log event of a lost lease, the same for every provider (its ``lock`` names which)."""

    def close(self) -> None:
        if self.kind == ZOOKEEPER:
            self.client.stop()
            self.client.close()


def _step_to_metadata_commit(daemon: CrashableDaemon, table: StorageSpec, instant: str) -> bool:
    """From a freeze inside the commit, run the daemon in slices of a few milliseconds until its metadata table's
    deltacommit of ``instant`` is completed (it logs it) and its replacecommit is not; returns frozen, False when
    that moment went by."""
    deadline = time.monotonic() + STEP_BUDGET_S
    while time.monotonic() < deadline:
        daemon.step(random.uniform(0.001, 0.004))
        daemon.poll_events()
        if daemon.count("metadata table updated", instant):
            return instant not in completed(table, "replacecommit") and not daemon.count("clustering completed",
                                                                                         instant)
        if daemon.count("clustering completed", instant) or daemon.count(FAILED, instant):
            return False
    return False


def _freeze_holding_commit_lock(daemon: CrashableDaemon, locks: LockService, table: StorageSpec, moment: str,
                                feed: Callable[[], None], timeout: float = 300) -> dict[str, Any]:
    """Wait for a clustering whose groups are all written, then freeze the daemon the moment it logs taking the
    lock for the commit, and make sure the lock service still shows it holding the lock; at ``moment``
    ``metadata_committed``, step it on to its metadata table's deltacommit. When the moment went by, ``feed``
    the table the commits of another clustering and try its plan. Returns the plan and the daemon's identity in
    the lock service."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = daemon.poll_events()
        plans = [e for e in events if e.get("event") == "plan started"]
        if not plans:
            time.sleep(0.05)
            continue
        instant, groups = str(plans[-1]["instant"]), int(plans[-1]["groups"])
        seen = len(events)
        while daemon.count("group finished", instant) < groups:  # the groups are written without the lock
            assert time.monotonic() < deadline, f"the groups of {instant} did not finish; see {daemon.log_file}"
            assert daemon.proc.poll() is None, f"daemon exited; see {daemon.log_file}"
            time.sleep(0.01)
            seen = len(daemon.poll_events())
        while time.monotonic() < deadline:  # the next acquisition is the commit's
            events = daemon.poll_events()
            taken = [e for e in events[seen:] if e.get("event") == locks.acquired_event]
            if taken:
                daemon.freeze()
                time.sleep(0.05)
                ours = locks.identity(taken[-1])
                if (ours in locks.holders() and daemon.count("clustering completed", instant) == 0
                        and (moment == LOCK_TAKEN or _step_to_metadata_commit(daemon, table, instant))
                        and ours in locks.holders()):
                    return {"instant": instant, "groups": groups, "identity": ours}
                daemon.thaw()  # released meanwhile: wait for the next plan
                break
            if daemon.count("clustering completed", instant):
                break
            time.sleep(0.001)
        known = {str(e["instant"]) for e in daemon.events if e.get("event") == "plan started"}
        feed()
        while {str(e["instant"]) for e in daemon.poll_events() if e.get("event") == "plan started"} == known:
            assert time.monotonic() < deadline, f"no plan after a missed commit; see {daemon.log_file}"
            time.sleep(0.05)
    raise AssertionError(f"the daemon was never caught holding the commit's lock; see {daemon.log_file}")


@pytest.fixture
def lock_server(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(f"{request.node.callspec.params['kind']}_server")


@pytest.mark.parametrize(("setup", "kind", "moment"), CASES)
def test_a_daemon_that_lost_its_lease_writes_nothing_and_recovers(
        setup: HudiSetup, kind: str, moment: str, s3_hudi: Callable[[HudiSetup], HudiWorker], s3_server: Any,
        lock_server: Any, tmp_path: Path) -> None:
    started = time.monotonic()
    worker = s3_hudi(setup)
    uri = s3a_uri(s3_server.fresh_uri("lease"))
    table_name = f"lease_{kind}_{uuid.uuid4().hex[:8]}"  # Hudi's inferred DynamoDB partition key / ZooKeeper key
    if kind == DYNAMODB:
        lock_options = {**dynamodb_lock_options(lock_server), "hoodie.write.lock.wait_time_ms": str(LEASE_MS)}
    else:
        lock_options = {**zookeeper_lock_options(lock_server),
                        "hoodie.write.lock.zookeeper.session_timeout_ms": str(SESSION_MS)}
    options = s3_writer_options(setup, table_name, lock_options,
                                extra={k: v for k, v in STREAM_WRITER_EXTRA.items() if "streaming" not in k})
    # Given a table Hudi wrote three times under the shared lock
    expected: Rows = {}
    inserted: list[int] = []

    def feed() -> None:
        """Three inserts of new keys by Hudi's writer: what starts a clustering of the daemon's."""
        for _ in range(BATCHES):
            rows = _insert(len(inserted))
            worker.write_rows(pa.Table.from_pylist(rows, schema=SCHEMA), uri,
                              {**options, "hoodie.datasource.write.operation": "insert"})
            expected.update(_by_key(rows))
            inserted.append(len(rows))

    feed()
    # and the daemon clustering it under the same lock (the writers' lock keys copied into its properties)
    (tmp_path / "conf").mkdir()
    props = tmp_path / "conf" / "clusterd.properties"
    port = free_port()
    write_props(props, uri, port, **CLUSTERING_POLICY, **lock_props(options, uri),
                **{"clusterd.log.level": "DEBUG"})
    env = {**s3_server.env(), **(lock_server.env() if kind == DYNAMODB else {})}
    locks = LockService(kind, lock_server, table_name)
    daemon = CrashableDaemon(props, tmp_path / "daemon.log", env=env)
    hudi_holds = False
    try:
        # When the daemon is frozen while it holds the lock to commit a clustering, ...
        table = StorageSpec(uri, s3_server.storage_options())
        caught = _freeze_holding_commit_lock(daemon, locks, table, moment, feed)
        frozen_at = time.monotonic()
        instant = caught["instant"]
        # ... past its lease (DynamoDB) or session (ZooKeeper), ...
        time.sleep((LEASE_MS if kind == DYNAMODB else SESSION_MS) / 1000 + FROZEN_PAST_S)
        # ... Hudi's writer takes the lock and commits an upsert into the groups being clustered
        rows = _upsert(len(inserted))
        reply = worker.write_rows(pa.Table.from_pylist(rows, schema=SCHEMA), uri, options)
        assert len(reply["instants"]) == 1, reply
        expected.update(_by_key(rows))
        assert caught["identity"] not in locks.holders()
        upsert_s = float(reply["seconds"])
        # When Hudi's own lock provider holds the lock, and the daemon is resumed
        held = worker.lock_acquire(lock_props(options, uri), timeout_ms=30000, name="after")
        hudi_holds = True
        before = _listing(s3_server, uri)
        frozen_s = time.monotonic() - frozen_at
        daemon.thaw()
        resumed = time.monotonic()
        deadline = resumed + 60
        while daemon.count(locks.lost_event) == 0:
            assert time.monotonic() < deadline, f"the resumed daemon did not log {locks.lost_event!r}"
            assert daemon.proc.poll() is None, f"daemon exited; see {daemon.log_file}"
            time.sleep(0.05)
            daemon.poll_events()
        time.sleep(RESUMED_S)
        after = _listing(s3_server, uri)
        daemon.poll_events()
        # Then it wrote nothing: no object under the table was added or changed; only its own heartbeat of the
        # failed attempt may be gone
        added = sorted(set(after) - set(before))
        changed = sorted(k for k in set(after) & set(before) if after[k] != before[k])
        removed = sorted(set(before) - set(after))
        assert not added and not changed, (added[:10], changed[:10])
        assert all(k == f".hoodie/.heartbeat/{instant}" for k in removed), removed[:10]
        assert daemon.count("clustering completed", instant) == 0
        lost = [e for e in daemon.events if e.get("event") == locks.lost_event]
        # And once Hudi releases the lock, the daemon recovers on its own: ...
        worker.lock_release("after")
        hudi_holds = False

        def done() -> bool:
            daemon.poll_events()
            return daemon.count("clustering completed", instant) > 0 and not pending_clusterings(table)

        wait_for(done, 240, "the daemon's recovery", daemon.proc, interval=0.5)
        # (the groups Hudi's upsert did not touch are clustered, under a new lease, after a check against the
        # timeline as it is then: at once, or after a rollback of the attempt and a new one, which is a must when
        # its metadata table's deltacommit was written)
        attempts = [e for e in daemon.events if e.get("instant") == instant and e.get("event") in FINISHED]
        outcomes = [e["outcome"] for e in attempts]
        # (right after the lock was taken, the lost lease fails the attempt or holds it back until the lock is had
        # again, by where in the commit the freeze landed)
        assert outcomes in ([["completed"], ["failed", "completed"]] if moment == LOCK_TAKEN
                            else [["failed", "completed"]]), outcomes
        assert instant in clusterings(table, replaced=True)
        # (the lost lease is counted, reported after the tick)
        wait_for(lambda: metric(scrape(port), "hudi_clusterd_lock_leases_lost_total", table="events") >= 1, 60,
                 "the lost lease in the daemon's metrics", daemon.proc, interval=0.5)
        assert daemon.terminate(120) == EXIT_OK
        events = daemon.poll_events()
    finally:
        if hudi_holds:
            worker.lock_release("after")
        daemon.close()
        locks.close()
    recovered = [f"{e['event']}: {e.get('message') or e.get('reason') or ''}"[:160] for e in events
                 if e.get("event") in ("rolled back abandoned clustering", "clustering failed; rolling back",
                                       *FINISHED)]
    # ... the rows read exactly (Hudi's snapshot, listing through its metadata table, and hudi-rs from S3), ...
    assert _by_key(worker.read(uri, columns=COLUMNS).to_pylist()) == expected
    assert _by_key(hudi_rs_rows(uri, COLUMNS, "id", storage_options=s3_storage_options(s3_server))) == expected
    # ... nothing is orphaned or left pending, ...
    mirror = S3Mirror(s3_server, uri, tmp_path / "mirror").sync()
    referenced = assert_no_orphan_files(mirror, at_rest=True)
    assert not mdt_orphan_files(mirror)
    assert not left_behind(mirror, stream_pending_work)
    # ... and Hudi's metadata table lists exactly what the bucket holds
    validate_files(worker, mirror, table_name, uri=uri).assert_clean()
    print(f"{setup.name} + {kind} at {moment}: daemon frozen {frozen_s:.1f} s holding the commit's lock of {instant} "
          f"({caught['groups']} groups); Hudi's upsert took {upsert_s:.1f} s, Hudi's lock then taken in "
          f"{held['waited_s']:.2f} s; the resumed daemon logged {len(lost)} lost lease(s) "
          f"({lost[0].get('reason', '')!s:.80}), wrote nothing in {RESUMED_S:.0f} s "
          f"({len(removed)} heartbeat deleted); recovery: {recovered}; "
          f"{len(expected)} rows exact, {referenced} files referenced; total {time.monotonic() - started:.0f}s")
