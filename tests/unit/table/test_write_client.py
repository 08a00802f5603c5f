from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from hudi_clusterd.domain.commit import Operation, WriteStat
from hudi_clusterd.domain.instant import Action, Instant, State, format_instant_time
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.errors import ExecutionError, TableError, TimelineError
from hudi_clusterd.formats.avro_schema import arrow_to_avro_json
from hudi_clusterd.table.base_file_writer import BaseFileTaskWriter, BaseFileWriteSpec, TaskIds
from hudi_clusterd.table.heartbeat import heartbeat_expired, heartbeat_path
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.markers import marker_dir
from hudi_clusterd.table.write_client import (
    WRITER_KEY,
    abort,
    complete_commit,
    rollback_failed_writes,
    start_commit,
)

DATA = pa.schema([("id", pa.int64())])
SCHEMA = arrow_to_avro_json(DATA, "t")


def _table(base: Path) -> HoodieTable:
    return HoodieTable.create(str(base), TableConfig.for_new_table(name="t", record_key_fields=["id"]))


def _write(table: HoodieTable, instant: str, attempt: int = 2) -> list[WriteStat]:
    spec = BaseFileWriteSpec(table.storage.full_path(), instant, DATA,
                             arrow_to_avro_json(DATA, "t", with_meta_fields=True))
    batch = pa.record_batch({"_hoodie_record_key": ["1", "2"], "_hoodie_partition_path": ["", ""],
                             "id": pa.array([1, 2], pa.int64())})
    return [f.to_write_stat() for f in BaseFileTaskWriter(spec, TaskIds(0, 1, attempt)).write([batch])]


def test_start_commit_refuses_when_the_timeline_is_ahead_of_wall_clock_time(tmp_path: Path) -> None:
    table = _table(tmp_path)
    (tmp_path / ".hoodie" / "29990101000000000.clean.requested").write_bytes(b"")  # a writer's clock far ahead
    with pytest.raises(TimelineError, match=r"newest instant 29990101000000000 is \d+s ahead of this host's clock"):
        start_commit(table)
    assert sorted(p.name for p in (tmp_path / ".hoodie").glob("*.commit*")) == []


def _age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_start_commit_writes_requested_inflight_and_heartbeat(tmp_path: Path) -> None:
    table = _table(tmp_path)
    newer = format_instant_time(datetime.now().astimezone() + timedelta(seconds=2))
    (tmp_path / ".hoodie" / f"{newer}.clean.requested").write_bytes(b"")  # a newer instant exists (a clock 2s ahead)
    handle = start_commit(table, extra={"k": "v"})
    try:
        assert handle.instant_time > newer
        hoodie = tmp_path / ".hoodie"
        assert (hoodie / f"{handle.instant_time}.commit.requested").read_bytes() == b""
        profile = json.loads((hoodie / f"{handle.instant_time}.inflight").read_text())
        assert profile["extraMetadata"] == {WRITER_KEY: "hudi-clusterd", "k": "v"}
        assert profile["operationType"] == "INSERT" and profile["partitionToWriteStats"] == {}
        assert (tmp_path / heartbeat_path(handle.instant_time)).exists()
    finally:
        abort(table, handle)


def test_complete_commit_writes_commit_and_cleans_up(tmp_path: Path) -> None:
    # Given a write whose task ran twice: attempt 2 failed half-way, attempt 3 succeeded
    table = _table(tmp_path)
    handle = start_commit(table, extra={"k": "v"})
    failed_attempt = _write(table, handle.instant_time, attempt=2)
    stats = _write(table, handle.instant_time, attempt=3)
    # When the successful attempt's stats are committed
    meta = complete_commit(table, handle, stats, Operation.INSERT, SCHEMA, {"more": "x"})
    # Then the commit is Hudi JSON with the stats, the schema and the writer's metadata
    commit = json.loads((tmp_path / ".hoodie" / f"{handle.instant_time}.commit").read_text())
    assert commit["operationType"] == "INSERT" and commit["extraMetadata"]["schema"] == SCHEMA
    assert commit["extraMetadata"]["k"] == "v" and commit["extraMetadata"]["more"] == "x"
    assert [ws["path"] for ws in commit["partitionToWriteStats"][""]] == [stats[0].path]
    assert meta.write_stats() == stats
    # And the failed attempt's file, the markers and the heartbeat are gone
    assert not (tmp_path / failed_attempt[0].path).exists()
    assert (tmp_path / stats[0].path).exists()
    assert not (tmp_path / marker_dir(handle.instant_time)).exists()
    assert not (tmp_path / heartbeat_path(handle.instant_time)).exists()


