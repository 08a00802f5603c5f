"""What every table lock provider promises (:class:`hudi_clusterd.lock.provider.LockProvider`).

Each test runs once per implementation in ``IMPLEMENTATIONS``: a function that builds a provider of one table
(``table``, a fresh folder) with a timeout, a stale time (after which a holder that stopped refreshing its lease
is dead) and a clock (seconds since the epoch) by which the provider ages the leases of others, and a function
that makes a holder's lease die as it dies in that implementation (``late``, the clock of the other handles,
moved past the stale time; or the holder's ZooKeeper session expired). Two providers of one table stand for two
handles of it (two processes, or two handles in one). A new implementation joins by adding its ``Implementation``
to ``IMPLEMENTATIONS``; its builder gets the test's fixtures through ``request`` (e.g. a server's).

A handle ages another's lease from when it first found it held, or earlier: a lock file by its modification time,
a DynamoDB item by how long its record version stayed the same in the handle's eyes. So before a test moves a
handle's clock past the stale time, that handle finds the lock held once.

The storage lock (Hudi's ``StorageBasedLockProvider``) runs on every storage with conditional writes: one
``storage_lock(<opener>)`` entry per storage, where the opener gives the storage of ``table`` (every call for one
``table`` the same place).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock import (
    FileSystemLockProvider,
    Lease,
    LockOptions,
    LockProvider,
    StorageLockProvider,
    lock_provider_from_properties,
)
from hudi_clusterd.lock.dynamodb import DynamoDBLockProvider
from hudi_clusterd.lock.dynamodb_config import dynamodb_lock_config
from hudi_clusterd.lock.zookeeper import ZooKeeperLease
from hudi_clusterd.storage import MemoryStorage, ObjectStorage, Storage, StorageSpec, open_storage
from tests.harness.zookeeper_locks import expire_session

STALE_S = 60.0
"""Long enough that no holder refreshes its lease during a test; a clock moved past it ages a lease instead."""


class Clock:
    """Wall-clock time moved by ``ahead_s``."""

    def __init__(self) -> None:
        self.ahead_s = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead_s


class Builder(Protocol):
    def __call__(self, table: Path, *, timeout_s: float, stale_s: float, clock: Callable[[], float],
                 request: pytest.FixtureRequest) -> LockProvider: ...


@dataclass(frozen=True)
class Implementation:
    build: Builder
    kill: Callable[[Lease, Clock, pytest.FixtureRequest], None]
    """Make a holder's lease die (``late`` is the clock of the handles that then take the lock)."""
    takes_over: bool = True
    """Whether the provider itself takes a dead holder's lock over (and counts it); ZooKeeper's server does, by
    ending the dead session."""


def file_system_lock(table: Path, *, timeout_s: float, stale_s: float, clock: Callable[[], float],
                     request: pytest.FixtureRequest) -> LockProvider:
    options = LockOptions(timeout_s=timeout_s, stale_s=stale_s)
    return FileSystemLockProvider(open_storage(str(table)), options, clock=clock)


def age_past_the_stale_time(lease: Lease, late: Clock, request: pytest.FixtureRequest) -> None:
    late.ahead_s = STALE_S + 5  # the holder's refreshes stand still on the other handles' clock


def zookeeper_lock(table: Path, *, timeout_s: float, stale_s: float, clock: Callable[[], float],
                   request: pytest.FixtureRequest) -> LockProvider:
    server: Any = request.getfixturevalue("zookeeper_server")
    props = {"hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider",
             "hoodie.write.lock.zookeeper.url": server.connect,
             "hoodie.write.lock.zookeeper.base_path": f"/contract/{table.name}",
             "hoodie.write.lock.zookeeper.lock_key": "t",
             "hoodie.write.lock.zookeeper.connection_timeout_ms": "5000"}
    return lock_provider_from_properties(props, open_storage(str(table)), timeout_s=timeout_s, stale_s=stale_s)


def expire_the_session(lease: Lease, late: Clock, request: pytest.FixtureRequest) -> None:
    assert isinstance(lease, ZooKeeperLease)
    expire_session(request.getfixturevalue("zookeeper_server").connect, lease.session)


StorageOpener = Callable[[pytest.FixtureRequest, Path], Storage]
"""The storage of one test's table (the same place on every call for one ``table``)."""


def storage_lock(open_table: StorageOpener) -> Builder:
    """Builds Hudi's storage lock on the storage ``open_table`` gives: the stale time is the lock's validity
    (renewed ten times per validity, Hudi's tightest ratio), attempts are 50 ms apart instead of Hudi's second."""

    def build(table: Path, *, timeout_s: float, stale_s: float, clock: Callable[[], float],
              request: pytest.FixtureRequest) -> LockProvider:
        return StorageLockProvider(open_table(request, table), validity_s=stale_s, renew_interval_s=stale_s / 10,
                                   timeout_s=timeout_s, clock=clock, retry_interval_s=0.05)

    return build


