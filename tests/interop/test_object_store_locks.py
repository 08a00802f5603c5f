"""The daemon's DynamoDB and ZooKeeper table locks exclude Apache Hudi's own lock providers, both ways, and Hudi's
writers on S3 wait for the daemon's lock.

Hudi's side is Hudi's own Java classes in a worker's JVM (``tests/harness/hudi_s3.py``): ``DynamoDBBasedLockProvider``
of Hudi 0.15.0 (hudi-aws; hudi-aws 1.x is not on Maven Central) and ``ZookeeperBasedLockProvider`` (Curator) of Hudi
0.15.0 and 1.2.0, each built as Hudi's ``LockManager`` builds it from a writer's options. The daemon's side is its
provider built as the daemon builds it: ``lock_provider_from_properties`` with the same lock keys. The servers are
the session's moto (DynamoDB), ZooKeeper 3.8.4 and SeaweedFS (S3).

For each provider and release, in both orders of arrival: while Hudi holds the lock the daemon's ``acquire`` times out
(``LockError``) and leaves nothing behind, and a waiting daemon gets the lock once Hudi releases it; while the daemon
holds it Hudi's ``tryLock`` fails, and a waiting ``tryLock`` gets it once the daemon releases it. Then a Hudi writer's
commit on S3 waits for the daemon's lock and succeeds after it (0.15.0 with DynamoDB, 1.2.0 with ZooKeeper).

The DynamoDB lease is short here (``hoodie.write.lock.wait_time_ms`` = 3 s, Hudi's lease and the daemon's), so that
a waiter's wait outlasts the holder's lease: only heartbeats keep the lock held.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock import Lease, LockProvider, lock_provider_from_properties
from hudi_clusterd.storage import StorageSpec, open_storage
from tests.harness.apache_hudi import HudiRequestError, HudiWorker
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

pytestmark = [pytest.mark.hudi, pytest.mark.hudi_s3]

DYNAMODB, ZOOKEEPER = "dynamodb", "zookeeper"
LEASE_MS = 3000
"""``hoodie.write.lock.wait_time_ms``: Hudi's tryLock timeout and DynamoDB lease (heartbeat every third), and the
daemon's DynamoDB lease."""
DAEMON_WAIT_S = 5.0
"""How long the daemon waits for a lock Hudi holds: longer than the DynamoDB lease."""
HOLD_S = 4.0
"""How long a holder keeps the lock while the other side waits."""
HANDOVER_S = 5.0
"""At most this long from one side's release to the waiting side holding the lock (DynamoDB waiters poll every
second; Curator and the daemon's ZooKeeper lock watch their predecessor)."""

LOCK_CASES = [
    pytest.param(HUDI_0_15, DYNAMODB, id="hudi-0.15-dynamodb"),
    pytest.param(HUDI_0_15, ZOOKEEPER, id="hudi-0.15-zookeeper"),
    pytest.param(HUDI_1_2_V9, ZOOKEEPER, id="hudi-1.2-zookeeper"),
]
WRITER_CASES = [
    pytest.param(HUDI_0_15, DYNAMODB, id="hudi-0.15-dynamodb"),
    pytest.param(HUDI_1_2_V9, ZOOKEEPER, id="hudi-1.2-zookeeper"),
]

ROWS = pa.schema([("id", pa.int64()), ("part", pa.string()), ("val", pa.int64()), ("ts", pa.int64())])
_COMPLETED_COMMIT = re.compile(r"^(\d+)(?:_\d+)?\.commit$")


# -- the two sides -------------------------------------------------------------------------------------------


def _lock_options(request: pytest.FixtureRequest, kind: str) -> dict[str, str]:
    """The writers' lock set-up of ``kind`` on the session's server (only that server is started)."""
    if kind == DYNAMODB:
        return dynamodb_lock_options(request.getfixturevalue("dynamodb_server"))
    return zookeeper_lock_options(request.getfixturevalue("zookeeper_server"))


