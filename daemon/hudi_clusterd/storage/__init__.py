"""Storage: the file operations of one table, relative to its base path (see ``storage.base``)."""

from hudi_clusterd.storage.arrow import ArrowStorage
from hudi_clusterd.storage.base import (
    Capabilities,
    FileInfo,
    PutMode,
    Storage,
    StorageSpec,
    is_secret_option,
    is_stale_temp_file,
    is_temp_file,
)
from hudi_clusterd.storage.factory import open_storage, table_storage_spec
from hudi_clusterd.storage.local import LocalStorage
from hudi_clusterd.storage.memory import MemoryStorage
from hudi_clusterd.storage.object import ObjectStorage
from hudi_clusterd.storage.requests import RequestCounts
from hudi_clusterd.storage.s3_settings import object_store_options

__all__ = [
    "ArrowStorage",
    "Capabilities",
    "FileInfo",
    "LocalStorage",
    "MemoryStorage",
    "ObjectStorage",
    "PutMode",
    "RequestCounts",
    "Storage",
    "StorageSpec",
    "is_secret_option",
    "is_stale_temp_file",
    "is_temp_file",
    "object_store_options",
    "open_storage",
    "table_storage_spec",
]
