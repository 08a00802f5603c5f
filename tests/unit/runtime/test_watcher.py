"""TimelineWatcher and ConfigWatcher on real folders with real watchdog observers (events and polling)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from watchdog.events import (
    DirCreatedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
)

from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.errors import ConfigError, TableError
from hudi_clusterd.runtime.watcher import (
    ConfigWatcher,
    Debouncer,
    TimelineWatcher,
    fingerprint,
    is_instant_file_name,
    is_timeline_change,
)
from hudi_clusterd.storage import open_storage
from hudi_clusterd.table.hoodie_table import HoodieTable, timeline_folder

WAIT = 10.0  # generous: only reached when something is broken


class Calls:
    """An on_change callback that counts calls and lets a test wait for the n-th one."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.count = 0

    def __call__(self) -> None:
        with self._cond:
            self.count += 1
            self._cond.notify_all()

    def wait_for(self, n: int, timeout: float = WAIT) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.count >= n, timeout)


def make_table(tmp_path: Path) -> Path:
    (tmp_path / "t" / ".hoodie" / ".aux").mkdir(parents=True)
    return tmp_path / "t"


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("20240101000000000.replacecommit.requested", True),
        ("20240101000000000.commit", True),
        ("20240101000000.commit", True),  # second-granularity instants (older tables)
        ("20240101000000000.replacecommit.inflight", True),
        ("20240101000000000.commit.tmp", False),
        ("hoodie.properties", False),
        ("hoodie.properties.backup", False),
        ("lock", False),
        (".20240101000000000.commit.crc", False),
        (".aux", False),
        ("metadata", False),
        ("2024010100000.commit", False),  # 13 digits
        ("20240101000000000", False),  # no action
        ("", False),
    ],
)
def test_is_instant_file_name_accepts_only_timeline_files(name: str, expected: bool) -> None:
    assert is_instant_file_name(name) is expected


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (FileCreatedEvent("/t/.hoodie/20240101000000000.commit"), True),
        (FileModifiedEvent("/t/.hoodie/20240101000000000.commit"), True),
        (FileClosedEvent(b"/t/.hoodie/20240101000000000.commit"), True),  # bytes paths happen
        (FileMovedEvent("/t/.hoodie/x.tmp", "/t/.hoodie/20240101000000000.commit"), True),
        (FileCreatedEvent("/t/.hoodie/20240101000000000.commit.tmp"), False),
        (FileModifiedEvent("/t/.hoodie/hoodie.properties"), False),
        (DirCreatedEvent("/t/.hoodie/20240101000000000.commit"), False),
    ],
)
def test_is_timeline_change_filters_watchdog_events(event: FileSystemEvent, expected: bool) -> None:
    assert is_timeline_change(event) is expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("/data/t1", Path("/data/t1")),
        ("relative/t1", Path("relative/t1")),
        ("file:///data/t1", Path("/data/t1")),
        ("s3a://bucket/t1", None),
        ("gs://bucket/t1", None),
    ],
)
def test_only_storages_with_file_system_events_are_watched(given: str, expected: Path | None) -> None:
    assert TimelineWatcher.supports(given) is (expected is not None)
    folder = open_storage(given).event_folder()
    assert (Path(folder) if folder is not None else None) == (expected.resolve() if expected is not None else None)


def test_timeline_watcher_new_instant_file_fires_on_change(tmp_path: Path) -> None:
    # Given a watcher on a table's timeline
    table = make_table(tmp_path)
    calls = Calls()
    with TimelineWatcher(str(table), calls, debounce=0.05) as watcher:
        assert watcher.mode == "events"
        # When a writer completes an instant
        (table / ".hoodie" / "20240101000000000.commit").write_text("{}")
        # Then the daemon is woken
        assert calls.wait_for(1)


