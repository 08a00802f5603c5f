"""The contract every ``Storage`` keeps, run over each implementation.

A new implementation joins by adding one entry to ``IMPLEMENTATIONS``. Tests of a guarantee only some storages
give (``Capabilities``) are skipped, with the reason, on the others. ``s3-seaweedfs`` runs on the session's
SeaweedFS server (``s3_server``), each test in a fresh prefix; ``object-memory`` is the same code over obstore's
in-memory store; ``azure-azurite`` the same code on the session's Azurite server (Azure Blob Storage). No Google
Cloud Storage emulator on a reachable registry answers as the client needs, so GCS is not run here.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.errors import PreconditionFailed, StorageError
from hudi_clusterd.storage import (
    ArrowStorage,
    FileInfo,
    MemoryStorage,
    ObjectStorage,
    PutMode,
    Storage,
    StorageSpec,
    is_temp_file,
    open_storage,
)
from tests.support import race


def _local(tmp_path: Path) -> Iterator[Storage]:
    yield open_storage(str(tmp_path / "base"))


def _memory(tmp_path: Path) -> Iterator[Storage]:
    name = f"contract-{uuid.uuid4().hex}"
    yield open_storage(f"memory://{name}/base")
    MemoryStorage.volumes.drop(name)


def _arrow_local(tmp_path: Path) -> Iterator[Storage]:
    """The pyarrow storage over pyarrow's local file system (what it does on HDFS, minus the network)."""
    yield ArrowStorage(StorageSpec(f"file://{tmp_path}/base"))


def _object_memory(tmp_path: Path) -> Iterator[Storage]:
    """The object storage over obstore's in-memory store (its own bucket per test)."""
    bucket = f"contract-{uuid.uuid4().hex[:12]}"
    yield open_storage(StorageSpec(f"s3://{bucket}/base", {"store": "memory"}))
    ObjectStorage.memory_buckets.drop(bucket)


def _s3_seaweedfs(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Storage]:
    """The object storage on the session's SeaweedFS server, in a fresh prefix of its bucket."""
    server = request.getfixturevalue("s3_server")
    yield open_storage(StorageSpec(server.fresh_uri("contract"), server.storage_options()))


def _azure_azurite(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Storage]:
    """The object storage on the session's Azurite server (Azure Blob Storage), in a fresh prefix of its
    container."""
    server = request.getfixturevalue("azurite_server")
    yield open_storage(StorageSpec(server.fresh_uri("contract"), server.storage_options()))


IMPLEMENTATIONS: dict[str, Callable[..., Iterator[Storage]]] = {
    "local": _local,
    "memory": _memory,
    "arrow-local": _arrow_local,
    "object-memory": _object_memory,
    "s3-seaweedfs": _s3_seaweedfs,
    "azure-azurite": _azure_azurite,
}
_NEEDS_REQUEST = frozenset({"s3-seaweedfs", "azure-azurite"})


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    make = IMPLEMENTATIONS[request.param]
    yield from (make(tmp_path, request) if request.param in _NEEDS_REQUEST else make(tmp_path))


def _same_file(a: FileInfo | None, b: FileInfo | None) -> bool:
    """The same file at the same version (a put's info carries this host's clock where the store does not say
    when it stamped the file; `Storage.put`)."""
    assert a is not None and b is not None
    return (a.path, a.size, a.is_dir, a.version) == (b.path, b.size, b.is_dir, b.version)


def _require(storage: Storage, capability: str) -> None:
    if not getattr(storage.capabilities, capability):
        pytest.skip(f"{type(storage).__name__} does not declare {capability}")




# --- whole files ----------------------------------------------------------------------------------------------


def test_put_then_read_round_trip(storage: Storage) -> None:
    info = storage.put("a/b.bin", b"\x00payload\xff")
    assert info is not None and info.path == "a/b.bin" and info.size == 9 and not info.is_dir
    assert storage.read_bytes("a/b.bin") == b"\x00payload\xff"
    found = storage.info("a/b.bin")
    assert found is not None and found.size == 9 and found.version == info.version
    assert storage.exists("a/b.bin") and storage.exists("a") and not storage.exists("a/c.bin")
    assert storage.info("a/c.bin") is None


