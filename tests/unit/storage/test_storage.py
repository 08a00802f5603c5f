from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hudi_clusterd.errors import StorageError
from hudi_clusterd.storage import open_storage


def test_storage_write_create_if_absent_is_exclusive(tmp_path: Path) -> None:
    s = open_storage(str(tmp_path))
    assert s.write_bytes("a/b.txt", b"one")
    assert not s.write_bytes("a/b.txt", b"two")
    assert s.read_bytes("a/b.txt") == b"one"
    assert s.write_bytes("a/b.txt", b"three", overwrite=True)
    assert s.read_bytes("a/b.txt") == b"three"
    assert [f.name for f in s.list_dir("a")] == ["b.txt"]  # no temporary files left


def test_storage_concurrent_creates_exactly_one_wins(tmp_path: Path) -> None:
    s = open_storage(str(tmp_path))
    wins: list[bool] = []
    barrier = threading.Barrier(8)

    def attempt(i: int) -> None:
        barrier.wait()
        wins.append(s.write_bytes("x", str(i).encode()))

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins.count(True) == 1


def test_storage_uri_and_back(tmp_path: Path) -> None:
    s = open_storage(str(tmp_path))
    uri = s.uri("p/f.parquet")
    assert uri == f"file:{tmp_path.resolve()}/p/f.parquet"
    assert s.rel_from_uri(uri) == "p/f.parquet"
    assert s.rel_from_uri(f"file://{tmp_path.resolve()}/p/f.parquet") == "p/f.parquet"


@pytest.mark.parametrize("outside", ["file:/etc/passwd", "file:{base}/../x.parquet", "/tmp"])
def test_storage_rel_from_uri_refuses_paths_outside_base(tmp_path: Path, outside: str) -> None:
    s = open_storage(str(tmp_path / "t"))
    with pytest.raises(StorageError, match="outside the table"):
        s.rel_from_uri(outside.format(base=tmp_path / "t"))


def test_storage_missing_file_error_names_path(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match=r"nope\.txt"):
        open_storage(str(tmp_path)).read_bytes("nope.txt")


def test_storage_delete_and_list_missing_folder(tmp_path: Path) -> None:
    s = open_storage(str(tmp_path))
    assert s.list_dir("missing") == []
    s.write_bytes("f", b"")
    assert s.delete("f") and not s.delete("f")