def test_timeline_watcher_on_a_version_9_table_watches_its_timeline_folder(tmp_path: Path) -> None:
    # Given a version-9 table, whose instants live in .hoodie/timeline, and a watcher on its layout's folder
    cfg = TableConfig.for_new_table(name="t", record_key_fields=["id"], table_version=9)
    base = tmp_path / "t9"
    HoodieTable.create(str(base), cfg)
    folder = timeline_folder(str(base))
    assert folder == ".hoodie/timeline"
    calls = Calls()
    with TimelineWatcher(str(base), calls, debounce=0.05, folder=folder):
        # When a writer completes an instant (named by its completion time)
        (base / folder / "20240101000000000_20240101000000100.commit").write_bytes(b"")
        # Then the daemon is woken
        assert calls.wait_for(1)


def test_timeline_watcher_instant_renamed_into_place_fires(tmp_path: Path) -> None:
    # Given a watcher (file: URI form of the base path)
    table = make_table(tmp_path)
    calls = Calls()
    with TimelineWatcher(table.as_uri(), calls, debounce=0.05):
        # When an instant is written to a temp name and renamed
        write_atomically(table / ".hoodie" / "20240101000000001.replacecommit", "{}")
        # Then the rename counts
        assert calls.wait_for(1)


def test_debouncer_burst_of_pokes_gives_one_call() -> None:
    # Given a debouncer with a quiet period far longer than a burst takes
    calls = Calls()
    debouncer = Debouncer(calls, 0.5, name="test-debounce")
    debouncer.start()
    try:
        # When five pokes arrive back to back
        for _ in range(5):
            debouncer.poke()
        assert calls.wait_for(1)
        # When one more poke arrives after the call
        debouncer.poke()
        assert calls.wait_for(2)
    finally:
        debouncer.stop()

    # Then the burst gave exactly one call and the later poke exactly one more
    assert calls.count == 2


def test_debouncer_callback_error_is_logged_and_thread_survives() -> None:
    # Given a callback that fails on its first call
    calls = Calls()
    outcomes = iter([RuntimeError("boom")])

    def flaky() -> None:
        calls()
        error = next(outcomes, None)
        if error is not None:
            raise error

    debouncer = Debouncer(flaky, 0.0, name="test-debounce")
    debouncer.start()
    try:
        # When poked, and poked again after the failure
        debouncer.poke()
        assert calls.wait_for(1)
        debouncer.poke()
        # Then the second call still happens
        assert calls.wait_for(2)
    finally:
        debouncer.stop()


def test_timeline_watcher_polling_mode_detects_new_instant(tmp_path: Path) -> None:
    # Given a polling watcher (storage without change events)
    table = make_table(tmp_path)
    calls = Calls()
    with TimelineWatcher(str(table), calls, mode="polling", poll_interval=0.05, debounce=0.0) as watcher:
        assert watcher.mode == "polling"
        # When an instant appears
        (table / ".hoodie" / "20240101000000003.commit").write_text("{}")
        # Then a later snapshot notices it
        assert calls.wait_for(1)


def test_timeline_watcher_stop_joins_its_threads(tmp_path: Path) -> None:
    # Given a started watcher
    table = make_table(tmp_path)
    before = set(threading.enumerate())
    watcher = TimelineWatcher(str(table), Calls())
    watcher.start()
    assert set(threading.enumerate()) - before

    # When stopped
    watcher.stop()

    # Then every thread it started has ended
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive()]


def test_timeline_watcher_missing_timeline_raises_table_error(tmp_path: Path) -> None:
    watcher = TimelineWatcher(str(tmp_path / "not-a-table"), Calls())
    with pytest.raises(TableError, match=r"\.hoodie: timeline folder not found"):
        watcher.start()


def test_timeline_watcher_remote_path_is_refused() -> None:
    assert not TimelineWatcher.supports("s3a://bucket/t1")
    with pytest.raises(ValueError, match="no file-system events"):
        TimelineWatcher("s3a://bucket/t1", Calls())