def test_create_when_absent_then_present(storage: Storage) -> None:
    assert storage.put("x/f", b"one", mode=PutMode.CREATE) is not None
    assert storage.put("x/f", b"two", mode=PutMode.CREATE) is None
    assert storage.read_bytes("x/f") == b"one"
    assert not storage.write_bytes("x/f", b"two")
    assert storage.write_bytes("x/f", b"three", overwrite=True)
    assert storage.read_bytes("x/f") == b"three"
    assert [f.name for f in storage.list_dir("x")] == ["f"]  # no temporary files left


def test_concurrent_creates_exactly_one_wins(storage: Storage) -> None:
    _require(storage, "atomic_create")
    results = race(8, lambda i: storage.put("lock", str(i).encode(), mode=PutMode.CREATE))
    winners = [i for i, r in enumerate(results) if r is not None]
    assert len(winners) == 1, results
    assert storage.read_bytes("lock") == str(winners[0]).encode()


def test_missing_file_read_names_the_path(storage: Storage) -> None:
    with pytest.raises(StorageError, match=r"nope\.txt"):
        storage.read_bytes("nope.txt")


def test_versions_change_on_every_overwrite_with_new_bytes(storage: Storage) -> None:
    first = storage.put("v", b"same size 00")
    assert first is not None
    if first.version is None:
        pytest.skip(f"{type(storage).__name__} reports no versions")
    versions = [first.version]
    for i in range(1, 20):
        info = storage.put("v", f"same size {i:02d}".encode())
        assert info is not None
        versions.append(str(info.version))
        found = storage.info("v")
        assert _same_file(found, info)
        assert found is not None and abs(found.mtime_ms - info.mtime_ms) < 5000
    assert len(set(versions)) == len(versions)


def test_versions_change_on_every_overwrite_even_with_the_same_bytes(storage: Storage) -> None:
    _require(storage, "unique_versions")
    first = storage.put("v", b"same bytes")
    assert first is not None and first.version is not None
    versions = [first.version]
    for _ in range(9):
        info = storage.put("v", b"same bytes")
        assert info is not None and _same_file(storage.info("v"), info)
        versions.append(str(info.version))
    assert len(set(versions)) == len(versions)


def test_without_unique_versions_the_version_follows_the_bytes(storage: Storage) -> None:
    """A content-hash version (S3's ETag): what a compare-and-swap writer must allow for (new bytes every time)."""
    if storage.capabilities.unique_versions:
        pytest.skip(f"{type(storage).__name__} declares unique_versions")
    one = storage.put("v", b"one")
    two = storage.put("v", b"two")
    again = storage.put("v", b"one")
    assert one is not None and two is not None and again is not None
    assert one.version != two.version and again.version == one.version
    assert storage.put("v", b"three", if_match=one.version) is not None  # the version written last matches


# --- conditional writes -----------------------------------------------------------------------------------------


def test_conditional_update_rejects_a_stale_version(storage: Storage) -> None:
    _require(storage, "conditional_update")
    v1 = storage.put("c", b"one")
    assert v1 is not None and v1.version is not None
    v2 = storage.put("c", b"two", if_match=v1.version)
    assert v2 is not None and v2.version != v1.version
    with pytest.raises(PreconditionFailed):
        storage.put("c", b"three", if_match=v1.version)
    assert storage.read_bytes("c") == b"two"
    with pytest.raises(PreconditionFailed):
        storage.put("absent", b"x", if_match=v1.version)
    assert not storage.exists("absent")


def test_concurrent_conditional_updates_exactly_one_wins(storage: Storage) -> None:
    _require(storage, "conditional_update")
    base = storage.put("counter", b"0")
    assert base is not None and base.version is not None
    version = base.version
    results = race(8, lambda i: storage.put("counter", str(i + 1).encode(), if_match=version))
    winners = [i for i, r in enumerate(results) if not isinstance(r, Exception)]
    assert len(winners) == 1, results
    assert all(isinstance(r, PreconditionFailed) for i, r in enumerate(results) if i not in winners)
    assert storage.read_bytes("counter") == str(winners[0] + 1).encode()