def _writer_options(setup: HudiSetup, table: str, lock: Mapping[str, str]) -> dict[str, str]:
    return s3_writer_options(setup, table, lock, extra={
        **setup.table_version_options,
        "hoodie.write.lock.wait_time_ms": str(LEASE_MS),
        "hoodie.write.lock.client.wait_time_ms_between_retry": "500",  # LockManager's sleep between tryLocks
    })


def _daemon_provider(props: Mapping[str, str], storage_uri: str, options: Mapping[str, str] | None = None
                     ) -> LockProvider:
    """The daemon's provider of the lock ``props`` name, built as the daemon builds it."""
    return lock_provider_from_properties(props, open_storage(StorageSpec(storage_uri, dict(options or {}))))


class _Waiter:
    """The daemon's ``acquire`` on a thread, and when (monotonic) it returned or raised."""

    def __init__(self, provider: LockProvider, timeout_s: float) -> None:
        self.lease: Lease | None = None
        self.error: BaseException | None = None
        self.done_at = 0.0
        self._thread = threading.Thread(target=self._run, args=(provider, timeout_s), daemon=True)
        self._thread.start()

    def _run(self, provider: LockProvider, timeout_s: float) -> None:
        try:
            self.lease = provider.acquire(timeout_s=timeout_s)
        except BaseException as exc:  # handed to the test thread
            self.error = exc
        self.done_at = time.monotonic()

    def waiting(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout_s: float) -> Lease:
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"the daemon's acquire did not return within {timeout_s} s"
        if self.error is not None:
            raise self.error
        assert self.lease is not None
        return self.lease


