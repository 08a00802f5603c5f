"""Hudi 1.x's storage-lock files (``.hoodie/.locks/table_lock.json``, and Hudi 1.2's lock audit:
``audit_enabled.json``, ``audit/<ms>_<owner>.jsonl``) are no part of the table the daemon lists, plans and checks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hudi_clusterd.ops.recovery import clean_stale_temp_files
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.ops.snapshot import TableSnapshot
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import FakeClock, TableGen, make_policy

OWNER = "6f7d2c1e-0b7a-4a55-9a8e-3d8f1f0c2b11"


def add_hudi_lock_files(base: Path) -> list[Path]:
    """The files a Hudi 1.2 writer with the storage lock and its audit leaves in ``.hoodie/.locks``."""
    locks = base / ".hoodie" / ".locks"
    (locks / "audit").mkdir(parents=True)
    files = {
        locks / "table_lock.json": f'{{"expired":true,"validUntil":1700000030000,"owner":"{OWNER}"}}',
        locks / "audit_enabled.json": '{"STORAGE_LOCK_AUDIT_SERVICE_ENABLED":true}',
        locks / "audit" / f"1700000000000_{OWNER}.jsonl":
            f'{{"ownerId":"{OWNER}","transactionStartTime":1700000000000,"state":"START"}}\n',
    }
    for path, text in files.items():
        path.write_text(text)
    return list(files)


@pytest.mark.parametrize("version", [6, 9])
def test_a_table_with_hudis_lock_files_lists_plans_and_checks_as_one_without(tmp_path: Path, version: int) -> None:
    # Given a table, and a copy of it to which Hudi's storage-lock files are added
    gen = TableGen(tmp_path / "plain", table_version=version, clock=FakeClock())
    for i in range(4):
        gen.commit({"p1": [float(i)], "p2": [float(i) + 0.5]})
    shutil.copytree(gen.base, tmp_path / "locked")
    lock_files = add_hudi_lock_files(tmp_path / "locked")
    plain, locked = (HoodieTable.open(str(tmp_path / name), clock=FakeClock()) for name in ("plain", "locked"))
    # Then both list the same partitions, base files and timeline
    assert locked.scan_files() == plain.scan_files()
    assert locked.timeline().instants == plain.timeline().instants
    assert [f.name for f in locked.timeline_store.listed] == [f.name for f in plain.timeline_store.listed]
    assert [f.name for f in TableSnapshot.load(locked).meta_files] == [f.name for f in plain.timeline_store.listed]
    # And both pass the checks before clustering and plan the same groups
    locked.check_clusterable()
    plain_plan, locked_plan = (schedule(t, make_policy()).plan for t in (plain, locked))
    assert plain_plan is not None and locked_plan is not None
    assert [g.group_ids() for g in locked_plan.input_groups] == [g.group_ids() for g in plain_plan.input_groups]
    # And the clean-up of the timeline folders leaves the lock files alone
    assert clean_stale_temp_files(TableSnapshot.load(locked), older_than_s=0) == []
    assert all(p.exists() for p in lock_files)
