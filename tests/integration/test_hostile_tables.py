"""Hostile tables on a real SparkSession: damaged or missing inputs, plans naming files outside the table, schema
evolution, special characters in partition values, very wide rows, many tiny files, and a broken table next to a
healthy one in the daemon. Each case gives a clear error or a correct result, and nothing is lost."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from structlog.testing import capture_logs

from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    RequestedReplaceMetadata,
    SliceInfo,
)
from hudi_clusterd.errors import ExecutionError, MetadataDecodeError
from hudi_clusterd.formats.avro import encode_requested_replace
from hudi_clusterd.ops.events import NoObserver
from hudi_clusterd.ops.execute import execute_pending
from hudi_clusterd.ops.ports import GroupRunner
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.runtime.reload import SettingsHolder
from hudi_clusterd.runtime.service import MAX_ATTEMPTS_PER_PLAN, Daemon, TableWorker
from hudi_clusterd.settings import Settings, settings_from_properties
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import TableGen, make_policy
from tests.harness.hudi_rs_checks import (
    assert_no_orphan_files,
    completed_clusterings,
    data_files,
    hudi_rs_rows,
    without_file_name,
)

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def runner(spark: Any) -> GroupRunner:
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner

    return SparkGroupRunner(spark, owns_session=False)



def make_table(base: Path, commits: int = 4, parts: tuple[str, ...] = ("p1", "p2"), rows: int = 20) -> TableGen:
    rng = random.Random(7)
    gen = TableGen(base)
    for _ in range(commits):
        gen.commit({p: [rng.uniform(0, 100) for _ in range(rows)] for p in parts})
    return gen


def planned_file(base: Path, plan: ClusteringPlan, partition: str = "p1") -> Path:
    s = next(s for g in plan.input_groups for s in g.slices if s.partition_path == partition)
    return base / partition / s.file_name


def pending_states(table: HoodieTable, instant: str) -> list[State]:
    return [i.state for i in table.timeline() if i.time == instant]


# --- damaged and missing inputs -----------------------------------------------------------------------------

DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "zero-byte": lambda data: b"",
    "tail-cut": lambda data: data[: len(data) // 2],  # the footer is gone
    "tiny": lambda data: data[:7],
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_execute_damaged_parquet_input_fails_naming_file_rolls_back_keeps_plan(
        tmp_path: Path, runner: GroupRunner, damage: str) -> None:
    gen = make_table(tmp_path / "t")
    pol = make_policy()
    scheduled = schedule(gen.table, pol, force=True)
    assert scheduled.instant is not None and scheduled.plan is not None
    victim = planned_file(gen.base, scheduled.plan)
    victim.write_bytes(DAMAGE[damage](victim.read_bytes()))
    damaged = victim.read_bytes()
    files_before = data_files(gen.base)

    with pytest.raises(ExecutionError, match=victim.name):
        execute_pending(gen.table, runner, scheduled.instant, parallelism=pol.max_parallelism)

    assert data_files(gen.base) == files_before  # nothing written remains, nothing was removed
    assert victim.read_bytes() == damaged
    assert pending_states(gen.table, scheduled.instant) == [State.REQUESTED]  # plan kept for a retry
    assert_no_orphan_files(gen.base, at_rest=True)


def test_execute_missing_committed_base_file_names_it_and_writes_nothing(tmp_path: Path,
                                                                        runner: GroupRunner) -> None:
    gen = make_table(tmp_path / "t")
    pol = make_policy()
    scheduled = schedule(gen.table, pol, force=True)
    assert scheduled.instant is not None and scheduled.plan is not None
    victim = planned_file(gen.base, scheduled.plan, "p2")
    victim.unlink()
    files_before = data_files(gen.base)

    with pytest.raises(ExecutionError, match=f"{victim.name}.*missing"):
        execute_pending(gen.table, runner, scheduled.instant, parallelism=pol.max_parallelism)

    assert data_files(gen.base) == files_before
    assert pending_states(gen.table, scheduled.instant) == [State.REQUESTED]
    assert_no_orphan_files(gen.base, at_rest=True)


def test_daemon_worker_drops_poisoned_plan_after_repeated_failures_keeps_data(tmp_path: Path,
                                                                              runner: GroupRunner) -> None:
    gen = make_table(tmp_path / "t")
    scheduled = schedule(gen.table, make_policy(), force=True)
    assert scheduled.instant is not None and scheduled.plan is not None
    victim = planned_file(gen.base, scheduled.plan)
    victim.write_bytes(b"")
    files_before = data_files(gen.base)
    daemon = Daemon(SettingsHolder(_settings({"t": gen.base}, max_commits="1000")), runner, NoObserver())
    worker = TableWorker("t", daemon)
    with capture_logs() as logs:
        for _ in range(MAX_ATTEMPTS_PER_PLAN):
            worker.tick()  # failures are logged, not raised
    failures = [e for e in logs if e["event"] == "clustering failed"]
    assert len(failures) == MAX_ATTEMPTS_PER_PLAN and all(victim.name in e["error"] for e in failures)
    assert any(e["event"] == "clustering plan dropped after repeated failures" for e in logs)
    assert pending_states(gen.table, scheduled.instant) == []
    assert data_files(gen.base) == files_before and victim.exists()
    assert_no_orphan_files(gen.base, at_rest=True)


# --- security: a plan naming files outside the table --------------------------------------------------------

@pytest.mark.parametrize("where", ["absolute", "dotdot", "sibling"])
def test_execute_plan_naming_file_outside_table_is_refused_and_file_survives(tmp_path: Path, runner: GroupRunner,
                                                                            where: str) -> None:
    gen = make_table(tmp_path / "t")
    inside = sorted((gen.base / "p1").glob("*.parquet"))
    outside_dir = {"absolute": tmp_path / "elsewhere" / "p1", "dotdot": tmp_path / "elsewhere" / "p1",
                   "sibling": tmp_path / "t-evil" / "p1"}[where]
    outside_dir.mkdir(parents=True)
    outside = outside_dir / inside[0].name.replace(inside[0].name.split("_")[0], "0000dead-0")
    outside.write_bytes(inside[0].read_bytes())
    uri = {"absolute": f"file:{outside}", "dotdot": f"file:{gen.base}/p1/../../elsewhere/p1/{outside.name}",
           "sibling": f"file:{outside}"}[where]
    slices = (SliceInfo(outside.name.split("_")[0], "p1", uri),
              *(SliceInfo(f.name.split("_")[0], "p1", f"file:{f}") for f in inside[1:]))
    pol = make_policy()
    strategy = ClusteringStrategy(pol.execution_strategy_class, pol.strategy_params())
    plan = ClusteringPlan((ClusteringGroup(slices, 1, {"TOTAL_IO_READ_MB": 0.1}),), strategy)
    t = gen.next_time()
    gen.table.timeline_store.create(Instant(t, Action.REPLACE_COMMIT, State.REQUESTED),
                                    encode_requested_replace(RequestedReplaceMetadata.for_plan(plan)))
    files_before = data_files(gen.base)
    content = outside.read_bytes()

    with pytest.raises(MetadataDecodeError, match=f"{t}.replacecommit.requested: slice .* is outside the table's "
                                                  "storage .*; the plan is refused"):
        execute_pending(gen.table, runner, t, parallelism=pol.max_parallelism)

    assert outside.read_bytes() == content
    assert data_files(gen.base) == files_before
    assert pending_states(gen.table, t) == [State.REQUESTED]


# --- schema evolution ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", [
    {},
    # the curve path reads the files itself: old files lack `y`, which the scan fills with nulls (sorting first)
    {"sort.columns": "y,x", "hoodie.layout.optimize.strategy": "hilbert"},
], ids=["unsorted", "hilbert-on-added-column"])
def test_cluster_schema_evolution_writes_merged_schema_with_nulls(tmp_path: Path, runner: GroupRunner,
                                                                  layout: dict[str, str]) -> None:
    gen = TableGen(tmp_path / "t")
    for i in range(2):
        gen.commit({"p1": [float(i), i + 0.5]})
    for i in range(2):
        gen.commit({"p1": [10.0 + i]}, extra_columns=lambda p, n: {"y": pa.array([f"y{k}" for k in range(n)])})
    before = hudi_rs_rows(gen.base)
    pol = make_policy(**layout)
    scheduled = schedule(gen.table, pol, force=True)
    assert scheduled.instant is not None

    result = execute_pending(gen.table, runner, scheduled.instant, parallelism=pol.max_parallelism)

    assert result.outcome == "completed"
    for ws in result.write_stats:
        assert pq.read_schema(gen.base / str(ws.path)).names[-4:] == ["id", "x", "part", "y"]
    if layout:  # one output file: rows without `y` (null) first, then by the curve
        (only,) = result.write_stats
        ys = pq.read_table(gen.base / str(only.path), columns=["y"]).column(0).to_pylist()
        assert ys[:4] == [None] * 4 and ys[4:] == ["y0", "y0"]
    after = hudi_rs_rows(gen.base)
    assert len(after) == 6
    ys = {r["id"]: r["y"] for r in after}
    assert [ys[i] for i in range(4)] == [None] * 4 and {ys[4], ys[5]} == {"y0"}
    old = {r["_hoodie_record_key"]: r for r in before}
    for r in without_file_name(after):
        assert all(r[k] == v for k, v in old[r["_hoodie_record_key"]].items() if k != "_hoodie_file_name")
    meta = json.loads((gen.base / ".hoodie" / f"{result.instant}.replacecommit").read_text())
    assert [f["name"] for f in json.loads(meta["extraMetadata"]["schema"])["fields"]][-1] == "y"
    assert_no_orphan_files(gen.base, at_rest=True)


# --- partition values with special characters, and an empty partition ---------------------------------------

SPECIAL = ["a b", "k=v", "100%", "%41%2F", "ü中文", "a+b&c", "[x]", "{a,b}", "st*r", "q?", "c:d", "semi;colon",
           "quote'\"", "#h", "-dash", "~tilde"]
# (a backslash or a control character in a partition path is refused: tests/unit/test_cli_hostile_paths.py)


def test_cluster_special_character_partitions_readable_by_hudi_rs(tmp_path: Path, runner: GroupRunner) -> None:
    gen = make_table(tmp_path / "t", parts=tuple(SPECIAL), rows=3)
    (gen.base / "empty").mkdir()
    (gen.base / "empty" / ".hoodie_partition_metadata").write_text("#partition metadata\npartitionDepth=1\n")
    before = without_file_name(hudi_rs_rows(gen.base))
    assert {r["_hoodie_partition_path"] for r in before} == set(SPECIAL)
    pol = make_policy(**{"hoodie.clustering.max.parallelism": "2"})
    scheduled = schedule(gen.table, pol, force=True)
    assert scheduled.plan is not None and scheduled.instant is not None
    assert {g.partition_path for g in scheduled.plan.input_groups} == set(SPECIAL)

    result = execute_pending(gen.table, runner, scheduled.instant, parallelism=pol.max_parallelism)

    assert result.outcome == "completed" and result.files_replaced == 4 * len(SPECIAL)
    assert without_file_name(hudi_rs_rows(gen.base)) == before
    for ws in result.write_stats:
        path = gen.base / str(ws.path)
        assert path.parent.name == ws.partition_path
        assert set(pq.read_table(path, columns=["_hoodie_partition_path"]).column(0).to_pylist()) == \
            {ws.partition_path}
    assert len(gen.table.file_system_view().latest_base_files()) == len(SPECIAL)
    assert_no_orphan_files(gen.base, at_rest=True)


# --- very wide rows -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", ["500-columns", "1mb-string"])
def test_cluster_very_wide_rows(tmp_path: Path, runner: GroupRunner, shape: str) -> None:
    def wide(partition: str, n: int) -> dict[str, pa.Array]:
        if shape == "500-columns":
            return {f"c{j:03d}": pa.array([float(j)] * n) for j in range(500)}
        return {"blob": pa.array([chr(65 + k % 26) * (1024 * 1024) for k in range(n)])}

    gen = TableGen(tmp_path / "t")
    for i in range(4):
        gen.commit({"p1": [float(i)] * (20 if shape == "500-columns" else 2)}, extra_columns=wide)
    before = without_file_name(hudi_rs_rows(gen.base))
    pol = make_policy(**{"sort.columns": "x"})
    scheduled = schedule(gen.table, pol, force=True)
    assert scheduled.instant is not None

    result = execute_pending(gen.table, runner, scheduled.instant, parallelism=pol.max_parallelism)

    assert result.outcome == "completed"
    after = without_file_name(hudi_rs_rows(gen.base))
    assert after == before
    assert len(after[0]) == 4 + 3 + (500 if shape == "500-columns" else 1)  # meta (less the file name) + data
    assert_no_orphan_files(gen.base, at_rest=True)


# --- many tiny files in one partition -----------------------------------------------------------------------

def _many_tiny_files(tmp_path: Path, runner: GroupRunner, files: int) -> None:
    gen = TableGen(tmp_path / "t")
    gen.commit({"p1": [1.0]}, files_per_partition=files)
    for i in range(3):
        gen.commit({"p1": [float(i)]})
    pol = make_policy()
    scheduled = schedule(gen.table, pol, force=True)
    assert scheduled.plan is not None and scheduled.instant is not None
    assert scheduled.plan.num_slices == files + 3

    result = execute_pending(gen.table, runner, scheduled.instant, parallelism=pol.max_parallelism)

    assert result.outcome == "completed" and result.files_replaced == files + 3
    latest = gen.table.file_system_view().latest_base_files()
    assert len(latest) == result.files_written
    rows = sum(pq.ParquetFile(gen.base / f.relative_path).metadata.num_rows for f in latest)
    assert rows == files + 3
    keys = {k for f in latest
            for k in pq.read_table(gen.base / f.relative_path, columns=["_hoodie_record_key"]).column(0).to_pylist()}
    assert len(keys) == files + 3


def test_cluster_1000_tiny_files_in_one_partition(tmp_path: Path, runner: GroupRunner) -> None:
    _many_tiny_files(tmp_path, runner, 1000)


@pytest.mark.slow
def test_cluster_10000_tiny_files_in_one_partition(tmp_path: Path, runner: GroupRunner) -> None:
    _many_tiny_files(tmp_path, runner, 10_000)


# --- a broken table next to a healthy one -------------------------------------------------------------------

def _settings(tables: dict[str, Path], max_commits: str = "4") -> Settings:
    props = {"clusterd.tables": ",".join(tables), "clusterd.metrics.address": "off",
             "hoodie.clustering.async.max.commits": max_commits}
    props.update({f"clusterd.table.{name}.base.path": str(base) for name, base in tables.items()})
    return settings_from_properties(props, source="test")[0]


BREAKAGE: dict[str, Callable[[Path], object]] = {
    "properties-garbage": lambda base: (base / ".hoodie" / "hoodie.properties").write_bytes(b"\x00\xff garbage"),
    "properties-missing": lambda base: (base / ".hoodie" / "hoodie.properties").unlink(),
    "commit-json": lambda base: sorted((base / ".hoodie").glob("*.commit"))[-1].write_bytes(b"{\"partitionTo"),
    "plan-avro": lambda base: (base / ".hoodie" / "20200101000000000.replacecommit.requested").write_bytes(
        b"Obj\x01 not really"),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGE))
def test_daemon_run_once_serves_healthy_table_when_other_is_broken(tmp_path: Path, runner: GroupRunner,
                                                                   breakage: str) -> None:
    broken = make_table(tmp_path / "a_broken")
    healthy = make_table(tmp_path / "b_healthy")
    BREAKAGE[breakage](broken.base)
    before = without_file_name(hudi_rs_rows(healthy.base))
    daemon = Daemon(SettingsHolder(_settings({"a": broken.base, "b": healthy.base})), runner, NoObserver())

    with capture_logs() as logs:
        failed = daemon.run_once()

    assert failed == ["a"]
    errors = [e for e in logs if e.get("log_level") == "error"]
    assert [e["event"] for e in errors] == ["tick failed"] and "a_broken" in errors[0]["error"]
    assert len(completed_clusterings(healthy.base)) == 1
    assert without_file_name(hudi_rs_rows(healthy.base)) == before
    # (the broken table's properties may be unreadable: its completed instant files tell, in either layout)
    assert not [p.name for p in broken.base.glob(".hoodie/**/*.replacecommit")]
    assert_no_orphan_files(healthy.base, at_rest=True)
