"""Clustering executed on a real local SparkSession, checked with hudi-rs and our own invariants."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.domain.policy import ClusteringPolicy
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.ops.execute import ExecutionResult, execute_pending
from hudi_clusterd.ops.ports import GroupRunner
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.ordering.figures import clustering_figures
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.table_ref import TableRef
from tests.builders import TableGen, make_policy
from tests.harness.hudi_rs_checks import (
    assert_no_orphan_files,
    data_bytes,
    data_files,
    hudi_rs_incremental,
    hudi_rs_rows,
    without_file_name,
)

pytestmark = pytest.mark.spark

KB = 1024


@pytest.fixture(scope="module")
def runner(spark: Any) -> GroupRunner:
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner

    return SparkGroupRunner(spark, owns_session=False)


def make_table(tmp_path: Path, commits: int = 8, rows: int = 400, seed: int = 3) -> TableGen:
    rng = random.Random(seed)
    gen = TableGen(tmp_path / "t")
    for _ in range(commits):
        gen.commit({"p1": [rng.uniform(0, 100) for _ in range(rows)],
                    "p2": [rng.uniform(0, 100) for _ in range(rows // 2)]})
    return gen


def last_commit(table: HoodieTable) -> str:
    return table.timeline().commits().completed().instants[-1].time


def run(table: HoodieTable, pol: ClusteringPolicy, runner: GroupRunner, **kw: Any) -> ExecutionResult:
    scheduled = schedule(table, pol, force=True)
    assert scheduled.instant is not None, scheduled.reason
    return execute_pending(table, runner, scheduled.instant, parallelism=pol.max_parallelism,
                           figures=clustering_figures, **kw)


@pytest.mark.parametrize("strategy", ["LINEAR", "HILBERT"])
def test_cluster_gzip_input_output_files_near_target_without_remainders(tmp_path: Path, runner: GroupRunner,
                                                                        strategy: str) -> None:
    # Given a gzip table (Hudi's default codec) that clustering rewrites with snappy, which is larger on disk
    rng = random.Random(5)
    gen = TableGen(tmp_path / "t", partitioned=False, compression="gzip")
    payload = lambda part, n: {"s": pa.array([f"v{rng.getrandbits(40):x}" for _ in range(n)])}  # noqa: E731
    for _ in range(6):
        gen.commit({"": [rng.uniform(0, 100) for _ in range(8_000)]}, extra_columns=payload)
    target = 160 * KB
    pol = make_policy(**{"sort.columns": "x,id", "target.file.max.bytes": str(target),
                    "hoodie.layout.optimize.strategy": strategy})
    with_plan = schedule(gen.table, pol, force=True)
    assert with_plan.plan is not None and with_plan.instant is not None
    planned = sum(g.num_output_file_groups for g in with_plan.plan.input_groups)
    # When clustered
    result = execute_pending(gen.table, runner, with_plan.instant, parallelism=pol.max_parallelism)
    assert result.outcome == "completed"
    sizes = sorted(data_bytes(f) for f in (tmp_path / "t").glob(f"*_{result.instant}.parquet"))
    # Then no file passes the target, none is a small remainder, and the count follows the output's bytes
    assert all(s <= 1.1 * target for s in sizes), sizes
    assert all(s >= 0.7 * target for s in sizes[1:]), sizes
    assert len(sizes) <= -(-sum(sizes) // int(0.8 * target)), (len(sizes), sum(sizes))
    assert len(sizes) > planned  # snappy output is larger than the gzip input: more files than the plan said
    assert sorted(r["id"] for r in hudi_rs_rows(tmp_path / "t")) == list(range(48_000))


def test_cluster_files_near_target_when_the_sample_overstates_the_output(tmp_path: Path, runner: GroupRunner
                                                                          ) -> None:
    # Given 400,000 rows (20 times the size sample) whose columns follow the sort column: in sort order they
    # compress far better than in the sample, whose neighbours lie 20 rows apart (it overstates bytes per row)
    rng = random.Random(11)
    gen = TableGen(tmp_path / "t", partitioned=False)
    xs: list[float] = []

    def following_x(part: str, n: int) -> dict[str, pa.Array]:
        return {**{f"b{k}": pa.array([int(v * 10**k) for v in xs], pa.int64()) for k in (2, 3, 4, 5)},
                **{f"y{k}": pa.array([round(v, k) for v in xs], pa.float64()) for k in (2, 3, 4)},
                **{f"label{k}": pa.array([f"cell-{int(v * 10**k)}" for v in xs]) for k in (2, 3)}}

    for _ in range(20):
        xs = [rng.uniform(0, 100) for _ in range(20_000)]
        gen.commit({"": xs}, extra_columns=following_x)
    target = 1024 * KB
    pol = make_policy(**{"sort.columns": "x", "target.file.max.bytes": str(target)})
    # When clustered
    result = run(gen.table, pol, runner)
    assert result.outcome == "completed"
    sizes = sorted(data_bytes(f) for f in (tmp_path / "t").glob(f"*_{result.instant}.parquet"))
    # Then the files land near the target (one writing task per estimated file made them 0.63 of it)
    assert all(s <= 1.1 * target for s in sizes), sizes
    assert sizes[len(sizes) // 2] >= 0.75 * target, sizes
    assert len(sizes) <= -(-sum(sizes) // int(0.75 * target)), (len(sizes), sum(sizes))
    assert len(hudi_rs_rows(tmp_path / "t")) == 400_000


def test_cluster_linear_keeps_every_row_and_meta_and_orders_output(tmp_path: Path, runner: GroupRunner) -> None:
    gen = make_table(tmp_path)
    base, table = gen.base, gen.table
    before_instant = last_commit(table)
    before = hudi_rs_rows(base)
    files_before = len(table.file_system_view().latest_base_files())
    target = 48 * KB
    pol = make_policy(**{"sort.columns": "x", "target.file.max.bytes": str(target)})

    result = run(table, pol, runner)

    assert result.outcome == "completed"
    after = hudi_rs_rows(base)
    assert without_file_name(after) == without_file_name(before)  # same rows, commit times and seqnos kept
    assert hudi_rs_rows(base, as_of=before_instant) == before
    assert without_file_name(hudi_rs_rows(base, as_of=result.instant)) == without_file_name(before)
    assert sum(b.num_rows for b in hudi_rs_incremental(base, before_instant, result.instant)) == 0
    keys = [r["_hoodie_record_key"] for r in after]
    assert len(keys) == len(set(keys))
    latest = table.file_system_view().latest_base_files()
    assert len(latest) < files_before
    meta = json.loads((base / ".hoodie" / f"{result.instant}.replacecommit").read_text())
    assert meta["operationType"] == "CLUSTER" and "schema" in meta["extraMetadata"]
    replaced = {(p, f) for p, fids in meta["partitionToReplaceFileIds"].items() for f in fids}
    assert len(replaced) == files_before
    by_task: dict[str, list[Path]] = {}
    for stats in meta["partitionToWriteStats"].values():
        for ws in stats:
            path = base / ws["path"]
            assert path.exists() and ws["fileSizeInBytes"] == path.stat().st_size
            assert ws["numWrites"] == pq.ParquetFile(path).metadata.num_rows
            assert data_bytes(path) <= 1.1 * target
            prefix = ws["fileId"].rsplit("-", 1)[0]
            by_task.setdefault(prefix, []).append(path)
    for paths in by_task.values():  # one Spark task's file groups, in roll-over order, are one sorted run
        paths.sort(key=lambda p: int(p.name.split("_")[0].rsplit("-", 1)[1]))
        xs = [x for p in paths for x in pq.read_table(p, columns=["x"]).column("x").to_pylist()]
        assert xs == sorted(xs)
        for p in paths:
            names = pq.read_table(p, columns=["_hoodie_file_name"]).column(0).to_pylist()
            assert set(names) == {p.name}
    assert float(meta["extraMetadata"]["hudi-clusterd.layout.files_scanned.after"]) <= \
        float(meta["extraMetadata"]["hudi-clusterd.layout.files_scanned.before"])
    assert_no_orphan_files(base, at_rest=True)


@pytest.mark.parametrize(("strategy", "method"), [("hilbert", "sample"), ("z-order", "direct")])
def test_cluster_curves_improve_two_column_layout(tmp_path: Path, runner: GroupRunner, strategy: str,
                                                  method: str) -> None:
    gen = make_table(tmp_path, commits=6, rows=600)
    pol = make_policy(**{"sort.columns": "x,id", "target.file.max.bytes": str(6 * KB),
                    "hoodie.layout.optimize.strategy": strategy, "hoodie.layout.optimize.curve.build.method": method})
    before = without_file_name(hudi_rs_rows(gen.base))
    result = run(gen.table, pol, runner)
    assert result.outcome == "completed"
    assert result.layout_before is not None and result.layout_after is not None
    assert result.layout_after < result.layout_before
    assert without_file_name(hudi_rs_rows(gen.base)) == before


GOLDEN_LAYOUTS = {
    "unsorted": {},
    # a curve over columns of three types, read by our own scan of the files (every type of the golden schema,
    # nested ones included, crosses from pyarrow into Spark and back out)
    "hilbert": {"sort.columns": "doubleField,timestampField,name", "hoodie.layout.optimize.strategy": "hilbert"},
}


@pytest.mark.parametrize("layout", sorted(GOLDEN_LAYOUTS))
@pytest.mark.parametrize("name", ["v6_simplekeygen_nonhivestyle", "v6_complexkeygen_hivestyle",
                                  "v6_simplekeygen_hivestyle_no_metafields", "v6_timebasedkeygen_nonhivestyle"])
def test_cluster_golden_tables_read_the_same_before_and_after(golden_copy: Any, runner: GroupRunner,
                                                              name: str, layout: str) -> None:
    base = golden_copy(name)
    table = HoodieTable.open(str(base))
    before = hudi_rs_rows(base)
    result = run(table, make_policy(**GOLDEN_LAYOUTS[layout]), runner)
    assert result.outcome == "completed"
    after = hudi_rs_rows(base)
    assert without_file_name(after) == without_file_name(before)
    if table.config.populate_meta_fields:
        previous = table.timeline().commits().completed().instants[-2].time
        assert sum(b.num_rows for b in hudi_rs_incremental(base, previous, result.instant)) == 0


V8_V9_NOMETA = {"v9_txns_simple_nometa": "amount,txn_ts", "v9_txns_complex_nometa": "txn_ts",
                "v9_txns_nonpart_nometa": "account_id", "v8_simplekeygen_nonhivestyle_overwritetable": "id"}


@pytest.mark.parametrize(("name", "columns"), sorted(V8_V9_NOMETA.items()))
def test_cluster_golden_v8_v9_tables_in_timeline_layout_2(golden_copy: Any, runner: GroupRunner, name: str,
                                                        columns: str) -> None:
    # Given a table Apache Hudi 1.x wrote (version 8 or 9, no metadata table)
    base = golden_copy(name)
    table = HoodieTable.open(str(base))
    before = hudi_rs_rows(base)
    # When we cluster it
    result = run(table, make_policy(**{"sort.columns": columns, "hoodie.layout.optimize.strategy": "z-order"}),
                 runner)
    assert result.outcome == "completed"
    # Then the instant's files are layout 2's: an Avro plan in .hoodie/timeline, an empty inflight, and one
    # completed replacecommit named by its completion time, in Avro; nothing in .hoodie itself or in history/
    t = result.instant
    timeline_dir = base / ".hoodie" / "timeline"
    names = sorted(p.name for p in timeline_dir.iterdir() if p.name.startswith(t))
    assert names[0] == f"{t}.clustering.inflight" and names[1] == f"{t}.clustering.requested", names
    assert len(names) == 3 and names[2].startswith(f"{t}_") and names[2].endswith(".replacecommit"), names
    completion = names[2].split("_", 1)[1].split(".", 1)[0]
    assert completion > t
    assert (timeline_dir / names[0]).stat().st_size == 0
    for name_ in names[1:]:
        assert (timeline_dir / name_).read_bytes()[:4] == b"Obj\x01"
    assert not [p for p in (base / ".hoodie").iterdir() if p.name[:1].isdigit()]
    assert not any((timeline_dir / "history").iterdir()) if (timeline_dir / "history").exists() else True
    # and every instant on the timeline is older than the completion time, which is the newest of all
    reread = HoodieTable.open(str(base)).timeline()
    assert reread.last_time() == completion
    done = reread.find(t)
    assert done is not None and done.is_completed and done.completion_time == completion
    meta = table.timeline_store.commit_metadata(done)
    assert meta.operation_type == "CLUSTER" and meta.schema
    # and hudi-rs reads the same rows, with their commit times, and no new rows in an incremental read
    after = hudi_rs_rows(base)
    assert without_file_name(after) == without_file_name(before)
    # (layout 2's incremental reads are by completion time)
    previous = reread.commits().completed().instants[-2]
    assert previous.completion_time is not None
    assert sum(b.num_rows for b in hudi_rs_incremental(base, previous.completion_time, completion)) == 0
    assert sum(b.num_rows for b in hudi_rs_incremental(base, previous.time, completion)) > 0
    assert assert_no_orphan_files(base) > 0


class FailingRunner:
    """Runs group 0 for real, then fails group 1: a failed group must fail (and roll back) the instant."""

    def __init__(self, inner: GroupRunner) -> None:
        self.inner = inner

    def run_group(self, table: TableRef, instant: str, plan: Any, index: int, files: Any, merge: Any = None) -> Any:
        if index == 1:
            time.sleep(0.2)
            raise RuntimeError("disk on fire")
        return self.inner.run_group(table, instant, plan, index, files, merge)

    def cancel(self, table: TableRef, instant: str) -> None:
        self.inner.cancel(table, instant)

    def close(self) -> None:
        return None


def test_failed_group_rolls_back_keeps_plan_and_retry_completes(tmp_path: Path, runner: GroupRunner) -> None:
    gen = make_table(tmp_path)
    before = hudi_rs_rows(gen.base)
    pol = make_policy(**{"hoodie.clustering.max.parallelism": "1"})
    scheduled = schedule(gen.table, pol, force=True)
    assert scheduled.instant is not None and scheduled.plan is not None and len(scheduled.plan.input_groups) == 2
    with pytest.raises(ExecutionError, match="disk on fire"):
        execute_pending(gen.table, FailingRunner(runner), scheduled.instant, parallelism=pol.max_parallelism)
    assert hudi_rs_rows(gen.base) == before
    assert not [f for f in data_files(gen.base) if scheduled.instant in f.name]  # group 0's files rolled back
    pending = gen.table.pending_clustering_plans()
    assert [(p.instant.time, p.instant.state.name) for p in pending] == [(scheduled.instant, "REQUESTED")]
    result = execute_pending(gen.table, runner, parallelism=pol.max_parallelism)  # the oldest pending plan
    assert result.outcome == "completed" and result.instant == scheduled.instant
    assert without_file_name(hudi_rs_rows(gen.base)) == without_file_name(before)
    assert_no_orphan_files(gen.base, at_rest=True)


def test_ingestion_wins_a_conflict_its_group_is_left_out_and_the_rest_commits(tmp_path: Path,
                                                                             runner: GroupRunner) -> None:
    gen = make_table(tmp_path, commits=4)
    pol = make_policy()
    scheduled = schedule(gen.table, pol, force=True)
    assert scheduled.plan is not None and scheduled.instant is not None and len(scheduled.plan.input_groups) == 2
    partition, file_id = scheduled.plan.group_ids()[0]
    gen.commit({partition: [1.0, 2.0]}, file_ids={partition: file_id})  # an update of a planned file group
    expected = without_file_name(hudi_rs_rows(gen.base))
    result = execute_pending(gen.table, runner, scheduled.instant, parallelism=pol.max_parallelism)
    assert result.outcome == "completed" and file_id in result.message and result.groups == 1
    committed = json.loads((gen.base / ".hoodie" / f"{scheduled.instant}.replacecommit").read_text())
    replaced = {(p, f) for p, ids in committed["partitionToReplaceFileIds"].items() for f in ids}
    assert replaced == set(scheduled.plan.input_groups[1].group_ids())  # the other partition was clustered
    assert committed["extraMetadata"]["hudi-clusterd.groups.dropped"] == "0"
    assert without_file_name(hudi_rs_rows(gen.base)) == expected  # the update is kept; nothing duplicated
    assert gen.table.pending_clustering_plans() == []
    assert_no_orphan_files(gen.base, at_rest=True)


def test_ingestion_wins_conflicts_in_every_group_and_the_plan_commits_empty_keeping_its_file(
        tmp_path: Path, runner: GroupRunner) -> None:
    gen = make_table(tmp_path, commits=4)
    pol = make_policy()
    scheduled = schedule(gen.table, pol, force=True)
    assert scheduled.plan is not None and scheduled.instant is not None
    for group in scheduled.plan.input_groups:  # an update in every group
        partition, file_id = group.group_ids()[0]
        gen.commit({partition: [1.0, 2.0]}, file_ids={partition: file_id})
    expected = hudi_rs_rows(gen.base)
    result = execute_pending(gen.table, runner, scheduled.instant, parallelism=pol.max_parallelism)
    assert result.outcome == "conflict"
    assert hudi_rs_rows(gen.base) == expected
    assert gen.table.pending_clustering_plans() == []
    # The plan file is never deleted (Hudi writers read every plan they listed; a vanished one fails their write):
    # the clustering completes, replacing and writing nothing
    hoodie = gen.base / ".hoodie"
    assert (hoodie / f"{scheduled.instant}.replacecommit.requested").exists()
    committed = json.loads((hoodie / f"{scheduled.instant}.replacecommit").read_text())
    assert committed["operationType"] == "CLUSTER"
    assert committed["partitionToReplaceFileIds"] == {} and committed["partitionToWriteStats"] == {}
    assert committed["extraMetadata"]["hudi-clusterd.groups.dropped"] == ",".join(
        str(i) for i in range(len(scheduled.plan.input_groups)))
    assert not list(hoodie.glob("*.rollback"))
    assert_no_orphan_files(gen.base, at_rest=True)


def test_second_run_without_new_commits_does_nothing(tmp_path: Path, runner: GroupRunner) -> None:
    gen = make_table(tmp_path)
    pol = make_policy(**{"target.file.max.bytes": str(64 * KB)})
    assert run(gen.table, pol, runner).outcome == "completed"
    files = data_files(gen.base)
    again = schedule(gen.table, pol)
    assert again.instant is None and again.reason.startswith("0 commits since the last clustering")
    forced = schedule(gen.table, pol, force=True)
    assert forced.instant is None
    assert data_files(gen.base) == files


_KILL_TARGET = """
import sys, time
from hudi_clusterd.cli import main
sys.exit(main(["execute", "--base-path", sys.argv[1], "--spark-master", "local[1]",
               "--props", sys.argv[2]]))
