"""What every table lock provider promises (:class:`hudi_clusterd.lock.provider.LockProvider`).

Each test runs once per implementation in ``IMPLEMENTATIONS``: a function that, given the test's request (for the
servers it needs), returns a builder of a provider of one table (``table``, a fresh folder) with a timeout, a
stale time (after which a holder that stopped refreshing its lease is dead) and a clock (seconds) by which the
provider ages the leases of others. Two providers of one table stand for two handles of it (two processes, or two
handles in one). A new implementation joins by adding its function to ``IMPLEMENTATIONS``.

A handle ages another's lease from when it first found it held, or earlier: a lock file by its modification time,
a DynamoDB item by how long its record version stayed the same in the handle's eyes. So before a test moves a
handle's clock past the stale time, that handle finds the lock held once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pytest

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock import FileSystemLockProvider, LockOptions, LockProvider
from hudi_clusterd.lock.dynamodb import DynamoDBLockProvider
from hudi_clusterd.lock.dynamodb_config import dynamodb_lock_config
from hudi_clusterd.storage import open_storage

STALE_S = 60.0
"""Long enough that no holder refreshes its lease during a test; a clock moved past it ages a lease instead."""


class Builder(Protocol):
    def __call__(self, table: Path, *, timeout_s: float, stale_s: float, clock: Callable[[], float]
                 ) -> LockProvider: ...


def file_system_lock(table: Path, *, timeout_s: float, stale_s: float, clock: Callable[[], float]) -> LockProvider:
    options = LockOptions(timeout_s=timeout_s, stale_s=stale_s)
    return FileSystemLockProvider(open_storage(str(table)), options, clock=clock)


def file_system(request: pytest.FixtureRequest) -> Builder:
    return file_system_lock


def dynamodb(request: pytest.FixtureRequest) -> Builder:
    """DynamoDB's lock on moto's server, its lease the stale time: a holder renews it every third of it."""
    server = request.getfixturevalue("dynamodb_server")

    def dynamodb_lock(table: Path, *, timeout_s: float, stale_s: float, clock: Callable[[], float]) -> LockProvider:
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

    return dynamodb_lock


IMPLEMENTATIONS = [pytest.param(file_system, id="file-system"), pytest.param(dynamodb, id="dynamodb")]


class Clock:
    """Wall-clock time moved by ``ahead_s``."""

    def __init__(self) -> None:
        self.ahead_s = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead_s


@pytest.fixture(params=IMPLEMENTATIONS)
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., LockProvider]:
    """Builds providers of one table: ``make(timeout_s=..., clock=...)``."""
    build: Builder = request.param(request)

    def provider(*, timeout_s: float = 5.0, stale_s: float = STALE_S,
                 clock: Callable[[], float] = time.time) -> LockProvider:
        return build(tmp_path, timeout_s=timeout_s, stale_s=stale_s, clock=clock)

    return provider


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


def test_a_lease_not_refreshed_for_the_stale_time_is_taken_over(make: Callable[..., LockProvider]) -> None:
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
        # And past it another handle takes the lock over
        late.ahead_s = STALE_S + 5
        with other.acquire() as taken:
            taken.verify()
    finally:
        lease.release()


def test_verify_fails_once_another_holder_took_the_lock_over(make: Callable[..., LockProvider]) -> None:
    late = Clock()
    holder, other = make(), make(clock=late)
    lease = holder.acquire()
    with pytest.raises(LockError, match="timed out"):
        other.acquire(timeout_s=0.0)
    late.ahead_s = STALE_S + 5
    taken = other.acquire()
    try:
        with pytest.raises(LockError, match="lost while held"):
            lease.verify()
        with pytest.raises(LockError):  # and it stays lost
            lease.verify()
        taken.verify()
    finally:
        lease.release()
        taken.release()


def test_a_release_after_the_loss_leaves_the_new_holders_lock_alone(make: Callable[..., LockProvider]) -> None:
    late = Clock()
    holder, other, third = make(), make(clock=late), make(timeout_s=0.2)
    lease = holder.acquire()
    with pytest.raises(LockError, match="timed out"):
        other.acquire(timeout_s=0.0)
    late.ahead_s = STALE_S + 5
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