def memory_storage(request: pytest.FixtureRequest, table: Path) -> Storage:
    volume = f"lock-contract-{uuid.uuid5(uuid.NAMESPACE_URL, str(table)).hex}"
    request.addfinalizer(lambda: MemoryStorage.volumes.drop(volume))
    return MemoryStorage(f"memory://{volume}/table")


def object_memory_storage(request: pytest.FixtureRequest, table: Path) -> Storage:
    """The object storage over obstore's in-memory store, a bucket per table."""
    bucket = f"lock-contract-{uuid.uuid5(uuid.NAMESPACE_URL, str(table)).hex}"
    request.addfinalizer(lambda: ObjectStorage.memory_buckets.drop(bucket))
    return open_storage(StorageSpec(f"s3://{bucket}/table", {"store": "memory"}))


def s3_storage(request: pytest.FixtureRequest, table: Path) -> Storage:
    """The object storage on the session's SeaweedFS server, a prefix per table."""
    server: Any = request.getfixturevalue("s3_server")
    prefix = f"lock-contract-{uuid.uuid5(uuid.NAMESPACE_URL, str(table)).hex}"
    return open_storage(StorageSpec(f"s3://{server.bucket}/{prefix}", server.storage_options()))


def azurite_storage(request: pytest.FixtureRequest, table: Path) -> Storage:
    """The object storage on the session's Azurite server (Azure Blob Storage), a prefix per table."""
    server: Any = request.getfixturevalue("azurite_server")
    prefix = f"lock-contract-{uuid.uuid5(uuid.NAMESPACE_URL, str(table)).hex}"
    uri = server.fresh_uri(prefix).rsplit("-", 1)[0]  # the same place on every call for one table
    return open_storage(StorageSpec(uri, server.storage_options()))


def dynamodb_lock(table: Path, *, timeout_s: float, stale_s: float, clock: Callable[[], float],
                  request: pytest.FixtureRequest) -> LockProvider:
    """DynamoDB's lock on moto's server, its lease the stale time: a holder renews it every third of it."""
    server: Any = request.getfixturevalue("dynamodb_server")
    config, problems = dynamodb_lock_config({
        "hoodie.write.lock.dynamodb.endpoint_url": server.endpoint,
        "hoodie.write.lock.dynamodb.region": server.region,
        "hoodie.write.lock.dynamodb.table": "contract_locks",
        "hoodie.write.lock.dynamodb.partition_key": f"contract:{table}",
        "hoodie.write.lock.wait_time_ms": str(round(stale_s * 1000)),
        "hoodie.aws.access.key": server.access_key,
        "hoodie.aws.secret.key": server.secret_key,
    })
    assert config is not None, problems
    return DynamoDBLockProvider(config, timeout_s=timeout_s, clock=clock)


IMPLEMENTATIONS = [
    pytest.param(Implementation(file_system_lock, age_past_the_stale_time), id="file-system"),
    pytest.param(Implementation(dynamodb_lock, age_past_the_stale_time), id="dynamodb"),
    pytest.param(Implementation(zookeeper_lock, expire_the_session, takes_over=False), id="zookeeper"),
    pytest.param(Implementation(storage_lock(memory_storage), age_past_the_stale_time), id="storage-memory"),
    pytest.param(Implementation(storage_lock(object_memory_storage), age_past_the_stale_time),
                 id="storage-object-memory"),
    pytest.param(Implementation(storage_lock(s3_storage), age_past_the_stale_time), id="storage-s3-seaweedfs"),
    pytest.param(Implementation(storage_lock(azurite_storage), age_past_the_stale_time), id="storage-azure-azurite"),
]


@pytest.fixture(params=IMPLEMENTATIONS)
def implementation(request: pytest.FixtureRequest) -> Implementation:
    impl: Implementation = request.param
    return impl


@pytest.fixture
def make(implementation: Implementation, request: pytest.FixtureRequest,
         tmp_path: Path) -> Callable[..., LockProvider]:
    """Builds providers of one table: ``make(timeout_s=..., clock=...)``."""

    def provider(*, timeout_s: float = 5.0, stale_s: float = STALE_S,
                 clock: Callable[[], float] = time.time) -> LockProvider:
        return implementation.build(tmp_path, timeout_s=timeout_s, stale_s=stale_s, clock=clock, request=request)

    return provider


