"""The storage seam: what every storage of a table offers, whatever it is built on.

Paths given to ``Storage`` methods are relative to the storage's base path, with ``/`` separators; every method
that takes one refuses, before any I/O, a path that leaves the base path (`Storage.confined`: an absolute path, a
``..`` segment, a backslash, a control character, a URI), and `Storage.rel_from_uri` a URI of another scheme,
bucket or folder, both with `PathOutsideStorageError` naming the path and the storage. A storage is
opened from a `StorageSpec` (``hudi_clusterd.storage.open_storage``); each implementation declares what it can
do atomically (`Capabilities`), and callers that need a guarantee check it instead of asking what the storage is.

Writes: `Storage.put` writes a whole file (so that readers never see it partly written, where ``atomic_put``
holds: local, memory and object stores, not HDFS), either unconditionally
(``PutMode.OVERWRITE``) or only when absent (``PutMode.CREATE``, which returns None when the file exists), and,
given ``if_match``, only over the exact version read before (compare-and-swap): a mismatch raises
`PreconditionFailed`. A storage without the ``conditional_update`` capability refuses ``if_match`` with a
`StorageError` rather than pretend: it cannot compare and swap atomically (likewise ``delete(if_match=...)``
without ``conditional_delete``).

Object stores (``storage.object``) differ from file systems in ways callers can see, each declared as a
capability: no rename at all (``atomic_rename`` False; `Storage.rename` refuses), no folder without files in it
(``empty_folders`` False: `Storage.makedirs` does nothing), and a version that is a hash of the content
(``unique_versions`` False: S3's ETag is the MD5 of the bytes, so a compare-and-swap writer must change the
bytes on every write it guards). Storages that count their requests (object stores) expose a `RequestCounts`
as `Storage.requests`; the others give None.
"""

from __future__ import annotations

import enum
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hudi_clusterd.errors import StorageError
from hudi_clusterd.retry import STORAGE_RETRY, RetryPolicy
from hudi_clusterd.storage.paths import confine

if TYPE_CHECKING:
    import pyarrow as pa

    from hudi_clusterd.storage.requests import RequestCounts


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One file or folder of a storage."""

    path: str  # relative to the base path
    size: int
    mtime_ms: int
    is_dir: bool
    version: str | None = None
    """Changes whenever the file is overwritten (None for folders, and where the storage cannot tell)."""

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class PutMode(enum.Enum):
    OVERWRITE = "overwrite"
    CREATE = "create"  # only if absent


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a storage does atomically."""

    atomic_create: bool  # PutMode.CREATE: of racing creators exactly one wins
    conditional_update: bool  # put with if_match compares and swaps atomically
    atomic_rename: bool  # rename moves a file in one step (never two copies, never none)
    atomic_put: bool  # readers never see a file that put is still writing
    conditional_delete: bool  # delete with if_match compares and deletes atomically
    unique_versions: bool  # every write gives a new version, even of identical bytes (False: a content hash)
    empty_folders: bool  # a folder exists without files in it (makedirs makes one that is listed)


_SECRET_WORDS = ("secret", "token", "password", "credential", "key")


def is_secret_option(key: str) -> bool:
    """Whether a storage option holds a secret, by its name: any key containing ``secret``, ``token``,
    ``password``, ``credential`` or ``key`` (case-insensitive). Broad on purpose: ``access_key_id`` or
    ``sse_kms_key_id`` are hidden too, which costs nothing, while a secret shown in a log cannot be taken back."""
    lower = key.lower()
    return any(word in lower for word in _SECRET_WORDS)


def redacted(options: Mapping[str, str]) -> dict[str, str]:
    """The options with every secret value (`is_secret_option`) replaced by ``***``."""
    return {k: "***" if is_secret_option(k) else v for k, v in options.items()}


@dataclass(frozen=True)
class StorageSpec:
    """Where a storage is (a local path or a URI) and the options its file system needs (an object store's
    endpoint, region, and possibly its credentials: `is_secret_option` values never show in the spec's repr).
    Picklable: Spark tasks get a spec and open it (`open_storage`)."""

    uri: str
    options: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __repr__(self) -> str:
        return f"StorageSpec(uri={self.uri!r}, options={redacted(self.options)!r})"

    @property
    def scheme(self) -> str:
        """``file`` for a plain path, else the URI's scheme in lower case."""
        return self.uri.split("://", 1)[0].lower() if "://" in self.uri else "file"

    def child(self, rel: str) -> StorageSpec:
        """The spec of folder ``rel`` below this one."""
        return StorageSpec(join(self.uri, rel) if "://" not in self.uri else _join_uri(self.uri, rel),
                           self.options)


def join(*parts: str) -> str:
    """Path parts joined with ``/``, leading and trailing slashes of each part dropped (a leading ``/`` of the
    first part is kept)."""
    joined = "/".join(p.strip("/") for p in parts if p and p.strip("/"))
    return "/" + joined if parts and parts[0].startswith("/") else joined


