"""Rolling back a pending write instant: delete what it wrote, record a rollback instant, retire the instant.

The steps, all under the table lock, in an order that is safe to interrupt and re-run:

1. find the files the instant wrote: its markers (``.hoodie/.temp/T``), or, when it has none, every base file
   whose name carries instant time T;
2. write ``R.rollback.requested`` (Avro ``HoodieRollbackPlan``) and an empty ``R.rollback.inflight``, R being a
   fresh instant time;
3. on a table with a metadata table, roll back T's metadata deltacommit (`MetadataTable.rollback`);
   then delete exactly those files: only paths inside the table's base path, outside ``.hoodie``, parsing as base
   files of instant T (a file of any other instant is never touched);
4. write ``R.rollback`` (Avro ``HoodieRollbackMetadata``);
5. delete T's markers and heartbeat, then ``T``'s inflight file and, when asked, its requested file.

Data files go before instant files, so a crash never leaves data files of an instant that has disappeared
from the timeline. A re-run finds the pending rollback of step 2 and resumes it with the same R, as Hudi does.
The same code retires failed ingestion commits and (keeping the requested plan) failed clustering attempts.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import structlog

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.file_group import BaseFile, check_relative_path
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.errors import (
    ExecutionError,
    MetadataDecodeError,
    PathOutsideStorageError,
    StorageError,
    TimelineError,
)
from hudi_clusterd.formats.avro import decode_ocf, encode_record
from hudi_clusterd.table.heartbeat import heartbeat_path
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.markers import IOType, delete_markers, list_markers

log = structlog.get_logger(__name__)

ROLLBACK_VERSION = 1


@dataclass(frozen=True, slots=True)
class RollbackResult:
    """What one rollback did."""

    rollback_time: str
    instant_time: str
    action: Action
    deleted_files: tuple[str, ...]  # relative to the base path
    resumed: bool  # an interrupted rollback instant was finished


def safe_file_of_instant(rel: str, instant_time: str) -> BaseFile | None:
    """The base file at ``rel`` if it may be deleted by a rollback of ``instant_time``, else None.

    Refuses any path `check_relative_path` refuses (one that leaves the table, or lies in ``.hoodie``) and any
    name that is not a base file of exactly that instant."""
    try:
        if not check_relative_path(rel, "file"):
            return None
    except ValueError:
        return None
    partition, _, name = rel.rpartition("/")
    bf = BaseFile.parse(partition, name, 0)
    if bf is None or bf.instant_time != instant_time:
        return None
    return bf


def files_to_roll_back(table: HoodieTable, instant_time: str, partitions: list[str] | None = None
                       ) -> list[BaseFile]:
    """The instant's files from its markers, or, when it left none, from a listing of ``partitions`` (None: the
    whole table); filtered by ``safe_file_of_instant``."""
    markers = list_markers(table.storage, instant_time)
    if markers:
        out: dict[str, BaseFile] = {}
        for m in markers:
            bf = safe_file_of_instant(m.data_file_path, instant_time) if m.io_type is not IOType.APPEND else None
            if bf is None:
                log.warning("rollback ignores a marker that does not name a base file of the instant",
                            instant=instant_time, marker=m.name)
                continue
            out[bf.relative_path] = bf
        return sorted(out.values(), key=lambda b: b.relative_path)
    return sorted((bf for bf in table.list_base_files(partitions) if bf.instant_time == instant_time),
                  key=lambda b: b.relative_path)


def _plan_record(table: HoodieTable, target: Instant, files: Iterable[BaseFile]) -> dict[str, Any]:
    requests: dict[tuple[str, str], list[str]] = defaultdict(list)
    for bf in files:
        requests[(bf.partition_path, bf.file_id)].append(table.storage.uri(bf.relative_path))
    return {
        "instantToRollback": {"commitTime": target.time, "action": target.action.value},
        "RollbackRequests": [
            {"partitionPath": p, "fileId": f, "latestBaseInstant": target.time, "filesToBeDeleted": paths,
             "logBlocksToBeDeleted": {}}
            for (p, f), paths in sorted(requests.items())
        ],
        "version": ROLLBACK_VERSION,
    }


def _plan_files(table: HoodieTable, plan: dict[str, Any], source: str, instant_time: str) -> list[BaseFile]:
    """The base files of ``instant_time`` that a rollback plan (file ``source``) names. A path outside the table
    refuses the plan (``MetadataDecodeError`` naming ``source`` and the path), before anything is deleted."""
    out: list[BaseFile] = []
    for req in plan.get("RollbackRequests") or []:
        for uri in req.get("filesToBeDeleted") or []:
            try:
                rel = table.storage.rel_from_uri(str(uri))
            except PathOutsideStorageError as e:
                raise MetadataDecodeError(f"{source}: filesToBeDeleted: {e}; the rollback plan is refused") from None
            bf = safe_file_of_instant(rel, instant_time)
            if bf is not None:
                out.append(bf)
    return out


def _partitions_written(table: HoodieTable, target: Instant) -> list[str] | None:
    """The partitions a pending clustering can have written to (those of its plan's groups); None when unknown.

    Rollback runs under the table lock, so it lists only these, never the whole table."""
    if not target.action.is_replace:
        return None
    try:
        meta = table.timeline_store.requested_replace(target.time)
    except MetadataDecodeError:
        return None
    if meta is None or meta.clustering_plan is None:
        return None
    return sorted({g.partition_path for g in meta.clustering_plan.input_groups})


def _pending_rollback_for(table: HoodieTable, timeline: Timeline,
                          target_time: str) -> tuple[Instant, dict[str, Any], str] | None:
    """An unfinished rollback instant whose plan targets ``target_time`` (to resume it), its plan and the plan's
    file."""
    for inst in timeline.of_actions([Action.ROLLBACK]).pending().after(target_time):
        path = table.timeline_store.path(inst.with_state(State.REQUESTED))
        if not table.storage.exists(path):
            continue
        try:
            plan = decode_ocf(table.storage.read_bytes(path), table.storage.full_path(path))
        except MetadataDecodeError as e:
            log.warning("unreadable rollback plan skipped", file=path, error=str(e))
            continue
        target = (plan.get("instantToRollback") or {}).get("commitTime")
        if target == target_time:
            return inst, plan, table.storage.full_path(path)
    return None


def rollback_pending(table: HoodieTable, instant_time: str, action: Action = Action.COMMIT, *,
                     delete_requested: bool = False, take_lock: bool = True) -> RollbackResult | None:
    """Roll back the pending instant ``instant_time``/``action``; None when it has nothing on the timeline.

    ``delete_requested`` also removes the requested file (a failed ingestion commit disappears entirely);
    without it the instant stays requested (a clustering plan that can be executed again). Refuses a
    completed instant. ``take_lock=False`` when the caller already holds the table lock."""
    if take_lock:
        with table.lock():
            return _rollback_locked(table, instant_time, action, delete_requested)
    return _rollback_locked(table, instant_time, action, delete_requested)


def _rollback_locked(table: HoodieTable, instant_time: str, action: Action,
                     delete_requested: bool) -> RollbackResult | None:
    started = time.monotonic()
    timeline = table.timeline()
    target = timeline.find(instant_time, action)
    if target is None:
        return None
    if target.is_completed:
        raise TimelineError(f"instant {target} is completed; only pending instants can be rolled back")
    store = table.timeline_store
    pending = _pending_rollback_for(table, timeline, instant_time)
    resumed = pending is not None
    if pending is not None:
        rollback, plan, source = pending
        rollback = rollback.with_state(State.REQUESTED)
        files = {bf.relative_path: bf for bf in _plan_files(table, plan, source, instant_time)}
    else:
        rollback = Instant(table.new_instant_time(timeline), Action.ROLLBACK, State.REQUESTED)
        files = {}
    # Markers or files may have appeared since an interrupted attempt planned; include them too.
    files.update({bf.relative_path: bf
                  for bf in files_to_roll_back(table, instant_time, _partitions_written(table, target))})
    ordered = sorted(files.values(), key=lambda b: b.relative_path)
    if pending is None:
        store.create(rollback, encode_record("HoodieRollbackPlan", _plan_record(table, target, ordered)))
    if not store.exists(rollback.with_state(State.INFLIGHT)):
        store.create(rollback.with_state(State.INFLIGHT), b"")
    log.info("rolling back", instant=str(target), rollback=rollback.time, files=len(ordered), resumed=resumed)
    mdt = table.metadata_table()
    if mdt is not None:
        # before any data file goes, and before this rollback completes: once it has, readers would take
        # the instant's metadata as valid again
        mdt.rollback(target.time, rollback.time)

    deleted: list[BaseFile] = []
    failed: list[str] = []
    for bf in ordered:
        try:
            table.storage.delete(bf.relative_path, missing_ok=True)
            deleted.append(bf)
        except StorageError as e:
            failed.append(f"{bf.relative_path} ({e})")
    if failed:
        raise StorageError(f"rollback {rollback.time} of {target}: could not delete {len(failed)} file(s): "
                           + "; ".join(failed[:5]) + "; it stays pending and resumes on the next attempt")

    partitions: dict[str, list[str]] = defaultdict(list)
    for bf in deleted:
        partitions[bf.partition_path].append(table.storage.uri(bf.relative_path))
    metadata = {
        "startRollbackTime": rollback.time,
        "timeTakenInMillis": int((time.monotonic() - started) * 1000),
        "totalFilesDeleted": len(deleted),
        "commitsRollback": [target.time],
        "partitionMetadata": {
            p: {"partitionPath": p, "successDeleteFiles": paths, "failedDeleteFiles": [],
                "rollbackLogFiles": None, "logFilesFromFailedCommit": None}
            for p, paths in sorted(partitions.items())
        },
        "version": ROLLBACK_VERSION,
        "instantsRollback": [{"commitTime": target.time, "action": target.action.value}],
    }
    store.create(rollback.with_state(State.COMPLETED), encode_record("HoodieRollbackMetadata", metadata))

    delete_markers(table.storage, instant_time)
    table.storage.delete(heartbeat_path(instant_time), missing_ok=True)
    store.delete(target.with_state(State.INFLIGHT))
    if delete_requested:
        store.delete(target.with_state(State.REQUESTED))
    log.info("rolled back", instant=str(target), rollback=rollback.time, deleted=len(deleted))
    return RollbackResult(rollback.time, target.time, target.action,
                          tuple(bf.relative_path for bf in deleted), resumed)


def reconcile_markers(table: HoodieTable, instant_time: str, write_stats: Iterable[WriteStat]) -> list[str]:
    """Delete files of instant T that have a marker but no write stat (failed or duplicate task attempts);
    returns their paths. Refuses to complete when a write-stat file is missing."""
    kept = {ws.path for ws in write_stats if ws.path}
    missing = sorted(p for p in kept if not table.storage.exists(p))
    if missing:
        raise ExecutionError(f"commit {instant_time}: {len(missing)} written file(s) are missing, e.g. "
                             f"{table.storage.full_path(missing[0])}; the write cannot be completed")
    removed: list[str] = []
    for marker in list_markers(table.storage, instant_time):
        rel = marker.data_file_path
        if rel in kept or safe_file_of_instant(rel, instant_time) is None:
            continue
        if table.storage.delete(rel, missing_ok=True):
            removed.append(rel)
    if removed:
        log.info("deleted files of failed task attempts", instant=instant_time, files=len(removed))
    return removed
