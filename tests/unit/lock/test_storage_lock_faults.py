"""The storage lock under the faults object stores really produce (`tests.harness.fault_injection`), at each of its
writes: the acquisition's create, a renewal and the release, on the in-memory storage and on the object storage
over obstore's in-memory store (both with real create-if-absent and compare-and-swap).

For every fault the lock reaches what a correct writer reaches: it carries on (a write whose reply was lost landed:
it is ours), or tries again (refused, throttled, not sent), or gives the lock up (the other writer won). It never
waits for its own lock, never declares its lease lost to itself, never skips its release, and the lock is free at
the end. ``unsettled`` is a write that landed while both its reply and the storage's read-back were lost: the
storage cannot settle it, so the lock recognises it by its own owner.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hudi_clusterd.errors import TransientStorageError
from hudi_clusterd.lock import LockData, StorageLease, StorageLockProvider
from hudi_clusterd.lock.storage_lock_format import LOCK_FILE
from hudi_clusterd.retry import NO_RETRY, RetryPolicy
from hudi_clusterd.storage import FileInfo, MemoryStorage, ObjectStorage, PutMode, Storage, StorageSpec, open_storage
from tests.harness.fault_injection import Fault, FaultLog, Rule, inject

UNSETTLED = "unsettled"
FAULTS = [*Fault, UNSETTLED]
RELEASE_RETRY = RetryPolicy(deadline_s=1.0, first_s=0.0, cap_s=0.0, jitter_s=0.0, sleep=lambda _s: None)


class Hooks:
    """What a test's storage does besides storing: ``after_put`` runs once after the next put landed, and the next
    ``lost_reads`` reads of the lock file's info fail as unanswered."""

    def __init__(self) -> None:
        self.after_put: Callable[[], None] | None = None
        self.lost_reads = 0


def hooked(storage: Storage, hooks: Hooks) -> Storage:
    """``storage`` running ``hooks`` (its class becomes a subclass; `inject` may wrap it further)."""
    base: type[Any] = type(storage)

    def _put(self: Storage, rel: str, data: bytes, *, mode: PutMode, if_match: str | None) -> FileInfo | None:
        written: FileInfo | None = base._put(self, rel, data, mode=mode, if_match=if_match)
        hook, hooks.after_put = hooks.after_put, None
        if hook is not None:
            hook()
        return written

    def info(self: Storage, rel: str) -> FileInfo | None:
        if rel == LOCK_FILE and hooks.lost_reads > 0:
            hooks.lost_reads -= 1
            raise TransientStorageError(f"head {rel}: timed out waiting for the answer (injected)")
        found: FileInfo | None = base.info(self, rel)
        return found

    storage.__class__ = type(f"Hooked{base.__name__}", (base,), {"_put": _put, "info": info})
    return storage


def memory(name: str) -> Storage:
    return MemoryStorage(f"memory://{name}/table")


def object_memory(name: str) -> Storage:
    return open_storage(StorageSpec(f"s3://{name}/table", {"store": "memory"}))


@pytest.fixture(params=[memory, object_memory], ids=["memory", "object-memory"])
def storage(request: pytest.FixtureRequest) -> Iterator[tuple[Storage, FaultLog, Hooks]]:
    name = f"lock-faults-{uuid.uuid4().hex[:12]}"
    hooks = Hooks()
    target = hooked(request.param(name), hooks)
    faults = inject(target)
    yield target, faults, hooks
    MemoryStorage.volumes.drop(name)
    ObjectStorage.memory_buckets.drop(name)


def provider(storage: Storage, *, timeout_s: float = 5.0) -> StorageLockProvider:
    """Renewals every 3 s (none during a test: they are made by hand), attempts 10 ms apart."""
    return StorageLockProvider(storage, validity_s=30.0, renew_interval_s=3.0, timeout_s=timeout_s,
                               retry_interval_s=0.01, release_retry=RELEASE_RETRY)


def arm(fault: Fault | str, storage: Storage, faults: FaultLog, hooks: Hooks) -> None:
    """The next lock file put fails with ``fault``."""
    if fault == UNSETTLED:
        storage.retry = NO_RETRY  # type: ignore[misc]  # the storage's own settling gets one try, and fails
        hooks.after_put = lambda: setattr(hooks, "lost_reads", 1)  # its read-back
        faults.rules.append(Rule(Fault.REPLY_LOST, LOCK_FILE))
    else:
        assert isinstance(fault, Fault)
        faults.rules.append(Rule(fault, LOCK_FILE))