def test_conditional_delete(storage: Storage) -> None:
    _require(storage, "conditional_delete")
    v1 = storage.put("d", b"one")
    v2 = storage.put("d", b"two")
    assert v1 is not None and v2 is not None and v1.version and v2.version
    with pytest.raises(PreconditionFailed):
        storage.delete("d", if_match=v1.version)
    assert storage.read_bytes("d") == b"two"
    assert storage.delete("d", if_match=v2.version)
    assert not storage.exists("d")
    with pytest.raises(PreconditionFailed):
        storage.delete("d", if_match=v2.version)


def test_without_conditional_update_if_match_is_refused(storage: Storage) -> None:
    if storage.capabilities.conditional_update:
        pytest.skip(f"{type(storage).__name__} declares conditional_update")
    info = storage.put("c", b"one")
    assert info is not None
    with pytest.raises(StorageError, match="conditionally"):
        storage.put("c", b"two", if_match=info.version or "1")
    assert storage.read_bytes("c") == b"one"


def test_without_conditional_delete_if_match_is_refused(storage: Storage) -> None:
    if storage.capabilities.conditional_delete:
        pytest.skip(f"{type(storage).__name__} declares conditional_delete")
    info = storage.put("c", b"one")
    assert info is not None
    with pytest.raises(StorageError, match="conditionally") as refused:
        storage.delete("c", if_match=info.version or "1")
    assert not isinstance(refused.value, PreconditionFailed)
    assert storage.read_bytes("c") == b"one"


# --- folders, deletes, renames ------------------------------------------------------------------------------------


def test_listing_files_and_folders(storage: Storage) -> None:
    assert storage.list_dir("missing") == []
    storage.put("t/b.txt", b"bb")
    storage.put("t/a/inner.txt", b"i")
    storage.put("t/a/deeper/x", b"")
    listed = storage.list_dir("t")
    assert [(f.path, f.is_dir) for f in listed] == [("t/a", True), ("t/b.txt", False)]
    assert next(f for f in listed if f.name == "b.txt").size == 2
    assert [(f.path, f.is_dir) for f in storage.list_dir("t/a")] == [("t/a/deeper", True), ("t/a/inner.txt", False)]
    assert {f.name for f in storage.list_dir()} == {"t"}
    folder = storage.info("t/a")
    assert folder is not None and folder.is_dir and folder.path == "t/a"


def test_made_folders_are_listed_while_empty(storage: Storage) -> None:
    _require(storage, "empty_folders")
    storage.put("t/b.txt", b"bb")
    storage.makedirs("t/empty")
    assert [(f.path, f.is_dir) for f in storage.list_dir("t")] == [("t/b.txt", False), ("t/empty", True)]
    assert storage.exists("t/empty")


def test_without_empty_folders_makedirs_leaves_nothing(storage: Storage) -> None:
    if storage.capabilities.empty_folders:
        pytest.skip(f"{type(storage).__name__} declares empty_folders")
    storage.makedirs("t/empty")
    assert not storage.exists("t/empty") and storage.list_dir("t") == []
    storage.put("t/empty/f", b"x")  # a folder exists while files are below it
    assert storage.exists("t/empty") and [f.name for f in storage.list_dir("t")] == ["empty"]


def test_delete_and_delete_dir(storage: Storage) -> None:
    storage.put("f", b"")
    assert storage.delete("f") and not storage.delete("f")
    with pytest.raises(StorageError, match="not found"):
        storage.delete("f", missing_ok=False)
    storage.put("tree/a/b", b"1")
    storage.put("tree/c", b"2")
    storage.delete_dir("tree")
    assert not storage.exists("tree") and storage.list_dir("tree") == []
    storage.delete_dir("tree")  # absent: nothing to do


def test_rename(storage: Storage) -> None:
    _require(storage, "atomic_rename")
    storage.put("r/src", b"moved")
    storage.rename("r/src", "r/dst")
    assert storage.read_bytes("r/dst") == b"moved" and not storage.exists("r/src")
    with pytest.raises(StorageError, match="not found"):
        storage.rename("r/src", "r/other")