def _release_later(lease: Lease, after_s: float, released: dict[str, float],
                   before_release: Callable[[], None] | None = None) -> threading.Thread:
    """Release ``lease`` on a thread ``after_s`` from now (verifying it first); ``released`` gets the monotonic
    times around the release."""

    def run() -> None:
        time.sleep(after_s)
        if before_release is not None:
            before_release()
        lease.verify()  # held all along: the other side never took it
        released["start"] = time.monotonic()
        lease.release()
        released["end"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# -- what the lock servers hold ------------------------------------------------------------------------------


def _holders(request: pytest.FixtureRequest, kind: str, table: str) -> list[str]:
    """Who holds or queues for the table's lock on its server: the DynamoDB item's ``ownerName`` (none when there
    is no item), or the children of the ZooKeeper lock path (each holder's or waiter's node)."""
    if kind == DYNAMODB:
        return dynamodb_lock_owners(request.getfixturevalue("dynamodb_server").client(), table)
    zk = request.getfixturevalue("zookeeper_server").client()
    try:
        return zookeeper_lock_nodes(zk, table)
    finally:
        zk.stop()
        zk.close()


def _unique_table(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


# -- exclusion, both ways ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("setup", "kind"), LOCK_CASES)
def test_the_daemon_waits_while_hudi_holds_the_lock(setup: HudiSetup, kind: str, s3_hudi: Callable[[HudiSetup],
                                                    HudiWorker], request: pytest.FixtureRequest,
                                                    tmp_path: Path) -> None:
    # Given Hudi's own provider holding a table's lock, and the daemon's provider of the same lock keys
    hudi = s3_hudi(setup)
    table = _unique_table("hudi_first")
    props = lock_props(_writer_options(setup, table, _lock_options(request, kind)), str(tmp_path))
    daemon = _daemon_provider(props, str(tmp_path))
    hudi.lock_acquire(props, name=table)
    try:
        hudi_holders = _holders(request, kind, table)
        assert len(hudi_holders) == 1, hudi_holders
        # When the daemon asks for it, for longer than a DynamoDB lease
        started = time.monotonic()
        with pytest.raises(LockError):
            daemon.acquire(timeout_s=DAEMON_WAIT_S)
        # Then it waited the whole time and gave up, leaving Hudi's holding as it was (no node of its own)
        assert time.monotonic() - started >= DAEMON_WAIT_S * 0.95
        assert _holders(request, kind, table) == hudi_holders
        # And a daemon that waits gets the lock once Hudi releases it, not before
        waiter = _Waiter(daemon, timeout_s=60)
        time.sleep(1.5)
        assert waiter.waiting()
        released = hudi.lock_release(name=table)
    except BaseException:
        with contextlib.suppress(HudiRequestError):
            hudi.lock_release(name=table)
        raise
    lease = waiter.join(30)
    try:
        assert waiter.done_at >= released["started_at"]
        handover = waiter.done_at - released["started_at"]
        print(f"{setup.name} {kind}: the waiting daemon held the lock {handover:.3f} s after Hudi's unlock began")
        assert handover < HANDOVER_S
        lease.verify()
        assert len(_holders(request, kind, table)) == 1
    finally:
        lease.release()
    assert _holders(request, kind, table) == []


@pytest.mark.parametrize(("setup", "kind"), LOCK_CASES)
def test_hudi_waits_while_the_daemon_holds_the_lock(setup: HudiSetup, kind: str, s3_hudi: Callable[[HudiSetup],
                                                    HudiWorker], request: pytest.FixtureRequest,
                                                    tmp_path: Path) -> None:
    # Given the daemon holding a table's lock
    hudi = s3_hudi(setup)
    table = _unique_table("daemon_first")
    props = lock_props(_writer_options(setup, table, _lock_options(request, kind)), str(tmp_path))
    lease = _daemon_provider(props, str(tmp_path)).acquire(timeout_s=30)
    released: dict[str, float] = {}
    try:
        daemon_holders = _holders(request, kind, table)
        assert len(daemon_holders) == 1, daemon_holders
        # When Hudi's provider tries it (a DynamoDB tryLock also waits out the daemon's lease)
        tried = hudi.lock_try(props, timeout_ms=2000)
        # Then it does not get it, and the daemon's lock is untouched
        assert not tried["acquired"], tried
        assert tried["waited_s"] >= 1.9
        lease.verify()
        assert _holders(request, kind, table) == daemon_holders
        # And a tryLock that waits gets the lock once the daemon releases it, not before
        holder = _release_later(lease, HOLD_S, released)
        waited = hudi.lock_try(props, timeout_ms=60000)
        holder.join(30)
    finally:
        if "start" not in released:
            lease.release()
    # (the worker's tryLock started and returned on the monotonic clock this process reads too)
    assert waited["acquired"], waited
    held_while_waiting = released["start"] - waited["started_at"]
    handover = waited["returned_at"] - released["start"]
    print(f"{setup.name} {kind}: Hudi's tryLock waited {waited['waited_s']:.3f} s, {held_while_waiting:.3f} s of "
          f"it while the daemon held the lock; it held the lock {handover:.3f} s after the daemon began its release")
    assert held_while_waiting >= 1.0
    assert waited["returned_at"] >= released["start"]
    assert handover < HANDOVER_S
    assert _holders(request, kind, table) == []  # Hudi released it at once (lock_try without hold)


# -- a Hudi writer's commit on S3 waits for the daemon's lock -------------------------------------------------


def _rows(version: int) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "part": f"p{i % 2}", "val": 100 * version + i, "ts": version}
                                 for i in range(20)], schema=ROWS)


def _completed_commits(s3: Any, uri: str) -> dict[str, datetime]:
    """The table's completed commits (``<requested time>`` -> the server's LastModified of the commit file), read
    from S3 (timeline layout 1 in ``.hoodie/``, layout 2 in ``.hoodie/timeline/``)."""
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    out: dict[str, datetime] = {}
    pages = s3.boto3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/.hoodie/")
    for page in pages:
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix) + len("/.hoodie/"):]
            name = rel[len("timeline/"):] if rel.startswith("timeline/") else rel
            match = _COMPLETED_COMMIT.match(name)
            if match and "/" not in name:
                out[match.group(1)] = obj["LastModified"]
    return out


