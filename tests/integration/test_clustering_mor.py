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