def test_touch_refreshes_the_modification_time(storage: Storage) -> None:
    storage.put("t", b"x")
    first = storage.info("t")
    assert first is not None
    storage.touch("t")
    touched = storage.info("t")
    assert touched is not None and touched.mtime_ms >= first.mtime_ms and storage.read_bytes("t") == b"x"


# --- streams ------------------------------------------------------------------------------------------------------


def test_parquet_through_output_and_input_files(storage: Storage) -> None:
    table = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]})
    with storage.open_output("p=1/f.parquet") as f:
        pq.write_table(table, f)
        assert f.tell() > 0
    with storage.open_input_file("p=1/f.parquet") as f:
        assert pq.ParquetFile(f).metadata.num_rows == 3
    with storage.open_input_file("p=1/f.parquet") as f:
        assert pq.read_table(f).equals(table)
    info = storage.info("p=1/f.parquet")
    assert info is not None and info.size == len(storage.read_bytes("p=1/f.parquet"))


@pytest.mark.parametrize("size", [0, 1, 100, 200_000])
def test_an_input_file_reads_exactly_the_file(storage: Storage, size: int) -> None:
    data = bytes(i * 13 % 256 for i in range(size))
    storage.put(f"in/{size}.bin", data)
    with storage.open_input_file(f"in/{size}.bin") as f:
        assert f.size() == size and f.read() == data
        f.seek(size // 2)
        assert f.read(10) == data[size // 2:size // 2 + 10]
    with pytest.raises(StorageError, match=r"in/none\.bin"):
        storage.open_input_file("in/none.bin")


# --- paths ----------------------------------------------------------------------------------------------------------


def test_child_paths_and_uris(storage: Storage) -> None:
    child = storage.child(".hoodie/metadata")
    child.put("files/x.log", b"log")
    assert storage.read_bytes(".hoodie/metadata/files/x.log") == b"log"
    assert child.uri("files/x.log") == storage.uri(".hoodie/metadata/files/x.log")
    assert child.uri("files/x.log").split(":", 1)[0] == storage.uri().split(":", 1)[0]
    assert child.rel_from_uri(storage.uri(".hoodie/metadata/files/x.log")) == "files/x.log"
    assert storage.rel_from_uri(child.uri("files/x.log")) == ".hoodie/metadata/files/x.log"
    assert child.full_path("files/x.log") == storage.full_path(".hoodie/metadata/files/x.log")
    assert [f.path for f in child.list_dir("files")] == ["files/x.log"]
    assert child.capabilities == storage.capabilities
    with pytest.raises(StorageError, match="outside the table"):
        child.rel_from_uri(storage.uri("p/f.parquet"))


def test_spec_opens_the_same_files(storage: Storage) -> None:
    storage.put("s/f", b"shared")
    assert open_storage(storage.spec).read_bytes("s/f") == b"shared"
    assert open_storage(storage.child("s").spec).read_bytes("f") == b"shared"


def test_temp_files_are_never_listed_under_a_final_name(storage: Storage) -> None:
    _require(storage, "atomic_put")
    payloads = {f"payload {i:04d} ".encode() * 2000 for i in range(40)}
    ordered = sorted(payloads)
    stop = threading.Event()
    seen: list[str] = []

    def write() -> None:
        rounds = 0
        while rounds < 3 or (not stop.is_set() and rounds < 1000):
            for i, data in enumerate(ordered):
                storage.put("d/f", data)
                storage.put(f"d/new-{i}", data, mode=PutMode.CREATE)
            rounds += 1

    writer = threading.Thread(target=write)
    writer.start()
    listings = 0
    deadline = time.monotonic() + 30
    while (listings < 200 or not seen) and time.monotonic() < deadline:
        listings += 1
        for entry in storage.list_dir("d"):
            if is_temp_file(entry.name):
                continue
            seen.append(entry.name)
            try:
                data = storage.read_bytes(entry.path)
            except StorageError:
                continue  # replaced between listing and reading
            assert data in payloads, f"{entry.name} listed while partly written"
    stop.set()
    writer.join()
    assert seen
    assert not [f.name for f in storage.list_dir("d") if is_temp_file(f.name)]
    assert {f.name for f in storage.list_dir("d")} == {"f"} | {f"new-{i}" for i in range(len(ordered))}
