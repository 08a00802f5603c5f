"""A group's slices split into base-only files and slices read merged, and a slice's merge as of an instant (no
JVM: the Spark job itself is `tests/integration/test_clustering_mor.py`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.domain.plan import ClusteringGroup, ClusteringPlan, ClusteringStrategy, SliceInfo
from hudi_clusterd.engine.clustering.merged import MergedSlice, merge_slice
from hudi_clusterd.engine.clustering.runner import group_input
from hudi_clusterd.engine.clustering.scan import ScanFile
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.formats.log import MergeMode, MergeRule, SliceMerge, encode_block
from hudi_clusterd.storage import Storage, open_storage
from tests.harness.mor_logs import META, avro_block, record_schema

T0, T1, T2 = "20260101000000000", "20260101000001000", "20260101000002000"
RULE = MergeRule.of_mode(MergeMode.EVENT_TIME, "txn_ts")


def _base(file_id: str) -> str:
    return f"p/{file_id}_0-1-1_{T0}.parquet"


def _log(file_id: str, version: int = 1) -> str:
    return f"p/.{file_id}_{T0}.log.{version}_0-1-1"


def _plan(storage: Storage, *slices: tuple[str, str | None, tuple[str, ...]]) -> ClusteringPlan:
    infos = tuple(SliceInfo(fid, "p", storage.uri(base) if base else "", tuple(storage.uri(p) for p in logs))
                  for fid, base, logs in slices)
    return ClusteringPlan((ClusteringGroup(infos, 1),), ClusteringStrategy("x", {}))


def test_slices_with_logs_are_read_merged_and_the_others_as_base_files(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path))
    plan = _plan(storage, ("a-0", _base("a-0"), ()), ("b-0", _base("b-0"), (_log("b-0"), _log("b-0", 2))),
                 ("c-0", None, (_log("c-0"),)), ("d-0", _base("d-0"), ()))
    files = [ScanFile(_base(f), 100 + i) for i, f in enumerate(["a-0", "b-0", "d-0"])]
    merge = SliceMerge.as_of_instant(RULE, {T0, T1, T2}, T1)
    read = group_input(storage, plan, 0, files, merge)
    assert read.files == (files[0], files[2])
    assert read.merged == (MergedSlice(_base("b-0"), (_log("b-0"), _log("b-0", 2))), MergedSlice(None, (_log("c-0"),)))
    assert read.bases == (files[1],) and read.merge == merge and read.input_bytes == 303
    assert merge.completed == {T0, T1} and merge.as_of == T1  # nothing after the clustering instant applies
    assert group_input(storage, _plan(storage, ("a-0", _base("a-0"), ())), 0, files[:1], None).merged == ()


def test_a_slice_with_logs_is_refused_without_a_merge_rule_its_base_file_or_any_base_file(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path))
    merge = SliceMerge.as_of_instant(RULE, {T0}, T0)
    with_logs = _plan(storage, ("b-0", _base("b-0"), (_log("b-0"),)))
    with pytest.raises(ExecutionError, match=r"\.b-0_.*\.log\.1_0-1-1: a log file of a clustering group, and no "
                                             "merge rule"):
        group_input(storage, with_logs, 0, [ScanFile(_base("b-0"), 10)], None)
    with pytest.raises(ExecutionError, match=r"b-0_0-1-1_.*\.parquet: the base file of a slice with log files is "
                                             "not among"):
        group_input(storage, with_logs, 0, [], merge)
    with pytest.raises(ExecutionError, match=r"\.c-0_.*: a group of log-only file slices is not read"):
        group_input(storage, _plan(storage, ("c-0", None, (_log("c-0"),))), 0, [], merge)


def test_a_golden_slice_merges_as_of_the_clustering_instant(golden_mor_tables: Path, tmp_path: Path) -> None:
    table = tmp_path / "t"
    shutil.copytree(golden_mor_tables / "v9_txns_simple_meta", table)
    storage = open_storage(str(table))
    fid = "3e93c8a9-fda0-4e8a-91dc-b4ade7dab76d-0"
    base = f"region=us/{fid}_1-27-53_20260307162557587.parquet"
    logs = (f"region=us/.{fid}_20260307162604102.log.1_0-52-126", f"region=us/.{fid}_20260307162606034.log.1_0-78-180")
    completed = {"20260307162557587", "20260307162604102", "20260307162606034"}
    piece = MergedSlice(base, logs)

    def merged_as_of(instant: str) -> list[tuple[str, str]]:
        merged = merge_slice(storage, piece, SliceMerge.as_of_instant(RULE, completed, instant))
        return sorted(zip(merged.column("_hoodie_record_key").to_pylist(),
                          merged.column("_hoodie_commit_time").to_pylist(), strict=True))

    before, updated, deleted = (merged_as_of(i) for i in sorted(completed))
    assert {t for _, t in before} == {"20260307162557587"}  # no log block applies yet
    assert [k for k, _ in updated] == [k for k, _ in before]  # the first deltacommit's data block updates a key
    assert {t for _, t in updated} == {"20260307162557587", "20260307162604102"}
    assert len(deleted) == len(updated) - 1 and set(deleted) < set(updated)  # the second one's DELETE block


def test_a_column_added_in_a_later_log_block_is_kept_by_the_merge(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path))
    (tmp_path / "p").mkdir()
    meta = {"_hoodie_commit_time": T0, "_hoodie_commit_seqno": "s", "_hoodie_partition_path": "p",
            "_hoodie_file_name": "f"}
    base_rows = [{**meta, "_hoodie_record_key": k, "txn_ts": 1} for k in ("k1", "k2")]
    pq.write_table(pa.Table.from_pylist(base_rows, pa.schema([*(pa.field(n, pa.string()) for n in META),
                                                             pa.field("txn_ts", pa.int64())])),
                   tmp_path / _base("a-0"))
    wider = record_schema([("txn_ts", "long"), ("note", "string")])
    block = avro_block(T1, wider, [{**meta, "_hoodie_commit_time": T1, "_hoodie_record_key": "k2", "txn_ts": 2,
                                    "note": "added"}])
    (tmp_path / _log("a-0")).write_bytes(encode_block(block))
    merge = SliceMerge.as_of_instant(RULE, {T0, T1}, T2, table_schema=json.dumps(wider))
    merged = merge_slice(storage, MergedSlice(_base("a-0"), (_log("a-0"),)), merge)
    assert sorted(merged.select(["_hoodie_record_key", "txn_ts", "note"]).to_pylist(),
                  key=lambda r: r["_hoodie_record_key"]) == [
        {"_hoodie_record_key": "k1", "txn_ts": 1, "note": None},
        {"_hoodie_record_key": "k2", "txn_ts": 2, "note": "added"}]
    # without the table's schema the base file's columns are the output's (what the group's scan reads)
    narrow = merge_slice(storage, MergedSlice(_base("a-0"), (_log("a-0"),)), SliceMerge.as_of_instant(
        RULE, {T0, T1}, T2))
    assert "note" not in narrow.column_names