def _join_uri(uri: str, rel: str) -> str:
    rel = rel.strip("/")
    return uri.rstrip("/") + "/" + rel if rel else uri


def parent_of(rel: str) -> str:
    return rel.rsplit("/", 1)[0] if "/" in rel else ""


_TEMP_FILE = re.compile(r"\.(?:.+\.)?[0-9a-f]{32}\.tmp")
"""Name of the temporary file of an atomic write (`LocalStorage`): ``.<uuid hex>.tmp``. It carries no part of
the final name: Hudi 0.15 takes any name that starts with a dot and *contains* a log file's name for a log file
(its pattern is not anchored at the end), so a temporary ``..files-0000-0_<t>.log.1_0-0-0.<uuid>.tmp`` in a
metadata table partition would be listed, and then fail its reader once renamed. ``.<name>.<uuid hex>.tmp`` is
recognised too."""


def temp_file_name(uuid_hex: str) -> str:
    """The name of an atomic write's temporary file (see `_TEMP_FILE`: never a name Hudi lists)."""
    return f".{uuid_hex}.tmp"


def is_temp_file(name: str) -> bool:
    """Whether ``name`` is the name of an atomic write's temporary file."""
    return _TEMP_FILE.fullmatch(name) is not None


def is_stale_temp_file(entry: FileInfo, now_s: float, older_than_s: float) -> bool:
    """Whether a listed entry is a temporary file of an atomic write (``.<32 hex>.tmp``, the exact form
    `LocalStorage` creates) last modified over ``older_than_s`` ago: left by a process killed between writing and
    renaming it (a live write takes milliseconds)."""
    return (not entry.is_dir and is_temp_file(entry.name)
            and entry.mtime_ms < (now_s - older_than_s) * 1000)


