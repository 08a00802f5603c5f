"""Storage: the file operations of one table, relative to its base path."""

from hudi_clusterd.storage.core import FileInfo, Storage, is_stale_temp_file

__all__ = ["FileInfo", "Storage", "is_stale_temp_file"]