"""


def test_sigkill_while_writing_then_execute_again_recovers(tmp_path: Path, runner: GroupRunner) -> None:
    gen = make_table(tmp_path, commits=6, rows=3000)
    before = without_file_name(hudi_rs_rows(gen.base))
    props = tmp_path / "c.properties"
    props.write_text("hoodie.clustering.plan.strategy.sort.columns=x\n"
                     "hoodie.layout.optimize.strategy=hilbert\n"
                     "hoodie.clustering.plan.strategy.target.file.max.bytes=16384\n")
    pol = make_policy(**{"sort.columns": "x", "target.file.max.bytes": "16384"})
    scheduled = schedule(gen.table, pol, force=True)
    assert scheduled.instant is not None
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([sys.executable, "-c", _KILL_TARGET, str(gen.base), str(props)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    markers = gen.base / ".hoodie" / ".temp" / scheduled.instant
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if markers.exists() and any(markers.rglob("*.marker.*")):
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the execute process ended before it could be killed mid-write"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert (gen.base / ".hoodie" / f"{scheduled.instant}.replacecommit.inflight").exists()
    assert hudi_rs_rows(gen.base) and without_file_name(hudi_rs_rows(gen.base)) == before  # still readable

    # notices the dead owner, rolls back, retries
    result = execute_pending(gen.table, runner, parallelism=pol.max_parallelism)
    assert result.outcome == "completed" and result.instant == scheduled.instant
    assert without_file_name(hudi_rs_rows(gen.base)) == before
    assert_no_orphan_files(gen.base, at_rest=True)
    rollbacks = sorted((gen.base / ".hoodie").glob("*.rollback"))
    assert rollbacks, "the killed attempt was rolled back through a rollback instant"
