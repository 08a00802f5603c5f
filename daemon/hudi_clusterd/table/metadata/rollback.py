"""Rolling back a data instant's metadata deltacommit (`MetadataTable.rollback`), and a crashed attempt of our
own commit: a metadata rollback instant that deletes the deltacommit's log files, then its instant files.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import structlog

from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.errors import MetadataDecodeError, MetadataTableError, PathOutsideStorageError, StorageError
from hudi_clusterd.formats.avro import decode_ocf, encode_record
from hudi_clusterd.formats.log import HeaderKey, LogFileName, decode_log_file
from hudi_clusterd.table.metadata.base import MAINTAINED, MetadataTableBase
from hudi_clusterd.table.timeline_store import TimelineStore

log = structlog.get_logger(__name__)


class MetadataRollbacks(MetadataTableBase):
    """Rollbacks of the metadata table's deltacommits."""

    def rollback(self, target: str, rollback_time: str) -> list[str]:
        """Roll back the metadata deltacommit of data instant ``target`` (pending or completed) as part of the data
        table's rollback ``rollback_time``; call under the data table's lock, before that rollback completes.
        Resumes an interrupted one. Returns the log files deleted (relative to the metadata table)."""
        store = self.timeline_store()
        timeline = store.load()
        mdt_rollback = rollback_time + self.table_format.rollback_suffix
        pending = self._pending_rollback(store, timeline, target)
        inst = timeline.find(target, Action.DELTA_COMMIT)
        if inst is None and pending is None:
            return []
        done = timeline.find(mdt_rollback, Action.ROLLBACK)
        if pending is None and done is not None and done.is_completed:
            # an attempt of this very rollback completed it and died before removing the deltacommit's instant
            # files: only those are left to remove
            if inst is not None:
                store.delete_all(inst)
            return []
        if pending is not None:
            mdt_rollback = pending
        if inst is not None and inst.is_completed:
            self._check_not_compacted(timeline, inst)
        files = self._log_files_of(store, inst, target) if inst is not None else []
        if pending is not None:  # its plan is checked before anything is written
            files = sorted(set(files) | set(self._planned_files(store, mdt_rollback)))
        requested = Instant(mdt_rollback, Action.ROLLBACK, State.REQUESTED)
        if pending is None:
            store.create(requested, encode_record("HoodieRollbackPlan", self._rollback_plan(target, files)))
        if not store.exists(requested.with_state(State.INFLIGHT)):
            store.create(requested.with_state(State.INFLIGHT))
        if inst is not None and inst.is_completed:  # first, so that no reader merges its blocks any more
            store.delete(inst)
        deleted = []
        for rel in files:
            self.before_write()
            if self.storage.delete(rel, missing_ok=True):
                deleted.append(rel)
        by_partition: dict[str, list[str]] = defaultdict(list)
        for rel in files:
            by_partition[rel.split("/", 1)[0]].append(self.storage.uri(rel))
        metadata = {
            "startRollbackTime": mdt_rollback,
            "timeTakenInMillis": 0,
            "totalFilesDeleted": len(files),
            "commitsRollback": [target],
            "partitionMetadata": {
                p: {"partitionPath": p, "successDeleteFiles": paths, "failedDeleteFiles": [],
                    "rollbackLogFiles": None, "logFilesFromFailedCommit": None}
                for p, paths in sorted(by_partition.items())},
            "version": 1,
            "instantsRollback": [{"commitTime": target, "action": Action.DELTA_COMMIT.value}],
        }
        store.create(requested.with_state(State.COMPLETED), encode_record("HoodieRollbackMetadata", metadata))
        if inst is not None:
            store.delete_all(inst)
        log.info("metadata table rolled back", instant=target, rollback=mdt_rollback, log_files=len(files))
        return deleted

    def _roll_back_own(self, store: TimelineStore, timeline: Timeline, inst: Instant) -> None:
        """Remove a pending metadata deltacommit of ours that never completed, with its log files (a crashed
        attempt of the same commit; nothing could read them)."""
        for rel in self._log_files_of(store, inst, inst.time):
            self.before_write()
            self.storage.delete(rel, missing_ok=True)
        store.delete_all(inst)

    def _check_not_compacted(self, timeline: Timeline, inst: Instant) -> None:
        """Refuse to roll back a deltacommit a completed compaction of the metadata table has merged."""
        point = inst.completion_time or inst.time
        for c in timeline.of_actions((Action.COMMIT, Action.COMPACTION)).completed():
            if c.time >= point:
                raise MetadataTableError(
                    f"{self.source}: metadata deltacommit {inst.time} was compacted by {c.time}; it can no longer be "
                    "rolled back (Hudi refuses this too). Restore the table to an instant before it with Hudi "
                    f"(call rollback_to_instant / restore) or complete data instant {inst.time} by hand")

    def _log_files_of(self, store: TimelineStore, inst: Instant | None, target: str) -> list[str]:
        """The log files deltacommit ``target`` wrote. Layout 2 names them after ``target``; version 6 names them
        in the deltacommit's write stats (its inflight state carries them before any is written)."""
        out: set[str] = set()
        if self.table_format.log_file_per_instant:
            for p in MAINTAINED:
                if p in self.partitions:
                    out.update(fi.path for fi in self.storage.list_dir(p)
                               if (lf := LogFileName.parse(fi.name)) is not None and lf.base_instant == target)
        elif inst is not None and inst.state is not State.REQUESTED:
            path = store.path(inst)
            meta = store.serde.decode_commit(self.storage.read_bytes(path), self.storage.full_path(path))
            out.update(ws.path for ws in meta.write_stats() if ws.path and self.storage.exists(ws.path))
        for rel in sorted(out):
            if not self._only_blocks_of(rel, target):
                raise MetadataTableError(f"{self.storage.full_path(rel)}: holds blocks of other instants than "
                                         f"{target}; hudi-clusterd never appends, so it will not delete it")
        return sorted(out)

    def _only_blocks_of(self, rel: str, target: str) -> bool:
        try:
            blocks = decode_log_file(self.storage.read_bytes(rel), source=self.storage.full_path(rel))
        except StorageError:
            if self.storage.info(rel) is not None:
                raise  # there, but unread (the store did not answer): not taken for gone
            return True  # gone already
        except (MetadataDecodeError, MetadataTableError):
            return False
        return bool(blocks) and all(b.header.get(HeaderKey.INSTANT_TIME) == target for b in blocks)

    def _rollback_plan(self, target: str, files: Iterable[str]) -> dict[str, Any]:
        requests: dict[tuple[str, str], list[str]] = defaultdict(list)
        for rel in files:
            partition, name = rel.split("/", 1)
            lf = LogFileName.parse(name)
            requests[(partition, lf.file_id if lf else name)].append(self.storage.uri(rel))
        return {
            "instantToRollback": {"commitTime": target, "action": Action.DELTA_COMMIT.value},
            "RollbackRequests": [
                {"partitionPath": p, "fileId": f, "latestBaseInstant": target, "filesToBeDeleted": paths,
                 "logBlocksToBeDeleted": {}} for (p, f), paths in sorted(requests.items())],
            "version": 1,
        }

    def _pending_rollback(self, store: TimelineStore, timeline: Timeline, target: str) -> str | None:
        for inst in timeline.of_actions((Action.ROLLBACK,)).pending():
            try:
                path = store.path(inst.with_state(State.REQUESTED))
                plan = decode_ocf(self.storage.read_bytes(path), self.storage.full_path(path))
            except (StorageError, MetadataDecodeError):
                continue
            if (plan.get("instantToRollback") or {}).get("commitTime") == target:
                return inst.time
        return None

    def _planned_files(self, store: TimelineStore, rollback_time: str) -> list[str]:
        path = store.path(Instant(rollback_time, Action.ROLLBACK, State.REQUESTED))
        plan = decode_ocf(self.storage.read_bytes(path), self.storage.full_path(path))
        out = []
        for req in plan.get("RollbackRequests") or []:
            for uri in req.get("filesToBeDeleted") or []:
                try:
                    out.append(self.storage.rel_from_uri(str(uri)))
                except PathOutsideStorageError as e:
                    raise MetadataDecodeError(f"{self.storage.full_path(path)}: filesToBeDeleted: {e}; the rollback "
                                              "plan is refused") from None
        return out
