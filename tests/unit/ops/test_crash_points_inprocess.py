"""Every crash point of a clustering cycle, enumerated in this process (no JVM, no SIGKILL): the table's storage
dies at its k-th write (`tests/harness/fault_storage.py`) for *every* k of one daemon cycle (schedule with the
claim, execute every group, commit, clean up, release the lock), and then at every write of the recovery that
follows a kill while writing (its rollback); after each, readers see exactly the rows from before, and after
recovery (the next writer takes the dead process's lock over, then what a daemon start or ``hudi-clusterd
execute`` runs: ``ops.recovery.recover`` and ``execute_pending``) the table passes the crash harness's checks:
exact rows through hudi-rs, unique keys, no orphan data file, nothing pending (instant, marker, heartbeat, held
lock), the lock takeable, no file group in two plans; and the plan completed.

For table versions 6 (timeline layout 1) and 9 (layout 2). The real SIGKILL samples (a process tree killed at a
random moment, leaving temporary files, heartbeats and a lock of a dead process) stay in
``tests/integration/test_crash_points.py`` and ``tests/interop/test_crash_points_hudi_streaming.py``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hudi_clusterd.domain.instant import Instant
from hudi_clusterd.lock import FileSystemLockProvider
from hudi_clusterd.ops.pending_writes import ingestion_rhythm
from hudi_clusterd.ops.snapshot import TableSnapshot
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.rollback import rollback_pending
from tests.builders import TableGen, make_policy
from tests.harness.crash_harness import COLUMNS, assert_rows, check_recovered, completed_replace_files, hoodie_names
from tests.harness.fault_storage import FaultyStorage, SimulatedCrash
from tests.harness.hudi_rs_checks import hudi_rs_rows
from tests.harness.inprocess_crash import LOCK, copies, daemon_cycle, recover_table, take_over_lock

POLICY = make_policy(**{"hoodie.clustering.plan.strategy.sort.columns": "x",
                        "hoodie.clustering.max.parallelism": "1"})


@dataclass(frozen=True)
class Pristine:
    """A table of four commits (two partitions, a file group per partition each) and its rows, copied per point."""

    base: Path
    version: int
    expected: list[dict[str, Any]]


def _v(partition: str, n: int) -> dict[str, pa.Array]:
    return {"v": pa.array([1] * n, pa.int64())}


@pytest.fixture(scope="module", params=[6, 9], ids=["v6", "v9"])
def pristine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    version: int = request.param
    base = tmp_path_factory.mktemp(f"pristine-v{version}") / "t"
    gen = TableGen(base, table_version=version)
    for i in range(4):
        gen.commit({"p1": [float(i), i + 0.25], "p2": [i + 0.5]}, extra_columns=_v)
    expected = hudi_rs_rows(base, COLUMNS, "id")
    assert len(expected) == 12
    # the writers fall idle before the first point: the commit does not wait for their next write (ops/commit.py,
    # IngestionRhythm), which would make the number of lock rounds depend on timing (the copies keep the files'
    # modification times, so they are as settled as the original)
    table = HoodieTable.open(str(base))
    table.timeline()
    rhythm = ingestion_rhythm(table.timeline_store.listed_states())
    assert rhythm is not None
    time.sleep(max(0.0, rhythm.settled_at_ms() / 1000.0 - time.time() + 0.05))
    return Pristine(base, version, expected)


@pytest.fixture
def fresh(pristine: Pristine, tmp_path: Path) -> Iterator[Any]:
    """Factory: a private copy of the pristine table for one crash point."""
    yield copies(pristine.base, tmp_path)


def assert_clustered_once(base: Path, what: str) -> None:
    replaced = completed_replace_files(base)
    assert len(replaced) == 1, f"{what}: {len(replaced)} completed clusterings: {hoodie_names(base)}"


def writes_of_a_clean_cycle(base: Path) -> list[str]:
    storage = FaultyStorage(str(base))
    daemon_cycle(base, storage, POLICY)
    return storage.calls


def test_every_crash_point_of_a_daemon_cycle_recovers_exactly(pristine: Pristine, fresh: Any) -> None:
    # Given the writes one clean cycle makes
    clean = fresh()
    calls = writes_of_a_clean_cycle(clean)
    check_recovered(clean, pristine.expected, "clean cycle")
    assert_clustered_once(clean, "clean cycle")
    # (the plan, its claim, markers and files of both groups, the commit, the clean-up and the lock, at least)
    kinds = " ".join(calls)
    for needle in (".requested", ".inflight", ".hoodie/.temp/", ".parquet", ".hoodie/.heartbeat/", "lock"):
        assert needle in kinds, f"{needle} never written: {calls}"
    assert sum(".parquet" in c and ".marker" not in c and c.startswith("write") for c in calls) == 4, calls

    # When the process dies before each one of them in turn
    for k in range(1, len(calls) + 1):
        base = fresh()
        storage = FaultyStorage(str(base), crash_at=k)
        with pytest.raises(SimulatedCrash):
            daemon_cycle(base, storage, POLICY)
        what = f"table v{pristine.version}, crash at {storage.crashed}"
        # Then readers see exactly the rows from before, and after recovery the table is exact and at rest, its
        # plan executed (or, killed before the plan was saved, the next tick's plan)
        assert_rows(base, pristine.expected, what + ", readers before recovery")
        outcomes = recover_table(base)
        if not completed_replace_files(base):
            assert not outcomes, outcomes
            assert daemon_cycle(base, FaultyStorage(str(base)), POLICY) is not None
        check_recovered(base, pristine.expected, what + ", after recovery")
        assert_clustered_once(base, what)
        shutil.rmtree(base)


def commit_call(calls: list[str]) -> int:
    """The number of the call that writes the completed replacecommit."""
    return next(i for i, c in enumerate(calls, 1) if c.startswith("write") and ".replacecommit" in c
                and not c.endswith((".requested", ".inflight")) and ".temp" not in c)


def killed_while_writing(fresh: Any) -> Any:
    """Factory: tables whose executor died with both groups written, right before its commit (an inflight
    clustering with markers, files, a heartbeat and a held lock left). Each is killed afresh: a copy would not do,
    the plan names its input files by absolute path."""
    commit_at = commit_call(writes_of_a_clean_cycle(fresh()))

    def _killed() -> Path:
        base = fresh()
        with pytest.raises(SimulatedCrash):
            daemon_cycle(base, FaultyStorage(str(base), crash_at=commit_at), POLICY)
        return base

    return _killed


def test_every_crash_point_of_the_recovery_recovers_exactly(pristine: Pristine, fresh: Any) -> None:
    # Given the writes a recovery makes after a kill right before the commit (the rollback of the inflight
    # clustering, its lock take-over, then the plan's execution again)
    killed = killed_while_writing(fresh)
    probe = killed()
    storage = FaultyStorage(str(probe))
    recover_table(probe, storage)
    calls = storage.calls
    assert any(".rollback" in c for c in calls), calls
    check_recovered(probe, pristine.expected, "clean recovery")

    # When the recovering process dies before each of them in turn
    for k in range(1, len(calls) + 1):
        base = killed()
        faulty = FaultyStorage(str(base), crash_at=k)
        with pytest.raises(SimulatedCrash):
            recover_table(base, faulty)
        what = f"table v{pristine.version}, recovery crashed at {faulty.crashed}"
        # Then readers still see exactly the rows, and the next recovery leaves the table exact and at rest
        assert_rows(base, pristine.expected, what + ", readers before the next recovery")
        recover_table(base)
        check_recovered(base, pristine.expected, what + ", after the next recovery")
        assert_clustered_once(base, what)
        shutil.rmtree(base)


def test_every_crash_point_of_a_rollback_recovers_exactly(pristine: Pristine, fresh: Any) -> None:
    # Given the writes of rolling back a clustering left inflight (what ``hudi-clusterd rollback`` runs)
    killed = killed_while_writing(fresh)

    def inflight() -> tuple[Path, Instant]:
        base = killed()
        take_over_lock(base)
        [pending] = TableSnapshot.load(HoodieTable.open(str(base))).pending
        return base, pending.instant

    probe, instant = inflight()
    storage = FaultyStorage(str(probe))
    table = HoodieTable.open(str(probe), storage=storage, lock_provider=FileSystemLockProvider(storage, LOCK))
    assert rollback_pending(table, instant.time, instant.action) is not None
    calls = storage.calls
    assert any(".rollback" in c for c in calls), calls

    for k in range(1, len(calls) + 1):
        base, instant = inflight()
        faulty = FaultyStorage(str(base), crash_at=k)
        table = HoodieTable.open(str(base), storage=faulty, lock_provider=FileSystemLockProvider(faulty, LOCK))
        with pytest.raises(SimulatedCrash):
            rollback_pending(table, instant.time, instant.action)
        what = f"table v{pristine.version}, rollback crashed at {faulty.crashed}"
        assert_rows(base, pristine.expected, what + ", readers before recovery")
        recover_table(base)
        check_recovered(base, pristine.expected, what + ", after recovery")
        shutil.rmtree(base)
