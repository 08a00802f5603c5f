"""Storage on the local (or a mounted) file system.

Instant files must appear whole: a file is written to a hidden temporary name in the same folder (``.<uuid
hex>.tmp``, see ``base._TEMP_FILE``), flushed to disk, and then linked into place (create-if-absent: the link
fails when the name exists, so of racing creators exactly one wins) or renamed over the old file (overwrite).
A file's version is its inode, modification time and size: an overwrite brings a new inode (the temporary
file's), so the version changes on every overwrite. Conditional updates are not offered: no local primitive
replaces a file only if it is still a given version.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from hudi_clusterd.errors import StorageError
from hudi_clusterd.storage.base import Capabilities, FileInfo, PutMode, Storage, StorageSpec, join, parent_of
from hudi_clusterd.storage.paths import inside, outside

LOCAL_CAPABILITIES = Capabilities(atomic_create=True, conditional_update=False, atomic_rename=True, atomic_put=True,
                                  conditional_delete=False, unique_versions=True, empty_folders=True)


def _without_scheme(uri: str) -> str:
    """The path of a ``file:`` URI (``file:/x``, ``file:///x``); any other text as it is."""
    path = uri
    if path.startswith("file:"):
        path = path[len("file:"):]
        while path.startswith("//"):
            path = path[1:]
    return path


def _local_path(uri: str) -> str:
    return str(Path(_without_scheme(uri)).expanduser().resolve())


def _version(st: os.stat_result) -> str:
    return f"{st.st_ino:x}.{st.st_mtime_ns:x}.{st.st_size:x}"


def _info(rel: str, st: os.stat_result) -> FileInfo:
    is_dir = stat.S_ISDIR(st.st_mode)
    return FileInfo(rel, 0 if is_dir else int(st.st_size), int(st.st_mtime_ns // 1_000_000), is_dir,
                    None if is_dir else _version(st))


class LocalStorage(Storage):
    """File operations relative to one local folder."""

    capabilities = LOCAL_CAPABILITIES

    def __init__(self, spec: StorageSpec | str) -> None:
        super().__init__(spec)
        if self.spec.scheme != "file":
            raise StorageError(f"{self.spec.uri}: not a local path")
        self.root = _local_path(self.spec.uri)
        self.spec = StorageSpec(self.root, self.spec.options)  # absolute: executors open the same folder

    def full_path(self, rel: str = "") -> str:
        return join(self.root, self.confined(rel))

    def uri(self, rel: str = "") -> str:
        return "file:" + self.full_path(rel)

    def rel_from_uri(self, uri: str) -> str:
        if "://" in uri and not uri.startswith("file:"):
            raise outside(uri, self.base_uri, "another scheme")
        return inside(_without_scheme(uri), self.root, uri, self.base_uri)

    def event_folder(self, rel: str = "") -> str | None:
        return self.full_path(rel)

    def child(self, rel: str) -> LocalStorage:
        return LocalStorage(self.spec.child(self.confined(rel)))

    def info(self, rel: str) -> FileInfo | None:
        with self._os_errors("stat", rel):
            try:
                return _info(rel, os.stat(self.full_path(rel)))
            except (FileNotFoundError, NotADirectoryError):
                return None

    def list_dir(self, rel: str = "") -> list[FileInfo]:
        out = []
        with self._os_errors("list", rel):
            try:
                with os.scandir(self.full_path(rel)) as entries:
                    for entry in entries:
                        with contextlib.suppress(FileNotFoundError):  # deleted while listed
                            out.append(_info(join(rel, entry.name), entry.stat()))
            except FileNotFoundError:
                return []
        return sorted(out, key=lambda f: f.name)

    def read_bytes(self, rel: str) -> bytes:
        with self._reading("read", rel), open(self.full_path(rel), "rb") as f:
            return f.read()

    def open_input_file(self, rel: str) -> pa.NativeFile:
        with self._reading("open", rel):
            return pafs.LocalFileSystem().open_input_file(self.full_path(rel))

    def open_output(self, rel: str) -> pa.NativeFile:
        path = self.full_path(rel)
        with self._os_errors("write", rel):
            os.makedirs(self.full_path(parent_of(rel)), exist_ok=True)
            return pafs.LocalFileSystem().open_output_stream(path)

    def makedirs(self, rel: str) -> None:
        with self._os_errors("mkdir", rel):
            os.makedirs(self.full_path(rel), exist_ok=True)

    def _put(self, rel: str, data: bytes, *, mode: PutMode, if_match: str | None) -> FileInfo | None:
        final = self.full_path(rel)
        folder = self.full_path(parent_of(rel))
        tmp = os.path.join(folder, f".{uuid.uuid4().hex}.tmp")  # never a name Hudi lists (base._TEMP_FILE)
        try:
            with self._os_errors("write", rel):
                try:
                    os.makedirs(folder, exist_ok=True)
                    with open(tmp, "wb") as f:
                        f.write(data)
                        f.flush()
                        os.fsync(f.fileno())
                        st = os.fstat(f.fileno())  # link and rename keep inode, mtime and size: the final version
                    if mode is PutMode.OVERWRITE:
                        os.replace(tmp, final)
                    else:
                        os.link(tmp, final)  # fails when the name exists: of racing creators, one wins
                except FileExistsError:
                    return None
            return _info(rel, st)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def rename(self, src: str, dst: str) -> None:
        src_path, dst_path = self.full_path(src), self.full_path(dst)
        with self._os_errors("rename", src, "rename {}: not found"):
            os.makedirs(self.full_path(parent_of(dst)), exist_ok=True)
            os.replace(src_path, dst_path)

    def _delete(self, rel: str, *, if_match: str | None) -> bool:
        with self._os_errors("delete", rel):
            try:
                os.unlink(self.full_path(rel))
            except FileNotFoundError:
                return False
        return True

    def delete_dir(self, rel: str) -> None:
        with self._os_errors("delete folder", rel):
            try:
                shutil.rmtree(self.full_path(rel))
            except FileNotFoundError:
                return

    def touch(self, rel: str) -> None:
        with self._os_errors("touch", rel):
            os.utime(self.full_path(rel))
