from __future__ import annotations

import io
import shutil
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.errors import PathOutsideStorageError, StorageError, TimelineError
from hudi_clusterd.formats.avro_schema import arrow_to_avro_json
from hudi_clusterd.table.base_file_writer import BaseFileTaskWriter, BaseFileWriteSpec, TaskIds
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.markers import create_marker, list_markers, marker_dir
from hudi_clusterd.table.rollback import rollback_pending, safe_file_of_instant
from hudi_clusterd.table.write_client import start_commit

DATA = pa.schema([("id", pa.int64()), ("part", pa.string())])


def _table(base: Path) -> HoodieTable:
    return HoodieTable.create(str(base), TableConfig.for_new_table(name="t", record_key_fields=["id"],
                                                                    partition_fields=["part"]))


def _write_files(table: HoodieTable, instant: str, parts: list[str]) -> list[str]:
    """Base files of ``instant`` (with markers), one per partition; returns their relative paths."""
    spec = BaseFileWriteSpec(str(table.storage.full_path()), instant, DATA,
                             arrow_to_avro_json(DATA, "t", with_meta_fields=True))
    batches = [pa.record_batch({"_hoodie_record_key": [f"{p}1"], "_hoodie_partition_path": [p],
                                "id": pa.array([1], pa.int64()), "part": [p]}) for p in parts]
    return [f.path for f in BaseFileTaskWriter(spec, TaskIds(0, 1, 2)).write(batches)]


def _decode(path: Path) -> dict[str, object]:
    records = list(fastavro.reader(io.BytesIO(path.read_bytes())))
    assert len(records) == 1
    return records[0]  # type: ignore[no-any-return]


def _timeline_files(base: Path) -> set[str]:
    return {p.name for p in (base / ".hoodie").iterdir() if p.is_file()}


def test_rollback_pending_commit_deletes_its_files_and_instant(tmp_path: Path) -> None:
    # Given a committed write and a failed (inflight) one
    table = _table(tmp_path)
    done = start_commit(table)
    kept = _write_files(table, done.instant_time, ["a"])
    (tmp_path / ".hoodie" / f"{done.instant_time}.commit").write_text("{}")  # completed, minimal
    done.heartbeat.stop()  # type: ignore[union-attr]
    failed = start_commit(table)
    doomed = _write_files(table, failed.instant_time, ["a", "b"])
    failed.heartbeat.stop(delete=False)  # type: ignore[union-attr]
    # When it is rolled back with its requested file
    result = rollback_pending(table, failed.instant_time, Action.COMMIT, delete_requested=True)
    # Then exactly its files are gone, with its markers, heartbeat and instant files
    assert result is not None and sorted(result.deleted_files) == sorted(doomed)
    assert all(not (tmp_path / p).exists() for p in doomed)
    assert all((tmp_path / p).exists() for p in kept)
    assert not (tmp_path / marker_dir(failed.instant_time)).exists()
    assert not (tmp_path / ".hoodie/.heartbeat" / failed.instant_time).exists()
    names = _timeline_files(tmp_path)
    assert not {n for n in names if n.startswith(failed.instant_time)}
    r = result.rollback_time
    assert {f"{r}.rollback.requested", f"{r}.rollback.inflight", f"{r}.rollback"} <= names
    assert r > failed.instant_time
    # And the rollback instants are Hudi's Avro records naming the instant and the files
    plan = _decode(tmp_path / ".hoodie" / f"{r}.rollback.requested")
    assert plan["instantToRollback"] == {"commitTime": failed.instant_time, "action": "commit"}
    planned = sorted(f for req in plan["RollbackRequests"] for f in req["filesToBeDeleted"])  # type: ignore[union-attr]
    assert planned == sorted(table.storage.uri(p) for p in doomed)
    # (Hudi copies logBlocksToBeDeleted with Map.putAll, so it must be a map, empty for base files)
    assert [req["logBlocksToBeDeleted"] for req in plan["RollbackRequests"]] == [{}, {}]  # type: ignore[union-attr]
    meta = _decode(tmp_path / ".hoodie" / f"{r}.rollback")
    assert meta["commitsRollback"] == [failed.instant_time] and meta["totalFilesDeleted"] == 2
    assert meta["instantsRollback"] == [{"commitTime": failed.instant_time, "action": "commit"}]
    assert (tmp_path / ".hoodie" / f"{r}.rollback.inflight").read_bytes() == b""
    assert table.timeline().find(failed.instant_time) is None


def test_rollback_without_markers_lists_files_of_the_instant(tmp_path: Path) -> None:
    table = _table(tmp_path)
    handle = start_commit(table)
    doomed = _write_files(table, handle.instant_time, ["a"])
    handle.heartbeat.stop()  # type: ignore[union-attr]
    shutil.rmtree(tmp_path / marker_dir(handle.instant_time))
    result = rollback_pending(table, handle.instant_time, Action.COMMIT, delete_requested=True)
    assert result is not None and list(result.deleted_files) == doomed
    assert not (tmp_path / doomed[0]).exists()


