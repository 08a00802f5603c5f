"""Crash points of a clustering cycle on a merge-on-read table whose plan holds file slices with log files,
enumerated in this process (no JVM): the table's storage dies at its k-th write (`tests/harness/fault_storage.py`)
during one daemon tick (schedule with the claim, execute every group with the slices' logs merged, commit, clean
up, release the lock); then the daemon recovers (the dead process's lock taken over, ``ops.recovery.recover`` and
``execute_pending``, as the next tick or ``hudi-clusterd execute`` runs them). Before recovery our merged view of
the table (every latest slice's base file merged with its log files, `tests/harness/mor_tables.py`) is the rows
from before; after it, that view is still exactly those rows, no data file of a rolled-back or interrupted instant
is left, nothing is pending (instant, marker, heartbeat, held lock), and the plan completed once.

The table: a copy of a golden table Apache Hudi 1.2 wrote (version 9, no metadata table) given two deltacommits of
Avro log files (updates and a DELETE block) on three file groups, one with two log files. The default run takes the
first crash point of each kind of write (the plan, the inflight state, a marker, a data file, the heartbeat, the
completed replacecommit, the lock...); every point is under ``slow``, and so is every crash point of the recovery
after a kill right before the commit.
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
from tests.harness.inprocess_crash import daemon_cycle, recover_table
from tests.harness.mor_tables import GOLDEN, add_log_commit, latest_base, merged_view, pending, stray_data_files

POLICY = make_policy(**{"hoodie.clustering.plan.strategy.sort.columns": "txn_ts",
                        "hoodie.clustering.max.parallelism": "1"})
EU = ("region=eu", "b151ed41-bdc8-4b95-a733-69266ed89edd-0")
US = ("region=us", "4625f1ea-a436-4846-a24a-1328e1c036a6-0")
APAC = ("region=apac", "db3ba9f9-d2c3-4bf4-a2e7-03ea74dd032f-0")


def _clusterings(base: Path) -> set[str]:
    timeline = HoodieTable.open(str(base)).timeline()
    return {i.time for i in timeline.of_actions([Action.REPLACE_COMMIT]).completed()}


class Pristine:
    """The table with live log files, its merged rows and its completed clusterings, copied per point."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.expected = merged_view(base)
        self.clusterings = _clusterings(base)


@pytest.fixture(scope="module")
def pristine(golden_mor_tables: Path, tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    base = tmp_path_factory.mktemp("pristine-mor") / "t"
    shutil.copytree(golden_mor_tables / GOLDEN, base)
    deleted = pq.read_table(latest_base(base, *US)).column("_hoodie_record_key")[2].as_py()
    add_log_commit(base, build={EU: {"n": 2}, US: {"n": 1, "delete_key": deleted}, APAC: {"n": 1}})
    add_log_commit(base, build={US: {"n": 2}})
    got = Pristine(base)
    assert len(got.expected) == 11 and sum(str(r["merchant_name"]).startswith("updated at") for r in got.expected) == 5
    # the writers fall idle before the first point: the commit does not wait for their next write (copies keep
    # the files' modification times)
    table = HoodieTable.open(str(base))
    rhythm = ingestion_rhythm(table.timeline_store.listed_states())
    if rhythm is not None:
        time.sleep(max(0.0, rhythm.settled_at_ms() / 1000.0 - time.time() + 0.05))
    return got


@pytest.fixture
def fresh(pristine: Pristine, tmp_path: Path) -> Callable[[], Path]:
    n = 0

    def _copy() -> Path:
        nonlocal n
        n += 1
        dest = tmp_path / f"t{n}"
        shutil.copytree(pristine.base, dest)
        return dest

    return _copy


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
    return f"{op} {what}"


def first_of_each_kind(calls: list[str]) -> list[int]:
    seen: dict[str, int] = {}
    for k, call in enumerate(calls, 1):
        seen.setdefault(kind(call), k)
    return sorted(seen.values())


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
    assert with_logs == {EU: 1, US: 2, APAC: 1}, with_logs  # APAC's: a clustering's output, logged since
    check_at_rest(base, pristine, "clean cycle")
    return storage.calls


def crash_and_recover(pristine: Pristine, fresh: Callable[[], Path], points: list[int], calls: int) -> None:
    for k in points:
        base = fresh()
        storage = FaultyStorage(str(base), crash_at=k)
        with pytest.raises(SimulatedCrash):
            daemon_cycle(base, storage, POLICY)
        what = f"MOR table, crash at {storage.crashed} of {calls}"
        assert merged_view(base) == pristine.expected, f"{what}: readers before recovery"
        outcomes = recover_table(base)
        if len(_clusterings(base)) == len(pristine.clusterings):  # killed before the plan was saved
            assert not outcomes, outcomes
            daemon_cycle(base, FaultyStorage(str(base)), POLICY)
        check_at_rest(base, pristine, what + ", after recovery")
        shutil.rmtree(base)


def test_a_crash_at_each_kind_of_write_recovers_the_merged_rows_exactly(pristine: Pristine,
                                                                        fresh: Callable[[], Path]) -> None:
    calls = clean_cycle(pristine, fresh)
    kinds = {kind(c) for c in calls}
    for needle in ("write requested", "write inflight", "write marker", "write data file", "write completed"):
        assert needle in kinds, f"{needle} never written: {sorted(kinds)}"
    points = first_of_each_kind(calls)
    print(f"\n{len(calls)} writes, {len(points)} kinds: {sorted(kinds)}")
    crash_and_recover(pristine, fresh, points, len(calls))


@pytest.mark.slow
def test_every_crash_point_of_a_cycle_recovers_the_merged_rows_exactly(pristine: Pristine,
                                                                       fresh: Callable[[], Path]) -> None:
    calls = clean_cycle(pristine, fresh)
    crash_and_recover(pristine, fresh, list(range(1, len(calls) + 1)), len(calls))


@pytest.mark.slow
def test_every_crash_point_of_the_recovery_recovers_the_merged_rows_exactly(pristine: Pristine,
                                                                           fresh: Callable[[], Path]) -> None:
    calls = clean_cycle(pristine, fresh)
    commit_at = next(i for i, c in enumerate(calls, 1) if kind(c) == "write completed")

    def killed() -> Path:
        base = fresh()
        with pytest.raises(SimulatedCrash):
            daemon_cycle(base, FaultyStorage(str(base), crash_at=commit_at), POLICY)
        return base

    probe = killed()
    storage = FaultyStorage(str(probe))
    recover_table(probe, storage)
    check_at_rest(probe, pristine, "clean recovery")
    assert any(".rollback" in c for c in storage.calls), storage.calls
    for k in range(1, len(storage.calls) + 1):
        base = killed()
        faulty = FaultyStorage(str(base), crash_at=k)
        with pytest.raises(SimulatedCrash):
            recover_table(base, faulty)
        what = f"MOR table, recovery crashed at {faulty.crashed}"
        assert merged_view(base) == pristine.expected, f"{what}: readers before the next recovery"
        recover_table(base)
        check_at_rest(base, pristine, what + ", after the next recovery")
        shutil.rmtree(base)
