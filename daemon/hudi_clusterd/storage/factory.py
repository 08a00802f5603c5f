"""`open_storage`: the one way to get a `Storage` from a path, a URI or a `StorageSpec`; `table_storage_spec`: the
spec of a table's storage from its base path and the writers' properties."""

from __future__ import annotations

from collections.abc import Mapping

from hudi_clusterd.storage.arrow import ArrowStorage
from hudi_clusterd.storage.base import Storage, StorageSpec
from hudi_clusterd.storage.local import LocalStorage
from hudi_clusterd.storage.memory import MemoryStorage
from hudi_clusterd.storage.object import ObjectStorage
from hudi_clusterd.storage.object_config import OBJECT_STORE_SCHEMES, S3_SCHEMES
from hudi_clusterd.storage.s3_settings import object_store_options


def open_storage(spec_or_uri: StorageSpec | str) -> Storage:
    """The storage a spec names, chosen by scheme: a plain path or ``file:`` is local, ``memory://<name>`` a
    memory volume of this process, an object store's URI (``s3``, ``s3a``, ``gs``, ``abfs``, ``abfss``, ``az``)
    an `ObjectStorage`, anything else (``hdfs``...) a pyarrow file system. Nothing reaches the network here: clients
    are built on first I/O."""
    spec = spec_or_uri if isinstance(spec_or_uri, StorageSpec) else StorageSpec(spec_or_uri)
    scheme = spec.scheme
    if scheme == "file":
        return LocalStorage(spec)
    if scheme == "memory":
        return MemoryStorage(spec)
    if scheme in OBJECT_STORE_SCHEMES:
        return ObjectStorage(spec)
    return ArrowStorage(spec)


def table_storage_spec(base_path: str, props: Mapping[str, str]) -> StorageSpec:
    """The spec of a table's storage: on S3, with the credentials its writers' properties carry
    (``hoodie.aws.access.key``, ``hoodie.aws.secret.key``, ``hoodie.aws.session.token``); without them, and on
    every other storage, the client finds its settings in the environment as the cloud's SDKs do."""
    spec = StorageSpec(base_path)
    if spec.scheme not in S3_SCHEMES:
        return spec
    return StorageSpec(base_path, object_store_options(props))
