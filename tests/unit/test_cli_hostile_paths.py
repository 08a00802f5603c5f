"""Hostile paths (``../x``, ``/etc/x``, ``a\\..\\b``, ``s3://other-bucket/x``, NUL) in a clustering plan, a
commit's write stats, a rollback plan and a marker of a table on local disk: the command that reads each
(``execute``, ``cluster``, ``rollback``) refuses it in one line naming the file and the path, and nothing beside the
table (the canary ``x`` that ``../x`` names, a sibling folder) changes, bytes or modification time, nor any data file
of the table. The same on S3: ``tests/integration/storage/test_hostile_paths_s3.py``. A partition folder named with
a backslash or a control character (by another writer) refuses the table in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hudi_clusterd.cli import main
from tests.builders import TableGen
from tests.harness.hostile_paths import CANARY, HOSTILE_PATHS, PLACES, plant


def _files(root: Path, *, leave_out: Path | None = None) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` (but ``leave_out``) with its bytes and modification time."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
            if p.is_file() and (leave_out is None or leave_out not in p.parents)}


def _data_files(base: Path) -> dict[str, tuple[bytes, int]]:
    return {k: v for k, v in _files(base).items() if k.endswith(".parquet")}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", sorted(HOSTILE_PATHS))
def test_a_hostile_path_is_refused_in_one_line_and_nothing_beside_the_table_changes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], place: str, name: str) -> None:
    # Given a table with a canary beside it (``../x`` names it) and a sibling folder whose name starts with its own
    path = HOSTILE_PATHS[name]
    gen = TableGen(tmp_path / "t")
    for i in range(3):
        gen.commit({"p1": [float(i), i + 0.5], "p2": [float(i)]})
    (tmp_path / CANARY).write_bytes(b"canary")
    (tmp_path / "t-evil").mkdir()
    (tmp_path / "t-evil" / CANARY).write_bytes(b"canary too")
    props = tmp_path / "cluster.properties"
    props.write_text("hoodie.clustering.plan.strategy.sort.columns=x\n")
    # And the hostile path written into the place
    planted = plant(gen, place, path, str(props))
    outside, data = _files(tmp_path, leave_out=gen.base), _data_files(gen.base)
    capsys.readouterr()
    # When the command that reads it runs
    code = main(planted.argv)
    # Then it is refused in one line naming the file and the path
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert planted.file in lines[0] and repr(path)[1:-1] in lines[0], lines[0]
    # And nothing beside the table, nor any data file of it, changed
    assert _files(tmp_path, leave_out=gen.base) == outside
    assert (tmp_path / CANARY).read_bytes() == b"canary"
    assert _data_files(gen.base) == data


@pytest.mark.parametrize("folder", ["back\\slash", "tab\tp"])
@pytest.mark.parametrize("command", ["status", "schedule"])
def test_a_partition_folder_whose_name_is_refused_refuses_the_table_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], folder: str, command: str) -> None:
    # Given a table another writer wrote with a partition folder named with a backslash or a control character
    gen = TableGen(tmp_path / "t")
    for i in range(3):
        gen.commit({"bs": [float(i)], "p2": [1.0]})
    (gen.base / "bs").rename(gen.base / folder)
    for c in (gen.base / ".hoodie").glob("*.commit"):
        c.write_text(c.read_text().replace('"bs', json.dumps(folder)[:-1]))
    before = _files(tmp_path)
    capsys.readouterr()
    # When a command reads it, then the table is refused in one line naming the folder, and nothing is written
    code = main([command, "--base-path", str(gen.base), *(["--force"] if command == "schedule" else [])])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and lines[0].startswith("error: ") and repr(folder)[1:-1] in lines[0], lines
    assert _files(tmp_path) == before
