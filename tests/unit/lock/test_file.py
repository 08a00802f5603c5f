from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.errors import LockError
from hudi_clusterd.lock import AUX_LOCK_FILE, LOCK_FILE, FileSystemLockProvider, LockOptions
from hudi_clusterd.storage import ObjectStorage, Storage, StorageSpec, open_storage
from tests.builders import TableGen

_HOLDER = """
import sys, time
from hudi_clusterd.lock import FileSystemLockProvider, LockOptions
from hudi_clusterd.storage import Storage, open_storage
lease = FileSystemLockProvider(open_storage(sys.argv[1]), LockOptions(stale_s=float(sys.argv[2]))).acquire()
print("held", flush=True)
time.sleep(600)
"""


def _start_holder(base: Path, stale_s: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(base), str(stale_s)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_lock_excludes_another_process_and_names_holder(tmp_path: Path) -> None:
    holder = _start_holder(tmp_path, 60.0)
    try:
        owner = json.loads((tmp_path / LOCK_FILE).read_text())["owner"]
        with pytest.raises(LockError, match=f"held by {owner}"):
            FileSystemLockProvider(open_storage(str(tmp_path)), LockOptions(timeout_s=0.3)).acquire()
    finally:
        holder.kill()
        holder.wait()


def test_lock_of_killed_process_is_taken_over_when_stale(tmp_path: Path) -> None:
    holder = _start_holder(tmp_path, 0.4)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert (tmp_path / LOCK_FILE).exists()  # a dead holder leaves its file behind
    lease = FileSystemLockProvider(open_storage(str(tmp_path)), LockOptions(timeout_s=10, stale_s=0.4)).acquire()
    # its heartbeat stopped, so both its files went stale and were taken over
    assert json.loads((tmp_path / AUX_LOCK_FILE).read_text())["owner"] == lease.owner
    lease.release()
    assert not (tmp_path / LOCK_FILE).exists() and not (tmp_path / AUX_LOCK_FILE).exists()


def test_lock_live_holder_heartbeat_prevents_takeover(tmp_path: Path) -> None:
    holder = _start_holder(tmp_path, 0.4)
    try:
        with pytest.raises(LockError):
            FileSystemLockProvider(open_storage(str(tmp_path)), LockOptions(timeout_s=1.5, stale_s=0.4)).acquire()
    finally:
        holder.kill()
        holder.wait()


def test_lock_threads_of_one_process_are_serialised(tmp_path: Path) -> None:
    provider = FileSystemLockProvider(open_storage(str(tmp_path)), LockOptions(timeout_s=10))
    inside = 0
    max_inside = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, max_inside
        with provider.held():
            with guard:
                inside += 1
                max_inside = max(max_inside, inside)
            time.sleep(0.01)
            with guard:
                inside -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert max_inside == 1
    assert not (tmp_path / LOCK_FILE).exists()


# --- Apache Hudi's lock files --------------------------------------------------------------------------------

HUDI_LOCK = b""
"""What Hudi 0.15's FileSystemBasedLockProvider leaves in its lock file: nothing (it writes its LockInfo only when
the file is missing right after creating it), and it never refreshes the file."""
HUDI_LOCK_INFO = b'{"lockCreateTime":"2026-01-01 00:00:00.000","lockThreadName":"main","lockStacksInfo":[]}'


def _hudi_lock(path: Path, age_s: float, content: bytes = HUDI_LOCK) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    then = time.time() - age_s
    os.utime(path, (then, then))


def test_a_hudi_writers_lock_is_never_taken_over_when_its_writers_never_expire_it(tmp_path: Path) -> None:
    # Given Hudi's lock file, a day old (Hudi never refreshes it, and by default never expires it)
    _hudi_lock(tmp_path / LOCK_FILE, age_s=86_400)
    # Then the daemon waits, however old it is, and says whose it is and what to do
    with pytest.raises(LockError, match=r"\.hoodie/lock: timed out .* held by an Apache Hudi writer; Hudi's lock "
                                        r"files never expire"):
        FileSystemLockProvider(open_storage(str(tmp_path)), LockOptions(timeout_s=0.3, stale_s=0.1)).acquire()
    assert (tmp_path / LOCK_FILE).read_bytes() == HUDI_LOCK
    assert not (tmp_path / AUX_LOCK_FILE).exists()  # the aux lock taken meanwhile was given back


def test_a_hudi_writers_lock_is_taken_over_only_after_the_writers_expiry(tmp_path: Path) -> None:
    # Given writers with hoodie.write.lock.filesystem.expire=1 and their lock, 30 s old
    _hudi_lock(tmp_path / LOCK_FILE, age_s=30, content=HUDI_LOCK_INFO)
    options = LockOptions(timeout_s=0.3, stale_s=0.1, expire_minutes=1)
    # Then it is theirs until a minute has passed
    with pytest.raises(LockError, match="held by an Apache Hudi writer"):
        FileSystemLockProvider(open_storage(str(tmp_path)), options).acquire()
    # And when it is older than their expiry, it is taken over, as Hudi's own provider would
    _hudi_lock(tmp_path / LOCK_FILE, age_s=61, content=HUDI_LOCK_INFO)
    provider = FileSystemLockProvider(open_storage(str(tmp_path)), options)
    with provider.held() as lease:
        assert json.loads((tmp_path / LOCK_FILE).read_text())["owner"] == lease.owner
        assert provider.heartbeat_interval_s <= 15.0  # refreshed well within the writers' expiry


def test_the_aux_lock_of_hudis_utilities_excludes_the_daemon_and_expires_after_a_minute(tmp_path: Path) -> None:
    # Given .hoodie/.aux/lock as Hudi's SQL procedures and utilities hold it (expire=1)
    _hudi_lock(tmp_path / AUX_LOCK_FILE, age_s=10)
    with pytest.raises(LockError, match=r"\.hoodie/\.aux/lock: timed out"):
        FileSystemLockProvider(open_storage(str(tmp_path)), LockOptions(timeout_s=0.3)).acquire()
    assert not (tmp_path / LOCK_FILE).exists()  # the main lock was given back while waiting
    # And once older than a minute it is dead for them and for us
    _hudi_lock(tmp_path / AUX_LOCK_FILE, age_s=61)
    with FileSystemLockProvider(open_storage(str(tmp_path)), LockOptions(timeout_s=1)).held() as lease:
        assert json.loads((tmp_path / AUX_LOCK_FILE).read_text())["owner"] == lease.owner
        assert json.loads((tmp_path / LOCK_FILE).read_text())["owner"] == lease.owner


def test_the_writers_lock_path_is_honoured(tmp_path: Path) -> None:
    # Given writers configured with hoodie.write.lock.filesystem.path=<folder outside the table>
    table, locks = tmp_path / "t", tmp_path / "locks"
    table.mkdir()
    options = LockOptions(timeout_s=0.3, path=str(locks))
    # Then the daemon holds <folder>/lock (and the aux lock), not .hoodie/lock
    with FileSystemLockProvider(open_storage(str(table)), options).held() as lease:
        assert json.loads((locks / "lock").read_text())["owner"] == lease.owner
        assert not (table / LOCK_FILE).exists()
    assert not (locks / "lock").exists()
    # And a writer holding that file excludes the daemon
    _hudi_lock(locks / "lock", age_s=5)
    with pytest.raises(LockError, match=f"{locks}/lock: timed out"):
        FileSystemLockProvider(open_storage(str(table)), options).acquire()


def test_a_lock_deleted_under_its_holder_stops_every_later_timeline_write(tmp_path: Path) -> None:
    # Given a table whose lock the daemon holds
    gen = TableGen(tmp_path / "t")
    table = gen.table
    planned = Instant(gen.next_time(), Action.REPLACE_COMMIT, State.REQUESTED)
    with table.lock():
        table.timeline_store.create(planned, b"")  # held: writes go through
        # When a Hudi 0.15 write client that failed to get the lock closes, it deletes the lock file
        (gen.base / LOCK_FILE).unlink()
        # Then the next timeline write refuses, naming the file, and writes nothing
        with pytest.raises(LockError, match=r"lost while held \(.*\.hoodie/lock no longer names this process"):
            table.timeline_store.create(planned.with_state(State.INFLIGHT), b"")
        with pytest.raises(LockError):
            table.timeline_store.delete(planned)
        # And a lock file another writer created meanwhile is left alone at release
        (gen.base / LOCK_FILE).write_bytes(HUDI_LOCK)
    assert not (gen.base / gen.table.timeline_store.path(planned.with_state(State.INFLIGHT))).exists()
    assert (gen.base / gen.table.timeline_store.path(planned)).exists()
    assert (gen.base / LOCK_FILE).read_bytes() == HUDI_LOCK


def test_storage_without_atomic_create_is_refused_naming_the_lock_file(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    storage = open_storage(str(tmp_path))
    monkeypatch.setattr(Storage, "supports_atomic_create", property(lambda self: False))
    provider = FileSystemLockProvider(storage)  # a table there can still be opened and read
    with pytest.raises(LockError, match=rf"{tmp_path}/\.hoodie/lock: this storage .* no atomic create-if-absent"):
        provider.acquire()


def test_an_object_store_is_refused_naming_the_lock_file_and_what_to_use() -> None:
    bucket = f"unit-lock-{uuid.uuid4().hex[:12]}"
    storage = open_storage(StorageSpec(f"s3://{bucket}/t", {"store": "memory"}))
    try:
        provider = FileSystemLockProvider(storage)  # a table there can still be opened and read
        with pytest.raises(LockError, match=rf"{bucket}/t/\.hoodie/lock: this storage \(s3\) is an object store, "
                                            r"where Hudi's FileSystemBasedLockProvider is not safe .* "
                                            "StorageBasedLockProvider"):
            provider.acquire()
        assert storage.list_dir(".hoodie") == []  # nothing written
    finally:
        ObjectStorage.memory_buckets.drop(bucket)


def test_a_takeover_moves_only_the_lock_file_it_judged_dead_never_one_created_since(tmp_path: Path) -> None:
    # Given a dead daemon's lock file, long unrefreshed
    (tmp_path / ".hoodie").mkdir()
    dead = tmp_path / LOCK_FILE
    dead.write_text(json.dumps({"owner": "dead:1:0", "holder": "hudi-clusterd"}))
    os.utime(dead, (time.time() - 1000, time.time() - 1000))
    live = FileSystemLockProvider(open_storage(str(tmp_path)), LockOptions(timeout_s=0, stale_s=60))
    leases = []

    # And a contender whose rename of the file it judged dead comes after another contender moved that file away
    # and a live daemon created its own lock there
    class Racing(type(open_storage(str(tmp_path)))):  # type: ignore[misc]
        def rename(self, src: str, dst: str) -> None:
            if not leases:
                dead.unlink()
                leases.append(live.acquire())
            super().rename(src, dst)

    contender = FileSystemLockProvider(Racing(str(tmp_path)), LockOptions(timeout_s=0, stale_s=60))
    # When the contender tries to take the lock
    with pytest.raises(LockError, match="timed out"):
        contender.acquire()
    # Then the live daemon's lock is where it was, still its own, and nothing was counted as taken over
    (lease,) = leases
    try:
        lease.verify()
        assert json.loads(dead.read_text())["owner"] == lease.owner
        assert contender.stats.takeovers == 0
        assert [p.name for p in (tmp_path / ".hoodie").iterdir() if ".dead." in p.name] == []
    finally:
        lease.release()
    # And once it is given back, the contender takes the lock
    with contender.acquire() as taken:
        taken.verify()
