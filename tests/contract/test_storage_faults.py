"""The faults object stores produce, met by every writer of a clustering: the daemon's own ticks
(`hudi_clusterd.runtime.service.TableWorker`: schedule and claim, execute, commit, clean up) on a small table with a
metadata table, its storage failing as ``tests/harness/faulty_daemon.py`` makes it (refused before writing;
written, then the reply lost; throttled, then served; a timeout before writing) at one user of the storage at a
time: the timeline's requested, inflight and completed clustering files, the metadata table's deltacommit (its
requested, inflight and completed files and its log file), the heartbeat (written at the claim, deleted after the
commit) and the markers. Groups run on pyarrow (`ArrowGroupRunner`), through the same faulty storage.

What a correct writer reaches, for each:

- a write whose reply was lost landed: the writer carries on, its own file is never a collision, and the
  clustering completes in the first tick; throttled or timed-out writes are tried again and complete it too;
- a refused write fails that tick's step (the plan, the claim, or the attempt, rolled back with its plan kept),
  and a later tick completes the clustering; a refusal after the commit point (the heartbeat's deletion) leaves
  the clustering committed, counted, and its heartbeat removed at the next tick;
- in every case: no clustering that committed is reported failed or rolled back, every file a completed instant
  names is still there, and at rest the rows read by hudi-rs are exactly the rows before, with nothing pending,
  orphaned or left behind.

And a create that went unanswered, retried after another writer created the same file: the other writer won (the
daemon's create fails as "already exists", the other writer's file stands).

The storage lock's rows of the matrix are in the lock's contract tests. Apache Hudi 1.2's snapshot read of the
same faults is ``tests/interop/test_storage_faults_hudi.py``.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.errors import TimelineError
from hudi_clusterd.ops.events import Outcome
from hudi_clusterd.storage import PutMode
from hudi_clusterd.storage.local import LocalStorage
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import TableGen
from tests.harness.crash_harness import COLUMNS, check_recovered, completed_replace_files, hoodie_names
from tests.harness.fault_injection import Fault, inject
from tests.harness.faulty_daemon import USERS, assert_nothing_named_is_gone, faulty_daemon, rules_for
from tests.harness.hudi_rs_checks import hudi_rs_rows
from tests.support import new_metadata_table

FAULTS = list(Fault)
BEFORE_ANY_FILE = {"requested", "inflight", "heartbeat"}
"""Users whose refusal comes before the clustering wrote any file: the plan's save, and the claim's two writes."""
WITH_METADATA_TABLE = {6}
"""Table versions whose table here has a metadata table: hudi-rs reads a version-9 table's metadata table, which
this hand-made one does not satisfy; layout 2 with Hudi's own metadata table is the interop test's."""
CASES = [pytest.param(version, fault, user, id=f"v{version}-{fault.name.lower()}-{user.replace(' ', '_')}")
         for version in (6, 9) for fault in FAULTS for user in USERS
         if user != "metadata commit" or version in WITH_METADATA_TABLE]
MAX_TICKS = 6

PROPS = {"clusterd.metrics.address": "off", "clusterd.commit.wait.seconds": "0",
         "hoodie.clustering.async.max.commits": "4", "hoodie.clustering.plan.strategy.sort.columns": "x",
         "hoodie.clustering.max.parallelism": "1"}


def with_metadata_table(base: Path, version: int) -> None:
    """Give the table at ``base`` a metadata table of ``files``, as Apache Hudi initialises it."""
    props = base / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text() + "hoodie.table.metadata.partitions=files\n")
    new_metadata_table(base, version)


@dataclass(frozen=True)
class Pristine:
    base: Path
    version: int
    expected: list[dict[str, Any]]


def _v(partition: str, n: int) -> dict[str, pa.Array]:
    return {"v": pa.array([1] * n, pa.int64())}


@pytest.fixture(scope="module")
def pristines(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Pristine]:
    """Factory: the table of ``version`` (made once): four commits over two partitions (and, on version 6, a
    metadata table), and its rows."""
    made: dict[int, Pristine] = {}

    def _pristine(version: int) -> Pristine:
        if version not in made:
            base = tmp_path_factory.mktemp(f"faults-v{version}") / "t"
            gen = TableGen(base, table_version=version)
            for i in range(4):
                gen.commit({"p1": [float(i), i + 0.25], "p2": [i + 0.5]}, extra_columns=_v)
            if version in WITH_METADATA_TABLE:
                with_metadata_table(base, version)
            expected = hudi_rs_rows(base, COLUMNS, "id")
            assert len(expected) == 12
            made[version] = Pristine(base, version, expected)
        return made[version]

    return _pristine


def copy_of(pristine: Pristine, tmp_path: Path) -> Path:
    base = tmp_path / "t"
    shutil.copytree(pristine.base, base)
    return base


def completed_times(table: HoodieTable) -> set[str]:
    return {i.time for i in table.timeline().replaces().completed()}


@pytest.mark.parametrize(("version", "fault", "user"), CASES)
def test_a_fault_at_each_writer_reaches_what_a_correct_writer_reaches(pristines: Callable[[int], Pristine],
                                                                      tmp_path: Path, version: int, fault: Fault,
                                                                      user: str) -> None:
    pristine = pristines(version)
    table = copy_of(pristine, tmp_path)
    # Given a daemon whose storage fails once at each storage call of one user of it
    d = faulty_daemon(table, PROPS, *rules_for(fault, user))
    # When it ticks until it has completed a clustering (and once more, to rest)
    ticks = d.tick_until_completed(MAX_TICKS)
    assert d.tick()
    what = f"v{pristine.version}, {fault.value} at the {user}"
    # Then every fault fired where it was aimed
    assert not d.unfired(), (what, d.unfired(), [log.fired for log in d.faults])
    # and the outcome is a correct writer's
    outcomes = [e.outcome for e in d.recorded.finished()]
    done = completed_times(d.table)
    assert len(done) == 1, f"{what}: {sorted(done)} completed"
    [instant] = done
    if fault is Fault.REFUSED:
        # the refused step fails its tick (or its attempt, rolled back); a later tick completes the clustering
        assert ticks.count(True) < len(ticks) or Outcome.FAILED in outcomes, (what, ticks, outcomes)
        if user in BEFORE_ANY_FILE:  # a refused plan or claim leaves nothing to roll back
            assert not [n for n in hoodie_names(table) if "rollback" in n], (what, hoodie_names(table))
    else:
        # landed with the reply lost: carried on; throttled or timed out: tried again; done in the first tick
        assert ticks == [True] and outcomes == [Outcome.COMPLETED], (what, ticks, outcomes)
    # no committed clustering reported failed: the completed instant is the one reported completed, once
    assert not d.recorded.committed_but_reported, (what, d.recorded.committed_but_reported)
    assert [e.instant for e in d.recorded.finished() if e.outcome is Outcome.COMPLETED] == [instant], what
    # a refusal after the commit point is clean-up left for the next tick, counted, never a failure
    if fault is Fault.REFUSED and user == "heartbeat":
        assert [(c.instant, c.step) for c in d.recorded.cleanup_failed()] == [(instant, "heartbeat")], what
    else:
        assert not d.recorded.cleanup_failed(), (what, d.recorded.cleanup_failed())
    assert_nothing_named_is_gone(table)
    assert len(completed_replace_files(table)) == 1
    check_recovered(table, pristine.expected, what)


@pytest.mark.parametrize("version", [6, 9])
def test_another_writers_file_found_after_an_unanswered_create_means_that_writer_won(
        pristines: Callable[[int], Pristine], tmp_path: Path, version: int) -> None:
    # Given a timeline whose create of a clustering plan times out before it reached the store, and another
    # writer that creates the same file before the daemon tries again
    base = copy_of(pristines(version), tmp_path)
    table = HoodieTable.open(str(base))
    [rule] = rules_for(Fault.TIMEOUT_BEFORE, "requested")
    inject(table.storage, rule)
    requested = Instant("20300101000000000", Action.CLUSTERING, State.REQUESTED)
    path = table.timeline_store.path(requested)
    theirs = b"another writer's plan"

    def other_writer_first(_pause: float) -> None:
        LocalStorage(str(base)).put(path, theirs, mode=PutMode.CREATE)

    table.storage.retry = dataclasses.replace(table.storage.retry, sleep=other_writer_first)
    # When the daemon creates it
    with pytest.raises(TimelineError, match="already exists"):
        table.timeline_store.create(requested, b"our plan")
    # Then the other writer won: its file stands, the daemon's write did not land over it
    assert rule.times == 0
    assert (base / path).read_bytes() == theirs
