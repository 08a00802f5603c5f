"""On a merge-on-read table: the instants a clustering's merge applies, the writes it did not read, and the log
files pending writes are writing (their markers)."""

from __future__ import annotations

import shutil
from pathlib import Path

from hudi_clusterd.domain.instant import Action
from hudi_clusterd.ops.pending_writes import late_writes, pending_writes
from hudi_clusterd.table.hoodie_table import HoodieTable

TABLE = "v9_txns_simple_nometa"


def _copy(golden_mor_tables: Path, tmp_path: Path) -> HoodieTable:
    shutil.copytree(golden_mor_tables / TABLE, tmp_path / TABLE)
    return HoodieTable.open(str(tmp_path / TABLE))


def test_the_merge_applies_every_write_completed_up_to_the_clustering_instant(golden_mor_tables: Path,
                                                                              tmp_path: Path) -> None:
    table = _copy(golden_mor_tables, tmp_path)
    timeline = table.timeline()
    done = [i.time for i in timeline.completed()]
    merge = table.slice_merge(timeline, done[2])
    assert merge is not None and merge.as_of == done[2]
    assert merge.completed == frozenset(done[:3])
    assert merge.archived_before == done[0]
    assert all(t in merge for t in done[:3]) and not any(t in merge for t in done[3:])


def test_writes_completed_after_the_merge_read_its_instants_are_late(golden_mor_tables: Path,
                                                                     tmp_path: Path) -> None:
    table = _copy(golden_mor_tables, tmp_path)
    timeline = table.timeline()
    deltas = list(timeline.of_actions([Action.DELTA_COMMIT]).completed())
    last = deltas[-1]
    touched = {(ws.partition_path or "", ws.file_id) for ws in table.timeline_store.commit_metadata(last).write_stats()}
    assert touched
    every = touched | {("region=nowhere", "x")}
    merge = table.slice_merge(timeline, deltas[-2].time)
    assert merge is not None
    late = late_writes(table, timeline, every, merge)
    assert set(late) >= touched and ("region=nowhere", "x") not in late
    assert late_writes(table, timeline, every, table.slice_merge(timeline, last.time) or merge) == {}


def test_a_pending_writes_log_file_markers_name_its_file_group(golden_mor_tables: Path, tmp_path: Path) -> None:
    table = _copy(golden_mor_tables, tmp_path)
    base = tmp_path / TABLE
    inflight = "20991231000000000"
    (base / ".hoodie/timeline" / f"{inflight}.deltacommit.requested").write_bytes(b"")
    (base / ".hoodie/timeline" / f"{inflight}.deltacommit.inflight").write_bytes(b"")
    log_name = f".abc-0_{inflight}.log.1_0-1-2"
    marker = base / ".hoodie/.temp" / inflight / "region=us" / f"{log_name}.marker.APPEND"
    marker.parent.mkdir(parents=True)
    marker.write_bytes(b"")
    writes = pending_writes(table, table.timeline(), {("region=us", "abc-0"), ("region=us", "other")}, "x")
    assert writes.writing == {("region=us", "abc-0"): inflight}
