"""Crash points of a clustering cycle on a merge-on-read table whose plan holds file slices with log files,
enumerated in this process (no JVM): the table's storage dies at its k-th write (`tests/harness/fault_storage.py`)
during one daemon tick (schedule with the claim, execute every group with the slices' logs merged, commit, clean
up, release the lock); then the daemon recovers (the dead process's lock taken over, ``ops.recovery.recover`` and
``execute_pending``, as the next tick or ``hudi-clusterd execute`` runs them). Before recovery our merged view of
the table (every latest slice's base file merged with its log files, `tests/harness/mor_tables.py`) is the rows
from before; after it, that view is still exactly those rows, no data file of a rolled-back or interrupted instant
is left, nothing is pending (instant, marker, heartbeat, held lock), and the plan completed once.

The tables: copies of golden tables Apache Hudi 1.2 wrote (version 9), one without a metadata table and one with
it (its ``files`` partition declared alone, see `tests/harness/mor_tables.py`), each given two deltacommits of
Avro log files (updates and a DELETE block) on a file group of each partition, one with two log files. On the
one with a metadata table, the table's files it lists after each recovery are exactly those storage holds.

The default run takes the first crash point of each kind of write (the plan, the inflight state, a marker, a data
file, the heartbeat, the completed replacecommit, the lock...); every point is under ``slow``, and so is every
crash point of the recovery after a kill right before the commit.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hudi_clusterd.domain.instant import Action
from hudi_clusterd.formats.avro import decode_requested_replace
from hudi_clusterd.ops.pending_writes import ingestion_rhythm
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import make_policy
from tests.harness.crash_harness import assert_plans_disjoint, plan_file
from tests.harness.crash_table import FileLockWatch
from tests.harness.fault_storage import FaultyStorage, SimulatedCrash
from tests.harness.inprocess_crash import copies, daemon_cycle, recover_table
from tests.harness.mor_tables import (
    GOLDEN,
    GOLDEN_META,
    add_log_commit,
    file_groups,
    files_only_metadata,
    latest_base,
    merged_view,
    metadata_and_storage_files,
    pending,
    stray_data_files,
)

POLICY = make_policy(**{"hoodie.clustering.plan.strategy.sort.columns": "txn_ts",
                        "hoodie.clustering.max.parallelism": "1"})
def _clusterings(base: Path) -> set[str]:
    timeline = HoodieTable.open(str(base)).timeline()
    return {i.time for i in timeline.of_actions([Action.REPLACE_COMMIT]).completed()}


class Pristine:
    """The table with live log files, its merged rows and completed clusterings, copied per point; ``logged``: the
    file groups given log files (one in each partition) and how many each has."""

    def __init__(self, base: Path, logged: dict[tuple[str, str], int]) -> None:
        self.base = base
        self.logged = logged
        self.expected = merged_view(base)
        self.clusterings = _clusterings(base)
        self.metadata = HoodieTable.open(str(base)).metadata_table() is not None


@pytest.fixture(scope="module", params=[GOLDEN, GOLDEN_META], ids=["nometa", "meta"])
def pristine(request: pytest.FixtureRequest, golden_mor_tables: Path,
             tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    base = tmp_path_factory.mktemp("pristine-mor") / "t"
    shutil.copytree(golden_mor_tables / request.param, base)
    if request.param == GOLDEN_META:
        files_only_metadata(base)
    largest: dict[str, tuple[int, tuple[str, str]]] = {}  # per partition, the file group with the most rows
    for group in file_groups(base):
        rows = pq.read_metadata(latest_base(base, *group)).num_rows
        if rows > largest.get(group[0], (0, group))[0]:
            largest[group[0]] = (rows, group)
    eu, us, apac = (largest[p][1] for p in ("region=eu", "region=us", "region=apac"))
    deleted = pq.read_table(latest_base(base, *us)).column("_hoodie_record_key").to_pylist()[-1]  # never updated
    add_log_commit(base, build={eu: {"n": 2}, us: {"n": 1, "delete_key": deleted}, apac: {"n": 1}})
    add_log_commit(base, build={us: {"n": 1}})
    got = Pristine(base, {eu: 1, us: 2, apac: 1})
    keys = [r["_hoodie_record_key"] for r in got.expected]
    updated = sum(str(r["merchant_name"]).startswith("updated at") for r in got.expected)
    assert deleted not in keys and len(keys) == 11 and updated >= 3, (keys, updated)
    if got.metadata:
        listed, stored = metadata_and_storage_files(base)
        assert listed == stored
    # the writers fall idle before the first point: the commit does not wait for their next write (copies keep
    # the files' modification times)
    table = HoodieTable.open(str(base))
    rhythm = ingestion_rhythm(table.timeline_store.listed_states())
    if rhythm is not None:
        time.sleep(max(0.0, rhythm.settled_at_ms() / 1000.0 - time.time() + 0.05))
    return got


@pytest.fixture
def fresh(pristine: Pristine, tmp_path: Path) -> Callable[[], Path]:
    return copies(pristine.base, tmp_path)


def check_at_rest(base: Path, pristine: Pristine, what: str) -> None:
    """Exact merged rows, no stray data file, nothing pending, the lock takeable, one new clustering."""
    assert merged_view(base) == pristine.expected, f"{what}: rows differ"
    assert not stray_data_files(base), f"{what}: stray data files {stray_data_files(base)}"
    assert not pending(base), f"{what}: pending {pending(base)}"
    hoodie = base / ".hoodie"
    left = [p for d in (".temp", ".heartbeat") for p in (hoodie / d).rglob("*") if p.is_file()]
    assert not left, f"{what}: left behind {left}"
    FileLockWatch(base).assert_takeable(what)
    assert_plans_disjoint(base)
    assert len(_clusterings(base) - pristine.clusterings) == 1, f"{what}: {_clusterings(base)}"
    if pristine.metadata:
        listed, stored = metadata_and_storage_files(base)
        assert listed == stored, f"{what}: the metadata table lists {listed}, storage holds {stored}"


def kind(call: str) -> str:
    """What a storage call writes, for picking one crash point per kind."""
    op, _, path = call.partition(" ")
    name = path.rsplit("/", 1)[-1]
    if "/.temp/" in path or path.startswith(".hoodie/.temp"):
        what = "marker"
    elif ".heartbeat" in path:
        what = "heartbeat"
    elif "lock" in name:
        what = "lock"
    elif name.endswith(".parquet"):
        what = "data file"
    elif name.endswith((".requested", ".inflight")):
        what = name.rsplit(".", 1)[-1]
    elif "replacecommit" in name:
        what = "completed"
    else:
        what = "".join(c for c in name if not c.isdigit())
    return f"{op} {'metadata ' if path.startswith('.hoodie/metadata/') else ''}{what}"


def clean_cycle(pristine: Pristine, fresh: Callable[[], Path]) -> list[str]:
    """The writes of one clean cycle, checked: a plan of slices with log files, committed exactly."""
    base = fresh()
    storage = FaultyStorage(str(base))
    instant = daemon_cycle(base, storage, POLICY)
    path = plan_file(base, instant)
    meta = decode_requested_replace(path.read_bytes(), str(path))
    assert meta is not None and meta.clustering_plan is not None
    with_logs = {s.group_id: len(s.delta_file_paths) for g in meta.clustering_plan.input_groups for s in g.slices
                 if s.delta_file_paths}
    assert with_logs == pristine.logged, with_logs
    check_at_rest(base, pristine, "clean cycle")
    return storage.calls


def crash_and_recover(pristine: Pristine, fresh: Callable[[], Path], points: list[int | str], calls: int) -> int:
    """Crash a cycle at each of ``points`` (the k-th write, or the first write of a `kind`), recover and check;
    returns how many crashed (a cycle may make fewer writes than the clean one: its commit can find the lock free
    at the first try, one lock round less)."""
    crashed = 0
    for point in points:
        base = fresh()
        storage = (FaultyStorage(str(base), crash_at=point) if isinstance(point, int)
                   else FaultyStorage(str(base), crash_if=lambda c, k=point: kind(c) == k))
        try:
            daemon_cycle(base, storage, POLICY)
        except SimulatedCrash:
            crashed += 1
        else:
            check_at_rest(base, pristine, f"MOR table, a cycle of {len(storage.calls)} writes (no crash at {point})")
            continue
        what = f"MOR table, crash at {storage.crashed} of {calls}"
        assert merged_view(base) == pristine.expected, f"{what}: readers before recovery"
        outcomes = recover_table(base)
        if len(_clusterings(base)) == len(pristine.clusterings):  # killed before the plan was saved
            assert not outcomes, outcomes
            daemon_cycle(base, FaultyStorage(str(base)), POLICY)
        check_at_rest(base, pristine, what + ", after recovery")
        shutil.rmtree(base)
    return crashed


def test_a_crash_at_each_kind_of_write_recovers_the_merged_rows_exactly(pristine: Pristine,
                                                                        fresh: Callable[[], Path]) -> None:
    calls = clean_cycle(pristine, fresh)
    kinds = {kind(c) for c in calls}
    for needle in ("write requested", "write inflight", "write marker", "write data file", "write completed"):
        assert needle in kinds, f"{needle} never written: {sorted(kinds)}"
    points: list[int | str] = sorted(kinds)
    crashed = crash_and_recover(pristine, fresh, points, len(calls))
    print(f"\n{len(calls)} writes, {len(points)} kinds, {crashed} crashed: {points}")
    assert crashed == len(points)


@pytest.mark.slow
def test_every_crash_point_of_a_cycle_recovers_the_merged_rows_exactly(pristine: Pristine,
                                                                       fresh: Callable[[], Path]) -> None:
    calls = clean_cycle(pristine, fresh)
    crashed = crash_and_recover(pristine, fresh, list(range(1, len(calls) + 1)), len(calls))
    print(f"\n{len(calls)} writes, {crashed} crashed")
    assert crashed >= len(calls) - 12  # at most two lock rounds (mkdir, two lock files, their deletes) less


@pytest.mark.slow
def test_every_crash_point_of_the_recovery_recovers_the_merged_rows_exactly(pristine: Pristine,
                                                                           fresh: Callable[[], Path]) -> None:
    clean_cycle(pristine, fresh)

    def killed() -> Path:  # right before the data table's commit
        base = fresh()
        with pytest.raises(SimulatedCrash):
            daemon_cycle(base, FaultyStorage(str(base), crash_if=lambda c: kind(c) == "write completed"), POLICY)
        return base

    probe = killed()
    storage = FaultyStorage(str(probe))
    recover_table(probe, storage)
    check_at_rest(probe, pristine, "clean recovery")
    assert any(".rollback" in c for c in storage.calls), storage.calls
    for k in range(1, len(storage.calls) + 1):
        base = killed()
        faulty = FaultyStorage(str(base), crash_at=k)
        try:
            recover_table(base, faulty)
        except SimulatedCrash:
            pass
        else:  # a recovery of fewer writes (one lock round less)
            check_at_rest(base, pristine, f"MOR table, a recovery of {len(faulty.calls)} writes (no crash at {k})")
            continue
        what = f"MOR table, recovery crashed at {faulty.crashed}"
        assert merged_view(base) == pristine.expected, f"{what}: readers before the next recovery"
        recover_table(base)
        check_at_rest(base, pristine, what + ", after the next recovery")
        shutil.rmtree(base)
