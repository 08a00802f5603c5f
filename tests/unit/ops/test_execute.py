"""What dead or failed writers leave behind an executed clustering.

- An executor killed after writing its replacecommit but before removing its markers and heartbeat: the next
  recovery (daemon start, ``execute``) removes them, unless that executor is still alive.
- A file with a marker of the instant but no write stat (a failed or duplicate task attempt, or a worker of a
  dead earlier attempt still writing): deleted before the commit, as ingestion commits do, so that no data
  file of a completed clustering is left that its commit does not name.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import ClusteringPlan, PendingPlan
from hudi_clusterd.ops.events import Outcome
from hudi_clusterd.ops.execute import Executor, execute
from hudi_clusterd.ops.ownership import Ownership
from hudi_clusterd.ops.recovery import recover
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.ops.snapshot import TableSnapshot
from hudi_clusterd.table.heartbeat import heartbeat_path
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.markers import create_marker
from hudi_clusterd.table.table_ref import TableRef
from tests.builders import TableGen, make_policy
from tests.support import add_metadata_table

FILE_ID = "00000000-0000-0000-0000-000000000000-0"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _scheduled(tmp_path: Path) -> tuple[HoodieTable, PendingPlan]:
    gen = TableGen(tmp_path / "t")
    for i in range(4):
        gen.commit({"p1": [float(i)], "p2": [float(i)]})
    scheduled = schedule(gen.table, make_policy())
    assert scheduled.pending is not None
    return gen.table, scheduled.pending


def _dead_owner(table: HoodieTable, instant: str) -> None:
    owner = json.dumps({"owner": f"{socket.gethostname()}:{_dead_pid()}:x", "token": "x"}).encode()
    table.storage.write_bytes(heartbeat_path(instant), owner, overwrite=True)


def _committed_but_not_cleaned(tmp_path: Path, ownership: Ownership) -> tuple[HoodieTable, str]:
    """A clustering whose replacecommit is written, with its marker and owner heartbeat still there."""
    table, pending = _scheduled(tmp_path)
    instant = pending.time
    claimed = ownership.claim(table, pending)
    assert claimed is not None
    plan = claimed.pending.plan
    claimed.heartbeat.stop(delete=False)
    name = f"{FILE_ID}_0-1-1_{instant}.parquet"
    create_marker(table.storage, instant, "p1", name)
    replaced: dict[str, tuple[str, ...]] = {}
    for group in plan.input_groups:
        for s in group.slices:
            replaced[s.partition_path] = (*replaced.get(s.partition_path, ()), s.file_id)
    stat = WriteStat(FILE_ID, f"p1/{name}", "p1", num_writes=1)
    meta = CommitMetadata({"p1": (stat,)}, {}, Operation.CLUSTER, partition_to_replace_file_ids=replaced)
    table.timeline_store.create(Instant(instant, Action.REPLACE_COMMIT, State.COMPLETED), meta.to_json_bytes())
    return table, instant


def test_recover_dead_owner_of_completed_clustering_removes_markers_and_heartbeat(tmp_path: Path) -> None:
    ownership = Ownership()
    table, instant = _committed_but_not_cleaned(tmp_path, ownership)
    _dead_owner(table, instant)
    completed = tmp_path / "t" / ".hoodie" / f"{instant}.replacecommit"
    before = completed.read_bytes()

    assert recover(TableSnapshot.load(table), ownership) == []

    assert not (tmp_path / "t" / ".hoodie" / ".temp" / instant).exists()
    assert not (tmp_path / "t" / ".hoodie" / ".heartbeat" / instant).exists()
    assert completed.read_bytes() == before


def test_recover_live_owner_of_completed_clustering_keeps_its_markers(tmp_path: Path) -> None:
    ownership = Ownership()
    table, instant = _committed_but_not_cleaned(tmp_path, ownership)  # claimed by this ownership, still running
    recover(TableSnapshot.load(table), ownership)
    assert (tmp_path / "t" / ".hoodie" / ".temp" / instant).is_dir()
    beat = tmp_path / "t" / ".hoodie" / ".heartbeat" / instant
    assert json.loads(beat.read_text())["owner"] == ownership.owner
    assert f":{os.getpid()}:" in ownership.owner


def test_recover_own_process_instant_of_another_ownership_is_alive_while_fresh(tmp_path: Path) -> None:
    first = Ownership()
    table, instant = _committed_but_not_cleaned(tmp_path, first)
    assert Ownership().owner_alive(table, instant)  # same pid, other token: the heartbeat's age decides
    assert not Ownership(timeout_s=0.0).owner_alive(table, instant)


def test_claim_rolls_back_a_dead_owners_inflight_plan_with_the_recovery_event(tmp_path: Path) -> None:
    from structlog.testing import capture_logs

    table, pending = _scheduled(tmp_path)
    instant = pending.time
    first = Ownership()
    claimed = first.claim(table, pending)  # a first executor claims the plan and writes one file, then dies
    assert claimed is not None
    first.release(claimed, delete_heartbeat=False)
    name = f"{FILE_ID}_0-1-1_{instant}.parquet"
    create_marker(table.storage, instant, "p1", name)
    written = tmp_path / "t" / "p1" / name
    written.write_bytes(b"PAR1 partial")
    _dead_owner(table, instant)

    second = Ownership()
    with capture_logs() as logs:  # the next executor picks the plan before any recovery pass ran
        again = second.claim(table, pending)
    try:
        assert again is not None
        assert not written.exists()
        recovered = [e for e in logs if e["event"] == "rolled back abandoned clustering"]
        assert [(e["instant"], e["deleted_files"]) for e in recovered] == [(instant, 1)]
    finally:
        if again is not None:
            second.release(again)


class AttemptsRunner:
    """Writes one file per group, plus, for group 0, the file of an attempt that failed after its marker."""

    def __init__(self) -> None:
        self.failed: list[Path] = []

    def _write(self, table: TableRef, instant: str, partition: str, token: str, index: int) -> WriteStat:
        storage = table.open_storage()
        file_id = f"{index:08d}-0000-0000-0000-000000000000-0"
        name = f"{file_id}_{token}_{instant}.parquet"
        create_marker(storage, instant, partition, name)
        path = Path(storage.full_path(f"{partition}/{name}"))
        pq.write_table(pa.table({"x": [1.0]}), path)
        size = path.stat().st_size
        return WriteStat(file_id, f"{partition}/{name}", partition, num_writes=1, num_inserts=1,
                         total_write_bytes=size, file_size_in_bytes=size)

    def run_group(self, table: TableRef, instant: str, plan: ClusteringPlan, index: int,
                  files: Sequence[BaseFile], merge: object = None) -> list[WriteStat]:
        partition = plan.input_groups[index].partition_path
        if index == 0:
            lost = self._write(table, instant, partition, "0-7-0", 90)
            assert lost.path is not None
            self.failed.append(Path(table.open_storage().full_path(lost.path)))
        return [self._write(table, instant, partition, "0-7-1", index)]

    def cancel(self, table: TableRef, instant: str) -> None:
        return None

    def close(self) -> None:
        return None


def test_execute_file_of_failed_task_attempt_is_deleted_before_the_commit(tmp_path: Path) -> None:
    table, pending = _scheduled(tmp_path)
    instant = pending.time
    runner = AttemptsRunner()

    result = execute(TableSnapshot.load(table), pending, Executor(runner, Ownership()))

    assert result.outcome is Outcome.COMPLETED and result.files_written == 2
    assert runner.failed and not any(p.exists() for p in runner.failed)
    meta = json.loads((tmp_path / "t" / ".hoodie" / f"{instant}.replacecommit").read_text())
    named = {ws["path"] for stats in meta["partitionToWriteStats"].values() for ws in stats}
    on_disk = {p.relative_to(tmp_path / "t").as_posix() for p in (tmp_path / "t").rglob(f"*_{instant}.parquet")}
    assert on_disk == named


def test_recovery_removes_old_temp_files_of_interrupted_writes_only(tmp_path: Path) -> None:
    # Given a table with temporary files as a killed atomic write leaves them: old ones, a fresh one (a write
    # in progress), and look-alikes that are not ours
    table, _ = _scheduled(tmp_path)
    base = Path(table.base_path)
    long_ago = os.path.getmtime(base / ".hoodie" / "hoodie.properties") - 7200
    old = [base / ".hoodie" / f".20261122092056250.replacecommit.inflight.{'a' * 32}.tmp",
           base / ".hoodie" / ".heartbeat" / f".20261122092056250.{'b' * 32}.tmp"]
    # the metadata table's timeline and partition folders (Hudi's readers never list them, by their names)
    add_metadata_table(base)
    old += [base / ".hoodie" / "metadata" / "files" / f".{'e' * 32}.tmp",
            base / ".hoodie" / "metadata" / ".hoodie" / f".{'f' * 32}.tmp"]
    fresh = base / ".hoodie" / f".lock.{'c' * 32}.tmp"
    foreign = [base / ".hoodie" / "notes.tmp", base / ".hoodie" / f".x.{'d' * 31}.tmp"]
    for f in [*old, fresh, *foreign]:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"partial")
    for f in [*old, *foreign]:
        os.utime(f, (long_ago, long_ago))
    # When recovery runs
    recover(TableSnapshot.load(HoodieTable.open(table.base_path)), Ownership())
    # Then exactly the old temporary files are gone
    assert [f.exists() for f in old] == [False] * 4
    assert fresh.exists()
    assert all(f.exists() for f in foreign)
