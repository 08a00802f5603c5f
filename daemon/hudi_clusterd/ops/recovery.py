"""Recovery after crashes: what dead executors and interrupted writes left behind.

- Clustering left inflight by an executor that died is rolled back (its files deleted); its plan stays requested
  and is executed again.
- A completed clustering whose executor died between the commit point and its clean-up leaves markers and a
  heartbeat; readers ignore them, but they would stay forever and look pending, so they are removed.
- Temporary files of atomic timeline, lock, heartbeat and metadata-table writes (``.<32 hex digits>.tmp``)
  whose writer was killed before the rename are removed once an hour old.
"""

from __future__ import annotations

import time

import structlog

from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.planner import scheduled_by_us
from hudi_clusterd.errors import MetadataTableError
from hudi_clusterd.ops.cleanup import remove_leftovers
from hudi_clusterd.ops.ownership import Ownership
from hudi_clusterd.ops.snapshot import TableSnapshot
from hudi_clusterd.storage import is_stale_temp_file
from hudi_clusterd.table.heartbeat import HEARTBEAT_FOLDER, heartbeat_path
from hudi_clusterd.table.rollback import RollbackResult, rollback_pending
from hudi_clusterd.table.timeline_store import TEMP_FOLDER

log = structlog.get_logger(__name__)

STALE_TEMP_S = 3600.0
"""Age after which a temporary file of an interrupted atomic write in the timeline folders is removed."""


def clean_completed_leftovers(snapshot: TableSnapshot, ownership: Ownership) -> list[str]:
    """Remove the markers and heartbeat of completed clustering instants whose executor died before removing
    them; returns the instant times cleaned."""
    storage = snapshot.table.storage
    leftovers = {e.name for e in storage.list_dir(TEMP_FOLDER) if e.is_dir}
    leftovers |= {e.name for e in storage.list_dir(HEARTBEAT_FOLDER) if not e.is_dir}
    completed = {i.time for i in snapshot.timeline.replaces().completed()
                 if i.time in leftovers and snapshot.table.is_clustering_instant(i)}
    cleaned: list[str] = []
    for instant in sorted(completed):
        if ownership.owner_alive(snapshot.table, instant):
            continue  # its executor is finishing the clean-up itself
        failures = remove_leftovers(snapshot.table, instant)
        if failures:  # tried again at the next recovery
            log.warning("could not remove markers or heartbeat left by a completed clustering", instant=instant,
                        errors=[f"{f.step}: {f.error}" for f in failures])
            continue
        log.warning("removed markers and heartbeat left by a completed clustering", instant=instant)
        cleaned.append(instant)
    return cleaned


def clean_stale_temp_files(snapshot: TableSnapshot, older_than_s: float = STALE_TEMP_S) -> list[str]:
    """Remove temporary files of atomic writes interrupted before their rename (over ``older_than_s`` old), in
    ``.hoodie`` (from the snapshot's listing), ``.hoodie/.heartbeat`` and the folders the metadata table is written
    in."""
    storage = snapshot.table.storage
    now = time.time()
    folders = [HEARTBEAT_FOLDER]
    mdt = snapshot.table.metadata_table()
    if mdt is not None:
        try:
            folders += mdt.written_folders()
        except MetadataTableError as e:  # unreadable: the next clustering refuses the table and says why
            log.debug("metadata table folders not listed for temporary files", error=str(e))
    candidates = [fi for fi in snapshot.meta_files if is_stale_temp_file(fi, now, older_than_s)]
    for folder in folders:
        candidates += [fi for fi in storage.list_dir(folder) if is_stale_temp_file(fi, now, older_than_s)]
    removed = [fi.path for fi in candidates if storage.delete(fi.path)]
    if removed:
        log.info("removed temporary files of interrupted writes", files=removed)
    return removed


def roll_back_abandoned(snapshot: TableSnapshot, ownership: Ownership) -> list[RollbackResult]:
    """Roll back the snapshot's inflight plans that hudi-clusterd scheduled and whose owner is dead (re-checked
    under the lock); they stay requested for a retry. Plans another writer scheduled are left to it."""
    table = snapshot.table
    out: list[RollbackResult] = []
    for p in snapshot.pending:
        if p.instant.state is not State.INFLIGHT or ownership.owner_alive(table, p.time):
            continue
        if not scheduled_by_us(p.plan):
            log.info("inflight clustering scheduled by another writer left to it", instant=p.time)
            continue
        inflight = Instant(p.time, Action.CLUSTERING, State.INFLIGHT)
        with table.lock():
            if not table.timeline_store.exists(inflight) or ownership.owner_alive(table, p.time):
                continue
            result = rollback_pending(table, p.time, Action.CLUSTERING, take_lock=False)
            table.storage.delete(heartbeat_path(p.time))
        if result is not None:
            log.warning("rolled back abandoned clustering", instant=p.time, deleted_files=len(result.deleted_files))
            out.append(result)
    return out


def recover(snapshot: TableSnapshot, ownership: Ownership) -> list[RollbackResult]:
    """Everything above, from one snapshot."""
    clean_completed_leftovers(snapshot, ownership)
    clean_stale_temp_files(snapshot)
    return roll_back_abandoned(snapshot, ownership)

