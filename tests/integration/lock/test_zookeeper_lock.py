"""The daemon's ZooKeeper lock against a real ZooKeeper 3.8.4: nodes Curator's ``InterProcessMutex`` recognises
and orders as its own (both orders of arrival, with a Curator-like contender written from Curator's rule), the
lease lost with its session or its connection, ZooKeeper down at start, a timeout that leaves no node, the keys
read as Hudi reads them, and no thread left behind."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock import LocalMutexes, lock_provider_from_properties
from hudi_clusterd.lock.zookeeper import ZooKeeperLease, ZooKeeperLockProvider
from hudi_clusterd.storage import open_storage
from tests.harness.servers import free_port
from tests.harness.zookeeper_locks import CuratorContender, TcpProxy, curator_rule_order, expire_session, wait_until

_PKG = "org.apache.hudi.client.transaction.lock."
ZOOKEEPER = _PKG + "ZookeeperBasedLockProvider"
IMPLICIT = _PKG + "ZookeeperBasedImplicitBasePathLockProvider"
NODE = re.compile(r"_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-\d{10}")


@pytest.fixture
def zk(zookeeper_server: Any) -> Iterator[Any]:
    """A plain kazoo client that looks at the server."""
    client = zookeeper_server.client()
    yield client
    client.stop()
    client.close()


@pytest.fixture
def base() -> str:
    return f"/hudi-{uuid.uuid4().hex[:8]}/locks"


def provider(server: Any, base: str, tmp_path: Path, *, timeout_s: float = 5.0, mutexes: LocalMutexes | None = None,
             **keys: str) -> ZooKeeperLockProvider:
    props = {"hoodie.write.lock.provider": ZOOKEEPER, "hoodie.write.lock.zookeeper.url": server.connect,
             "hoodie.write.lock.zookeeper.base_path": base, "hoodie.write.lock.zookeeper.lock_key": "events",
             "hoodie.write.lock.zookeeper.connection_timeout_ms": "5000", "hoodie.write.lock.app_id": "clusterd-t",
             **{f"hoodie.write.lock.{k}": v for k, v in keys.items()}}
    built = lock_provider_from_properties(props, open_storage(str(tmp_path)), timeout_s=timeout_s, mutexes=mutexes)
    assert isinstance(built, ZooKeeperLockProvider)
    return built


def kazoo_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name != "MainThread" and not t.name.startswith("test-")}


def acquire_in_thread(p: ZooKeeperLockProvider, timeout_s: float) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(_try_acquire(p, timeout_s)), name="test-acquire")
    t.start()
    return t, out


def _try_acquire(p: ZooKeeperLockProvider, timeout_s: float) -> ZooKeeperLease | LockError:
    try:
        return p.acquire(timeout_s=timeout_s)
    except LockError as e:
        return e


# --- nodes and ordering ---------------------------------------------------------------------------------------


def test_the_lock_node_is_curators_and_nothing_else_is_created(zookeeper_server: Any, zk: Any, base: str,
                                                              tmp_path: Path) -> None:
    p = provider(zookeeper_server, base, tmp_path)
    with p.acquire() as lease:
        lock_path = f"{base}/events"
        assert p.lock_path == lock_path and lease.lock_path == lock_path
        children = zk.get_children(lock_path)
        assert children == [lease.owner] and NODE.fullmatch(lease.owner)
        data, stat = zk.get(f"{lock_path}/{lease.owner}")
        assert data == b"application_id=clusterd-t"
        assert stat.ephemeralOwner == lease.session[0] != 0
        for parent in (base.rsplit("/", 1)[0], base, lock_path):  # parents are persistent
            assert zk.exists(parent).ephemeralOwner == 0
        lease.verify()
    assert zk.get_children(lock_path) == []
    assert zk.exists(lock_path) is not None  # the parents stay, as Hudi's do


def test_the_daemon_waits_for_a_curator_node_that_came_first(zookeeper_server: Any, zk: Any, base: str,
                                                             tmp_path: Path) -> None:
    # Given a Curator-style writer that holds the lock
    curator = CuratorContender(zookeeper_server.connect, f"{base}/events")
    try:
        assert curator.holds()
        # When the daemon asks for it
        waiter, result = acquire_in_thread(provider(zookeeper_server, base, tmp_path), timeout_s=20)
        assert wait_until(lambda: len(zk.get_children(f"{base}/events")) == 2)
        # Then its node queues behind the writer's by Curator's rule, and it waits
        order = curator_rule_order(zk.get_children(f"{base}/events"))
        assert order[0] == curator.node and NODE.fullmatch(order[1])
        assert curator.holds()
        time.sleep(0.3)
        assert waiter.is_alive() and not result
    finally:
        released_at = time.monotonic()
        curator.release()
    # And it takes the lock as soon as the writer releases it
    waiter.join(10)
    lease = result[0]
    assert isinstance(lease, ZooKeeperLease), lease
    assert time.monotonic() - released_at < 2.0
    assert lease.owner == order[1]
    lease.verify()
    lease.release()


def test_a_curator_contender_arriving_after_the_daemon_sees_the_daemons_node_first(
        zookeeper_server: Any, base: str, tmp_path: Path) -> None:
    lease = provider(zookeeper_server, base, tmp_path).acquire()
    curator = CuratorContender(zookeeper_server.connect, f"{base}/events")
    try:
        # Curator's rule puts the daemon's node first: the writer waits, watching it
        assert not curator.holds()
        assert curator.predecessor() == lease.owner
        assert not curator.wait_until_holds(0.3)
        lease.verify()
        # Once the daemon releases, the writer holds the lock
        lease.release()
        assert curator.wait_until_holds(5)
    finally:
        lease.release()
        curator.release()


def test_a_queue_of_curator_and_daemon_contenders_is_served_in_sequence_order(
        zookeeper_server: Any, zk: Any, base: str, tmp_path: Path) -> None:
    first = CuratorContender(zookeeper_server.connect, f"{base}/events")
    waiter, result = acquire_in_thread(provider(zookeeper_server, base, tmp_path), timeout_s=20)
    assert wait_until(lambda: len(zk.get_children(f"{base}/events")) == 2)
    third = CuratorContender(zookeeper_server.connect, f"{base}/events")
    try:
        daemon_node = curator_rule_order(zk.get_children(f"{base}/events"))[1]
        assert third.predecessor() == daemon_node  # the later writer waits for the daemon, not for the first
        first.release()
        waiter.join(10)
        lease = result[0]
        assert isinstance(lease, ZooKeeperLease), lease
        assert not third.holds()
        lease.release()
        assert third.wait_until_holds(5)
    finally:
        third.release()


# --- losing the lease -----------------------------------------------------------------------------------------


def test_an_expired_session_loses_the_lease_and_a_writer_gets_the_lock(zookeeper_server: Any, base: str,
                                                                      tmp_path: Path) -> None:
    before = kazoo_threads()
    p = provider(zookeeper_server, base, tmp_path)
    lease = p.acquire()
    curator = CuratorContender(zookeeper_server.connect, f"{base}/events")
    try:
        assert not curator.holds()
        # When the daemon's session expires for real (its node goes with it)
        expire_session(zookeeper_server.connect, lease.session)
        # Then the writer gets the lock and the daemon's lease fails its check, for good
        assert curator.wait_until_holds(10)
        with pytest.raises(LockError, match="lost while held"):
            lease.verify()
        with pytest.raises(LockError, match="lost while held"):
            lease.verify()
        assert p.stats.leases_lost == 1
        # And its release neither raises nor touches the writer's node
        lease.release()
        assert curator.holds()
    finally:
        lease.release()
        curator.release()
    assert wait_until(lambda: kazoo_threads() <= before)


def test_a_suspended_connection_loses_the_lease_even_when_the_session_survives(zookeeper_server: Any, zk: Any,
                                                                              base: str, tmp_path: Path) -> None:
    proxy = TcpProxy(zookeeper_server.connect)
    try:
        p = provider(proxy, base, tmp_path, wait_time_ms_between_retry="50", max_wait_time_ms_between_retry="100")
        lease = p.acquire()
        lease.verify()
        # When the connection drops and comes back within the session timeout
        proxy.cut()
        assert wait_until(lambda: p.stats.connection_retries >= 1 and lease.connection_state == "CONNECTED")
        # Then the node is still there, the same session's, yet the lease counts as lost
        _, stat = zk.get(f"{base}/events/{lease.owner}")
        assert stat.ephemeralOwner == lease.session[0]
        with pytest.raises(LockError, match=r"lost while held \(the ZooKeeper connection was suspended\)"):
            lease.verify()
        assert p.stats.leases_lost == 1
        # And release deletes the node of the live session
        lease.release()
        assert zk.get_children(f"{base}/events") == []
    finally:
        proxy.close()


# --- failures and timeouts ------------------------------------------------------------------------------------


def test_zookeeper_down_at_start_is_one_line_naming_it_after_the_connection_timeout(base: str,
                                                                                   tmp_path: Path) -> None:
    before = kazoo_threads()

    class Nowhere:
        connect = f"127.0.0.1:{free_port()}"

    p = provider(Nowhere, base, tmp_path, **{"zookeeper.connection_timeout_ms": "1000",
                                            "wait_time_ms_between_retry": "50",
                                            "max_wait_time_ms_between_retry": "100"})
    started = time.monotonic()
    with pytest.raises(LockError) as caught:
        p.acquire()
    took = time.monotonic() - started
    message = str(caught.value)
    assert "\n" not in message and Nowhere.connect in message and "no connection within 1s" in message
    assert 1.0 <= took < 5.0
    assert p.stats.connection_retries >= 1
    assert wait_until(lambda: kazoo_threads() <= before), kazoo_threads() - before
    # and it is ready to try again later
    with pytest.raises(LockError, match="no connection"):
        p.acquire()


def test_a_timeout_leaves_no_node_behind(zookeeper_server: Any, zk: Any, base: str, tmp_path: Path) -> None:
    holder = provider(zookeeper_server, base, tmp_path)
    other = provider(zookeeper_server, base, tmp_path, timeout_s=0.3)
    with holder.acquire() as lease:
        started = time.monotonic()
        with pytest.raises(LockError, match=rf"timed out after 0.3s waiting for the table lock held by node "
                                            rf"{lease.owner} \(application_id=clusterd-t\)"):
            other.acquire()
        assert time.monotonic() - started >= 0.3
        assert zk.get_children(f"{base}/events") == [lease.owner]
    curator = CuratorContender(zookeeper_server.connect, f"{base}/events")
    try:
        with pytest.raises(LockError, match="timed out"):
            other.acquire(timeout_s=0)
        assert zk.get_children(f"{base}/events") == [curator.node]
    finally:
        curator.release()


def test_threads_of_one_process_queue_on_the_shared_mutex_and_none_is_left_after_release(
        zookeeper_server: Any, base: str, tmp_path: Path) -> None:
    before = kazoo_threads()
    mutexes = LocalMutexes()
    first = provider(zookeeper_server, base, tmp_path, mutexes=mutexes)
    second = provider(zookeeper_server, base, tmp_path, mutexes=mutexes, timeout_s=0.2)
    with first.acquire():
        assert kazoo_threads() - before  # the lease's client runs while held
        with pytest.raises(LockError, match="waiting for another thread of this process"):
            second.acquire()
    with second.acquire():
        pass
    assert wait_until(lambda: kazoo_threads() <= before), kazoo_threads() - before


# --- keys -----------------------------------------------------------------------------------------------------


def test_the_port_key_is_ignored_with_a_warning(zookeeper_server: Any, zk: Any, base: str, tmp_path: Path) -> None:
    with capture_logs() as logs:
        p = provider(zookeeper_server, base, tmp_path, **{"zookeeper.port": "2181"})
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1 and "hoodie.write.lock.zookeeper.port is ignored" in warnings[0]["event"]
    with p.acquire() as lease:  # the url's port is the one used
        assert zk.get_children(f"{base}/events") == [lease.owner]


def test_the_lock_key_defaults_to_the_tables_name_from_the_keys_or_from_hoodie_properties(
        zookeeper_server: Any, zk: Any, base: str, tmp_path: Path) -> None:
    table = tmp_path / "t"
    (table / ".hoodie").mkdir(parents=True)
    (table / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=trips\nhoodie.table.version=6\n")
    props = {"hoodie.write.lock.provider": ZOOKEEPER, "hoodie.write.lock.zookeeper.url": zookeeper_server.connect,
             "hoodie.write.lock.zookeeper.base_path": base}
    from_file = lock_provider_from_properties(props, open_storage(str(table)), timeout_s=5)
    from_keys = lock_provider_from_properties({**props, "hoodie.table.name": "rides"}, open_storage(str(table)),
                                              timeout_s=5)
    with from_file.acquire() as a, from_keys.acquire() as b:
        assert (a.lock_path, b.lock_path) == (f"{base}/trips", f"{base}/rides")
        assert zk.get_children(f"{base}/trips") == [a.owner]
    # a table without hoodie.properties cannot name its lock: a retryable LockError naming the file
    bare = lock_provider_from_properties(props, open_storage(str(tmp_path / "none")), timeout_s=5)
    with pytest.raises(LockError, match=r"hoodie\.table\.name cannot be read: .*none/\.hoodie/hoodie\.properties"):
        bare.acquire()


def test_the_implicit_provider_locks_under_the_hash_of_the_base_path(zookeeper_server: Any, zk: Any,
                                                                    tmp_path: Path) -> None:
    props = {"hoodie.write.lock.provider": IMPLICIT, "hoodie.write.lock.zookeeper.url": zookeeper_server.connect,
             "hoodie.base.path": "s3a://hudi/t015"}
    # the hash Hudi 1.2.0's HashID gives for s3://hudi/t015 (s3a:// is read as s3://)
    expected = "/tmp/85EF697BEEA58661/lock_key"
    p = lock_provider_from_properties(props, open_storage(str(tmp_path)), timeout_s=5)
    assert isinstance(p, ZooKeeperLockProvider) and p.lock_path == expected
    curator = CuratorContender(zookeeper_server.connect, expected)
    try:
        with pytest.raises(LockError, match="timed out"):
            p.acquire(timeout_s=0.2)
    finally:
        curator.release()
    with p.acquire() as lease:
        assert zk.get_children(expected) == [lease.owner]
    # without hoodie.base.path the daemon's base path of the table is hashed
    own = lock_provider_from_properties({k: v for k, v in props.items() if k != "hoodie.base.path"},
                                        open_storage(str(tmp_path)), timeout_s=5)
    assert isinstance(own, ZooKeeperLockProvider) and own.lock_path.startswith("/tmp/")
    assert own.lock_path != expected
