from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from hudi_clusterd.commands import ingest
from hudi_clusterd.errors import ConfigError


def _touch(*paths: Path) -> None:
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"")


def test_resolve_sources_file_folder_and_glob(tmp_path: Path) -> None:
    a, b, c = tmp_path / "in/a.parquet", tmp_path / "in/sub/b.parquet", tmp_path / "in/c.parquet"
    _touch(a, b, c, tmp_path / "in/_SUCCESS", tmp_path / "in/.a.parquet.crc", tmp_path / "in/_tmp/x.parquet",
           tmp_path / "in/notes.txt")
    assert ingest.resolve_sources(str(a)) == [f"file:{a}"]
    assert ingest.resolve_sources(str(tmp_path / "in")) == [f"file:{a}", f"file:{c}", f"file:{b}"]
    assert ingest.resolve_sources(str(tmp_path / "in" / "*.parquet")) == [f"file:{a}", f"file:{c}"]


@pytest.mark.parametrize("source", ["missing", "in/*.csv", "*/x.parquet"])
def test_resolve_sources_refuses_nothing_found(tmp_path: Path, source: str) -> None:
    _touch(tmp_path / "in/a.parquet")
    with pytest.raises(ConfigError, match="--source"):
        ingest.resolve_sources(str(tmp_path / source))


def test_ingest_run_prints_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    ingest.register(parser.add_subparsers())
    args = parser.parse_args(["ingest", "--base-path", str(tmp_path / "t"), "--source", str(tmp_path / "nope")])
    assert args.func(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --source") and err.count("\n") == 1
