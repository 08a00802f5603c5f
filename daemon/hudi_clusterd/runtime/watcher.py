"""File-system observers that wake the daemon: one on each table's timeline, one on the config folder.

The watchdog handlers only *notify*: they filter the event by name and poke a debouncer, whose thread calls
the ``on_change`` callback once a burst of events has gone quiet. ``on_change`` should itself be cheap (set an
Event, wake a loop); the daemon does the real work on its own thread. Events can be lost (an inotify queue
overflow, a network file system, object storage), so the daemon keeps a periodic full check as a safety net;
these watchers only make it react sooner.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal

import structlog
from watchdog.events import (
    EVENT_TYPE_CLOSED_NO_WRITE,
    EVENT_TYPE_OPENED,
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from hudi_clusterd.domain.instant import parse_instant_file_name
from hudi_clusterd.errors import ConfigError, TableError, TimelineError
from hudi_clusterd.storage import open_storage

log = structlog.get_logger(__name__)

WatchMode = Literal["events", "polling"]
"""``events``: the OS notification API (inotify on Linux); ``polling``: periodic directory snapshots."""


# Events meaning "a file appeared or changed". Opened and closed-without-write are left out: they are reads,
# ours included (the config watcher reads the file on every check and must not wake itself up).
_FILE_CHANGES: Final[list[type[FileSystemEvent]]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileClosedEvent,
]
# A ConfigMap swap moves and deletes symlinks and folders, so the config watcher also takes those.
_FOLDER_CHANGES: Final[list[type[FileSystemEvent]]] = [
    *_FILE_CHANGES,
    FileDeletedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
]
_READS: Final = frozenset({EVENT_TYPE_OPENED, EVENT_TYPE_CLOSED_NO_WRITE})


def is_instant_file_name(name: str) -> bool:
    """True for a top-level timeline file name (``20240101000000000.replacecommit.requested``,
    ``20240101000000000_20240101000000100.commit``).

    Names the timeline's parser (`parse_instant_file_name`, either layout) takes for no instant are not:
    temporary files (``*.tmp``), hidden files, ``hoodie.properties*``, ``lock``, malformed instant times.
    """
    try:
        return parse_instant_file_name(name, with_completion=True) is not None
    except TimelineError:
        return False


def is_timeline_change(event: FileSystemEvent) -> bool:
    """True when a watchdog event creates, changes or renames a file into a timeline (instant) file name."""
    if event.is_directory:
        return False
    names = [os.path.basename(os.fsdecode(event.src_path))]
    if event.dest_path:
        names.append(os.path.basename(os.fsdecode(event.dest_path)))
    return any(is_instant_file_name(name) for name in names)


class Debouncer:
    """Calls ``callback`` on its own thread once ``poke()`` calls have stopped for ``delay`` seconds.

    A burst of pokes gives one call; a steady stream still gives a call at least every ``10 * delay`` seconds.
    Exceptions from ``callback`` are logged and the thread carries on.
    """

    def __init__(self, callback: Callable[[], object], delay: float, *, name: str) -> None:
        self._callback = callback
        self._delay = delay
        self._max_delay = delay * 10
        self._cond = threading.Condition()
        self._first: float | None = None
        self._last = 0.0
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def poke(self) -> None:
        """Ask for a call once things are quiet; cheap and safe from any thread."""
        with self._cond:
            now = time.monotonic()
            if self._first is None:
                self._first = now
            self._last = now
            self._cond.notify()

    def stop(self) -> None:
        """Stop the thread and drop any pending call."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and self._first is None:
                    self._cond.wait()
                while not self._stopped and self._first is not None:
                    due = min(self._last + self._delay, self._first + self._max_delay)
                    remaining = due - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                if self._stopped:
                    return
                self._first = None
            try:
                self._callback()
            except Exception:
                log.exception("watcher callback raised", thread=self._thread.name)


class _NotifyHandler(FileSystemEventHandler):
    """A watchdog handler that only filters and notifies (never does work on the observer thread)."""

    def __init__(self, accept: Callable[[FileSystemEvent], bool], notify: Callable[[], None]) -> None:
        self._accept = accept
        self._notify = notify

    def on_any_event(self, event: FileSystemEvent) -> None:
        if self._accept(event):
            self._notify()