def test_complete_commit_after_rollback_fails(tmp_path: Path) -> None:
    table = _table(tmp_path)
    handle = start_commit(table)
    stats = _write(table, handle.instant_time)
    table.timeline_store.delete(handle.inflight)
    with pytest.raises(TimelineError, match="inflight file is gone"):
        complete_commit(table, handle, stats, Operation.INSERT, SCHEMA)
    handle.heartbeat.stop()  # type: ignore[union-attr]


def test_complete_commit_missing_file_refuses(tmp_path: Path) -> None:
    table = _table(tmp_path)
    handle = start_commit(table)
    stats = _write(table, handle.instant_time)
    (tmp_path / stats[0].path).unlink()
    with pytest.raises(ExecutionError, match="missing"):
        complete_commit(table, handle, stats, Operation.INSERT, SCHEMA)
    abort(table, handle)
    assert table.timeline().find(handle.instant_time) is None


def test_abort_removes_everything_of_the_instant(tmp_path: Path) -> None:
    table = _table(tmp_path)
    handle = start_commit(table)
    stats = _write(table, handle.instant_time)
    result = abort(table, handle)
    assert result is not None and list(result.deleted_files) == [stats[0].path]
    assert not (tmp_path / stats[0].path).exists()
    assert table.timeline().find(handle.instant_time) is None
    assert not (tmp_path / heartbeat_path(handle.instant_time)).exists()


def test_start_commit_refuses_non_commit_actions(tmp_path: Path) -> None:
    with pytest.raises(TableError, match="replacecommit"):
        start_commit(_table(tmp_path), Action.REPLACE_COMMIT)


def test_rollback_failed_writes_only_expired_ingestion_commits(tmp_path: Path) -> None:
    # Given a dead writer's commit (stale heartbeat), a live one, and a pending clustering without heartbeat
    table = _table(tmp_path)
    dead = start_commit(table, extra={"q": "dead"})
    dead.heartbeat.stop(delete=False)  # type: ignore[union-attr]
    dead_files = _write(table, dead.instant_time)
    _age(tmp_path / heartbeat_path(dead.instant_time), 600)
    live = start_commit(table, extra={"q": "live"})
    t = table.new_instant_time()
    table.timeline_store.create(Instant(t, Action.REPLACE_COMMIT, State.REQUESTED), b"")
    table.timeline_store.create(Instant(t, Action.REPLACE_COMMIT, State.INFLIGHT), b"")
    _age(tmp_path / ".hoodie" / f"{t}.replacecommit.inflight", 600)
    # When failed writes are rolled back
    results = rollback_failed_writes(table, heartbeat_timeout_s=120)
    # Then only the dead writer's commit went
    assert [r.instant_time for r in results] == [dead.instant_time]
    assert not (tmp_path / dead_files[0].path).exists()
    timeline = table.timeline()
    assert timeline.find(live.instant_time) is not None and timeline.find(t) is not None
    abort(table, live)


def test_rollback_failed_writes_select_ignoring_heartbeat(tmp_path: Path) -> None:
    table = _table(tmp_path)
    mine = start_commit(table, extra={"q": "mine"})
    theirs = start_commit(table, extra={"q": "theirs"})
    results = rollback_failed_writes(table, select=lambda _i, extra: extra.get("q") == "mine",
                                     ignore_heartbeat=True)
    assert [r.instant_time for r in results] == [mine.instant_time]
    assert table.timeline().find(theirs.instant_time) is not None
    mine.heartbeat.stop()  # type: ignore[union-attr]
    abort(table, theirs)


def test_heartbeat_expired_without_file_counts_from_instant_time(tmp_path: Path) -> None:
    table = _table(tmp_path)
    now = time.time()
    old = Instant("20240101000000001", Action.COMMIT, State.INFLIGHT, transition_ms=int((now - 600) * 1000))
    new = Instant("20240101000000002", Action.COMMIT, State.INFLIGHT, transition_ms=int(now * 1000))
    assert heartbeat_expired(table.storage, old, 120, now)
    assert not heartbeat_expired(table.storage, new, 120, now)
    (tmp_path / heartbeat_path(old.time)).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / heartbeat_path(old.time)).write_bytes(b"")  # a fresh beat wins over the old state file
    assert not heartbeat_expired(table.storage, old, 120, time.time())
