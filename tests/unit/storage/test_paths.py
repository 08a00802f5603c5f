"""One rule for paths that leave their root (``domain.paths.escape_reason``): the storages' check
(``storage.paths``), the timeline decoders' ``check_relative_path`` and the rollback's file filter refuse the same
paths, each naming the path."""

from __future__ import annotations

from pathlib import Path

import pytest

from hudi_clusterd.domain.file_group import check_relative_path
from hudi_clusterd.domain.paths import escape_reason
from hudi_clusterd.errors import PathOutsideStorageError, StorageError
from hudi_clusterd.storage import open_storage
from hudi_clusterd.storage.paths import confine, inside
from hudi_clusterd.table.rollback import safe_file_of_instant

T = "20240101000000001"
HOSTILE = {
    "../x": "a '..' segment",
    "p1/../../x": "a '..' segment",
    "/etc/x": "an absolute path",
    "a\\..\\b": "a backslash",
    "p1\\x": "a backslash",
    "s3://other-bucket/x": "a URI",
    "file:/etc/x": "a URI",
    "C:/Windows/x": "a URI",
    "p1/\x00x": "a control character",
    "p1/x\ny": "a control character",
    "p1/\x7fx": "a control character",
}
STAYS = ["", "p1", "p1/x.parquet", ".hoodie/x", "a b/c:d", "k=12:30/x", "100%/x", "ü中文/x", "p1/./x", "p1//x"]


@pytest.mark.parametrize(("path", "reason"), sorted(HOSTILE.items()))
def test_every_checker_refuses_a_path_that_leaves_its_root(path: str, reason: str) -> None:
    assert escape_reason(path) == reason
    with pytest.raises(PathOutsideStorageError) as refused:
        confine(path, "s3://hudi/t")
    assert str(refused.value) == f"path {path!r} is outside the table's storage s3://hudi/t ({reason})"
    assert "\n" not in str(refused.value)  # one line, a newline in the path included (repr)
    with pytest.raises(ValueError, match=rf"is not a path inside the table \({reason}\)"):
        check_relative_path(path, "partition")
    assert safe_file_of_instant(f"{path}/f-0_0-1-2_{T}.parquet", T) is None


@pytest.mark.parametrize("path", STAYS)
def test_paths_below_the_root_stay(path: str) -> None:
    assert escape_reason(path) is None
    assert confine(path, "s3://hudi/t") == path


def test_the_refusal_is_a_storage_error_that_is_not_retried() -> None:
    with pytest.raises(StorageError) as refused:
        confine("../x", "/t")
    assert not refused.value.retryable


@pytest.mark.parametrize(("path", "why"), [("t/p/../../x", "a '..' segment"), ("t/p/../q/x", "a '..' segment"),
                                           ("t2/x", None), ("t/a\\b", "a backslash"), ("t/p/\x00", "a control")])
def test_inside_refuses_what_leaves_the_root_even_when_it_comes_back(path: str, why: str | None) -> None:
    with pytest.raises(PathOutsideStorageError, match=f"is outside the table's storage s3://b/t( \\({why}|$)"):
        inside(path, "t", f"s3://b/{path}", "s3://b/t")
    assert inside("t//p/./x", "t", "s3://b/t//p/./x", "s3://b/t") == "p/x"


@pytest.mark.parametrize("uri", ["s3://hudi/t/p1/\x00.parquet", "s3://hudi/t/a\\..\\b", "s3a://other-bucket/t/x",
                                 "gs://hudi/t/x", "s3://hudi/t/p/../x"])
def test_object_storage_rel_from_uri_refuses_hostile_uris(uri: str) -> None:
    with pytest.raises(PathOutsideStorageError, match="outside the table's storage s3://hudi/t"):
        open_storage("s3://hudi/t").rel_from_uri(uri)


def test_local_rel_from_uri_refuses_a_backslash_or_nul_below_the_base(tmp_path: Path) -> None:
    s = open_storage(str(tmp_path / "t"))
    for name in ("a\\..\\b", "p1/\x00x"):
        with pytest.raises(PathOutsideStorageError, match="outside the table's storage"):
            s.rel_from_uri(f"file:{tmp_path}/t/{name}")
