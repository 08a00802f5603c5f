"""Storage on object stores (S3, GCS, Azure) through obstore, the Python binding of Rust's ``object_store``.

Paths are keys below the base URI's key; the bucket's client (`object_config.ObjectClient`: its store, built on
first I/O, and its `RequestCounts`) is shared by every ``child``. What it guarantees (`Capabilities`):

- **Create-if-absent and compare-and-swap are atomic**: ``PutMode.CREATE`` is a conditional ``PUT``
  (``If-None-Match: *``), ``if_match`` a conditional ``PUT`` on the version read (``If-Match``; GCS: the
  generation). A version is the object's ETag as the store quotes it (quotes kept); on S3 it is the MD5 of the
  bytes, so identical bytes keep the version (``unique_versions`` is False there). An update of a missing object
  fails its condition (412 or 404, by store) and raises `PreconditionFailed` either way.
- **Deletes are not conditional**: obstore 0.12 sends no ``If-Match`` with a ``DELETE`` (``conditional_delete``
  False); ``delete`` asks first whether the object exists (``HEAD``), to say whether it deleted one.
- **No rename**: a copy and a delete are two steps that others can see in between; `rename` refuses.
- **Folders are key prefixes**: ``makedirs`` does nothing, a folder exists while an object is below it, and the
  directory markers Hadoop's S3A connector leaves (zero-byte ``…/`` keys) are folders, never files.
- **Reads by ranges, writes whole**: `open_input_file` reads the byte ranges asked for (`object_io.RangeReader`);
  `put` is one ``PUT``; `open_output` uploads on close, so the object appears whole, only then.
- **Spark** reads the files in its Python workers through this storage (``spark_readable`` is False); on S3,
  `s3a_options` gives the settings with which Hadoop's S3A connector reaches the same objects.
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
from hudi_clusterd.storage.object_io import MIN_FETCH, PART_BYTES, UPLOAD_CONCURRENCY, RangeReader, UploadWriter
from hudi_clusterd.storage.paths import inside, outside
from hudi_clusterd.storage.requests import DELETE, GET, HEAD, LIST, PRECONDITION_FAILED, PUT, object_error

if TYPE_CHECKING:
    from obstore import ObjectMeta

    from hudi_clusterd.storage.requests import RequestCounts

PAGE: int = 1000
"""Entries per listing page, and keys per bulk delete."""


class ObjectStorage(Storage):
    """File operations relative to one prefix of a bucket (see the module docstring)."""

    memory_buckets: ClassVar[MemoryBuckets] = MemoryBuckets()
    """The in-memory stores that the storage option ``store=memory`` names (tests)."""
    spark_readable = False  # Hadoop's S3A, GCS and ABFS connectors have credentials and endpoints of their own

    def __init__(self, spec: StorageSpec | str, *, client: ObjectClient | None = None) -> None:
        super().__init__(spec)
        self.location = parse_location(self.spec.uri)
        self.root = self.location.key
        if client is not None and not client.location.same_bucket(self.location):
            raise StorageError(f"{self.spec.uri}: not in the bucket of {client.location.scheme}://"
                               f"{client.location.netloc}")
        self.client = client or ObjectClient(self.location, self.spec.options, ObjectStorage.memory_buckets)
        kind = versions(self.location, self.spec.options)
        self._version_field = kind.field
        self.capabilities = Capabilities(atomic_create=True, conditional_update=True, atomic_rename=False,
                                         atomic_put=True, conditional_delete=False, unique_versions=kind.unique,
                                         empty_folders=False)

    # --- paths ------------------------------------------------------------------------------------------------

    def _key(self, rel: str) -> str:
        return join(self.root, self.confined(rel))

    def full_path(self, rel: str = "") -> str:
        return join(self.location.netloc, self.root, self.confined(rel))

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

    @contextmanager
    def _request(self, op: str, rel: str, kind: str | None = None, not_found: str | None = None) -> Iterator[None]:
        """Count one request of ``kind`` (when given) and turn obstore's errors into one-line `StorageError`s naming
        the object and the endpoint (`object_error`); ``not_found``: the message of an object not found."""
        if kind is not None:
            self.requests.add(kind)
        try:
            yield
        except StorageError:
            raise
        except Exception as e:
            if not_found is not None and isinstance(e, FileNotFoundError):
                raise StorageError(not_found) from e
            raise object_error(op, self.uri(rel), self.client.endpoint, e) from e

    def _head(self, rel: str) -> ObjectMeta | None:
        import obstore as obs

        with self._request("stat", rel, HEAD):
            try:
                return obs.head(self.client.store, self._key(rel))
            except FileNotFoundError:
                return None

    def _info(self, rel: str, meta: ObjectMeta) -> FileInfo:
        return FileInfo(rel, int(meta["size"]), int(meta["last_modified"].timestamp() * 1000), False,
                        self._version(meta))

    def _version(self, meta: Any) -> str | None:
        return meta.get(self._version_field) or meta.get("e_tag")  # type: ignore[no-any-return]

    def _got(self, data: Any) -> bytes:
        """The bytes of a ``GET``'s answer, counted as read."""
        got = bytes(data)
        self.requests.add_bytes_read(len(got))
        return got

    # --- reading ----------------------------------------------------------------------------------------------

    def info(self, rel: str) -> FileInfo | None:
        """A ``HEAD`` of the object; else a listing of one entry below the prefix (a folder)."""
        import obstore as obs

        if self._key(rel):
            meta = self._head(rel)
            if meta is not None:
                return self._info(rel, meta)
        with self._request("list", rel, LIST):
            found = next(iter(obs.list(self.client.store, self._key(rel) or None, chunk_size=1)), [])
        return FileInfo(rel, 0, 0, True) if found else None

    def list_dir(self, rel: str = "") -> list[FileInfo]:
        """One delimiter listing (a ``LIST`` per page of `PAGE` entries): the common prefixes are folders; an object
        named like the listed folder (its directory marker, which obstore lists as an object) is dropped."""
        import obstore as obs

        prefix = self._key(rel)
        with self._request("list", rel, LIST):
            listed = obs.list_with_delimiter(self.client.store, prefix or None)
        extra = len(listed["objects"]) + len(listed["common_prefixes"]) - PAGE
        if extra > 0:
            self.requests.add(LIST, math.ceil(extra / PAGE))
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

        with self._request("read", rel, GET, f"file not found: {self.uri(rel)}"):
            return self._got(obs.get(self.client.store, self._key(rel)).bytes())

    def open_input_file(self, rel: str) -> pa.NativeFile:
        size, tail = self._tail(rel)
        return pa.PythonFile(RangeReader(lambda start, end: self._range(rel, start, end), size, self.uri(rel),
                                         tail), mode="r")

    def _tail(self, rel: str) -> tuple[int, bytes]:
        """The object's size and its last `MIN_FETCH` bytes (all of it when smaller), from one suffix-range
        ``GET`` (a Parquet footer is read from them, no ``HEAD``); a store that refuses the range (S3 for an empty
        object) is asked the size instead (a ``HEAD``), and so is Azure, to which obstore sends no suffix range."""
        import obstore as obs

        if self.location.cloud == "azure":
            return self._size(rel), b""
        key = self._key(rel)
        self.requests.add(GET)
        try:
            result = obs.get(self.client.store, key, options={"range": {"suffix": MIN_FETCH}})
            tail = self._got(result.bytes())
        except FileNotFoundError as e:
            raise StorageError(f"file not found: {self.uri(rel)}") from e
        except Exception:  # asked again: the HEAD's error names the object and the endpoint
            return self._size(rel), b""
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

        with self._request("read", rel, GET, f"file not found: {self.uri(rel)} (deleted while read)"):
            return self._got(obs.get_range(self.client.store, self._key(rel), start=start, end=end))

    # --- writing ----------------------------------------------------------------------------------------------

    def _put(self, rel: str, data: bytes, *, mode: PutMode, if_match: str | None) -> FileInfo | None:
        import obstore as obs
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        obs_mode: Any = "create" if mode is PutMode.CREATE else "overwrite"
        if if_match is not None:
            obs_mode = {self._version_field: if_match}
        with self._request("write", rel, PUT):
            try:
                written = obs.put(self.client.store, self._key(rel), data, mode=obs_mode, use_multipart=False)
            except AlreadyExistsError:
                self.requests.add(PRECONDITION_FAILED)
                return None
            except (PreconditionError, FileNotFoundError) as e:  # another version, or none (S3: 412, AWS: 404)
                if if_match is None:
                    raise
                self.requests.add(PRECONDITION_FAILED)
                raise PreconditionFailed(f"{self.uri(rel)}: version {if_match} expected, found another version or "
                                         "no file") from e
        return FileInfo(rel, len(data), time.time_ns() // 1_000_000, False, self._version(written))

    def open_output(self, rel: str) -> pa.NativeFile:
        """A multipart-capable upload (`object_io.UploadWriter`): one ``PUT`` up to `PART_BYTES`, else parts."""
        import obstore as obs

        with self._request("write", rel):
            writer = obs.open_writer(self.client.store, self._key(rel), buffer_size=PART_BYTES,
                                     max_concurrency=UPLOAD_CONCURRENCY)
        return pa.PythonFile(UploadWriter(writer, self.uri(rel), self.requests,
                                          lambda e: object_error("write", self.uri(rel), self.client.endpoint, e)),
                             mode="w")

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
        with self._request("delete", rel, DELETE):
            obs.delete(self.client.store, self._key(rel))
        return True

    def delete_dir(self, rel: str) -> None:
        """A flat listing, then deletes of `PAGE` keys each (one by one where the store takes no bulk delete). The
        emptied folders' names are deleted too, last and deepest first: a store on a file system (SeaweedFS) keeps
        listing them. obstore cannot address a key ending in ``/``, so S3A's directory markers stay on AWS."""
        import obstore as obs

        prefix = self._key(rel)
        keys: list[str] = []
        with self._request("list", rel):
            try:
                for batch in obs.list(self.client.store, prefix or None, chunk_size=PAGE):
                    keys.extend(meta["path"] for meta in batch)
            finally:
                self.requests.add(LIST, max(1, math.ceil(len(keys) / PAGE)))
        if not keys:
            return
        folders: set[str] = {prefix} if prefix else set()
        for key in keys:
            parent = posixpath.dirname(key)
            while parent and parent != prefix and parent.startswith(prefix):
                folders.add(parent)
                parent = posixpath.dirname(parent)
        doomed = keys + sorted(folders, key=lambda f: (-f.count("/"), f))
        bulk = self.client.setup().bulk_delete
        with self._request("delete folder", rel):
            for i in range(0, len(doomed), PAGE):
                chunk = doomed[i:i + PAGE]
                self.requests.add(DELETE, 1 if bulk else len(chunk))
                try:
                    obs.delete(self.client.store, chunk)
                except FileNotFoundError:  # a store without folder names (Azure) says so: one by one, then
                    for key in chunk:
                        self.requests.add(DELETE)
                        with contextlib.suppress(FileNotFoundError):
                            obs.delete(self.client.store, key)

    def touch(self, rel: str) -> None:
        """Write the object again with its own bytes (an object's time cannot be set), only over the version
        read: a file deleted or replaced meanwhile is not brought back (`PreconditionFailed`)."""
        import obstore as obs

        with self._request("touch", rel, GET, f"touch {self.uri(rel)}: not found"):
            got = obs.get(self.client.store, self._key(rel))
            data = self._got(got.bytes())
        try:
            self.put(rel, data, if_match=self._version(got.meta))
        except PreconditionFailed as e:
            raise PreconditionFailed(f"touch {self.uri(rel)}: deleted or replaced while touched") from e


__all__ = ["ObjectStorage"]
