"""Scheduling ignores empty partitions (with, without or with an empty partition metafile)."""

from __future__ import annotations

from pathlib import Path

from hudi_clusterd.ops.schedule import schedule
from tests.builders import TableGen, make_policy, small_table


def test_schedule_empty_partitions_are_ignored(tmp_path: Path) -> None:
    gen = small_table(tmp_path)
    (gen.base / "empty").mkdir()
    (gen.base / "empty" / ".hoodie_partition_metadata").write_text("#partition metadata\npartitionDepth=1\n")
    (gen.base / "bare").mkdir()  # not even a metafile
    (gen.base / "zero").mkdir()
    (gen.base / "zero" / ".hoodie_partition_metadata").write_bytes(b"")
    assert "empty" in gen.table.scan_files()[0]
    result = schedule(gen.table, make_policy(), force=True)
    assert result.plan is not None and result.instant is not None
    assert {g.partition_path for g in result.plan.input_groups} == {"p1", "p2"}


def test_schedule_table_of_only_empty_partitions_plans_nothing(tmp_path: Path) -> None:
    gen = TableGen(tmp_path / "t")
    for p in ("a", "b"):
        (gen.base / p).mkdir()
        (gen.base / p / ".hoodie_partition_metadata").write_text("#partition metadata\npartitionDepth=1\n")
    result = schedule(gen.table, make_policy(), force=True)
    assert result.instant is None and result.plan is None