def lock_file(storage: Storage) -> LockData:
    return LockData.parse(storage.read_bytes(LOCK_FILE), LOCK_FILE)


def assert_free(storage: Storage) -> None:
    storage.retry = NO_RETRY  # type: ignore[misc]
    with provider(storage, timeout_s=0.0).acquire() as other:
        other.verify()


def retried_by_the_lock(fault: Fault | str) -> int:
    """Tries the lock itself makes again: a refusal (the storage does not retry it) and a write nobody could
    settle."""
    return 1 if fault in (Fault.REFUSED, UNSETTLED) else 0


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f if isinstance(f, str) else f.name.lower())
def test_an_acquisition_whose_write_fails_holds_its_lock_and_never_waits_for_it(
        storage: tuple[Storage, FaultLog, Hooks], fault: Fault | str) -> None:
    target, faults, hooks = storage
    locks = provider(target)
    arm(fault, target, faults, hooks)
    started = time.monotonic()
    lease = locks.acquire()
    try:
        # Then the lock is held at once (never waited for up to the timeout as if another writer held it)
        assert time.monotonic() - started < 2.0
        assert [f for f, _op, _rel in faults.fired] == [Fault.REPLY_LOST if fault == UNSETTLED else fault]
        assert lock_file(target).owner == lease.owner and not lock_file(target).expired
        assert target.info(LOCK_FILE).version == lease.version  # type: ignore[union-attr]
        lease.verify()
        assert locks.stats.connection_retries == retried_by_the_lock(fault)
    finally:
        lease.release()
    assert lock_file(target).expired and locks.stats.leases_lost == 0
    assert_free(target)


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f if isinstance(f, str) else f.name.lower())
def test_a_renewal_whose_write_fails_is_never_a_lease_lost_to_itself(
        storage: tuple[Storage, FaultLog, Hooks], fault: Fault | str) -> None:
    target, faults, hooks = storage
    locks = provider(target)
    lease = locks.acquire()
    assert isinstance(lease, StorageLease)
    try:
        before = lease.valid_until_ms
        time.sleep(0.002)  # a later validUntil
        arm(fault, target, faults, hooks)
        renewed = lease.renew()
        # Then the renewal carried on (it landed), or failed unanswered and the next one is made on whatever landed
        assert renewed is (retried_by_the_lock(fault) == 0)
        if not renewed:
            assert lease.renew()
        assert lease.lost is None
        lease.verify()
        assert lock_file(target).owner == lease.owner and lock_file(target).valid_until_ms == lease.valid_until_ms
        assert lease.valid_until_ms > before
        assert target.info(LOCK_FILE).version == lease.version  # type: ignore[union-attr]
    finally:
        lease.release()
    # And the release was not skipped
    assert lock_file(target).expired and lock_file(target).owner == lease.owner
    assert (locks.stats.leases_lost, locks.stats.connection_retries) == (0, retried_by_the_lock(fault))
    assert_free(target)


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f if isinstance(f, str) else f.name.lower())
def test_a_release_whose_write_fails_still_frees_the_lock(storage: tuple[Storage, FaultLog, Hooks],
                                                          fault: Fault | str) -> None:
    target, faults, hooks = storage
    locks = provider(target)
    lease = locks.acquire()
    arm(fault, target, faults, hooks)
    lease.release()
    assert faults.fired
    assert lock_file(target) == LockData(True, lease.valid_until_ms, lease.owner)
    assert locks.stats.leases_lost == 0
    assert_free(target)


def test_a_renewal_whose_reply_was_lost_after_another_writer_took_the_lock_gives_it_up(
        storage: tuple[Storage, FaultLog, Hooks]) -> None:
    # Given a renewal that landed, after which another writer took the lock over, and whose reply was lost
    target, faults, hooks = storage
    locks = provider(target)
    lease = locks.acquire()
    thief = LockData(False, lease.valid_until_ms + 60_000, "thief").to_json()
    hooks.after_put = lambda: target.put(LOCK_FILE, thief)
    faults.rules.append(Rule(Fault.REPLY_LOST, LOCK_FILE))
    # Then the other writer won: the lease is lost (counted once) and its release leaves the thief's lock alone
    assert not lease.renew()
    assert lease.lost is not None and locks.stats.leases_lost == 1
    lease.release()
    assert lock_file(target).owner == "thief" and not lock_file(target).expired
