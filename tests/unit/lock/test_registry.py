from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hudi_clusterd.errors import ConfigError, LockError
from hudi_clusterd.lock import (
    FILE_SYSTEM_PROVIDER,
    LOCK_FILE,
    PROVIDER_KEY,
    STORAGE_PROVIDER,
    FileSystemLockProvider,
    LocalMutexes,
    StorageLockProvider,
    lock_problems,
    lock_properties,
    lock_provider_from_properties,
    storage_lock_times,
)
from hudi_clusterd.lock.file import file_lock_options
from hudi_clusterd.lock.registry import PROVIDERS
from hudi_clusterd.lock.storage_lock_format import StorageLockTimes
from hudi_clusterd.lock.zookeeper import ZooKeeperLockProvider
from hudi_clusterd.storage import MemoryStorage, open_storage
from tests.builders import TableGen, make_policy

_PKG = "org.apache.hudi.client.transaction.lock."
REFUSED = [
    _PKG + "InProcessLockProvider",
    "org.apache.hudi.hive.transaction.lock.HiveMetastoreBasedLockProvider",
    "com.example.MyLockProvider",
]

@pytest.mark.parametrize("props", [{}, {PROVIDER_KEY: FILE_SYSTEM_PROVIDER},
                                   {PROVIDER_KEY: f" {FILE_SYSTEM_PROVIDER} "}, {PROVIDER_KEY: ""}],
                         ids=["absent", "named", "padded", "empty"])
def test_the_file_system_provider_is_the_default_and_its_own_name(tmp_path: Path, props: dict[str, str]) -> None:
    provider = lock_provider_from_properties(props, open_storage(str(tmp_path)), timeout_s=3, stale_s=7)
    assert isinstance(provider, FileSystemLockProvider)
    assert (provider.options.timeout_s, provider.options.stale_s) == (3, 7)
    assert provider.timeout_s == 3