class _DirectoryObserver:
    """One non-recursive watch on ``directory`` with the chosen mode; falls back to polling if events fail."""

    def __init__(self, directory: Path, handler: FileSystemEventHandler, mode: WatchMode, poll: float) -> None:
        if mode not in ("events", "polling"):
            raise ValueError(f"watch mode must be 'events' or 'polling', got {mode!r}")
        if poll <= 0:
            raise ValueError(f"poll interval must be > 0 seconds, got {poll}")
        self.directory = directory
        self.mode: WatchMode = mode
        self._handler = handler
        self._poll = poll
        self._observer: BaseObserver | None = None

    def start(self, event_filter: list[type[FileSystemEvent]] | None) -> None:
        try:
            self._observer = self._start(self.mode, event_filter)
        except OSError as exc:
            if self.mode == "polling":
                raise
            # inotify instance or watch limits reached: keep working, just slower.
            log.warning("file events unavailable; polling instead", path=str(self.directory), error=str(exc))
            self.mode = "polling"
            self._observer = self._start("polling", event_filter)

    def _start(self, mode: WatchMode, event_filter: list[type[FileSystemEvent]] | None) -> BaseObserver:
        observer = Observer() if mode == "events" else PollingObserver(timeout=self._poll)
        observer.name = f"watch-{mode}:{self.directory.name}"
        observer.schedule(self._handler, str(self.directory), recursive=False, event_filter=event_filter)
        observer.start()  # the watch (or first snapshot) exists when this returns
        return observer

    def stop(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join()


class TimelineWatcher:
    """Calls ``on_change`` (debounced) when an instant file appears or changes in ``<base_path>/.hoodie``.

    Only top-level timeline files count (not ``.aux``, ``metadata`` or temp files). ``mode="polling"``
    snapshots the folder every ``poll_interval`` seconds (for file systems without change events); in
    ``events`` mode a failure to set up OS notifications falls back to polling (see ``.mode``).
    """

    def __init__(
        self,
        base_path: str,
        on_change: Callable[[], None],
        mode: WatchMode = "events",
        poll_interval: float = 2.0,
        debounce: float = 0.2,
        folder: str = ".hoodie",
    ) -> None:
        """``folder``: the table's timeline folder, relative to ``base_path`` (its layout's)."""
        storage = open_storage(base_path)
        root, events = storage.event_folder(), storage.event_folder(folder)
        if root is None or events is None:
            raise ValueError(f"{base_path}: this storage has no file-system events; rely on the periodic check")
        if debounce < 0:
            raise ValueError(f"debounce must be >= 0 seconds, got {debounce}")
        self.base_path = base_path
        self.timeline_dir = Path(events)
        self._debouncer = Debouncer(on_change, debounce, name=f"timeline-debounce:{Path(root).name}")
        handler = _NotifyHandler(is_timeline_change, self._debouncer.poke)
        self._observer = _DirectoryObserver(self.timeline_dir, handler, mode, poll_interval)

    @staticmethod
    def supports(base_path: str) -> bool:
        """True when the storage of ``base_path`` has file-system events (watchable at all)."""
        return open_storage(base_path).event_folder() is not None

    @property
    def mode(self) -> WatchMode:
        """The mode in effect (``polling`` after a fallback)."""
        return self._observer.mode

    def start(self) -> None:
        """Start watching. Raises ``TableError`` when ``.hoodie`` is not a folder."""
        if not self.timeline_dir.is_dir():
            raise TableError(f"{self.timeline_dir}: timeline folder not found; is {self.base_path} a Hudi table?")
        self._debouncer.start()
        try:
            self._observer.start(_FILE_CHANGES)
        except BaseException:
            self._debouncer.stop()
            raise
        log.debug("watching timeline", path=str(self.timeline_dir), mode=self.mode)

    def stop(self) -> None:
        """Stop the observer and the debouncer and join their threads; a pending notification is dropped."""
        self._observer.stop()
        self._debouncer.stop()

    def __enter__(self) -> TimelineWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


Fingerprint = tuple[str, str]
"""(resolved path, SHA-256 of the content) of a config file."""


def fingerprint(path: Path) -> Fingerprint | None:
    """The resolved target and content hash of ``path``; None while it is missing or unreadable."""
    try:
        resolved = path.resolve(strict=True)
        digest = hashlib.sha256(resolved.read_bytes()).hexdigest()
    except OSError:
        return None
    return str(resolved), digest


class ConfigWatcher:
    """Calls ``on_change`` (debounced) when the config file's resolved target or content changes.

    It watches the file's *folder*, not the file: a Kubernetes ConfigMap mount replaces the file by
    swapping a ``..data`` symlink, which a watch on the old file never sees. Events in the folder only trigger
    a fingerprint comparison; ``on_change`` fires when the fingerprint differs from the last one seen. A file
    that goes missing does not fire (the current config stays); it fires again once it reappears changed.
    ``check()`` runs the same comparison on demand, e.g. from the daemon's periodic check.
    """

    def __init__(
        self,
        config_path: str | Path,
        on_change: Callable[[], None],
        debounce: float = 0.5,
        mode: WatchMode = "events",
        poll_interval: float = 2.0,
    ) -> None:
        if debounce < 0:
            raise ValueError(f"debounce must be >= 0 seconds, got {debounce}")
        self.config_path = Path(os.path.abspath(config_path))  # keep symlinks: the swap happens above them
        self._on_change = on_change
        self._lock = threading.Lock()
        self._last: Fingerprint | None = None
        self._debouncer = Debouncer(self.check, debounce, name="config-debounce")
        handler = _NotifyHandler(lambda event: event.event_type not in _READS, self._debouncer.poke)
        self._observer = _DirectoryObserver(self.config_path.parent, handler, mode, poll_interval)

    @property
    def mode(self) -> WatchMode:
        """The mode in effect (``polling`` after a fallback)."""
        return self._observer.mode

    def start(self) -> None:
        """Record the current fingerprint and start watching; ``ConfigError`` if the folder is missing."""
        if not self.config_path.parent.is_dir():
            raise ConfigError(f"{self.config_path.parent}: config folder not found")
        with self._lock:
            self._last = fingerprint(self.config_path)
        self._debouncer.start()
        try:
            self._observer.start(_FOLDER_CHANGES)
        except BaseException:
            self._debouncer.stop()
            raise
        log.debug("watching config", path=str(self.config_path), mode=self.mode)

    def check(self) -> bool:
        """Compare the fingerprint with the last one seen; on a change call ``on_change`` and return True."""
        current = fingerprint(self.config_path)
        with self._lock:
            if current is None or current == self._last:
                return False
            self._last = current
        log.info("config file changed", path=str(self.config_path), target=current[0])
        self._on_change()
        return True

    def stop(self) -> None:
        """Stop the observer and the debouncer and join their threads."""
        self._observer.stop()
        self._debouncer.stop()

    def __enter__(self) -> ConfigWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = [
    "ConfigWatcher",
    "Debouncer",
    "Fingerprint",
    "TimelineWatcher",
    "WatchMode",
    "fingerprint",
    "is_instant_file_name",
    "is_timeline_change",
]
