"""Storage for one table: a small port over ``pyarrow.fs`` rooted at the table's base path.

Paths given to ``Storage`` methods are relative to the base path, with ``/`` separators. The local file
system is the default; any pyarrow filesystem URI works (``s3://``, ``gs://``, ``hdfs://``...).

Atomicity: instant files must appear whole. Locally a file is written to a hidden temporary name in the same
folder and then linked (create-if-absent) or renamed (overwrite) into place. Elsewhere create-if-absent is a
check followed by a write, which two writers can both pass: object stores cannot do better, and HDFS's own
exclusive create is not reachable through ``pyarrow.fs``. ``supports_atomic_create`` is therefore True only
locally, and the table lock refuses other storage (see ``hudi_clusterd.lock``).
"""

from __future__ import annotations

import errno
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs

from hudi_clusterd.errors import StorageError


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One entry of a folder listing."""

    path: str  # relative to the base path
    size: int
    mtime_ms: int
    is_dir: bool

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


_TEMP_FILE = re.compile(r"\.(?:.+\.)?[0-9a-f]{32}\.tmp")
"""Name of the temporary file of an atomic write (`Storage._write_local`): ``.<uuid hex>.tmp``. It carries no part
of the final name: Hudi 0.15 takes any name that starts with a dot and *contains* a log file's name for a log file
(its pattern is not anchored at the end), so a temporary ``..files-0000-0_<t>.log.1_0-0-0.<uuid>.tmp`` in a
metadata table partition would be listed, and then fail its reader once renamed. ``.<name>.<uuid hex>.tmp`` is
recognised too."""


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


class Storage:
    """File operations relative to one base path."""

    def __init__(self, base_uri: str, filesystem: pafs.FileSystem | None = None) -> None:
        self.base_uri = base_uri.rstrip("/") or base_uri
        if filesystem is not None:
            self.fs = filesystem
            self.root = self.base_uri
        elif "://" in base_uri and not base_uri.startswith("file://"):
            try:
                self.fs, self.root = pafs.FileSystem.from_uri(base_uri)
            except Exception as e:
                raise StorageError(f"cannot open storage for {base_uri!r}: {e}") from e
        else:
            local = base_uri[len("file://"):] if base_uri.startswith("file://") else base_uri
            self.fs = pafs.LocalFileSystem()
            self.root = str(Path(local).expanduser().resolve())
        self.is_local = isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def supports_atomic_create(self) -> bool:
        """Whether create-if-absent is atomic (needed by the file-based table lock)."""
        return self.is_local

    def full_path(self, rel: str = "") -> str:
        """The filesystem path (no scheme) of ``rel``."""
        return _join(self.root, rel) if not self.root.startswith("/") else "/" + _join(self.root, rel)

    def uri(self, rel: str = "") -> str:
        """A full path with scheme, as Hudi records base files in clustering plans (``file:/...`` locally)."""
        if self.is_local:
            return "file:" + self.full_path(rel)
        scheme = self.base_uri.split("://", 1)[0]
        return f"{scheme}://{_join(self.root, rel)}"

    def rel_from_uri(self, uri: str) -> str:
        """Inverse of ``uri``: a path relative to the base path; refuses paths outside the table."""
        path = uri
        if path.startswith("file:"):
            path = path[len("file:"):]
            while path.startswith("//"):
                path = path[1:]
        elif "://" in path:
            path = path.split("://", 1)[1]
        root = self.full_path().rstrip("/")
        norm = os.path.normpath(path) if self.is_local else path
        if not (norm == root or norm.startswith(root + "/")):
            raise StorageError(f"path {uri!r} is outside the table's base path {self.base_uri!r}")
        return norm[len(root):].lstrip("/")

    def _wrap(self, op: str, rel: str, e: Exception) -> StorageError:
        return StorageError(f"{op} {self.full_path(rel)}: {e}")

    def exists(self, rel: str) -> bool:
        try:
            return bool(self.fs.get_file_info(self.full_path(rel)).type != pafs.FileType.NotFound)
        except OSError as e:
            raise self._wrap("stat", rel, e) from e

    def info(self, rel: str) -> FileInfo | None:
        try:
            fi = self.fs.get_file_info(self.full_path(rel))
        except OSError as e:
            raise self._wrap("stat", rel, e) from e
        if fi.type == pafs.FileType.NotFound:
            return None
        return self._to_info(rel, fi)

    @staticmethod
    def _to_info(rel: str, fi: pafs.FileInfo) -> FileInfo:
        mtime = fi.mtime_ns // 1_000_000 if fi.mtime_ns is not None else 0
        is_dir = fi.type == pafs.FileType.Directory
        return FileInfo(rel, 0 if is_dir else int(fi.size or 0), int(mtime), is_dir)

    def list_dir(self, rel: str = "") -> list[FileInfo]:
        """Entries directly in a folder; empty when the folder does not exist."""
        selector = pafs.FileSelector(self.full_path(rel), allow_not_found=True, recursive=False)
        try:
            infos = self.fs.get_file_info(selector)
        except OSError as e:
            raise self._wrap("list", rel, e) from e
        return [self._to_info(_join(rel, fi.base_name), fi) for fi in infos]

    def read_bytes(self, rel: str) -> bytes:
        try:
            with self.fs.open_input_stream(self.full_path(rel)) as f:
                return bytes(f.read())
        except FileNotFoundError as e:
            raise StorageError(f"file not found: {self.full_path(rel)}") from e
        except OSError as e:
            raise self._wrap("read", rel, e) from e

    def makedirs(self, rel: str) -> None:
        try:
            self.fs.create_dir(self.full_path(rel), recursive=True)
        except OSError as e:
            raise self._wrap("mkdir", rel, e) from e

    def write_bytes(self, rel: str, data: bytes, *, overwrite: bool = False) -> bool:
        """Write a whole file so that readers never see it partly written.

        With ``overwrite=False`` the file is created only if absent and False is returned when it already
        exists (atomically so on local storage)."""
        parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
        if self.is_local:
            return self._write_local(rel, parent, data, overwrite)
        if not overwrite and self.exists(rel):
            return False
        try:
            with self.fs.open_output_stream(self.full_path(rel)) as f:
                f.write(data)
        except OSError as e:
            raise self._wrap("write", rel, e) from e
        return True

    def _write_local(self, rel: str, parent: str, data: bytes, overwrite: bool) -> bool:
        final = self.full_path(rel)
        folder = self.full_path(parent)
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{uuid.uuid4().hex}.tmp")  # never a name Hudi lists (see _TEMP_FILE)
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if overwrite:
                os.replace(tmp, final)
                return True
            try:
                os.link(tmp, final)
            except FileExistsError:
                return False
            return True
        except OSError as e:
            if e.errno == errno.EEXIST:
                return False
            raise self._wrap("write", rel, e) from e
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def rename(self, src: str, dst: str) -> None:
        """Move a file; on local storage fails if ``src`` vanished (used to take over stale locks)."""
        try:
            self.fs.move(self.full_path(src), self.full_path(dst))
        except FileNotFoundError as e:
            raise StorageError(f"rename {self.full_path(src)}: not found") from e
        except OSError as e:
            raise self._wrap("rename", src, e) from e

    def delete(self, rel: str, *, missing_ok: bool = True) -> bool:
        """Delete one file; True if it existed."""
        try:
            self.fs.delete_file(self.full_path(rel))
            return True
        except FileNotFoundError:
            if missing_ok:
                return False
            raise StorageError(f"delete {self.full_path(rel)}: not found") from None
        except OSError as e:
            raise self._wrap("delete", rel, e) from e

    def delete_dir(self, rel: str) -> None:
        try:
            if self.exists(rel):
                self.fs.delete_dir(self.full_path(rel))
        except OSError as e:
            raise self._wrap("delete folder", rel, e) from e

    def touch(self, rel: str) -> None:
        """Refresh a file's modification time (lock heartbeats)."""
        if self.is_local:
            try:
                os.utime(self.full_path(rel))
            except OSError as e:
                raise self._wrap("touch", rel, e) from e
        else:
            self.write_bytes(rel, self.read_bytes(rel), overwrite=True)


def is_stale_temp_file(entry: FileInfo, now_s: float, older_than_s: float) -> bool:
    """Whether a listed entry is a temporary file of an atomic write (``.<32 hex>.tmp``, the exact form
    `Storage` creates) last modified over ``older_than_s`` ago: left by a process killed between writing and
    renaming it (a live write takes milliseconds)."""
    return (not entry.is_dir and _TEMP_FILE.fullmatch(entry.name) is not None
            and entry.mtime_ms < (now_s - older_than_s) * 1000)