class Storage(ABC):
    """File operations relative to one base path (see the module docstring)."""

    spec: StorageSpec
    base_uri: str
    """The base path as given (no trailing slash): the table's name in messages and keys."""
    capabilities: Capabilities
    retry: RetryPolicy = STORAGE_RETRY
    """How long a request the store did not answer, or throttled, is tried again (writes settled first)."""
    spark_readable: bool = True
    """Whether Spark's own readers (the JVM's Hadoop file systems) open this storage's URIs. Where not (an object
    store reached through this process's client, a memory volume), the engine reads the files in its Python
    workers, through `open_storage`."""

    def s3a_options(self) -> dict[str, str] | None:
        """The Hadoop settings (``fs.s3a.bucket.<bucket>.*``) with which Spark's S3A connector reaches this
        storage's objects as this process does (`object_config.s3a_bucket_options`); None where S3A does not serve
        them (local folders, memory volumes, GCS, Azure). They hold credentials: never log them."""
        return None

    # --- paths ------------------------------------------------------------------------------------------------

    def confined(self, rel: str) -> str:
        """``rel`` when it stays below this storage's root, else `PathOutsideStorageError` naming it and the storage
        (`storage.paths.confine`). Every method that takes a relative path asks it before any I/O."""
        return confine(rel, self.base_uri)

    @abstractmethod
    def full_path(self, rel: str = "") -> str:
        """The path of ``rel`` without scheme, as messages name it."""

    @property
    def requests(self) -> RequestCounts | None:
        """The requests this storage (and its children) made, by kind; None for a storage that does not count
        them (local, memory, pyarrow file systems)."""
        return None

    def event_folder(self, rel: str = "") -> str | None:
        """The operating system's folder whose file-system events (watchdog) show changes under ``rel``; None for a
        storage that has no such events (an object store is polled)."""
        self.confined(rel)
        return None

    def _wrap(self, op: str, rel: str, e: Exception) -> StorageError:
        return StorageError(f"{op} {self.full_path(rel)}: {e}")

    @contextmanager
    def _reading(self, op: str, rel: str) -> Iterator[None]:
        """Turn the file system's errors of reading ``rel`` into `StorageError`s naming it."""
        try:
            yield
        except FileNotFoundError as e:
            raise StorageError(f"file not found: {self.full_path(rel)}") from e
        except OSError as e:
            raise self._wrap(op, rel, e) from e

    @abstractmethod
    def uri(self, rel: str = "") -> str:
        """A full path with scheme, as Hudi records files in its plans and as Spark reads them."""

    @abstractmethod
    def rel_from_uri(self, uri: str) -> str:
        """Inverse of ``uri``: a path relative to the base path. Refuses (`PathOutsideStorageError`) a URI of another
        scheme or bucket, one outside the base path, one with a ``..`` segment, and one whose path below the base
        `confined` refuses."""

    @abstractmethod
    def child(self, rel: str) -> Storage:
        """A storage of the same kind rooted at folder ``rel`` (its URIs keep the scheme)."""

    @property
    def supports_atomic_create(self) -> bool:
        """Whether create-if-absent is atomic (needed by the file-based table lock)."""
        return self.capabilities.atomic_create

    # --- reading ----------------------------------------------------------------------------------------------

    @abstractmethod
    def info(self, rel: str) -> FileInfo | None:
        """The file or folder ``rel``; None when absent."""

    def exists(self, rel: str) -> bool:
        return self.info(rel) is not None

    @abstractmethod
    def list_dir(self, rel: str = "") -> list[FileInfo]:
        """Entries directly in a folder, by name; empty when the folder does not exist."""

    @abstractmethod
    def read_bytes(self, rel: str) -> bytes:
        """A whole file; `StorageError` naming it when absent."""

    @abstractmethod
    def open_input_file(self, rel: str) -> pa.NativeFile:
        """A random-access reader of a file (what pyarrow's parquet reader takes); close it (``with``)."""

    # --- writing ----------------------------------------------------------------------------------------------

    def put(self, rel: str, data: bytes, *, mode: PutMode = PutMode.OVERWRITE, if_match: str | None = None
            ) -> FileInfo | None:
        """Write a whole file (atomically for readers where ``atomic_put`` holds). ``PutMode.CREATE`` returns
        None when the file exists; ``if_match`` (with ``OVERWRITE``) writes only over that version, else raises
        `PreconditionFailed` (also when the file is gone). Returns the written file's info (an object store does
        not say when it stamped the object: its ``mtime_ms`` is then this host's clock; `info` gives the
        store's).

        A write whose outcome is unknown (`TransientStorageError`: no answer, a reset, a server error) is settled
        by reading the file back: our bytes there mean it landed (its info is returned), another writer's mean the
        other writer won (None for a create, `PreconditionFailed` for a compare-and-swap), none mean it did not
        land and it is tried again, within `retry`'s deadline. A create that finds the file, or a compare-and-swap
        that fails its condition, is read back too: a client that retried a write of ours which had landed sees
        our own bytes there, and that is a success, not another writer."""
        self._check_conditional(self.confined(rel), mode, if_match)
        from hudi_clusterd.storage.settle import settled_put

        return settled_put(self, rel, data, mode, if_match)

    @abstractmethod
    def _put(self, rel: str, data: bytes, *, mode: PutMode, if_match: str | None) -> FileInfo | None:
        """One attempt of `put`, as the store answers it (no read-back, no retry)."""

    def write_bytes(self, rel: str, data: bytes, *, overwrite: bool = False) -> bool:
        """``put`` as a yes/no: with ``overwrite=False`` the file is created only if absent, and False is
        returned when it already exists."""
        return self.put(rel, data, mode=PutMode.OVERWRITE if overwrite else PutMode.CREATE) is not None

    @abstractmethod
    def open_output(self, rel: str) -> pa.NativeFile:
        """A stream writing a new file in place (not atomic: for base files, which no reader trusts before their
        commit); the file exists once the stream is closed."""

    @abstractmethod
    def makedirs(self, rel: str) -> None:
        """Make a folder (and its parents); nothing where ``empty_folders`` does not hold."""

    @abstractmethod
    def rename(self, src: str, dst: str) -> None:
        """Move a file over ``dst``; `StorageError` when ``src`` is gone (one of racing movers wins where
        ``atomic_rename`` holds: stale locks are taken over this way). Object stores refuse (`StorageError`)."""

    def delete(self, rel: str, *, if_match: str | None = None, missing_ok: bool = True) -> bool:
        """Delete one file; True if it existed. ``if_match``: only that version, else `PreconditionFailed`
        (refused, `StorageError`, where ``conditional_delete`` does not hold). A delete whose outcome is unknown
        (`TransientStorageError`) is settled by looking again: the file gone means it landed (True); still there
        (at the version asked for) means it is tried again, within `retry`'s deadline."""
        self._check_conditional(self.confined(rel), None, if_match)
        from hudi_clusterd.storage.settle import settled_delete

        return settled_delete(self, rel, if_match, missing_ok)

    @abstractmethod
    def _delete(self, rel: str, *, if_match: str | None, missing_ok: bool) -> bool:
        """One attempt of `delete`, as the store answers it."""

    @abstractmethod
    def delete_dir(self, rel: str) -> None:
        """Delete a folder and everything in it (nothing when absent)."""

    @abstractmethod
    def touch(self, rel: str) -> None:
        """Refresh a file's modification time (lock heartbeats)."""

    # --- shared checks ----------------------------------------------------------------------------------------

    def _check_conditional(self, rel: str, mode: PutMode | None, if_match: str | None) -> None:
        """Refuse ``if_match`` where it cannot hold: ``mode`` is the put's mode, None for a delete."""
        if if_match is None:
            return
        if mode is None and not self.capabilities.conditional_delete:
            raise StorageError(f"{self.full_path(rel)}: this storage ({self.spec.scheme}) cannot delete a file "
                               "conditionally")
        if mode is not None and not self.capabilities.conditional_update:
            raise StorageError(f"{self.full_path(rel)}: this storage ({self.spec.scheme}) cannot update a file "
                               "conditionally")
        if mode is PutMode.CREATE:
            raise StorageError(f"{self.full_path(rel)}: if_match applies to an overwrite, not to a create")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_uri!r})"