def test_rollback_never_deletes_files_of_other_instants_or_outside(tmp_path: Path) -> None:
    # Given a pending instant whose markers name another instant's file (a marker escaping the table is refused)
    table = _table(tmp_path)
    other = start_commit(table)
    others = _write_files(table, other.instant_time, ["a"])
    other.heartbeat.stop()  # type: ignore[union-attr]
    (tmp_path / ".hoodie" / f"{other.instant_time}.commit").write_text("{}")
    handle = start_commit(table)
    handle.heartbeat.stop()  # type: ignore[union-attr]
    create_marker(table.storage, handle.instant_time, "a", others[0].split("/")[1])
    outside = tmp_path.parent / f"x-0_0-1-2_{handle.instant_time}.parquet"
    outside.write_bytes(b"keep")
    with pytest.raises(PathOutsideStorageError, match=r"'\.\.' segment"):  # the storage refuses such a marker
        create_marker(table.storage, handle.instant_time, "..", outside.name)
    # When rolled back
    result = rollback_pending(table, handle.instant_time, Action.COMMIT, delete_requested=True)
    # Then nothing of theirs was touched
    assert result is not None and result.deleted_files == ()
    assert (tmp_path / others[0]).exists() and outside.exists()
    outside.unlink()


@pytest.mark.parametrize(("rel", "ok"), [
    ("a/f-0_0-1-2_20240101000000001.parquet", True),
    ("f-0_0-1-2_20240101000000001.parquet", True),
    ("a/f-0_0-1-2_20240101000000002.parquet", False),
    ("../f-0_0-1-2_20240101000000001.parquet", False),
    ("/abs/f-0_0-1-2_20240101000000001.parquet", False),
    ("a/../../f-0_0-1-2_20240101000000001.parquet", False),
    (".hoodie/f-0_0-1-2_20240101000000001.parquet", False),
    ("a/.hoodie_partition_metadata", False),
])
def test_safe_file_of_instant_accepts_only_base_files_of_the_instant(rel: str, ok: bool) -> None:
    assert (safe_file_of_instant(rel, "20240101000000001") is not None) is ok


def test_rollback_interrupted_resumes_same_rollback_instant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a rollback that fails while deleting files
    table = _table(tmp_path)
    handle = start_commit(table)
    doomed = _write_files(table, handle.instant_time, ["a", "b"])
    handle.heartbeat.stop()  # type: ignore[union-attr]
    real_delete = table.storage.delete

    def failing_delete(rel: str, *, missing_ok: bool = True) -> bool:
        if rel == doomed[1]:
            raise StorageError("disk on fire")
        return real_delete(rel, missing_ok=missing_ok)

    monkeypatch.setattr(table.storage, "delete", failing_delete)
    with pytest.raises(StorageError, match="stays pending"):
        rollback_pending(table, handle.instant_time, Action.COMMIT, delete_requested=True)
    pending = [i for i in table.timeline() if i.action is Action.ROLLBACK]
    assert len(pending) == 1 and pending[0].state is State.INFLIGHT
    assert table.timeline().find(handle.instant_time) is not None  # the instant is still there
    # When re-run after the fault is gone
    monkeypatch.setattr(table.storage, "delete", real_delete)
    result = rollback_pending(table, handle.instant_time, Action.COMMIT, delete_requested=True)
    # Then the same rollback instant completes and all files are gone
    assert result is not None and result.resumed and result.rollback_time == pending[0].time
    assert all(not (tmp_path / p).exists() for p in doomed)
    assert [i.state for i in table.timeline() if i.action is Action.ROLLBACK] == [State.COMPLETED]


def test_rollback_replacecommit_keeps_requested_plan(tmp_path: Path) -> None:
    table = _table(tmp_path)
    t = table.new_instant_time()
    store = table.timeline_store
    store.create(Instant(t, Action.REPLACE_COMMIT, State.REQUESTED), b"plan")
    store.create(Instant(t, Action.REPLACE_COMMIT, State.INFLIGHT), b"")
    written = _write_files(table, t, ["a"])
    result = rollback_pending(table, t, Action.REPLACE_COMMIT)
    assert result is not None and list(result.deleted_files) == written
    inst = table.timeline().find(t, Action.REPLACE_COMMIT)
    assert inst is not None and inst.state is State.REQUESTED
    assert (tmp_path / ".hoodie" / f"{t}.replacecommit.requested").read_bytes() == b"plan"
    assert list_markers(table.storage, t) == []


def test_rollback_refuses_completed_and_ignores_unknown(tmp_path: Path) -> None:
    table = _table(tmp_path)
    handle = start_commit(table)
    handle.heartbeat.stop()  # type: ignore[union-attr]
    (tmp_path / ".hoodie" / f"{handle.instant_time}.commit").write_text("{}")
    with pytest.raises(TimelineError, match="completed"):
        rollback_pending(table, handle.instant_time, Action.COMMIT)
    assert rollback_pending(table, "20200101000000000", Action.COMMIT) is None