def test_timeline_watcher_rejects_bad_mode_and_intervals(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="watch mode"):
        TimelineWatcher(str(tmp_path), Calls(), mode="magic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="poll interval"):
        TimelineWatcher(str(tmp_path), Calls(), poll_interval=0)
    with pytest.raises(ValueError, match="debounce"):
        TimelineWatcher(str(tmp_path), Calls(), debounce=-1)


def make_configmap(root: Path, content: str) -> Path:
    """Lay out a folder like a Kubernetes ConfigMap mount; return the path the daemon is given."""
    root.mkdir()
    version = root / "..2024_01_01_00_00_00.000000001"
    version.mkdir()
    (version / "clusterd.toml").write_text(content)
    (root / "..data").symlink_to(version.name)
    (root / "clusterd.toml").symlink_to("..data/clusterd.toml")
    return root / "clusterd.toml"


def swap_configmap(root: Path, content: str, stamp: str) -> None:
    """Publish new content the way the kubelet does: new folder, new symlink, rename over ..data, delete old."""
    old = (root / "..data").resolve()
    version = root / f"..{stamp}"
    version.mkdir()
    (version / "clusterd.toml").write_text(content)
    (root / "..data_tmp").symlink_to(version.name)
    os.replace(root / "..data_tmp", root / "..data")
    shutil.rmtree(old)


@pytest.mark.parametrize("mode", ["events", "polling"])
def test_config_watcher_kubernetes_symlink_swap_fires(tmp_path: Path, mode: str) -> None:
    # Given a ConfigMap-style mount and a watcher on its file
    config = make_configmap(tmp_path / "config", "a = 1\n")
    first_target = fingerprint(config)
    calls = Calls()
    with ConfigWatcher(config, calls, debounce=0.05, mode=mode, poll_interval=0.05):  # type: ignore[arg-type]
        # When the kubelet swaps in a new version
        swap_configmap(tmp_path / "config", "a = 2\n", "2024_01_01_00_05_00.000000002")
        # Then the watcher fires, and the file now resolves to the new version
        assert calls.wait_for(1)
    second = fingerprint(config)
    assert first_target is not None and second is not None
    assert second[0] != first_target[0]
    assert config.read_text() == "a = 2\n"


def test_config_watcher_in_place_edit_fires(tmp_path: Path) -> None:
    # Given a plain config file
    config = tmp_path / "clusterd.toml"
    config.write_text("a = 1\n")
    calls = Calls()
    with ConfigWatcher(config, calls, debounce=0.05):
        # When an editor rewrites it with new content
        write_atomically(config, "a = 2\n")
        # Then the watcher fires
        assert calls.wait_for(1)


def test_config_watcher_check_ignores_unchanged_content_and_missing_file(tmp_path: Path) -> None:
    # Given a started watcher (fingerprint recorded)
    config = tmp_path / "clusterd.toml"
    config.write_text("a = 1\n")
    calls = Calls()
    watcher = ConfigWatcher(config, calls, debounce=60.0)  # the debouncer never fires within this test
    watcher.start()
    try:
        # When the file is rewritten with identical content, then removed
        write_atomically(config, "a = 1\n")
        unchanged = watcher.check()
        config.unlink()
        missing = watcher.check()
        # When it comes back changed
        config.write_text("a = 3\n")
        changed = watcher.check()
        again = watcher.check()
    finally:
        watcher.stop()

    # Then only the real change counted, once
    assert (unchanged, missing, changed, again) == (False, False, True, False)
    assert calls.count == 1


def test_config_watcher_missing_folder_raises_config_error(tmp_path: Path) -> None:
    watcher = ConfigWatcher(tmp_path / "nope" / "clusterd.toml", Calls())
    with pytest.raises(ConfigError, match="config folder not found"):
        watcher.start()


def test_config_watcher_callback_error_does_not_kill_the_watcher(tmp_path: Path) -> None:
    # Given a callback that fails the first time only
    config = tmp_path / "clusterd.toml"
    config.write_text("a = 1\n")
    calls = Calls()
    failures = iter([RuntimeError("first reload blew up")])

    def flaky() -> None:
        calls()
        error = next(failures, None)
        if error is not None:
            raise error

    on_change: Callable[[], None] = flaky
    with ConfigWatcher(config, on_change, debounce=0.05):
        # When two changes arrive one after the other
        write_atomically(config, "a = 2\n")
        assert calls.wait_for(1)
        write_atomically(config, "a = 3\n")
        # Then the second is still delivered
        assert calls.wait_for(2)
