"""Storage on object stores (S3, GCS, Azure) through obstore, the Python binding of Rust's ``object_store``.

Paths are keys below the base URI's key; the client (`object_config.ObjectClient`) is built on first I/O
(options, then the environment, then the SDKs' credential chains) and shared, with its `RequestCounts`, by every
``child``. What it guarantees (`Capabilities`):

- **Create-if-absent and compare-and-swap are atomic**: ``PutMode.CREATE`` is a conditional ``PUT``
  (``If-None-Match: *``), ``if_match`` a conditional ``PUT`` on the version read (``If-Match``; GCS: the
  generation). A version is the object's ETag as the store quotes it (quotes kept); on S3 it is the MD5 of the
  bytes, so identical bytes keep the version (``unique_versions`` is False there). An update of a missing object
  fails its condition (412 or 404, by store) and raises `PreconditionFailed` either way.
- **Deletes are not conditional**: obstore 0.12 sends no ``If-Match`` with a ``DELETE``, so ``if_match`` is
  refused (``conditional_delete`` False). The table locks never delete conditionally (the storage lock never
  deletes at all). ``delete`` asks first whether the object exists (``HEAD``), to say whether it deleted one.
- **No rename**: a copy and a delete are two steps that others can see in between; `rename` refuses, naming both
  paths, and nothing the daemon does on an object store renames.
- **Folders are key prefixes**: ``makedirs`` does nothing, a folder exists while an object is below it.
  Directory markers (zero-byte ``…/`` keys that Hadoop's S3A connector leaves for empty folders) are folders and
  never files: obstore lists a marker as an object named like its folder, and `list_dir` drops such an object
  (the listed folder's own marker) and keeps the common prefixes as folders. obstore cannot address a key ending
  in ``/``, so ``delete_dir`` cannot remove S3A's markers on AWS; it also deletes the folder names of the keys it
  deleted, which removes the emptied folders that a file-system-backed store (SeaweedFS) keeps listing.
- **Reads by ranges**: `open_input_file` reads the byte ranges asked for (`object_io.RangeReader`), starting with
  one suffix-range ``GET`` of the object's last `MIN_FETCH` bytes that also tells its size (a Parquet footer is
  read from it; no ``HEAD``; on Azure, a ``HEAD`` for the size); `read_bytes` gets the whole object. Writes: `put`
  is one ``PUT``; `open_output` uploads on close (one ``PUT``, or a multipart upload for large files), so the
  object appears whole, only when the stream is closed.
- **Listings** are the store's pages (``LIST``, 1000 entries each): a delimiter listing for `list_dir`, a flat one
  for `info` of a folder (one entry is enough) and `delete_dir`.
- **Spark** reads the files in its Python workers through this storage (``spark_readable`` is False): no Hadoop
  connector is needed, and the spec's options travel to the tasks with the spec. On S3, `s3a_options` gives the
  settings with which Hadoop's S3A connector reaches the same objects, for a Spark set to read through it.
"""

from __future__ import annotations

import contextlib
import math
import posixpath
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

import pyarrow as pa

from hudi_clusterd.errors import PreconditionFailed, StorageError
from hudi_clusterd.storage.base import Capabilities, FileInfo, PutMode, Storage, StorageSpec, join
from hudi_clusterd.storage.object_config import (
    MemoryBuckets,
    ObjectClient,
    parse_location,
    s3a_bucket_options,
    versions,
)
from hudi_clusterd.storage.object_io import (
    MIN_FETCH,
    PART_BYTES,
    UPLOAD_CONCURRENCY,
    RangeReader,
    UploadWriter,
    upload_requests,
)
from hudi_clusterd.storage.paths import inside, outside
from hudi_clusterd.storage.requests import (
    DELETE,
    GET,
    HEAD,
    LIST,
    PRECONDITION_FAILED,
    PUT,
    RequestCounts,
    object_error,
)

if TYPE_CHECKING:
    from obstore import ObjectMeta

PAGE: int = 1000
"""Entries per listing page, and keys per bulk delete."""


