"""The clustering's Spark job reading file slices with log files merged (in tasks of their own, the merge in the
Python workers), on a copy of a golden merge-on-read table written by Apache Hudi 1.2 (version 9): a hand-built
plan takes the slices of Hudi's compaction plan with their log files, one slice with logs that no compaction
touched, and base-only slices; the rows written equal `merge_file_slice`'s merge and Hudi's compacted base files
on every column but ``_hoodie_file_name``, and base-only slices come out unchanged."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.plan import ClusteringGroup, ClusteringPlan, ClusteringStrategy, SliceInfo
from hudi_clusterd.formats.avro import decode_ocf
from hudi_clusterd.formats.log import MergeMode, MergeRule, SliceMerge, merge_file_slice, read_data_log
from hudi_clusterd.storage import open_storage
from hudi_clusterd.table.properties import read_config
from hudi_clusterd.table.table_ref import TableRef
from tests.builders import make_policy

pytestmark = pytest.mark.spark

TABLE = "v9_txns_simple_meta"
COMPACTION = "20260307162618152"
CLUSTERING = "20260307170000000"  # after every instant of the table
COMPLETED = re.compile(r"(\d+)_\d+\.[a-z]+")  # a completed instant's file name on timeline layout 2
UNCOMPACTED = "c923cb31-a2d3-49c6-8f47-4be96502c239-0"  # region=eu: a base file and two log files, never compacted
BASE_ONLY = {"region=us": ["9041822d-a952-41d2-87fc-4652f4df0f9f-0"],
             "region=eu": ["694491b7-ed54-402d-ad59-c36ed6c1d6a2-0", "c86b1f8f-af9f-4b56-83e7-26cb80673368-0"]}


def _rows(t: pa.Table) -> list[dict[str, Any]]:
    """The rows without ``_hoodie_file_name``, by record key."""
    return sorted(({k: v for k, v in r.items() if k != "_hoodie_file_name"} for r in t.to_pylist()),
                  key=lambda r: r["_hoodie_record_key"])


def _base(partition: Path, file_id: str, instant: str | None = None) -> Path:
    [path] = [p for p in partition.glob(f"{file_id}_*.parquet") if instant is None or p.stem.endswith(instant)]
    return path


def _logs(partition: Path, file_id: str) -> list[Path]:
    return sorted(partition.glob(f".{file_id}_*.log.*"))


@pytest.fixture
def table(golden_mor_tables: Path, tmp_path: Path) -> Path:
    dest = tmp_path / TABLE
    shutil.copytree(golden_mor_tables / TABLE, dest)
    return dest


def test_slices_with_log_files_are_written_merged_and_base_only_slices_unchanged(table: Path, spark: Any) -> None:
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner, group_input
    from hudi_clusterd.engine.clustering.scan import GroupScan, footer_schema

    storage = open_storage(str(table))
    ref = TableRef(TABLE, storage.spec, read_config(storage))
    timeline = table / ".hoodie" / "timeline"
    completed = {m.group(1) for p in timeline.iterdir() if (m := COMPLETED.fullmatch(p.name))}
    rule = MergeRule.of_mode(MergeMode.EVENT_TIME, "txn_ts")
    merge = SliceMerge.as_of_instant(rule, completed, CLUSTERING)
    operations = decode_ocf((timeline / f"{COMPACTION}.compaction.requested").read_bytes(), COMPACTION)["operations"]
    # (partition, file id, base file, log files, the rows Hudi's compaction wrote or None)
    merged: list[tuple[str, str, Path, list[Path], pa.Table | None]] = []
    for op in operations:
        partition = table / op["partitionPath"]
        logs = [partition / name for name in op["deltaFilePaths"]]
        assert logs == _logs(partition, op["fileId"])  # the latest slice's logs are the plan's
        compacted = pq.read_table(_base(partition, op["fileId"], COMPACTION))
        merged.append((op["partitionPath"], op["fileId"], partition / op["dataFilePath"], logs, compacted))
    eu = table / "region=eu"
    merged.append(("region=eu", UNCOMPACTED, _base(eu, UNCOMPACTED), _logs(eu, UNCOMPACTED), None))
    assert sorted(p for p, *_ in merged) == ["region=apac", "region=eu", "region=us"]

    def slice_of(partition: str, file_id: str, base: Path, logs: list[Path]) -> SliceInfo:
        return SliceInfo(file_id, partition, storage.uri(str(base.relative_to(table))),
                         tuple(storage.uri(str(p.relative_to(table))) for p in logs))

    groups: list[tuple[SliceInfo, ...]] = []
    for partition in ["region=us", "region=eu"]:  # slices with logs beside base-only slices in one group
        groups.append((*(slice_of(p, f, b, logs) for p, f, b, logs, _ in merged if p == partition),
                       *(slice_of(partition, f, _base(table / partition, f), []) for f in BASE_ONLY[partition])))
    groups += [(slice_of(p, f, b, logs),) for p, f, b, logs, _ in merged if p == "region=apac"]
    apac_base_only = (slice_of("region=apac", "e5de8884-c15f-4225-8adf-4f15b351534b-0",
                               _base(table / "region=apac", "e5de8884-c15f-4225-8adf-4f15b351534b-0"), []),)
    groups.append(apac_base_only)  # a group of base-only slices
    pol = make_policy(**{"sort.columns": "txn_ts"})
    plan = ClusteringPlan(tuple(ClusteringGroup(g, 1) for g in groups),
                          ClusteringStrategy(pol.execution_strategy_class, pol.strategy_params()))

    # what each group must come out as: the merge of each slice with logs, each base-only file as it is
    expected: list[list[dict[str, Any]]] = []
    for group in plan.input_groups:
        parts: list[pa.Table] = []
        for s in group.slices:
            base = pq.read_table(table / storage.rel_from_uri(s.data_file_path))
            if not s.delta_file_paths:
                parts.append(base)
                continue
            blocks = [b for p in s.delta_file_paths for b in read_data_log(
                (table / storage.rel_from_uri(p)).read_bytes(), source=p)]
            ours = merge_file_slice(base, blocks, completed=completed, rule=rule, as_of=CLUSTERING)
            hudi = next((c for p, f, _, _, c in merged if f == s.file_id and c is not None), None)
            if hudi is not None:
                assert _rows(ours) == _rows(hudi), s.file_id
                assert _rows(ours) != _rows(base), s.file_id  # the logs changed the slice
            parts.append(ours)
        expected.append(sorted((r for t in parts for r in _rows(t)), key=lambda r: r["_hoodie_record_key"]))

    runner = SparkGroupRunner(spark, owns_session=False)
    for index, group in enumerate(plan.input_groups):
        files = [BaseFile.parse(s.partition_path, s.file_name, (table / storage.rel_from_uri(
            s.data_file_path)).stat().st_size) for s in group.slices]
        read = group_input(storage, plan, index, runner.scan_files(storage, [f for f in files if f]), merge)
        schema, _ = footer_schema(storage, [*read.files, *read.bases])
        scan = GroupScan(spark, storage.spec, read.files, schema, merged=read.merged, merge=read.merge)
        # one task per base-only file (as few files as these), then the slices with logs dealt to tasks of their
        # own (at most two per core)
        tasks = len(read.files) + min(len(read.merged), 2 * spark.sparkContext.defaultParallelism)
        assert scan.map_files(lambda b: b, schema).rdd.getNumPartitions() == tasks
        stats = runner.run_group(ref, CLUSTERING, plan, index, [f for f in files if f is not None], merge)
        assert stats and all(s.path for s in stats)
        written = pa.concat_tables([pq.read_table(table / str(s.path)) for s in stats])
        assert _rows(written) == expected[index], f"group {index}"
        assert {s.path.rsplit("/", 1)[-1] for s in stats if s.path} == set(
            written.column("_hoodie_file_name").to_pylist())
        assert sum(s.num_writes for s in stats) == written.num_rows


def _merged_snapshot(base: Path) -> list[dict[str, Any]]:
    """The table's rows as of now, read through our file-system view and merge (the latest slice of every live
    file group, its log files merged), without ``_hoodie_file_name``."""
    from hudi_clusterd.table.hoodie_table import HoodieTable

    table = HoodieTable.open(str(base))
    timeline = table.timeline()
    merge = table.slice_merge(timeline, "99991231235959999")
    assert merge is not None
    rows: list[dict[str, Any]] = []
    for sl in table.file_system_view(timeline).latest_file_slices():
        base_rows = pq.read_table(base / sl.base_file.relative_path) if sl.base_file is not None else None
        blocks = [b for lf in sl.log_files
                  for b in read_data_log((base / lf.relative_path).read_bytes(), source=lf.file_name)]
        rows += _rows(merge_file_slice(base_rows, blocks, completed=merge, rule=merge.rule, as_of=merge.as_of))
    return sorted(rows, key=lambda r: (r["_hoodie_record_key"], r["_hoodie_partition_path"]))


def _append_updates(base: Path, instant: str, every: int = 2) -> list[tuple[str, str]]:
    """A deltacommit ``instant`` of our own making that appends to each latest file slice one log file holding an
    AVRO block (every ``every``-th row updated: a larger ``txn_ts`` and a new ``merchant_name``) and a DELETE
    block (the slice's first row), as Hudi's upsert writes them; returns the (partition, file id) it touched."""
    import json

    from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
    from hudi_clusterd.domain.instant import Action, Instant, State
    from hudi_clusterd.formats.avro_schema import arrow_to_avro_json, strip_meta_fields
    from hudi_clusterd.formats.log import encode_block
    from hudi_clusterd.table.hoodie_table import HoodieTable
    from tests.harness.mor_logs import avro_block, delete_block, ordering_bytes

    table = HoodieTable.open(str(base))
    store = table.timeline_store
    touched: list[tuple[str, str]] = []
    stats: dict[str, list[WriteStat]] = {}
    for sl in table.file_system_view().latest_file_slices():
        assert sl.base_file is not None
        rows = pq.read_table(base / sl.base_file.relative_path)
        schema = json.loads(arrow_to_avro_json(strip_meta_fields(rows.schema), "t", with_meta_fields=True))
        updates = [{**r, "_hoodie_commit_time": instant, "_hoodie_commit_seqno": f"{instant}_0_{n}",
                    "txn_ts": r["txn_ts"] + 1000, "merchant_name": f"updated-{n}"}
                   for n, r in enumerate(rows.to_pylist()) if n % every == 1]
        first = rows.slice(0, 1).to_pylist()[0]
        blocks = [avro_block(instant, schema, updates),
                  delete_block(instant, [(first["_hoodie_record_key"], first["_hoodie_partition_path"],
                                          ordering_bytes("long", first["txn_ts"] + 1000))])]
        name = f".{sl.file_id}_{instant}.log.1_0-1-2"
        path = f"{sl.partition_path}/{name}" if sl.partition_path else name
        data = b"".join(encode_block(b) for b in blocks)
        (base / path).write_bytes(data)
        stats.setdefault(sl.partition_path, []).append(WriteStat(
            sl.file_id, path, sl.partition_path, prev_commit=sl.base_instant, num_writes=len(updates) + 1,
            num_deletes=1, num_update_writes=len(updates), total_write_bytes=len(data), file_size_in_bytes=len(data),
            log_version=1, log_offset=0, base_file=sl.base_file.file_name, log_files=(name,)))
        touched.append(sl.group_id)
    meta = CommitMetadata({p: tuple(v) for p, v in stats.items()},
                          {"schema": table.latest_schema() or ""}, Operation.UPSERT)
    requested = Instant(instant, Action.DELTA_COMMIT, State.REQUESTED)
    with table.lock():
        store.create(requested)
        store.create(requested.with_state(State.INFLIGHT))
        store.create(requested.with_state(State.COMPLETED), store.serde.encode_commit(meta))
    return touched


@pytest.mark.parametrize("name", ["v9_txns_simple_nometa",
                                  pytest.param("v9_txns_complex_nometa", marks=pytest.mark.slow)])
def test_the_daemon_plans_slices_with_their_log_files_and_the_table_reads_the_same_after(
        name: str, golden_mor_tables: Path, tmp_path: Path, spark: Any) -> None:
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner
    from hudi_clusterd.ops.events import Outcome
    from hudi_clusterd.ops.execute import execute_pending
    from hudi_clusterd.ops.schedule import schedule
    from hudi_clusterd.table.hoodie_table import HoodieTable

    base = tmp_path / name
    shutil.copytree(golden_mor_tables / name, base)
    touched = _append_updates(base, "20260308000000000")
    before = _merged_snapshot(base)
    table = HoodieTable.open(str(base))
    scheduled = schedule(table, make_policy(**{"small.file.limit": "100000000", "sort.columns": "txn_ts"}),
                         force=True, hot_commits=0)
    plan = scheduled.plan
    assert plan is not None, scheduled.reason
    with_logs = [s for g in plan.input_groups for s in g.slices if s.delta_file_paths]
    assert {(s.partition_path, s.file_id) for s in with_logs} == set(touched)
    result = execute_pending(table, SparkGroupRunner(spark, owns_session=False), commit_wait_s=0)
    assert result.outcome is Outcome.COMPLETED, result.message
    assert result.files_replaced == plan.num_slices
    after = _merged_snapshot(base)
    assert len(after) == len(before) and after == before
    # the clustered groups' log files are no longer read: the new base files hold their merged rows
    view = table.file_system_view()
    assert not {(s.partition_path, s.file_id) for s in with_logs} & {sl.group_id for sl in view.latest_file_slices()}
