from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hudi_clusterd.errors import LockError
from hudi_clusterd.io.lock import LOCK_FILE, TableLock
from hudi_clusterd.io.storage import Storage

_HOLDER = """
import sys, time
from hudi_clusterd.io.lock import TableLock
from hudi_clusterd.io.storage import Storage
lock = TableLock(Storage(sys.argv[1]), stale_s=float(sys.argv[2]))
lock.acquire()
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
            TableLock(Storage(str(tmp_path)), timeout_s=0.3).acquire()
    finally:
        holder.kill()
        holder.wait()


def test_lock_of_killed_process_is_taken_over_when_stale(tmp_path: Path) -> None:
    holder = _start_holder(tmp_path, 0.4)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert (tmp_path / LOCK_FILE).exists()  # a dead holder leaves its file behind
    lock = TableLock(Storage(str(tmp_path)), timeout_s=10, stale_s=0.4)
    lock.acquire()  # its heartbeat stopped, so it goes stale and is taken over
    lock.release()
    assert not (tmp_path / LOCK_FILE).exists()


def test_lock_live_holder_heartbeat_prevents_takeover(tmp_path: Path) -> None:
    holder = _start_holder(tmp_path, 0.4)
    try:
        with pytest.raises(LockError):
            TableLock(Storage(str(tmp_path)), timeout_s=1.5, stale_s=0.4).acquire()
    finally:
        holder.kill()
        holder.wait()


def test_lock_threads_of_one_process_are_serialised(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    inside = 0
    max_inside = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, max_inside
        with TableLock(storage, timeout_s=10).held():
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