@pytest.fixture
def kill(implementation: Implementation, request: pytest.FixtureRequest) -> Callable[[Lease, Clock], None]:
    """Makes a holder's lease die: ``kill(lease, late)``."""
    return lambda lease, late: implementation.kill(lease, late, request)


def test_a_lease_is_verified_while_held_and_not_after_release(make: Callable[..., LockProvider]) -> None:
    provider = make()
    lease = provider.acquire()
    lease.verify()
    assert lease.owner
    lease.release()
    with pytest.raises(LockError):
        lease.verify()
    lease.release()  # a second release does nothing
    with provider.acquire(timeout_s=0.5) as again:  # given back: taken again at once
        again.verify()
        assert again.owner != lease.owner


def test_a_held_lock_makes_another_handle_time_out_then_lets_it_in(make: Callable[..., LockProvider]) -> None:
    first, second = make(), make(timeout_s=0.3)
    with first.acquire():
        started = time.monotonic()
        with pytest.raises(LockError, match="timed out"):
            second.acquire()
        assert time.monotonic() - started >= 0.3
        with pytest.raises(LockError, match="timed out"):
            second.acquire(timeout_s=0.0)
    with second.acquire() as lease:
        lease.verify()


def test_handles_in_threads_exclude_each_other(make: Callable[..., LockProvider]) -> None:
    providers = [make(timeout_s=20), make(timeout_s=20)]
    inside, max_inside, entered = 0, 0, 0
    guard = threading.Lock()
    errors: list[BaseException] = []

    def work(provider: LockProvider) -> None:
        nonlocal inside, max_inside, entered
        try:
            for _ in range(2):
                with provider.acquire() as lease:
                    with guard:
                        inside += 1
                        entered += 1
                        max_inside = max(max_inside, inside)
                    time.sleep(0.01)
                    lease.verify()
                    with guard:
                        inside -= 1
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(providers[i % 2],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert (max_inside, entered) == (1, 8)


def test_a_lease_not_refreshed_for_the_stale_time_is_taken_over(make: Callable[..., LockProvider],
                                                                kill: Callable[[Lease, Clock], None]) -> None:
    # Given a holder that stopped refreshing its lease (its clock, and so its refreshes, stand still)
    late = Clock()
    holder, other = make(), make(timeout_s=5, clock=late)
    lease = holder.acquire()
    try:
        # Then another handle finds it held, and before the stale time it is still held
        with pytest.raises(LockError, match="timed out"):
            other.acquire(timeout_s=0.2)
        late.ahead_s = STALE_S / 2
        with pytest.raises(LockError, match="timed out"):
            other.acquire(timeout_s=0.2)
        # And once its lease died another handle takes the lock over
        kill(lease, late)
        with other.acquire() as taken:
            taken.verify()
    finally:
        lease.release()


def test_verify_fails_once_another_holder_took_the_lock_over(make: Callable[..., LockProvider],
                                                             kill: Callable[[Lease, Clock], None],
                                                             implementation: Implementation) -> None:
    late = Clock()
    holder, other = make(), make(clock=late)
    lease = holder.acquire()
    with pytest.raises(LockError, match="timed out"):  # a DynamoDB handle ages a lease from when it saw it
        other.acquire(timeout_s=0.0)
    kill(lease, late)
    taken = other.acquire()
    try:
        # And the take-over is counted by the handle that took it, the loss once by the one that lost it
        assert (other.stats.takeovers, other.stats.leases_lost) == (int(implementation.takes_over), 0)
        with pytest.raises(LockError, match="lost while held"):
            lease.verify()
        with pytest.raises(LockError):  # and it stays lost
            lease.verify()
        taken.verify()
        assert (holder.stats.leases_lost, holder.stats.takeovers) == (1, 0)
    finally:
        lease.release()
        taken.release()
    assert (holder.stats.leases_lost, other.stats.leases_lost) == (1, 0)


def test_a_release_after_the_loss_leaves_the_new_holders_lock_alone(make: Callable[..., LockProvider],
                                                                    kill: Callable[[Lease, Clock], None]) -> None:
    late = Clock()
    holder, other, third = make(), make(clock=late), make(timeout_s=0.2)
    lease = holder.acquire()
    with pytest.raises(LockError, match="timed out"):  # a DynamoDB handle ages a lease from when it saw it
        other.acquire(timeout_s=0.0)
    kill(lease, late)
    taken = other.acquire()
    lease.release()
    try:
        taken.verify()  # still held by the new holder
        with pytest.raises(LockError, match="timed out"):
            third.acquire()
    finally:
        taken.release()
    with third.acquire() as last:
        last.verify()