@pytest.mark.parametrize("name", REFUSED)
def test_every_other_provider_is_refused_in_one_line_naming_it_and_what_to_use(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        lock_provider_from_properties({PROVIDER_KEY: name}, open_storage(str(tmp_path)))
    message = str(caught.value)
    assert "\n" not in message
    assert f"{PROVIDER_KEY}: {name} " in message
    reason = "locks inside one JVM only" if name.endswith("InProcessLockProvider") else "is not supported"
    assert reason in message
    assert "FileSystemBasedLockProvider (a local or mounted file system)" in message
    for supported in PROVIDERS:
        assert supported.rsplit(".", 1)[-1] in message
    assert lock_problems({PROVIDER_KEY: name}) == [message.split(": ", 2)[2]]
    assert not list(tmp_path.iterdir())  # nothing created

def test_the_file_system_keys_reach_the_file_lock(tmp_path: Path) -> None:
    table, locks = tmp_path / "t", tmp_path / "locks"
    table.mkdir()
    props = {PROVIDER_KEY: FILE_SYSTEM_PROVIDER, "hoodie.write.lock.filesystem.path": str(locks),
             "hoodie.write.lock.filesystem.expire": "3"}
    provider = lock_provider_from_properties(props, open_storage(str(table)), timeout_s=1)
    assert isinstance(provider, FileSystemLockProvider)
    assert provider.options.expire_minutes == 3
    with provider.acquire() as lease:
        assert json.loads((locks / "lock").read_text())["owner"] == lease.owner
        assert not (table / LOCK_FILE).exists()

def test_a_lock_path_that_is_not_absolute_is_refused_when_the_lock_keys_are_read(tmp_path: Path) -> None:
    bad = {"hoodie.write.lock.filesystem.path": "locks"}
    with pytest.raises(ConfigError, match=r"hoodie\.write\.lock\.filesystem\.path: must be an absolute path or a URI"):
        lock_provider_from_properties(bad, open_storage(str(tmp_path)))
    assert lock_problems(bad) == [
        "hoodie.write.lock.filesystem.path: must be an absolute path or a URI (a folder holding the lock file), "
        "got 'locks'"]
    options, problems = file_lock_options({"hoodie.write.lock.filesystem.path": "/var/locks/t"})
    assert options is not None and options.path == "/var/locks/t" and not problems
    # the clustering policy does not read the lock keys
    assert "hoodie.write.lock.filesystem.path" not in make_policy(**bad).to_properties()

@pytest.mark.parametrize(("raw", "problem"), [("-1", "must be >= 0, got -1"),
                                              ("soon", "must be an integer, got 'soon'"),
                                              ("", "must be an integer, got ''")])
def test_a_bad_expiry_is_refused(raw: str, problem: str) -> None:
    assert lock_problems({"hoodie.write.lock.filesystem.expire": raw}) == [
        f"hoodie.write.lock.filesystem.expire: {problem}"]

def test_lock_properties_are_the_write_lock_keys_and_the_table_keys_a_lock_infers_from_sorted() -> None:
    props = {"hoodie.write.lock.provider": "p", "hoodie.clustering.x": "1", "hoodie.write.lock.a": "2",
             "hoodie.table.name": "t", "hoodie.base.path": "s3://b/t", "hoodie.table.type": "COPY_ON_WRITE"}
    assert lock_properties(props) == (("hoodie.base.path", "s3://b/t"), ("hoodie.table.name", "t"),
                                      ("hoodie.write.lock.a", "2"), ("hoodie.write.lock.provider", "p"))

@pytest.mark.parametrize("name", [_PKG + "ZookeeperBasedLockProvider",
                                  _PKG + "ZookeeperBasedImplicitBasePathLockProvider"])
def test_the_zookeeper_providers_are_registered_under_hudis_names(tmp_path: Path, name: str) -> None:
    props = {PROVIDER_KEY: name, "hoodie.write.lock.zookeeper.url": "127.0.0.1:2181",
             "hoodie.write.lock.zookeeper.base_path": "/hudi/locks", "hoodie.write.lock.zookeeper.lock_key": "t"}
    provider = lock_provider_from_properties(props, open_storage(str(tmp_path)), timeout_s=3, stale_s=7)
    assert isinstance(provider, ZooKeeperLockProvider)
    assert provider.timeout_s == 3
    assert provider.lock_path.endswith("/lock_key" if "Implicit" in name else "/hudi/locks/t")
    problems = lock_problems({PROVIDER_KEY: name})
    assert [p.split(":")[0] for p in problems] == ["hoodie.write.lock.zookeeper.url"] + (
        [] if "Implicit" in name else ["hoodie.write.lock.zookeeper.base_path"])
    with pytest.raises(ConfigError, match=r"hoodie\.write\.lock\.zookeeper\.url: must be set"):
        lock_provider_from_properties({PROVIDER_KEY: name}, open_storage(str(tmp_path)))
    assert not list(tmp_path.iterdir())  # nothing created, nothing connected

def test_providers_built_with_one_set_of_mutexes_queue_their_threads_on_it(tmp_path: Path) -> None:
    # Given two handles of one table built by one process with its mutexes
    mutexes = LocalMutexes()
    first = lock_provider_from_properties({}, open_storage(str(tmp_path)), timeout_s=0.2, mutexes=mutexes)
    second = lock_provider_from_properties({}, open_storage(str(tmp_path)), timeout_s=0.2, mutexes=mutexes)
    # Then while one holds the lock, the other waits in this process, not on the lock files
    with first.acquire(), pytest.raises(LockError, match="waiting for another thread of this process"):
        second.acquire()
    # And a provider built without them waits on the lock files
    alone = lock_provider_from_properties({}, open_storage(str(tmp_path)), timeout_s=0.2)
    with first.acquire(), pytest.raises(LockError, match="waiting for the table lock held by"):
        alone.acquire()

_VALIDITY, _RENEW = "hoodie.write.lock.storage.validity.timeout.secs", "hoodie.write.lock.storage.renew.interval.secs"
_RENEW_ALT = "hoodie.write.lock.storage.heartbeat.poll.secs"

def test_the_storage_provider_is_built_with_the_writers_times_and_the_daemons_timeout() -> None:
    storage = MemoryStorage("memory://registry-storage-lock/t")
    try:
        mutexes = LocalMutexes()
        props = {PROVIDER_KEY: STORAGE_PROVIDER, _VALIDITY: "60", _RENEW: "6"}
        first = lock_provider_from_properties(props, storage, timeout_s=0.1, mutexes=mutexes)
        assert isinstance(first, StorageLockProvider)
        assert (first.validity_s, first.renew_interval_s, first.timeout_s) == (60, 6, 0.1)
        default = lock_provider_from_properties({PROVIDER_KEY: STORAGE_PROVIDER}, storage, mutexes=mutexes)
        assert isinstance(default, StorageLockProvider) and (default.validity_s, default.renew_interval_s) == (300, 30)
        with first.acquire() as lease, pytest.raises(LockError, match="waiting for another thread of this process"):
            assert storage.read_bytes(".hoodie/.locks/table_lock.json").endswith(f'"owner":"{lease.owner}"}}'.encode())
            default.acquire(timeout_s=0.1)  # one mutex per lock file of the process
    finally:
        MemoryStorage.volumes.drop("registry-storage-lock")

@pytest.mark.parametrize(("props", "times"), [
    ({}, StorageLockTimes(300, 30)),
    ({_VALIDITY: " 100 ", _RENEW: "10"}, StorageLockTimes(100, 10)),
    ({_RENEW_ALT: "5"}, StorageLockTimes(300, 5)),
    ({_RENEW: "20", _RENEW_ALT: "5"}, StorageLockTimes(300, 20)),  # the key wins over its former name
    ({_VALIDITY: "10", _RENEW: "1"}, StorageLockTimes(10, 1)),
], ids=["defaults", "set", "former-name", "both-names", "smallest"])
def test_the_storage_lock_times_are_read_from_hudis_keys(props: dict[str, str], times: StorageLockTimes) -> None:
    assert storage_lock_times(props) == (times, [])

@pytest.mark.parametrize(("props", "problems"), [
    ({_VALIDITY: "5"}, [f"{_VALIDITY}: must be at least 10 seconds, got 5",
                        f"{_VALIDITY}: must be at least 10 times {_RENEW} (30), got 5"]),
    ({_RENEW: "0", _VALIDITY: "20"}, [f"{_RENEW}: must be at least 1 second, got 0"]),
    ({_VALIDITY: "100"}, [f"{_VALIDITY}: must be at least 10 times {_RENEW} (30), got 100"]),
    ({_RENEW_ALT: "31"}, [f"{_VALIDITY}: must be at least 10 times {_RENEW_ALT} (31), got 300"]),
    ({_VALIDITY: "5m", _RENEW: ""}, [f"{_VALIDITY}: must be an integer, got '5m'",
                                     f"{_RENEW}: must be an integer, got ''"]),
    ({_VALIDITY: "9", _RENEW: "-1"}, [f"{_VALIDITY}: must be at least 10 seconds, got 9",
                                      f"{_RENEW}: must be at least 1 second, got -1"]),
], ids=["short-validity", "zero-renew", "ratio", "ratio-former-name", "not-integers", "both-short"])
def test_storage_lock_times_breaking_hudis_constraints_are_refused_naming_key_and_value(
        props: dict[str, str], problems: list[str]) -> None:
    full = {PROVIDER_KEY: STORAGE_PROVIDER, **props}
    assert lock_problems(full) == problems
    with pytest.raises(ConfigError, match="the table's lock cannot be taken"):
        lock_provider_from_properties(full, MemoryStorage("memory://registry-refused/t"))


_IMPORTS = """
import sys
from hudi_clusterd.lock import registry
from hudi_clusterd.commands.common import open_table
table = open_table(sys.argv[1], None)
with table.lock():
    pass
if sys.argv[2] == "zookeeper":
    registry.lock_provider_from_properties({"hoodie.write.lock.provider": registry.ZOOKEEPER_PROVIDER,
                                            "hoodie.write.lock.zookeeper.url": "127.0.0.1:1",
                                            "hoodie.write.lock.zookeeper.lock_key": "t",
                                            "hoodie.write.lock.zookeeper.base_path": "/l"}, table.storage)
print(" ".join(sorted({m.split(".")[0] for m in sys.modules} & {"boto3", "botocore", "kazoo"})))
"""


@pytest.mark.parametrize(("then", "clients"), [("file", ""), ("zookeeper", "kazoo")])
def test_lock_service_clients_are_imported_only_for_a_table_that_uses_them(tmp_path: Path, then: str,
                                                                            clients: str) -> None:
    # Given a local table locked with the file lock, opened and locked in a fresh interpreter
    gen = TableGen(tmp_path / "t")
    gen.commit({"p=0": [1.0]})
    done = subprocess.run([sys.executable, "-c", _IMPORTS, str(gen.base), then], capture_output=True, text=True,
                          check=True)
    # Then neither boto3, botocore nor kazoo was imported; a ZooKeeper lock's provider brings kazoo in
    assert done.stdout.strip() == clients


def test_writers_with_non_blocking_concurrency_control_are_refused_naming_the_key() -> None:
    problems = lock_problems({"hoodie.write.concurrency.mode": "non_blocking_concurrency_control"})
    assert problems == ["hoodie.write.concurrency.mode=non_blocking_concurrency_control: tables written with "
                        "non-blocking concurrency control are not served (supported: SINGLE_WRITER, "
                        "OPTIMISTIC_CONCURRENCY_CONTROL)"]
    assert lock_problems({"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"}) == []
