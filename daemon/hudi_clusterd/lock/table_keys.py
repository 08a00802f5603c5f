"""The table keys a lock infers its place from, and the one reading of the table's name (:func:`table_name`): the
``hoodie.table.name`` the properties give, else the one of the table's ``hoodie.properties`` (its ``.backup`` when
the file cannot be read, as Hudi reads it). ``hoodie.base.path`` is hashed by Hudi 1.x's implicit providers.
"""

from __future__ import annotations

from hudi_clusterd.domain.keys import Key
from hudi_clusterd.domain.values import optional_text
from hudi_clusterd.errors import LockError, MetadataDecodeError, StorageError
from hudi_clusterd.formats.java_properties import parse_properties
from hudi_clusterd.storage import Storage

__all__ = ["TABLE_BASE_PATH", "TABLE_NAME", "table_name"]

TABLE_NAME = Key("hoodie.table.name", None, optional_text, (
    "The table's name: with a ZooKeeper or DynamoDB lock whose lock key or partition key is unset, the lock's "
    "name, as Hudi infers it; unset = the hoodie.table.name of the table's hoodie.properties."))
TABLE_BASE_PATH = Key("hoodie.base.path", None, optional_text, (
    "The writers' base path of the table, hashed (s3a:// read as s3://) into the lock of Hudi 1.x's implicit "
    "providers (ZookeeperBasedImplicitBasePathLockProvider: /tmp/<hash>/lock_key; "
    "DynamoDBBasedImplicitPartitionKeyLockProvider: the partition key); unset = the daemon's base path of the "
    "table."))
_PROPERTIES = (".hoodie/hoodie.properties", ".hoodie/hoodie.properties.backup")


def table_name(given: str | None, storage: Storage | None, *, instead_of: str) -> str:
    """``given`` (the properties' ``hoodie.table.name``), else the table's own, read from ``storage``;
    ``LockError`` naming ``instead_of`` (the key the name stands in for) and the file when neither has one."""
    if given:
        return given
    if storage is None:
        raise LockError(f"{instead_of} is not set, and no table to read {TABLE_NAME.name} from")
    errors: list[str] = []
    for rel in _PROPERTIES:
        try:
            text = storage.read_bytes(rel).decode("iso-8859-1")  # Java's properties encoding
        except StorageError as e:
            errors.append(str(e))
            continue
        try:
            name = parse_properties(text, storage.full_path(rel)).get(TABLE_NAME.name, "").strip()
        except MetadataDecodeError as e:
            raise LockError(f"{instead_of} is not set and {TABLE_NAME.name} cannot be read: {e}") from e
        if not name:
            raise LockError(f"{storage.full_path(rel)}: no {TABLE_NAME.name}, so the lock's name cannot be "
                            f"inferred; set {instead_of} to the writers' value")
        return name
    raise LockError(f"{instead_of} is not set and {TABLE_NAME.name} cannot be read: {errors[0]}")
