"""Storage over a pyarrow file system, for URIs that are neither local nor an object store's (``hdfs://``,
``viewfs://``...; `open_storage` gives object stores to ``storage.object``).

Paths and URIs are worked out from the spec's URI alone, and the file system is built on first I/O: a storage
can name its files (plans, messages, ``child``) without reaching the network. The spec's options are given to
pyarrow as the URI's query parameters (``region``, ``endpoint_override``...).

Create-if-absent is a check followed by a write, which two writers can both pass: object stores cannot do better
through pyarrow, and HDFS's own exclusive create is not reachable through ``pyarrow.fs``. So ``atomic_create``
is False (the table lock refuses such storage), and conditional updates are not offered. Renames are atomic on
HDFS only (an object store copies, then deletes). A file is written in place: an object store shows it whole once
its stream is closed, HDFS shows it while it is written (``atomic_put`` is False there). A version is the file's
modification time and size: unique per write on HDFS and local files (milliseconds or finer), not on object
stores (one-second times).
"""

from __future__ import annotations

import threading
from urllib.parse import urlencode, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from hudi_clusterd.errors import StorageError
from hudi_clusterd.storage.base import Capabilities, FileInfo, PutMode, Storage, StorageSpec, join, parent_of
from hudi_clusterd.storage.paths import inside

_FILE_SYSTEM_SCHEMES = frozenset({"hdfs", "viewfs", "file"})
"""Schemes of file systems (not object stores): the host (a name node) is not part of their paths, and a rename is
atomic."""


def _fs_path(uri: str, scheme: str) -> str:
    """The file system path of a URI: the path for HDFS and local files, bucket and key for object stores."""
    parts = urlsplit(uri)
    if scheme in _FILE_SYSTEM_SCHEMES:
        return parts.path or "/"
    return join(parts.netloc, parts.path)


class ArrowStorage(Storage):
    """File operations relative to one base path of a pyarrow file system."""

    def __init__(self, spec: StorageSpec | str, filesystem: pafs.FileSystem | None = None) -> None:
        super().__init__(spec)
        if "://" not in self.spec.uri:
            raise StorageError(f"{self.spec.uri}: not a URI")
        if "?" in self.spec.uri or "#" in self.spec.uri:
            raise StorageError(f"{self.spec.uri}: give file system options as the spec's options, not in the URI")
        scheme = self.spec.scheme
        self.capabilities = Capabilities(atomic_create=False, conditional_update=False,
                                         atomic_rename=scheme in _FILE_SYSTEM_SCHEMES,
                                         atomic_put=scheme not in _FILE_SYSTEM_SCHEMES, conditional_delete=False,
                                         unique_versions=scheme in _FILE_SYSTEM_SCHEMES, empty_folders=True)
        self.root = _fs_path(self.base_uri, scheme)
        self._fs = filesystem
        self._fs_lock = threading.Lock()

    def _filesystem(self) -> pafs.FileSystem:
        if self._fs is None:
            with self._fs_lock:
                if self._fs is None:
                    query = "?" + urlencode(dict(self.spec.options)) if self.spec.options else ""
                    try:
                        self._fs = pafs.FileSystem.from_uri(self.base_uri + query)[0]
                    except Exception as e:
                        raise StorageError(f"cannot open storage for {self.base_uri!r}: {e}") from e
        return self._fs

    # --- paths ------------------------------------------------------------------------------------------------

    def full_path(self, rel: str = "") -> str:
        return join(self.root, self.confined(rel))

    def rel_from_uri(self, uri: str) -> str:
        path = _fs_path(uri, self.spec.scheme) if "://" in uri else uri
        return inside(path, self.root, uri, self.base_uri)

    def child(self, rel: str) -> ArrowStorage:
        return ArrowStorage(self.spec.child(self.confined(rel)), self._fs)

    # --- reading ----------------------------------------------------------------------------------------------

    @staticmethod
    def _to_info(rel: str, fi: pafs.FileInfo) -> FileInfo:
        mtime_ns = fi.mtime_ns
        is_dir = fi.type == pafs.FileType.Directory
        size = 0 if is_dir else int(fi.size or 0)
        version = None if is_dir or mtime_ns is None else f"{mtime_ns:x}.{size:x}"
        return FileInfo(rel, size, int(mtime_ns // 1_000_000) if mtime_ns is not None else 0, is_dir, version)

    def info(self, rel: str) -> FileInfo | None:
        with self._os_errors("stat", rel):
            fi = self._filesystem().get_file_info(self.full_path(rel))
        return None if fi.type == pafs.FileType.NotFound else self._to_info(rel, fi)

    def list_dir(self, rel: str = "") -> list[FileInfo]:
        selector = pafs.FileSelector(self.full_path(rel), allow_not_found=True, recursive=False)
        with self._os_errors("list", rel):
            infos = self._filesystem().get_file_info(selector)
        return sorted((self._to_info(join(rel, fi.base_name), fi) for fi in infos), key=lambda f: f.name)

    def read_bytes(self, rel: str) -> bytes:
        with self._reading("read", rel), self._filesystem().open_input_stream(self.full_path(rel)) as f:
            return bytes(f.read())

    def open_input_file(self, rel: str) -> pa.NativeFile:
        with self._reading("open", rel):
            return self._filesystem().open_input_file(self.full_path(rel))

    # --- writing ----------------------------------------------------------------------------------------------

    def open_output(self, rel: str) -> pa.NativeFile:
        fs = self._filesystem()
        with self._os_errors("write", rel):
            try:
                return fs.open_output_stream(self.full_path(rel))
            except FileNotFoundError:  # a file system with real folders, and the folder is missing
                fs.create_dir(self.full_path(parent_of(rel)), recursive=True)
                return fs.open_output_stream(self.full_path(rel))

    def _put(self, rel: str, data: bytes, *, mode: PutMode, if_match: str | None) -> FileInfo | None:
        if mode is PutMode.CREATE and self.exists(rel):
            return None
        with self.open_output(rel) as f, self._os_errors("write", rel):
            f.write(data)
        return self.info(rel)

    def makedirs(self, rel: str) -> None:
        with self._os_errors("mkdir", rel):
            self._filesystem().create_dir(self.full_path(rel), recursive=True)

    def rename(self, src: str, dst: str) -> None:
        with self._os_errors("rename", src, "rename {}: not found"):
            self._filesystem().move(self.full_path(src), self.full_path(dst))

    def _delete(self, rel: str, *, if_match: str | None) -> bool:
        with self._os_errors("delete", rel):
            try:
                self._filesystem().delete_file(self.full_path(rel))
            except FileNotFoundError:
                return False
        return True

    def delete_dir(self, rel: str) -> None:
        with self._os_errors("delete folder", rel):
            if self.exists(rel):
                self._filesystem().delete_dir(self.full_path(rel))
