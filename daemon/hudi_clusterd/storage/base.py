"""The storage seam: what every storage of a table offers, whatever it is built on (docs/architecture.md, "storage/").

Paths given to ``Storage`` methods are relative to the storage's base path, with ``/`` separators, and confined to
it (`Storage.confined`, `Storage.rel_from_uri`). A storage is opened from a `StorageSpec` (``open_storage``); each
implementation declares what it can do atomically (`Capabilities`), and callers that need a guarantee check it
instead of asking what the storage is: a storage refuses, with a `StorageError`, an ``if_match`` it cannot honour
atomically rather than pretend.
"""

from __future__ import annotations

import enum
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
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


@dataclass(frozen=True)
class StorageSpec:
    """Where a storage is (a local path or a URI) and the options its file system needs (an object store's
    endpoint, region, and possibly its credentials: `is_secret_option` values never show in the spec's repr).
    Picklable: Spark tasks get a spec and open it (`open_storage`)."""

    uri: str
    options: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __repr__(self) -> str:
        options = {k: "***" if is_secret_option(k) else v for k, v in self.options.items()}
        return f"StorageSpec(uri={self.uri!r}, options={options!r})"

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
"""Name of the temporary file of an atomic write (`LocalStorage`): ``.<uuid hex>.tmp`` (``.<name>.<uuid hex>.tmp``
is recognised too). It carries no part of the final name: Hudi 0.15 takes any name that starts with a dot and
*contains* a log file's name for a log file, so a temporary file named after a log file would be listed."""


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

    def __init__(self, spec: StorageSpec | str) -> None:
        self.spec = spec if isinstance(spec, StorageSpec) else StorageSpec(spec)
        self.base_uri = self.spec.uri.rstrip("/") or self.spec.uri

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

    def _named(self, rel: str) -> str:
        """``rel`` as this storage's messages name it: its `full_path` (an object store's: its `uri`)."""
        return self.full_path(rel)

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

    @contextmanager
    def _os_errors(self, op: str, rel: str, not_found: str | None = None) -> Iterator[None]:
        """Turn the file system's errors on ``rel`` into one-line `StorageError`s naming it: ``<op> <path>: <error>``,
        or ``not_found`` (the path in place of ``{}``) for a file not found, when given."""
        try:
            yield
        except OSError as e:
            if not_found is not None and isinstance(e, FileNotFoundError):
                raise StorageError(not_found.format(self.full_path(rel))) from e
            raise StorageError(f"{op} {self.full_path(rel)}: {e}") from e

    def _reading(self, op: str, rel: str) -> AbstractContextManager[None]:
        return self._os_errors(op, rel, "file not found: {}")

    def uri(self, rel: str = "") -> str:
        """A full path with scheme, as Hudi records files in its plans and as Spark reads them."""
        rel = self.confined(rel).strip("/")
        return f"{self.base_uri}/{rel}" if rel else self.base_uri

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
        store's). A write whose outcome is unknown is settled by reading the file back, and tried again within
        `retry`'s deadline (`storage.settle`)."""
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
        """Delete one file; True if it existed (``missing_ok=False``: `StorageError` if not). ``if_match``: only
        that version, else `PreconditionFailed` (refused, `StorageError`, where ``conditional_delete`` does not
        hold). A delete whose outcome is unknown is settled by looking again, and tried again within `retry`'s
        deadline (`storage.settle`)."""
        self._check_conditional(self.confined(rel), None, if_match)
        from hudi_clusterd.storage.settle import settled_delete

        existed = settled_delete(self, rel, if_match)
        if not existed and not missing_ok:
            raise StorageError(f"delete {self._named(rel)}: not found")
        return existed

    @abstractmethod
    def _delete(self, rel: str, *, if_match: str | None) -> bool:
        """One attempt of `delete`, as the store answers it: whether the file was there."""

    @abstractmethod
    def delete_dir(self, rel: str) -> None:
        """Delete a folder and everything in it (nothing when absent)."""

    def touch(self, rel: str) -> None:
        """Refresh a file's modification time (lock heartbeats); here, by writing its bytes again."""
        self.put(rel, self.read_bytes(rel))

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

