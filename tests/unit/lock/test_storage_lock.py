"""Hudi's storage-based lock on the in-memory storage (real create-if-absent and compare-and-swap), with injected
clocks: the wall clock that ``validUntil`` is read and written with, and the clock that ages a lease."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hudi_clusterd.errors import LockError, StorageError
from hudi_clusterd.lock import LocalMutexes, LockData, StorageLease, StorageLockProvider
from hudi_clusterd.lock.storage_lock_format import LOCK_FILE
from hudi_clusterd.retry import NO_RETRY
from hudi_clusterd.storage import FileInfo, MemoryStorage, PutMode, open_storage

T0 = 1_700_000_000.0
"""Wall-clock start of every test (seconds since the epoch)."""


class Clock:
    """A clock that moves only when told."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class RecordingStorage(MemoryStorage):
    """The in-memory storage, recording every ``put`` (``(mode, if_match, data)``) and failing the next
    ``unreachable`` of them with `StorageError` (a storage that cannot be reached), or every one with ``defect``."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.puts: list[tuple[PutMode, str | None, bytes]] = []
        self.unreachable = 0
        self.defect: Exception | None = None
        self._guard = threading.Lock()

    def put(self, rel: str, data: bytes, *, mode: PutMode = PutMode.OVERWRITE, if_match: str | None = None
            ) -> FileInfo | None:
        with self._guard:
            self.puts.append((mode, if_match, data))
            fail, self.unreachable = self.unreachable > 0, max(self.unreachable - 1, 0)
        if self.defect is not None:
            raise self.defect
        if fail:
            raise StorageError(f"put {self.full_path(rel)}: connection refused")
        return super().put(rel, data, mode=mode, if_match=if_match)

    def lock_data(self) -> LockData:
        return LockData.parse(self.read_bytes(LOCK_FILE), LOCK_FILE)


@pytest.fixture
def storage() -> Iterator[RecordingStorage]:
    volume = f"storage-lock-{uuid.uuid4().hex}"
    yield RecordingStorage(f"memory://{volume}/table")
    MemoryStorage.volumes.drop(volume)


@pytest.fixture
def wall() -> Clock:
    return Clock(T0)


@pytest.fixture
def elapsed() -> Clock:
    return Clock(1000.0)


Make = Callable[..., StorageLockProvider]


@pytest.fixture
def make(storage: RecordingStorage, wall: Clock, elapsed: Clock) -> Make:
    """Providers of the test's table; by default validity 30 s and renewals every 3 s, so that no heartbeat beats
    during a test unless it asks for a shorter interval."""

    def provider(*, validity_s: float = 30.0, renew_interval_s: float = 3.0, timeout_s: float = 0.0,
                 mutexes: LocalMutexes | None = None) -> StorageLockProvider:
        return StorageLockProvider(storage, validity_s=validity_s, renew_interval_s=renew_interval_s,
                                   timeout_s=timeout_s, clock=wall, elapsed=elapsed, retry_interval_s=0.05,
                                   release_retry=NO_RETRY, mutexes=mutexes)

    return provider


def other_writer(storage: RecordingStorage, valid_until_ms: int, *, owner: str = "hudi-writer",
                 expired: bool = False) -> None:
    """A lock file as another writer leaves it."""
    storage.put(LOCK_FILE, LockData(expired, valid_until_ms, owner).to_json())


def wait_until(condition: Callable[[], bool], timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_the_lock_file_is_hudis_json_and_the_release_expires_it_with_the_same_valid_until(
        storage: RecordingStorage, make: Make) -> None:
    lease = make().acquire()
    assert str(uuid.UUID(lease.owner)) == lease.owner
    assert storage.read_bytes(".hoodie/.locks/table_lock.json") == (
        f'{{"expired":false,"validUntil":1700000030000,"owner":"{lease.owner}"}}'.encode())
    lease.verify()
    lease.release()
    assert storage.read_bytes(LOCK_FILE) == (
        f'{{"expired":true,"validUntil":1700000030000,"owner":"{lease.owner}"}}'.encode())
    assert [f.name for f in storage.list_dir(".hoodie/.locks")] == ["table_lock.json"]  # never deleted
    with pytest.raises(LockError, match="not held"):
        lease.verify()


def test_the_first_holder_creates_the_file_and_later_writes_are_made_on_the_version_read(
        storage: RecordingStorage, make: Make) -> None:
    provider = make()
    lease = provider.acquire()
    created = lease.version
    assert storage.puts[-1][:2] == (PutMode.CREATE, None)
    assert lease.renew()
    assert storage.puts[-1][:2] == (PutMode.OVERWRITE, created)
    renewed = lease.version
    lease.release()
    assert storage.puts[-1][:2] == (PutMode.OVERWRITE, renewed)
    released = storage.info(LOCK_FILE)
    assert released is not None
    again = provider.acquire()
    assert storage.puts[-1][:2] == (PutMode.OVERWRITE, released.version)
    again.release()


def test_a_lock_counts_as_held_until_500_ms_past_valid_until(storage: RecordingStorage, make: Make,
                                                             wall: Clock) -> None:
    other_writer(storage, 1_700_000_010_000)
    provider = make()
    for late_s in (0.0, 0.4, 0.5):
        wall.t = T0 + 10 + late_s
        with pytest.raises(LockError, match=r"timed out after 0s waiting for the table lock \(held by hudi-writer "
                                            r"until 2023-11-14T22:13:30\.000\+00:00\)"):
            provider.acquire()
    wall.t = T0 + 10.6
    with provider.acquire() as lease:
        assert storage.lock_data() == LockData(False, 1_700_000_040_600, lease.owner)


@pytest.mark.parametrize(("valid_until_ms", "expired"), [(1_699_999_990_000, False), (1_700_000_100_000, True)],
                         ids=["run-out", "released"])
def test_a_lock_nobody_holds_is_taken_over_on_the_version_read(storage: RecordingStorage, make: Make,
                                                               valid_until_ms: int, expired: bool) -> None:
    other_writer(storage, valid_until_ms, expired=expired)
    found = storage.info(LOCK_FILE)
    assert found is not None
    with make().acquire() as lease:
        assert storage.puts[-1][:2] == (PutMode.OVERWRITE, found.version)
        assert storage.lock_data() == LockData(False, 1_700_000_030_000, lease.owner)


def test_a_file_written_by_hudi_is_read_whatever_its_field_order_and_extra_fields(storage: RecordingStorage,
                                                                                  make: Make, wall: Clock) -> None:
    owner = "6f7d2c1e-0b7a-4a55-9a8e-3d8f1f0c2b11"
    storage.put(LOCK_FILE, json.dumps({"owner": owner, "lockAuditId": 7, "validUntil": 1_700_000_005_000,
                                       "extra": {"nested": [1, 2]}, "expired": False}, indent=2).encode())
    provider = make()
    found = provider.read()
    assert found is not None and found[0] == LockData(False, 1_700_000_005_000, owner)
    with pytest.raises(LockError, match=f"held by {owner}"):
        provider.acquire()
    wall.t = T0 + 6
    with provider.acquire() as lease:
        lease.verify()


@pytest.mark.parametrize(("body", "problem"), [
    (b"not json", "not JSON"),
    (b"[1]", "a JSON list, not an object"),
    (b'{"expired":false,"owner":"o"}', "'validUntil' is missing"),
    (b'{"expired":false,"validUntil":5,"owner":null}', "'owner' must be a string, got None"),
    (b'{"expired":"false","validUntil":5,"owner":"o"}', "'expired' must be true or false, got 'false'"),
    (b'{"expired":false,"validUntil":"5","owner":"o"}', "'validUntil' must be an integer (epoch ms), got '5'"),
    (b'{"expired":false,"validUntil":true,"owner":"o"}', "'validUntil' must be an integer (epoch ms), got True"),
    (b"{}", "'expired' is missing; 'validUntil' is missing; 'owner' is missing"),
])
def test_a_file_that_is_not_a_lock_is_refused_naming_it(storage: RecordingStorage, make: Make, body: bytes,
                                                        problem: str) -> None:
    storage.put(LOCK_FILE, body)
    provider = make(timeout_s=5)
    for _ in range(2):  # at once, not after the timeout; and the in-process mutex is given back
        started = time.monotonic()
        with pytest.raises(LockError) as caught:
            provider.acquire()
        assert time.monotonic() - started < 1
        assert str(caught.value).startswith(f"{storage.full_path(LOCK_FILE)}: not a lock file of Hudi's "
                                            "StorageBasedLockProvider (")
        assert problem in str(caught.value)
    assert storage.read_bytes(LOCK_FILE) == body


def test_a_storage_without_compare_and_swap_is_refused_when_the_lock_is_taken(tmp_path: Path) -> None:
    provider = StorageLockProvider(open_storage(str(tmp_path)), validity_s=3, renew_interval_s=0.3)
    with pytest.raises(LockError, match=r"this storage \(file\) cannot create a file atomically and compare and "
                                        r"swap it.*use FileSystemBasedLockProvider on a local or mounted file system"):
        provider.acquire()
    assert not list(tmp_path.iterdir())


def race_for_the_lock(providers: list[StorageLockProvider]) -> tuple[list[StorageLease], list[str]]:
    """Each provider tries once to take the lock, all in threads let go at once: the leases won, the errors."""
    start = threading.Barrier(len(providers))
    won: list[StorageLease] = []
    lost: list[str] = []

    def take(provider: StorageLockProvider) -> None:
        start.wait()
        try:
            won.append(provider.acquire())
        except LockError as e:
            lost.append(str(e))

    threads = [threading.Thread(target=take, args=(p,)) for p in providers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return won, lost


def test_eight_threads_racing_for_the_lock_have_exactly_one_winner(storage: RecordingStorage, make: Make,
                                                                    wall: Clock, elapsed: Clock) -> None:
    providers = [make() for _ in range(8)]
    winners: list[StorageLease] = []
    for race in range(4):  # the first race creates the file, the others overwrite a released or run-out lock
        won, lost = race_for_the_lock(providers)
        assert len(won) == 1 and len(lost) == 7, lost
        assert all("timed out" in e for e in lost)
        assert storage.lock_data().owner == won[0].owner
        won[0].verify()
        winners += won
        if race % 2:
            won[0].release()
        else:  # its holder paused until the lock ran out
            wall.t += 31
            elapsed.t += 31
    for lease in winners:
        lease.release()


def test_a_renewal_that_finds_another_writers_file_loses_the_lease_for_good(storage: RecordingStorage,
                                                                            make: Make, wall: Clock) -> None:
    provider = make()
    lease = provider.acquire()
    other_writer(storage, 1_700_000_100_000, owner="usurper")
    writes = len(storage.puts)
    assert not lease.renew()
    with pytest.raises(LockError, match=r"lost while held \(another writer changed or removed the lock file"):
        lease.verify()
    assert not lease.renew() and len(storage.puts) == writes + 1  # no more writes, the release's included
    lease.release()
    assert len(storage.puts) == writes + 1 and storage.lock_data().owner == "usurper"
    assert provider.stats.connection_retries == 0


def test_verify_sees_another_writers_file_before_any_renewal(storage: RecordingStorage, make: Make) -> None:
    lease = make().acquire()
    other_writer(storage, 1_700_000_100_000, owner="usurper")
    with pytest.raises(LockError, match="the lock file now names usurper"):
        lease.verify()
    storage.delete(LOCK_FILE)
    with pytest.raises(LockError, match="now names usurper"):  # lost for good, whatever comes next
        lease.verify()
    lease.release()
    assert not storage.exists(LOCK_FILE)


def test_a_paused_holder_fails_verify_and_never_renews_its_run_out_lease(storage: RecordingStorage, make: Make,
                                                                         elapsed: Clock) -> None:
    provider = make(validity_s=3, renew_interval_s=0.3)
    assert provider.lease_limit_s == pytest.approx(2.2)
    lease = provider.acquire()
    elapsed.t += 2.1
    assert lease.renew()  # within its time
    elapsed.t += 2.3  # then paused (SIGSTOP, a long GC) past the validity less the margins
    writes = len(storage.puts)
    assert not lease.renew()  # the heartbeat, woken first, checks before it writes
    assert len(storage.puts) == writes
    with pytest.raises(LockError, match=r"lost while held \(its last successful write started 2\.3s ago and a "
                                        r"lease lasts 3s\)"):
        lease.verify()
    lease.release()  # nobody took it: marked expired on the version it last wrote
    assert storage.lock_data() == LockData(True, lease.valid_until_ms, lease.owner)


def test_the_heartbeat_renews_and_stops_once_the_lease_ran_out(storage: RecordingStorage, make: Make,
                                                               elapsed: Clock) -> None:
    provider = make(validity_s=3, renew_interval_s=0.05)
    lease = provider.acquire()
    wait_until(lambda: len(storage.puts) >= 3)  # renewing
    lease.verify()
    elapsed.t += 3  # paused past the validity: its heartbeat wakes before anyone calls verify
    wait_until(lambda: lease.lost is not None)
    writes = len(storage.puts)
    time.sleep(0.25)
    assert len(storage.puts) == writes
    with pytest.raises(LockError, match="last successful write started"):
        lease.verify()
    lease.release()


def test_verify_fails_once_the_heartbeat_thread_died(storage: RecordingStorage, make: Make) -> None:
    lease = make(validity_s=3, renew_interval_s=0.05).acquire()
    storage.defect = RuntimeError("a defect")
    deadline = time.monotonic() + 3
    while True:
        try:
            lease.verify()
        except LockError as e:
            assert "lost while held (its heartbeat thread died: RuntimeError('a defect'))" in str(e)
            break
        assert time.monotonic() < deadline, "verify kept passing"
        time.sleep(0.01)
    storage.defect = None
    lease.release()


def test_an_unreachable_storage_is_tried_again_and_counted_until_the_lease_runs_out(
        storage: RecordingStorage, make: Make, elapsed: Clock) -> None:
    provider = make(validity_s=3, renew_interval_s=0.3, timeout_s=2)
    storage.unreachable = 1
    lease = provider.acquire()  # its first attempt could not write
    assert provider.stats.connection_retries == 1
    storage.unreachable = 2
    assert not lease.renew() and not lease.renew()
    lease.verify()  # still within its time
    assert lease.renew() and provider.stats.connection_retries == 3
    storage.unreachable = 100
    elapsed.t += 2.0
    assert not lease.renew()
    elapsed.t += 0.3
    assert not lease.renew()
    with pytest.raises(LockError, match="lost while held"):
        lease.verify()
    assert provider.stats.connection_retries == 4  # the last renewal was not even tried
    lease.release()  # could not be written either: left to run out
    assert provider.stats.connection_retries == 5
    assert storage.lock_data().expired is False


def test_every_write_changes_the_files_bytes_even_when_the_wall_clock_stands_still_or_goes_back(
        storage: RecordingStorage, make: Make, wall: Clock) -> None:
    lease = make().acquire()
    for step in (0.0, 0.0, -5.0, 0.0):
        wall.t += step
        assert lease.renew()
    lease.release()
    bodies = [json.loads(data) for _, _, data in storage.puts]
    assert len({json.dumps(b) for b in bodies}) == len(bodies) == 6
    valid_until = [b["validUntil"] for b in bodies]
    assert valid_until == [1_700_000_030_000 + i for i in range(5)] + [1_700_000_030_004]
    assert [b["expired"] for b in bodies] == [False] * 5 + [True]


def test_threads_of_one_process_queue_on_its_mutex(storage: RecordingStorage, make: Make) -> None:
    mutexes = LocalMutexes()
    first, second = make(mutexes=mutexes), make(mutexes=mutexes, timeout_s=0.1)
    with first.acquire(), pytest.raises(LockError, match="waiting for another thread of this process"):
        second.acquire()
    with second.acquire() as lease:
        lease.verify()


def test_times_that_leave_no_margin_are_refused(storage: RecordingStorage) -> None:
    with pytest.raises(LockError, match=r"the validity \(1s\) must exceed the renew interval \(0\.5s"):
        StorageLockProvider(storage, validity_s=1, renew_interval_s=0.5)
