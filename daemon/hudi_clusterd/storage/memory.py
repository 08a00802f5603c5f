"""Storage in memory, for tests: thread-safe, with real create-if-absent, compare-and-swap and versions.

``memory://<volume>/<path>`` names folder ``<path>`` of the named volume. Volumes live in the registry that the
class `MemoryStorage` owns (`MemoryVolumes`), so every storage opened on one name in this process, from any
thread, sees the same files; `MemoryVolumes.drop` forgets one. Folders exist when made, or while they hold a
file. A file's version is a counter of the volume that every write of any file advances.
"""

from __future__ import annotations

import io
import threading
import time
from dataclasses import dataclass
from typing import ClassVar
from urllib.parse import urlsplit

import pyarrow as pa

from hudi_clusterd.errors import PreconditionFailed, StorageError
from hudi_clusterd.storage.base import Capabilities, FileInfo, PutMode, Storage, StorageSpec, join
from hudi_clusterd.storage.paths import inside, outside

MEMORY_CAPABILITIES = Capabilities(atomic_create=True, conditional_update=True, atomic_rename=True, atomic_put=True,
                                   conditional_delete=True, unique_versions=True, empty_folders=True)


@dataclass(frozen=True, slots=True)
class _Entry:
    data: bytes
    version: int
    mtime_ns: int

    def info(self, rel: str) -> FileInfo:
        return FileInfo(rel, len(self.data), self.mtime_ns // 1_000_000, False, str(self.version))


class MemoryVolume:
    """The files and folders of one named volume; every method is atomic."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.files: dict[str, _Entry] = {}
        self.dirs: set[str] = set()
        self._counter = 0

    def next_version(self) -> int:
        with self.lock:
            self._counter += 1
            return self._counter

    def is_dir(self, key: str) -> bool:
        with self.lock:
            prefix = key + "/" if key else ""
            return key == "" or key in self.dirs or any(k.startswith(prefix) for k in (*self.files, *self.dirs))


class MemoryVolumes:
    """Named volumes of this process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._volumes: dict[str, MemoryVolume] = {}

    def get(self, name: str) -> MemoryVolume:
        """The volume of that name, made empty on first use."""
        with self._lock:
            return self._volumes.setdefault(name, MemoryVolume())

    def drop(self, name: str) -> None:
        with self._lock:
            self._volumes.pop(name, None)


class _Output(io.BytesIO):
    """Collects a file's bytes; the file appears, whole, when the stream is closed."""

    def __init__(self, storage: MemoryStorage, rel: str) -> None:
        super().__init__()
        self._storage = storage
        self._rel = rel

    def close(self) -> None:
        if not self.closed:
            self._storage.put(self._rel, self.getvalue())
        super().close()


class MemoryStorage(Storage):
    """File operations relative to one folder of a memory volume."""

    volumes: ClassVar[MemoryVolumes] = MemoryVolumes()
    capabilities = MEMORY_CAPABILITIES
    spark_readable = False

    def __init__(self, spec: StorageSpec | str) -> None:
        super().__init__(spec)
        if self.spec.scheme != "memory":
            raise StorageError(f"{self.spec.uri}: not a memory:// URI")
        parts = urlsplit(self.spec.uri)
        if not parts.netloc:
            raise StorageError(f"{self.spec.uri}: a memory storage needs a volume name (memory://<name>/<path>)")
        self.volume_name = parts.netloc
        self.root = parts.path.strip("/")
        self.volume = MemoryStorage.volumes.get(self.volume_name)

    # --- paths ------------------------------------------------------------------------------------------------

    def _key(self, rel: str) -> str:
        return join(self.root, self.confined(rel))

    def full_path(self, rel: str = "") -> str:
        return join(self.volume_name, self.root, self.confined(rel))

    def uri(self, rel: str = "") -> str:
        return f"memory://{self.full_path(rel)}"

    def rel_from_uri(self, uri: str) -> str:
        if uri.startswith("memory://"):
            path = uri[len("memory://"):]
        elif "://" in uri:
            raise outside(uri, self.base_uri, "another scheme")
        else:
            path = uri
        return inside("/" + path.lstrip("/"), "/" + self.full_path(), uri, self.base_uri)

    def child(self, rel: str) -> MemoryStorage:
        return MemoryStorage(self.spec.child(self.confined(rel)))

    # --- reading ----------------------------------------------------------------------------------------------

    def info(self, rel: str) -> FileInfo | None:
        key = self._key(rel)
        with self.volume.lock:
            entry = self.volume.files.get(key)
            if entry is not None:
                return entry.info(rel)
            if self.volume.is_dir(key):
                return FileInfo(rel, 0, 0, True)
        return None

    def list_dir(self, rel: str = "") -> list[FileInfo]:
        key = self._key(rel)
        prefix = key + "/" if key else ""
        out: dict[str, FileInfo] = {}
        with self.volume.lock:
            for k, entry in self.volume.files.items():
                if k.startswith(prefix):
                    name, _, rest = k[len(prefix):].partition("/")
                    out[name] = FileInfo(join(rel, name), 0, 0, True) if rest else entry.info(join(rel, name))
            for d in self.volume.dirs:
                if d.startswith(prefix):
                    name = d[len(prefix):].split("/", 1)[0]
                    out.setdefault(name, FileInfo(join(rel, name), 0, 0, True))
        return [out[name] for name in sorted(out)]

    def _entry(self, rel: str) -> _Entry:
        entry = self.volume.files.get(self._key(rel))
        if entry is None:
            raise StorageError(f"file not found: {self.full_path(rel)}")
        return entry

    def read_bytes(self, rel: str) -> bytes:
        with self.volume.lock:
            return self._entry(rel).data

    def open_input_file(self, rel: str) -> pa.NativeFile:
        return pa.BufferReader(self.read_bytes(rel))

    # --- writing ----------------------------------------------------------------------------------------------

    def open_output(self, rel: str) -> pa.NativeFile:
        return pa.PythonFile(_Output(self, self.confined(rel)), mode="w")

    def _expect(self, rel: str, current: _Entry | None, if_match: str | None) -> None:
        """`PreconditionFailed` unless ``if_match`` is None or the version of ``current``."""
        if if_match is not None and (current is None or str(current.version) != if_match):
            raise PreconditionFailed(f"{self.full_path(rel)}: version {if_match} expected, found "
                                     f"{'no file' if current is None else current.version}")

    def _put(self, rel: str, data: bytes, *, mode: PutMode, if_match: str | None) -> FileInfo | None:
        key = self._key(rel)
        with self.volume.lock:
            current = self.volume.files.get(key)
            if mode is PutMode.CREATE and current is not None:
                return None
            self._expect(rel, current, if_match)
            if current is None and self.volume.is_dir(key) and key:
                raise StorageError(f"write {self.full_path(rel)}: a folder has that name")
            entry = _Entry(bytes(data), self.volume.next_version(), time.time_ns())
            self.volume.files[key] = entry
        return entry.info(rel)

    def makedirs(self, rel: str) -> None:
        key = self._key(rel)
        with self.volume.lock:
            if key in self.volume.files:
                raise StorageError(f"mkdir {self.full_path(rel)}: a file has that name")
            if key:
                self.volume.dirs.add(key)

    def rename(self, src: str, dst: str) -> None:
        src_key, dst_key = self._key(src), self._key(dst)
        with self.volume.lock:
            entry = self.volume.files.pop(src_key, None)
            if entry is None:
                raise StorageError(f"rename {self.full_path(src)}: not found")
            self.volume.files[dst_key] = _Entry(entry.data, self.volume.next_version(), entry.mtime_ns)

    def _delete(self, rel: str, *, if_match: str | None) -> bool:
        key = self._key(rel)
        with self.volume.lock:
            self._expect(rel, self.volume.files.get(key), if_match)
            return self.volume.files.pop(key, None) is not None

    def delete_dir(self, rel: str) -> None:
        key = self._key(rel)
        prefix = key + "/" if key else ""
        with self.volume.lock:
            for k in [k for k in self.volume.files if k.startswith(prefix)]:
                del self.volume.files[k]
            self.volume.dirs = {d for d in self.volume.dirs if d != key and not d.startswith(prefix)}

    def touch(self, rel: str) -> None:
        with self.volume.lock:
            entry = self._entry(rel)
            self.volume.files[self._key(rel)] = _Entry(entry.data, entry.version, time.time_ns())
