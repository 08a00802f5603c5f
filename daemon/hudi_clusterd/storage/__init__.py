"""Storage: the file operations of one table, relative to its base path (see ``storage.base``)."""

from hudi_clusterd.storage.arrow import ArrowStorage
from hudi_clusterd.storage.base import (
    Capabilities,
    FileInfo,
    PutMode,
    Storage,
    StorageSpec,
    is_stale_temp_file,
    is_temp_file,
)
from hudi_clusterd.storage.factory import open_storage
from hudi_clusterd.storage.local import LocalStorage
from hudi_clusterd.storage.memory import MemoryStorage, MemoryVolumes

__all__ = [
    "ArrowStorage",
    "Capabilities",
    "FileInfo",
    "LocalStorage",
    "MemoryStorage",
    "MemoryVolumes",
    "PutMode",
    "Storage",
    "StorageSpec",
    "is_stale_temp_file",
    "is_temp_file",
    "open_storage",
]
