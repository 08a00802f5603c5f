"""The daemon and Apache Hudi's writers exclude each other through Hudi's file-system lock (issue #14, F2-F5, F13).

Each test runs once per Hudi setup, on the session's Hudi worker (a separate process, as a user's writer is); the
daemon's side is its table lock, held in this process as the daemon holds it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pytest

from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.errors import LockError
from hudi_clusterd.lock import AUX_LOCK_FILE, LOCK_FILE, FileSystemLockProvider, LockOptions
from hudi_clusterd.storage import open_storage
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.harness.apache_hudi import HudiRequestError, HudiWorker, hudi_write_options
from tests.harness.daemon_harness import instant_files

pytestmark = pytest.mark.hudi
# Hudi 1.2 on a version-6 table repeats what 0.15 and 1.2 on version 9 show here: long run only
SLOW_SETUPS = ("hudi-1.2-v6",)

KEYS = pa.schema([("id", pa.int64()), ("part", pa.string()), ("v", pa.int64())])


def _batch(version: int) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "part": f"p{i % 2}", "v": version} for i in range(8)], schema=KEYS)


def _options(apache_hudi: HudiWorker, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return hudi_write_options(apache_hudi.setup, "locked", record_key="id", partition_path="part", precombine="v",
                              extra=extra)


def _table(apache_hudi: HudiWorker, base: Path, extra: Mapping[str, str] | None = None) -> HoodieTable:
    apache_hudi.write(_batch(0), base, {**_options(apache_hudi, extra), "hoodie.datasource.write.operation": "insert"})
    return HoodieTable.open(str(base))


def _latest_commit_mtime(base: Path) -> float:
    return max(f.path.stat().st_mtime for f in instant_files(base) if f.action == "commit" and f.state == "completed")


@pytest.mark.parametrize("lock_folder", [None, "elsewhere"], ids=["default-path", "filesystem-path"])
def test_a_hudi_writer_waits_for_the_daemons_lock(apache_hudi: HudiWorker, tmp_path: Path,
                                                  lock_folder: str | None) -> None:
    # Given a table Hudi wrote, and writers that may name their lock folder (hoodie.write.lock.filesystem.path)
    base = tmp_path / "t"
    extra = {"hoodie.write.lock.client.wait_time_ms_between_retry": "300"}
    if lock_folder is not None:
        extra["hoodie.write.lock.filesystem.path"] = str(tmp_path / lock_folder)
    _table(apache_hudi, base, extra)
    table = HoodieTable.open(str(base), lock_provider=FileSystemLockProvider(
        open_storage(str(base)), LockOptions(path=extra.get("hoodie.write.lock.filesystem.path"))))
    holding, released = threading.Event(), threading.Event()
    release_at: list[float] = []

    def hold() -> None:
        with table.lock():
            holding.set()
            time.sleep(4)
            release_at.append(time.time())
        released.set()

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(30)
    lock_file = tmp_path / lock_folder / "lock" if lock_folder else base / LOCK_FILE
    assert json.loads(lock_file.read_text())["holder"] == "hudi-clusterd"
    # When Hudi upserts meanwhile
    apache_hudi.write(_batch(1), base, _options(apache_hudi, extra))
    holder.join()
    # Then its commit completed only after the daemon let go of the lock, and its rows are there
    assert released.is_set() and _latest_commit_mtime(base) >= release_at[0] - 0.01
    assert sorted(apache_hudi.read(base).column("v").to_pylist()) == [1] * 8
    assert not lock_file.exists() and not (base / AUX_LOCK_FILE).exists()


def test_a_hudi_writer_that_gives_up_on_the_lock_cannot_make_the_daemon_write_without_it(
        apache_hudi: HudiWorker, tmp_path: Path) -> None:
    # Given a table whose lock the daemon holds
    base = tmp_path / "t"
    table = _table(apache_hudi, base)
    planned = Instant(table.new_instant_time(), Action.REPLACE_COMMIT, State.REQUESTED)
    with table.lock():
        # When a Hudi writer gives up waiting for it (few retries) and its write client closes
        with pytest.raises(HudiRequestError, match=r"HoodieLockException: Unable to acquire (the )?lock"):
            apache_hudi.write(_batch(1), base, _options(apache_hudi, {
                "hoodie.write.lock.client.num_retries": "2",
                "hoodie.write.lock.client.wait_time_ms_between_retry": "200"}))
        if apache_hudi.setup.hudi_version.startswith("0."):
            # Then Hudi 0.15's provider deleted the lock file on close, though it never held it (F3) ...
            assert not (base / LOCK_FILE).exists()
            # ... and the daemon notices before its next timeline write, and writes nothing
            with pytest.raises(LockError, match="lost while held"):
                table.timeline_store.create(planned, b"")
        else:
            # Then Hudi 1.x leaves a lock it does not hold alone, and the daemon goes on under it
            assert json.loads((base / LOCK_FILE).read_text())["holder"] == "hudi-clusterd"
            table.timeline_store.create(planned, b"")
    written = planned.time in {f.time for f in instant_files(base)}
    assert written is not apache_hudi.setup.hudi_version.startswith("0.")
    # And Hudi's view of the table is unchanged by the failed write
    assert sorted(apache_hudi.read(base).column("v").to_pylist()) == [0] * 8
