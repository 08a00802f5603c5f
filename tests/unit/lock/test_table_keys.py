"""``hoodie.table.name`` is read in one way for every lock that names itself after the table: the properties' own,
else the table's ``hoodie.properties``, else its backup."""

from __future__ import annotations

from pathlib import Path

import pytest

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock.dynamodb_config import dynamodb_lock_config, partition_key
from hudi_clusterd.lock.table_keys import table_name
from hudi_clusterd.lock.zookeeper import ZooKeeperLockProvider
from hudi_clusterd.lock.zookeeper_options import zookeeper_options
from hudi_clusterd.storage import Storage, open_storage

ZK = {"hoodie.write.lock.zookeeper.url": "127.0.0.1:2181", "hoodie.write.lock.zookeeper.base_path": "/hudi/locks"}


def _names(props: dict[str, str], storage: Storage) -> tuple[str, str]:
    """The ZooKeeper lock's name and the DynamoDB lock's partition key for the same keys and table."""
    options, _ = zookeeper_options({**ZK, **props})
    config, _ = dynamodb_lock_config(props, env={})
    assert options is not None and config is not None
    zookeeper = ZooKeeperLockProvider(options, storage).lock_path.rsplit("/", 1)[-1]
    return zookeeper, partition_key(config, storage)


def test_both_locks_infer_the_same_name_from_the_same_table(tmp_path: Path) -> None:
    hoodie = tmp_path / ".hoodie"
    hoodie.mkdir()
    (hoodie / "hoodie.properties").write_text("hoodie.table.name=trips\n")
    storage = open_storage(str(tmp_path))
    assert _names({}, storage) == ("trips", "trips")
    assert _names({"hoodie.table.name": "events"}, storage) == ("events", "events")
    (hoodie / "hoodie.properties").rename(hoodie / "hoodie.properties.backup")
    assert _names({}, storage) == ("trips", "trips")


def test_without_a_name_the_error_names_the_key_it_stands_in_for(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path))
    with pytest.raises(LockError, match=r"^hoodie\.write\.lock\.zookeeper\.lock_key is not set and "
                                        r"hoodie\.table\.name cannot be read: "):
        table_name(None, storage, instead_of="hoodie.write.lock.zookeeper.lock_key")
    (tmp_path / ".hoodie").mkdir()
    (tmp_path / ".hoodie" / "hoodie.properties").write_text("hoodie.table.type=COPY_ON_WRITE\n")
    with pytest.raises(LockError, match=r"hoodie\.properties: no hoodie\.table\.name, so the lock's name cannot be "
                                        r"inferred; set hoodie\.write\.lock\.dynamodb\.partition_key"):
        table_name(None, storage, instead_of="hoodie.write.lock.dynamodb.partition_key")
    with pytest.raises(LockError, match=r"no table to read hoodie\.table\.name from"):
        table_name(None, None, instead_of="x")
    assert table_name("given", None, instead_of="x") == "given"
