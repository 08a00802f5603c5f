"""The path check every ``Storage`` keeps, run over each implementation: every method that takes a relative path
refuses one that leaves the storage's root (``..``, an absolute path, a backslash, NUL and other control
characters, a URI), and ``rel_from_uri`` a URI of another scheme, bucket or folder, with `PathOutsideStorageError`
naming the path and the storage; and canaries beside the root (a sibling file, a sibling folder whose name starts
with the root's) keep their bytes and version.

Each storage is the child ``base`` of a storage one level up (``parent``), which writes and checks the canaries.
``s3-seaweedfs`` and ``azure-azurite`` run on the session's servers, each test in a fresh prefix.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hudi_clusterd.errors import PathOutsideStorageError
from hudi_clusterd.storage import ArrowStorage, MemoryStorage, ObjectStorage, Storage, StorageSpec, open_storage


def _local(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Storage]:
    yield open_storage(str(tmp_path))


def _memory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Storage]:
    name = f"paths-{uuid.uuid4().hex}"
    yield open_storage(f"memory://{name}/up")
    MemoryStorage.volumes.drop(name)


def _arrow_local(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Storage]:
    yield ArrowStorage(StorageSpec(f"file://{tmp_path}"))


def _object_memory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Storage]:
    bucket = f"paths-{uuid.uuid4().hex[:12]}"
    yield open_storage(StorageSpec(f"s3://{bucket}/up", {"store": "memory"}))
    ObjectStorage.memory_buckets.drop(bucket)


def _s3_seaweedfs(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Storage]:
    server = request.getfixturevalue("s3_server")
    yield open_storage(StorageSpec(server.fresh_uri("paths"), server.storage_options()))


def _azure_azurite(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Storage]:
    server = request.getfixturevalue("azurite_server")
    yield open_storage(StorageSpec(server.fresh_uri("paths"), server.storage_options()))


PARENTS: dict[str, Callable[[Path, pytest.FixtureRequest], Iterator[Storage]]] = {
    "local": _local, "memory": _memory, "arrow-local": _arrow_local, "object-memory": _object_memory,
    "s3-seaweedfs": _s3_seaweedfs, "azure-azurite": _azure_azurite,
}
CANARIES = ("canary", "base-evil/canary")


@pytest.fixture(params=sorted(PARENTS))
def parent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    yield from PARENTS[request.param](tmp_path, request)


def _hostile(parent: Storage, storage: Storage) -> list[str]:
    """Relative paths that would reach the canaries, or leave the root otherwise, if they were joined unchecked."""
    return ["../canary", "x/../../canary", "../base-evil/canary", "x\\..\\..\\canary", "a\\..\\b", "canary\x00",
            "x/\x00/../../canary", "p1/\x1b", "/" + parent.full_path("canary").lstrip("/"), "/etc/x",
            parent.uri("canary"), "s3://other-bucket/x", "file:/etc/x"]


def _operations(storage: Storage) -> dict[str, Callable[[str], object]]:
    """Every method that takes a relative path, called with one."""
    def read_range(rel: str) -> object:
        with storage.open_input_file(rel) as f:
            return f.read()

    def write_stream(rel: str) -> object:
        with storage.open_output(rel) as f:
            return f.write(b"x")

    return {
        "info": storage.info, "exists": storage.exists, "list_dir": storage.list_dir,
        "read_bytes": storage.read_bytes, "open_input_file": read_range,
        "put": lambda rel: storage.put(rel, b"hostile"), "write_bytes": lambda rel: storage.write_bytes(rel, b"x"),
        "open_output": write_stream, "makedirs": storage.makedirs,
        "rename from": lambda rel: storage.rename(rel, "moved"), "rename to": lambda rel: storage.rename("f", rel),
        "delete": storage.delete, "delete_dir": storage.delete_dir, "touch": storage.touch,
        "child": storage.child, "uri": storage.uri, "full_path": storage.full_path,
        "event_folder": storage.event_folder,
    }


def _snapshot(parent: Storage) -> dict[str, tuple[bytes, str | None, int]]:
    out = {}
    for rel in CANARIES:
        info = parent.info(rel)
        if info is not None:
            out[rel] = (parent.read_bytes(rel), info.version, info.mtime_ms)
    return out


def test_every_method_refuses_a_path_leaving_the_root_and_nothing_beside_it_changes(parent: Storage) -> None:
    # Given canaries beside the storage's root, and a file of its own
    storage = parent.child("base")
    for rel in CANARIES:
        parent.put(rel, f"canary {rel}".encode())
    storage.put("f", b"own")
    before = _snapshot(parent)
    assert set(before) == set(CANARIES)
    # When every method is called with every hostile path
    for path in _hostile(parent, storage):
        for op, call in _operations(storage).items():
            # Then each is refused, naming the path and the storage, in one line
            try:
                call(path)
            except PathOutsideStorageError as refused:
                message = str(refused)
            else:
                pytest.fail(f"{op}({path!r}) was not refused")
            assert repr(path) in message and storage.base_uri in message and "\n" not in message, (op, message)
    # And nothing beside the root, nor in it, changed
    assert _snapshot(parent) == before
    assert storage.read_bytes("f") == b"own"
    assert sorted(f.name for f in storage.list_dir()) == ["f"]
    assert sorted(f.name for f in parent.list_dir()) == ["base", "base-evil", "canary"]


def test_rel_from_uri_refuses_uris_outside_the_root(parent: Storage) -> None:
    storage = parent.child("base")
    scheme = storage.uri().split(":", 1)[0]
    outside = [parent.uri("canary"), parent.uri("base-evil/f"), storage.uri() + "/../canary",
               storage.uri() + "/p/../f", storage.uri() + "/a\\..\\b", storage.uri() + "/p/\x00f",
               "s3://other-bucket/x", "file:/etc/x", "/etc/x", f"{'gs' if scheme != 'gs' else 's3'}://x/y"]
    for uri in outside:
        with pytest.raises(PathOutsideStorageError) as refused:
            storage.rel_from_uri(uri)
        assert repr(uri) in str(refused.value) and storage.base_uri in str(refused.value), uri
    assert storage.rel_from_uri(storage.uri("p/f")) == "p/f"
    assert parent.rel_from_uri(storage.uri("p/f")) == "base/p/f"
