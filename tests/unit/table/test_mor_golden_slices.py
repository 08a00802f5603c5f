"""File slices of the golden merge-on-read tables Apache Hudi wrote (``../shared/reference/hudi-tables/mor``):
every slice's base file and log files as Hudi's own records name them: the compaction plans on the version 9
timelines, the deltacommit write stats on version 6; the compactions read from their plans, as written and as
if still pending."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hudi_clusterd.domain.fs_view import FileSystemView
from hudi_clusterd.domain.instant import Action
from hudi_clusterd.domain.planner import eligible_slices
from hudi_clusterd.storage import open_storage
from hudi_clusterd.table.clustering_queries import pending_clustering_plans
from hudi_clusterd.table.listing import DataFiles, file_system_view, scan_files
from hudi_clusterd.table.properties import read_config
from hudi_clusterd.table.timeline_store import TimelineStore
from tests.builders import make_policy

V9_WITH_COMPACTION = ["v9_txns_complex_meta", "v9_txns_complex_nometa", "v9_txns_nonpart_meta",
                      "v9_txns_nonpart_nometa", "v9_txns_simple_meta", "v9_txns_simple_nometa"]
V6 = "v6_simplekeygen_nonhivestyle_overwritetable"


def _open(path: Path) -> tuple[TimelineStore, FileSystemView]:
    """The table's timeline and view (through the listing and the timeline, as a tick reads them)."""
    storage = open_storage(str(path))
    store = TimelineStore(storage, layout=read_config(storage).timeline_layout)
    timeline = store.load()
    listing = scan_files(storage)
    view = file_system_view(store, timeline, DataFiles(listing.base_files, listing.log_files), listing.partitions,
                            pending_clustering_plans(store, timeline))
    return store, view


def _slice_files(view: FileSystemView, group: tuple[str, str], base_instant: str) -> tuple[str, list[str]]:
    fg = view.file_group(group)
    assert fg is not None, f"file group {group} not listed"
    [sl] = [s for s in fg.slices if s.base_instant == base_instant]
    return (sl.base_file.file_name if sl.base_file else "", [lf.file_name for lf in sl.log_files])


@pytest.mark.parametrize("name", V9_WITH_COMPACTION)
def test_v9_slices_hold_the_files_hudis_compaction_plan_names(golden_mor_tables: Path, name: str) -> None:
    store, view = _open(golden_mor_tables / name)
    compactions = view.timeline.of_actions([Action.COMPACTION]).completed().instants
    assert len(compactions) == 1
    plan = store.compaction_plan(compactions[0])
    assert plan.operations
    for op in plan.operations:
        assert _slice_files(view, op.group_id, op.base_instant) == (op.data_file_path, list(op.delta_file_paths))
        base, logs = _slice_files(view, op.group_id, compactions[0].time)  # the compaction's output slice
        assert base.endswith(f"_{compactions[0].time}.parquet") and logs == []


@pytest.mark.parametrize("name", V9_WITH_COMPACTION)
def test_v9_a_pending_compaction_is_read_from_its_plan_and_its_groups_left_alone(
        golden_mor_tables: Path, tmp_path: Path, name: str) -> None:
    table = tmp_path / name
    shutil.copytree(golden_mor_tables / name, table)
    [done] = list((table / ".hoodie" / "timeline").glob("*_*.commit"))
    compaction = done.name.split("_")[0]
    done.unlink()  # the compactor has not finished
    store, view = _open(table)
    plan_groups = set(store.compaction_plan(view.timeline.find(compaction, Action.COMPACTION)).group_ids())
    assert set(view.pending_compaction.compaction) == plan_groups
    assert all(view.pending_compaction.compaction[g] == compaction for g in plan_groups)
    for op in store.compaction_plan(view.timeline.find(compaction, Action.COMPACTION)).operations:
        assert _slice_files(view, op.group_id, op.base_instant) == (op.data_file_path, list(op.delta_file_paths))
        latest = view.latest_slice_of(op.group_id)
        if latest is not None:  # not replaced since: the compaction's slice, its half-written base file hidden
            assert latest.base_instant == compaction and latest.base_file is None
    skipped: dict[str, int] = {}
    eligible = eligible_slices(view, view.partitions(), make_policy(), skipped)
    assert not plan_groups & {sl.group_id for sls in eligible.values() for sl in sls}


def test_v6_slices_hold_the_files_each_deltacommit_recorded(golden_mor_tables: Path) -> None:
    store, view = _open(golden_mor_tables / V6)
    checked = 0
    for inst in view.timeline.of_actions([Action.DELTA_COMMIT]).completed():
        for ws in store.commit_metadata(inst).write_stats():
            if not ws.log_files:
                continue
            group = (ws.partition_path or "", ws.file_id)
            assert _slice_files(view, group, ws.prev_commit) == (ws.base_file, list(ws.log_files))
            checked += 1
    assert checked == 1  # the one log file G6 has: 10/.92e64357-…_20250121000647668.log.1_0-73-101


def test_the_listing_keeps_every_log_file(golden_mor_tables: Path) -> None:
    listing = scan_files(open_storage(str(golden_mor_tables / "v9_txns_nonpart_nometa")))
    assert len(listing.log_files) == 5
    assert {lf.file_id for lf in listing.log_files} == {"1900ff60-ed76-4f51-823b-dbcb27f05a0c-0"}
    assert listing.partitions == [""]
