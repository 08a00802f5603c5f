from __future__ import annotations

import json
from pathlib import Path

import pytest

from hudi_clusterd.errors import ConfigError, LockError
from hudi_clusterd.lock import (
    FILE_SYSTEM_PROVIDER,
    LOCK_FILE,
    PROVIDER_KEY,
    FileSystemLockProvider,
    LocalMutexes,
    lock_problems,
    lock_properties,
    lock_provider_from_properties,
)
from hudi_clusterd.lock.file import file_lock_options
from hudi_clusterd.storage import open_storage
from tests.builders import make_policy

_PKG = "org.apache.hudi.client.transaction.lock."
REFUSED = [
    _PKG + "InProcessLockProvider",
    _PKG + "ZookeeperBasedLockProvider",
    "org.apache.hudi.hive.transaction.lock.HiveMetastoreBasedLockProvider",
    _PKG + "StorageBasedLockProvider",
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
    assert f"{PROVIDER_KEY}: {name} is not supported yet; use {FILE_SYSTEM_PROVIDER}" in message
    assert "local or mounted file system" in message
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


def test_lock_properties_are_the_write_lock_keys_sorted() -> None:
    props = {"hoodie.write.lock.provider": "p", "hoodie.clustering.x": "1", "hoodie.write.lock.a": "2"}
    assert lock_properties(props) == (("hoodie.write.lock.a", "2"), ("hoodie.write.lock.provider", "p"))


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
