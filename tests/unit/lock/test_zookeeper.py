"""The parts of the ZooKeeper lock that need no server (the rest is in tests/integration/lock)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from kazoo.retry import ForceRetryError, KazooRetry

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock.usage import LockStats
from hudi_clusterd.lock.zookeeper import ZooKeeperLockProvider, _CountingRetry, curator_order
from hudi_clusterd.lock.zookeeper_options import ZooKeeperOptions
from hudi_clusterd.storage import open_storage


def test_children_sort_by_the_text_after_the_last_lock_dash_as_curator_sorts_them() -> None:
    children = ["_c_9f-lock-0000000002", "b0c1-lock-0000000001", "zzz", "_c_00-lock-0000000003",
                "x-lock-lock-0000000000", "123", "lock-"]
    assert curator_order(children) == ["lock-", "x-lock-lock-0000000000", "b0c1-lock-0000000001",
                                       "_c_9f-lock-0000000002", "_c_00-lock-0000000003", "123", "zzz"]


def test_kazoos_own_lock_nodes_do_not_sort_by_sequence() -> None:
    # why kazoo's stock Lock does not exclude Curator: its names have no "lock-" and sort by the whole name
    kazoo_first, curator_later = "ff00__lock__0000000000", "_c_1-lock-0000000001"
    assert curator_order([kazoo_first, curator_later]) == [curator_later, kazoo_first]


def test_connection_passes_after_the_first_count_as_retries() -> None:
    stats = LockStats()
    retry = _CountingRetry(KazooRetry(max_tries=5, delay=0.001, max_jitter=0.0), stats).copy()
    calls: list[int] = []

    def connect() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ForceRetryError()
        return "connected"

    assert retry(connect) == "connected"
    assert (len(calls), stats.connection_retries) == (3, 2)
    assert retry(connect) == "connected"  # a new start: its first pass is no retry
    assert stats.connection_retries == 2


def test_stats_count_from_many_threads() -> None:
    stats = LockStats()
    threads = [threading.Thread(target=lambda: [stats.add_connection_retry() for _ in range(1000)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats.add_lease_lost()
    assert (stats.connection_retries, stats.leases_lost) == (4000, 1)


def test_an_invalid_lock_path_is_refused_before_connecting(tmp_path: Path) -> None:
    (tmp_path / ".hoodie").mkdir()
    (tmp_path / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=a/../b\n")
    provider = ZooKeeperLockProvider(ZooKeeperOptions("127.0.0.1:1", "/locks", None), open_storage(str(tmp_path)))
    with pytest.raises(LockError, match=r"ZooKeeper lock path '/locks/a/\.\./b' must not have an empty, \. or \.\. "):
        provider.acquire(timeout_s=0)
