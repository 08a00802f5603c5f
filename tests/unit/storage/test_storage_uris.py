"""Storages name their files from the spec alone: URIs keep their scheme below ``child`` (the metadata table's
rollback plans record these URIs), and nothing reaches the network to name a file."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from hudi_clusterd.errors import StorageError
from hudi_clusterd.storage import ArrowStorage, LocalStorage, MemoryStorage, ObjectStorage, StorageSpec, open_storage


@pytest.mark.parametrize("scheme", ["s3", "s3a", "gs"])
def test_object_store_child_keeps_the_scheme(scheme: str) -> None:
    # Given a table on an object store (never contacted: the client is built on first I/O)
    table = open_storage(StorageSpec(f"{scheme}://bucket/tbl", {"region": "eu-west-1"}))
    assert isinstance(table, ObjectStorage)
    # When the metadata table's storage is made from it
    mdt = table.child(".hoodie/metadata")
    # Then its URIs name the same bucket and scheme, and read back to paths relative to it
    uri = mdt.uri("files/.files-0000-0_20240101000000001.log.1_0-0-0")
    assert uri == f"{scheme}://bucket/tbl/.hoodie/metadata/files/.files-0000-0_20240101000000001.log.1_0-0-0"
    assert mdt.rel_from_uri(uri) == "files/.files-0000-0_20240101000000001.log.1_0-0-0"
    assert table.rel_from_uri(uri) == ".hoodie/metadata/files/.files-0000-0_20240101000000001.log.1_0-0-0"
    assert mdt.full_path("files") == "bucket/tbl/.hoodie/metadata/files"
    assert mdt.spec == StorageSpec(f"{scheme}://bucket/tbl/.hoodie/metadata", {"region": "eu-west-1"})
    assert mdt.spec.scheme == scheme
    assert mdt.capabilities.atomic_create and not mdt.capabilities.atomic_rename
    assert mdt.requests is table.requests  # one client, one count


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_pyarrow_object_store_storage_still_names_its_files(scheme: str) -> None:
    table = ArrowStorage(StorageSpec(f"{scheme}://bucket/tbl", {"region": "eu-west-1"}))
    mdt = table.child(".hoodie/metadata")
    assert mdt.uri("files/x") == f"{scheme}://bucket/tbl/.hoodie/metadata/files/x"
    assert table.rel_from_uri(mdt.uri("files/x")) == ".hoodie/metadata/files/x"
    assert not mdt.capabilities.atomic_create and not mdt.supports_atomic_create and mdt.requests is None


@pytest.mark.parametrize("uri", ["s3://bucket/tbl-evil/f.parquet", "s3://bucket/tbl/../x.parquet",
                                 "s3://other/tbl/f.parquet", "bucket/other/f.parquet"])
def test_object_store_rel_from_uri_refuses_paths_outside(uri: str) -> None:
    with pytest.raises(StorageError, match="outside the table"):
        open_storage("s3://bucket/tbl").rel_from_uri(uri)


def test_hdfs_uris_keep_the_name_node() -> None:
    table = open_storage("hdfs://namenode:8020/warehouse/tbl")
    assert table.full_path("p/f.parquet") == "/warehouse/tbl/p/f.parquet"
    assert table.uri("p/f.parquet") == "hdfs://namenode:8020/warehouse/tbl/p/f.parquet"
    assert table.rel_from_uri("hdfs://namenode:8020/warehouse/tbl/p/f.parquet") == "p/f.parquet"
    assert table.child(".hoodie").uri("x") == "hdfs://namenode:8020/warehouse/tbl/.hoodie/x"
    assert table.capabilities.atomic_rename and not table.capabilities.atomic_create


def test_open_storage_chooses_by_scheme(tmp_path: Path) -> None:
    assert isinstance(open_storage(str(tmp_path)), LocalStorage)
    assert isinstance(open_storage(f"file://{tmp_path}"), LocalStorage)
    assert isinstance(open_storage(f"file:{tmp_path}"), LocalStorage)
    assert isinstance(open_storage("memory://unit-open/t"), MemoryStorage)
    for uri in ("s3://bucket/t", "s3a://bucket/t", "gs://bucket/t", "az://container/t",
                "abfs://container@account.dfs.core.windows.net/t", "abfss://container@account.dfs.core.windows.net/t"):
        assert isinstance(open_storage(uri), ObjectStorage), uri
    assert isinstance(open_storage("hdfs://namenode:8020/t"), ArrowStorage)


def test_local_spec_is_absolute_and_picklable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a table opened by a relative path
    monkeypatch.chdir(tmp_path)
    storage = open_storage("t")
    storage.write_bytes("a.txt", b"x")
    # Then its spec names the folder absolutely, so a task elsewhere opens the same files
    spec = pickle.loads(pickle.dumps(storage.spec))
    assert spec.uri == str(tmp_path / "t")
    assert open_storage(spec).read_bytes("a.txt") == b"x"
    assert storage.base_uri == "t"


def test_memory_volume_is_shared_by_name_and_dropped() -> None:
    a = open_storage("memory://unit-shared/t")
    a.write_bytes("x", b"1")
    assert open_storage(StorageSpec("memory://unit-shared/t")).read_bytes("x") == b"1"
    assert open_storage("memory://unit-shared").read_bytes("t/x") == b"1"
    MemoryStorage.volumes.drop("unit-shared")
    assert not open_storage("memory://unit-shared/t").exists("x")


def test_memory_storage_needs_a_volume_name() -> None:
    with pytest.raises(StorageError, match="volume name"):
        open_storage("memory:///t")


def test_uri_with_query_is_refused() -> None:
    with pytest.raises(StorageError, match="options"):
        open_storage("s3://bucket/t?region=x")
