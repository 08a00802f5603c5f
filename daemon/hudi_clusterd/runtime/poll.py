"""The cheap poll of a table whose storage has no file-system events (an object store).

A tick lists every partition folder of the table and reads its properties: on an object store that is a request
per folder, every poll interval, for as long as the table exists. Yet when nothing happens on the timeline a tick
changes nothing: the trigger counts commits, and a table whose last tick did not fire and had no pending plan
stays that way until an instant file or ``hoodie.properties`` changes. So between such *quiet* ticks the worker
lists only the timeline folder (and ``.hoodie``, where ``hoodie.properties`` is, when the timeline is elsewhere:
layout 2): one or two ``LIST`` requests, and it ticks when their files (names, sizes, versions, times) differ
from those seen before the last tick. Folders are left out (an object store may keep listing an emptied one).

The worker ticks anyway after a tick that was not quiet (it failed, was deferred, fired the trigger, or saw a
pending plan), on an explicit wake-up (a settings reload), and at every `FULL_CHECK_EVERY`-th poll.
"""

from __future__ import annotations

from typing import Final

import structlog

from hudi_clusterd.errors import StorageError
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.timeline_store import META_FOLDER

log = structlog.get_logger(__name__)

FULL_CHECK_EVERY: Final = 30
"""Polls between two ticks of a quiet table, whatever its timeline says (a safety net)."""

Fingerprint = frozenset[tuple[str, str, int, str | None, int]]
"""(folder, name, size, version, modification time) of every file of the timeline folders."""


def timeline_fingerprint(table: HoodieTable) -> Fingerprint:
    """The files of the table's timeline folder and of ``.hoodie`` (one listing each; one when they are one)."""
    folders = dict.fromkeys((table.timeline_store.folder, META_FOLDER))
    return frozenset((folder, f.name, f.size, f.version, f.mtime_ms)
                     for folder in folders for f in table.storage.list_dir(folder) if not f.is_dir)


class TimelinePoll:
    """Decides, for one table worker, whether the next turn of its loop ticks (see the module docstring)."""

    def __init__(self, full_check_every: int = FULL_CHECK_EVERY) -> None:
        self.full_check_every = full_check_every
        self._seen: Fingerprint | None = None
        self._before_tick: Fingerprint | None = None
        self._quiet = False
        self._skipped = 0

    def due(self, table: HoodieTable | None, woken: bool = False) -> bool:
        """Whether to tick now. Always for a table not yet open or whose storage has file-system events (its
        watcher wakes it); for the others, see the module docstring."""
        if table is None or table.storage.event_folder() is not None:
            return True
        try:
            current: Fingerprint | None = timeline_fingerprint(table)
        except StorageError as e:
            log.debug("timeline poll failed; ticking", error=str(e))
            current = None
        self._before_tick = current
        if (woken or not self._quiet or current is None or current != self._seen
                or self._skipped + 1 >= self.full_check_every):
            return True
        self._skipped += 1
        return False

    def ticked(self, quiet: bool) -> None:
        """Record the tick that `due` allowed: whether it was quiet, and the timeline it started from."""
        self._quiet = quiet
        self._seen = self._before_tick if quiet else None
        self._skipped = 0


__all__ = ["FULL_CHECK_EVERY", "Fingerprint", "TimelinePoll", "timeline_fingerprint"]