class ObjectStorage(Storage):
    """File operations relative to one prefix of a bucket (see the module docstring)."""

    memory_buckets: ClassVar[MemoryBuckets] = MemoryBuckets()
    """The in-memory stores that the storage option ``store=memory`` names (tests)."""
    spark_readable = False  # Hadoop's S3A, GCS and ABFS connectors have credentials and endpoints of their own

    def __init__(self, spec: StorageSpec | str, *, client: ObjectClient | None = None) -> None:
        spec = spec if isinstance(spec, StorageSpec) else StorageSpec(spec)
        self.location = parse_location(spec.uri)
        self.spec = spec
        self.base_uri = spec.uri.rstrip("/")
        self.root = self.location.key
        if client is not None and not client.location.same_bucket(self.location):
            raise StorageError(f"{spec.uri}: not in the bucket of {client.location.scheme}://{client.location.netloc}")
        self.client = client or ObjectClient(self.location, spec.options, ObjectStorage.memory_buckets)
        kind = versions(self.location, spec.options)
        self._version_field = kind.field
        self.capabilities = Capabilities(atomic_create=True, conditional_update=True, atomic_rename=False,
                                         atomic_put=True, conditional_delete=False, unique_versions=kind.unique,
                                         empty_folders=False)

    # --- paths ------------------------------------------------------------------------------------------------

    def _key(self, rel: str) -> str:
        return join(self.root, self.confined(rel))

    def full_path(self, rel: str = "") -> str:
        return join(self.location.netloc, self.root, self.confined(rel))

    def uri(self, rel: str = "") -> str:
        rel = self.confined(rel).strip("/")
        return f"{self.base_uri}/{rel}" if rel else self.base_uri

    def rel_from_uri(self, uri: str) -> str:
        path = uri
        if "://" in uri:
            parts = urlsplit(uri)
            scheme = parts.scheme.lower()
            family = {"s3a": "s3", "abfss": "abfs"}.get(scheme, scheme)
            if family != self.location.family or parts.netloc != self.location.netloc:
                raise outside(uri, self.base_uri, "another scheme or bucket")
            path = join(parts.netloc, parts.path)
        return inside(path, self.full_path(), uri, self.base_uri)

    def _named(self, rel: str) -> str:
        return self.uri(rel)

    def s3a_options(self) -> dict[str, str] | None:
        return s3a_bucket_options(self.location, self.spec.options)

    def child(self, rel: str) -> ObjectStorage:
        return ObjectStorage(self.spec.child(self.confined(rel)), client=self.client)

    @property
    def requests(self) -> RequestCounts:
        return self.client.requests

    # --- requests -----------------------------------------------------------------------------------------------

    def _count(self, kind: str, n: int = 1) -> None:
        self.client.requests.add(kind, n)

    @contextmanager
    def _request(self, op: str, rel: str) -> Iterator[None]:
        """Turn obstore's errors into one-line `StorageError`s naming the object and the endpoint."""
        try:
            yield
        except StorageError:
            raise
        except Exception as e:
            raise object_error(op, self.uri(rel), self.client.endpoint, e) from e

    def _head(self, rel: str) -> ObjectMeta | None:
        import obstore as obs

        self._count(HEAD)
        with self._request("stat", rel):
            try:
                return obs.head(self.client.store, self._key(rel))
            except FileNotFoundError:
                return None

    def _info(self, rel: str, meta: ObjectMeta) -> FileInfo:
        version = meta.get(self._version_field) or meta.get("e_tag")
        return FileInfo(rel, int(meta["size"]), int(meta["last_modified"].timestamp() * 1000), False, version)

    def _pages(self, entries: int) -> int:
        return max(1, math.ceil(entries / PAGE))

    # --- reading ----------------------------------------------------------------------------------------------

    def info(self, rel: str) -> FileInfo | None:
        import obstore as obs

        if self._key(rel):
            meta = self._head(rel)
            if meta is not None:
                return self._info(rel, meta)
        self._count(LIST)
        with self._request("list", rel):
            found = next(iter(obs.list(self.client.store, self._key(rel) or None, chunk_size=1)), [])
        return FileInfo(rel, 0, 0, True) if found else None

    def list_dir(self, rel: str = "") -> list[FileInfo]:
        import obstore as obs

        prefix = self._key(rel)
        with self._request("list", rel):
            try:
                listed = obs.list_with_delimiter(self.client.store, prefix or None)
            finally:
                self._count(LIST)
        extra = len(listed["objects"]) + len(listed["common_prefixes"]) - PAGE
        if extra > 0:
            self._count(LIST, self._pages(extra))
        out: dict[str, FileInfo] = {}
        for folder in listed["common_prefixes"]:
            name = folder.rstrip("/").rsplit("/", 1)[-1]
            out[name] = FileInfo(join(rel, name), 0, 0, True)
        for meta in listed["objects"]:
            path = meta["path"].rstrip("/")
            if path == prefix:
                continue  # the folder's own directory marker
            name = path.rsplit("/", 1)[-1]
            out.setdefault(name, self._info(join(rel, name), meta))
        return [out[name] for name in sorted(out)]

    def read_bytes(self, rel: str) -> bytes:
        import obstore as obs

        self._count(GET)
        with self._request("read", rel):
            try:
                data = bytes(obs.get(self.client.store, self._key(rel)).bytes())
            except FileNotFoundError as e:
                raise StorageError(f"file not found: {self.uri(rel)}") from e
        self.client.requests.add_bytes_read(len(data))
        return data

    def open_input_file(self, rel: str) -> pa.NativeFile:
        size, tail = self._tail(rel)
        return pa.PythonFile(RangeReader(lambda start, end: self._range(rel, start, end), size, self.uri(rel),
                                         tail), mode="r")

    def _tail(self, rel: str) -> tuple[int, bytes]:
        """The object's size and its last `MIN_FETCH` bytes (all of it when smaller), from one suffix-range
        ``GET``; a store that refuses the range (S3 for an empty object) is asked the size instead (a ``HEAD``),
        and so is Azure, to which obstore sends no suffix range."""
        import obstore as obs

        if self.location.cloud == "azure":
            return self._size(rel), b""
        key = self._key(rel)
        self._count(GET)
        try:
            result = obs.get(self.client.store, key, options={"range": {"suffix": MIN_FETCH}})
            tail = bytes(result.bytes())
        except FileNotFoundError as e:
            raise StorageError(f"file not found: {self.uri(rel)}") from e
        except Exception:  # asked again: the HEAD's error names the object and the endpoint
            return self._size(rel), b""
        self.client.requests.add_bytes_read(len(tail))
        size = int(result.meta["size"])
        start, end = result.range
        if end != size or end - start != len(tail):
            raise StorageError(f"{self.uri(rel)}: the store answered the last {MIN_FETCH} bytes of an object of "
                               f"{size} with bytes {start}-{end} ({len(tail)} of them)")
        return size, tail

    def _size(self, rel: str) -> int:
        meta = self._head(rel)
        if meta is None:
            raise StorageError(f"file not found: {self.uri(rel)}")
        return int(meta["size"])

    def _range(self, rel: str, start: int, end: int) -> bytes:
        import obstore as obs

        self._count(GET)
        with self._request("read", rel):
            try:
                data = bytes(obs.get_range(self.client.store, self._key(rel), start=start, end=end))
            except FileNotFoundError as e:
                raise StorageError(f"file not found: {self.uri(rel)} (deleted while read)") from e
        self.client.requests.add_bytes_read(len(data))
        return data

    # --- writing ----------------------------------------------------------------------------------------------

    def _put(self, rel: str, data: bytes, *, mode: PutMode, if_match: str | None) -> FileInfo | None:
        import obstore as obs
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        obs_mode: Any = "create" if mode is PutMode.CREATE else "overwrite"
        if if_match is not None:
            obs_mode = {self._version_field: if_match}
        self._count(PUT)
        with self._request("write", rel):
            try:
                written = obs.put(self.client.store, self._key(rel), data, mode=obs_mode, use_multipart=False)
            except AlreadyExistsError:
                self._count(PRECONDITION_FAILED)
                return None
            except (PreconditionError, FileNotFoundError) as e:  # another version, or none (S3: 412, AWS: 404)
                if if_match is None:
                    raise
                self._count(PRECONDITION_FAILED)
                raise PreconditionFailed(f"{self.uri(rel)}: version {if_match} expected, found another version or "
                                         "no file") from e
        version = written.get(self._version_field) or written.get("e_tag")
        return FileInfo(rel, len(data), time.time_ns() // 1_000_000, False, version)

    def open_output(self, rel: str) -> pa.NativeFile:
        import obstore as obs

        with self._request("write", rel):
            writer = obs.open_writer(self.client.store, self._key(rel), buffer_size=PART_BYTES,
                                     max_concurrency=UPLOAD_CONCURRENCY)

        def done(total: int) -> None:
            for kind, n in upload_requests(total).items():
                self._count(kind, n)

        def wrap(e: Exception) -> Exception:
            return object_error("write", self.uri(rel), self.client.endpoint, e)

        return pa.PythonFile(UploadWriter(writer, self.uri(rel), done, wrap), mode="w")

    def makedirs(self, rel: str) -> None:
        """Nothing (the path checked): an object store's folders are the prefixes of its keys (``empty_folders`` is
        False)."""
        self.confined(rel)

    def rename(self, src: str, dst: str) -> None:
        raise StorageError(f"rename {self.uri(src)} to {self.uri(dst)}: object stores cannot rename (a copy and a "
                           "delete are two steps others see); nothing on an object store may rely on a rename")

    def _delete(self, rel: str, *, if_match: str | None) -> bool:
        import obstore as obs

        if self._head(rel) is None:
            return False
        self._count(DELETE)
        with self._request("delete", rel):
            obs.delete(self.client.store, self._key(rel))
        return True

    def delete_dir(self, rel: str) -> None:
        import obstore as obs

        prefix = self._key(rel)
        keys: list[str] = []
        with self._request("list", rel):
            try:
                for batch in obs.list(self.client.store, prefix or None, chunk_size=PAGE):
                    keys.extend(meta["path"] for meta in batch)
            finally:
                self._count(LIST, self._pages(len(keys)))
        if not keys:
            return
        folders: set[str] = {prefix} if prefix else set()
        for key in keys:
            parent = posixpath.dirname(key)
            while parent and parent != prefix and parent.startswith(prefix):
                folders.add(parent)
                parent = posixpath.dirname(parent)
        # the emptied folders' names last, deepest first: a store on a file system (SeaweedFS) keeps listing them
        doomed = keys + sorted(folders, key=lambda f: (-f.count("/"), f))
        bulk = self.client.setup().bulk_delete
        with self._request("delete folder", rel):
            for i in range(0, len(doomed), PAGE):
                chunk = doomed[i:i + PAGE]
                self._count(DELETE, 1 if bulk else len(chunk))
                try:
                    obs.delete(self.client.store, chunk)
                except FileNotFoundError:  # a store without folder names (Azure) says so: one by one, then
                    for key in chunk:
                        self._count(DELETE)
                        with contextlib.suppress(FileNotFoundError):
                            obs.delete(self.client.store, key)

    def touch(self, rel: str) -> None:
        """Write the object again with its own bytes (an object's time cannot be set), only over the version
        read: a file deleted or replaced meanwhile is not brought back (`PreconditionFailed`)."""
        import obstore as obs

        self._count(GET)
        with self._request("touch", rel):
            try:
                got = obs.get(self.client.store, self._key(rel))
                data = bytes(got.bytes())
            except FileNotFoundError as e:
                raise StorageError(f"touch {self.uri(rel)}: not found") from e
        self.client.requests.add_bytes_read(len(data))
        version = got.meta.get(self._version_field) or got.meta.get("e_tag")
        try:
            self.put(rel, data, if_match=version)
        except PreconditionFailed as e:
            raise PreconditionFailed(f"touch {self.uri(rel)}: deleted or replaced while touched") from e


__all__ = ["ObjectStorage"]