@pytest.mark.parametrize(("setup", "kind"), WRITER_CASES)
def test_a_hudi_commit_on_s3_waits_for_the_daemons_lock(setup: HudiSetup, kind: str, s3_hudi: Callable[[HudiSetup],
                                                        HudiWorker], s3_server: Any,
                                                        request: pytest.FixtureRequest) -> None:
    # Given a table on S3 that Hudi wrote once, with the lock the writers share
    hudi = s3_hudi(setup)
    uri = s3_server.fresh_uri("locked")
    table = _unique_table("events")
    options = _writer_options(setup, table, _lock_options(request, kind))
    hudi.write_rows(_rows(0), s3a_uri(uri), {**options, "hoodie.datasource.write.operation": "insert"})
    first = _completed_commits(s3_server, uri)
    assert len(first) == 1, first
    # and the daemon holding that lock (its provider built from the same keys, on the table's storage)
    daemon = _daemon_provider(lock_props(options, s3a_uri(uri)), uri, s3_server.storage_options())
    lease = daemon.acquire(timeout_s=30)
    released: dict[str, float] = {}
    during: dict[str, dict[str, datetime]] = {}
    released_wall: list[datetime] = []

    def before_release() -> None:
        during["commits"] = _completed_commits(s3_server, uri)
        released_wall.append(datetime.now(UTC))

    # When Hudi upserts meanwhile, and the daemon releases the lock HOLD_S after the write started
    hold_s = 2 * HOLD_S
    holder = _release_later(lease, hold_s, released, before_release)
    started = time.monotonic()
    try:
        reply = hudi.write_rows(_rows(1), s3a_uri(uri), options)
    finally:
        holder.join(60)
        if "start" not in released:
            lease.release()
    ended = time.monotonic()
    # Then no commit completed while the daemon held the lock ...
    assert during["commits"] == first
    # ... the write took the whole hold and completed after the release, with one commit ...
    print(f"{setup.name} {kind}: Hudi's upsert took {reply['seconds']:.1f} s ({ended - started:.1f} s with the "
          f"request), the daemon holding the lock for the first {hold_s:.0f} s of it")
    assert started < released["start"] < ended
    assert reply["seconds"] >= hold_s - 1.0
    commits = _completed_commits(s3_server, uri)
    new = sorted(set(commits) - set(first))
    assert len(new) == 1, commits
    assert commits[new[0]] >= released_wall[0].replace(microsecond=0)  # S3 stamps whole seconds
    # ... whose rows read back exactly
    got = sorted(hudi.read(s3a_uri(uri), columns=["id", "part", "val", "ts"]).to_pylist(), key=lambda r: r["id"])
    assert got == _rows(1).to_pylist()
    # And nobody holds the lock afterwards
    assert _holders(request, kind, table) == []


# -- the harness on S3 (long run: the tests above write and read through it in every run) ---------------------


@pytest.mark.slow
@pytest.mark.parametrize(("setup", "kind"), WRITER_CASES)
def test_hudi_writes_and_reads_a_table_on_s3_under_its_lock(setup: HudiSetup, kind: str,
                                                            s3_hudi: Callable[[HudiSetup], HudiWorker],
                                                            s3_server: Any, request: pytest.FixtureRequest) -> None:
    hudi = s3_hudi(setup)
    uri = s3a_uri(s3_server.fresh_uri("smoke"))
    options = _writer_options(setup, _unique_table("events"), _lock_options(request, kind))
    for version in range(3):
        reply = hudi.write_rows(_rows(version).slice(0, 10 + 5 * version), uri, options)
        assert len(reply["instants"]) == 1, reply
    expected = {**{r["id"]: r for r in _rows(1).slice(0, 15).to_pylist()},
                **{r["id"]: r for r in _rows(2).to_pylist()}}
    got = hudi.read(uri, columns=["id", "part", "val", "ts"]).to_pylist()
    assert sorted(got, key=lambda r: r["id"]) == [expected[k] for k in sorted(expected)]
    assert len(reply["timeline"]) == 3
    # in the setup's table version
    bucket, _, key = uri[len("s3a://"):].partition("/")
    body = s3_server.boto3().get_object(Bucket=bucket, Key=f"{key}/.hoodie/hoodie.properties")["Body"].read()
    assert f"hoodie.table.version={setup.table_version}" in body.decode().splitlines()
