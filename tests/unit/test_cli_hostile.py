"""Corrupt timeline files under the CLI: one error line naming the file, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from hudi_clusterd.cli import main
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.errors import TimelineError
from hudi_clusterd.formats.avro import encode_requested_replace
from hudi_clusterd.ops.schedule import schedule
from tests.builders import make_policy, small_table, valid_plan_meta

VALID_PLAN = encode_requested_replace(valid_plan_meta())


def _one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    assert code != 0
    assert "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    return lines[0]


@pytest.mark.parametrize("command", ["status", "schedule"])
@pytest.mark.parametrize("content", [b"{\n  \"partitionToWriteStats\" : {\n    \"p1\" : [ {", b"\xff\xfe\x00",
                                     b'{"partitionToWriteStats": {"p1": [{"fileId": "f", "numWrites": 1e999}]}}'])
def test_cli_corrupt_commit_file_prints_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           command: str, content: bytes) -> None:
    gen = small_table(tmp_path)
    victim = sorted((gen.base / ".hoodie").glob("*.commit"))[-1]
    victim.write_bytes(content)
    props = tmp_path / "c.properties"  # sort columns: scheduling checks them against the newest commit's schema
    props.write_text("hoodie.clustering.plan.strategy.sort.columns=x\n")
    extra = ["--props", str(props)] if command == "schedule" else []
    line = _one_error_line(capsys, [command, "--base-path", str(gen.base), *extra])
    assert victim.name in line


def test_cli_schedule_corrupt_completed_clustering_prints_one_line_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = small_table(tmp_path)
    t = gen.next_time()
    store = gen.table.timeline_store
    store.create(Instant(t, Action.REPLACE_COMMIT, State.REQUESTED), VALID_PLAN)
    store.create(Instant(t, Action.REPLACE_COMMIT, State.INFLIGHT), b"")
    store.create(Instant(t, Action.REPLACE_COMMIT, State.COMPLETED), b'{"operationType": "CLUSTER", "partitionTo')
    line = _one_error_line(capsys, ["schedule", "--base-path", str(gen.base), "--force"])
    assert f"{t}.replacecommit" in line


@pytest.mark.parametrize("command", ["status", "schedule"])
@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_cli_corrupt_plan_file_prints_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         command: str, cut: float) -> None:
    gen = small_table(tmp_path)
    result = schedule(gen.table, make_policy(), force=True)
    assert result.instant is not None
    plan_file = gen.base / ".hoodie" / f"{result.instant}.replacecommit.requested"
    data = plan_file.read_bytes()
    plan_file.write_bytes(data[: int(len(data) * cut)])
    line = _one_error_line(capsys, [command, "--base-path", str(gen.base), *(["--force"] if command == "schedule"
                                                                                else [])])
    assert plan_file.name in line


@pytest.mark.parametrize("name", ["123.commit", "00000000000000000000.replacecommit.requested"])
def test_cli_malformed_instant_file_name_prints_one_line_naming_it(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   name: str) -> None:
    gen = small_table(tmp_path)
    (gen.base / ".hoodie" / name).write_bytes(b"")
    assert name in _one_error_line(capsys, ["schedule", "--base-path", str(gen.base), "--force"])


def test_instant_age_of_impossible_pending_instant_is_timeline_error(tmp_path: Path) -> None:
    gen = small_table(tmp_path, commits=1)
    (gen.base / ".hoodie" / "99999999999999999.replacecommit.requested").write_bytes(VALID_PLAN)
    (pending,) = gen.table.timeline().pending()
    with pytest.raises(TimelineError, match="99999999999999"):  # not a bare ValueError from strptime
        gen.table.instant_age_seconds(pending.time)
