"""One view of a table per tick: its timeline, file-system view and pending plans, read once.

`TableSnapshot.load` walks the table once (each partition folder listed once), then lists ``.hoodie/`` once and
decodes the pending plans; everything a tick decides (the trigger, the plan, the gauges, what to execute and
recover) comes from it. Only the short re-checks under the table lock read the storage again.

The partitions are listed *before* the timeline, so that the timeline can be read under the table lock while
the listing, which can take long, is not. A commit that completed between the two is on the timeline but its
new files may be missing from the listing; the file groups it wrote are then *unsettled* (their newest
committed file is not in the listing) and are left out of planning until the next tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from hudi_clusterd.domain.file_group import BaseFile, FileGroupId
from hudi_clusterd.domain.fs_view import FileSystemView
from hudi_clusterd.domain.instant import Action
from hudi_clusterd.domain.log_file import LogFile
from hudi_clusterd.domain.plan import PendingPlan
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.storage import FileInfo
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.listing import DataFiles, Listing, file_system_view


@dataclass(frozen=True, slots=True)
class TableSnapshot:
    table: HoodieTable
    timeline: Timeline
    view: FileSystemView
    pending: tuple[PendingPlan, ...]
    meta_files: tuple[FileInfo, ...]
    unsettled: frozenset[FileGroupId]

    @classmethod
    def load(cls, table: HoodieTable, listing: Listing | None = None) -> TableSnapshot:
        """List the table (unless ``listing`` is given), then its timeline; see the module docstring."""
        scanned = listing if listing is not None else table.scan_files()
        timeline = table.timeline()
        pending = tuple(table.pending_clustering_plans(timeline))
        files = DataFiles(scanned.base_files, scanned.log_files)
        view = file_system_view(table.timeline_store, timeline, files, scanned.partitions, list(pending))
        return cls(table, timeline, view, pending, table.timeline_store.listed,
                   _unsettled(table, timeline, view, [*scanned.base_files, *scanned.log_files]))

    @property
    def last_clustering(self) -> str | None:
        """The newest completed or pending clustering instant (Hudi 0.15 counts pending ones too)."""
        return self.table.last_clustering_time(self.timeline)

    @property
    def commits_since_clustering(self) -> int:
        return self.timeline.commits_since(self.last_clustering)

    def clustered_instants(self) -> set[str]:
        """Times of completed clustering instants."""
        return {i.time for i in self.timeline.replaces().completed()
                if self.table.is_clustering_instant(i)}

    def schema(self) -> str | None:
        """The table's current writer schema (Avro JSON), None for a table never written."""
        return self.table.latest_schema(self.timeline)

    def hot_groups(self, last_commits: int) -> set[FileGroupId]:
        """File groups updated (``numUpdateWrites`` > 0) by the last ``last_commits`` completed ingestion writes:
        commits, on a merge-on-read table deltacommits (its commits are compactions)."""
        out: set[FileGroupId] = set()
        if last_commits <= 0:
            return out
        action = Action.DELTA_COMMIT if self.table.config.merge_on_read else Action.COMMIT
        for inst in self.timeline.of_actions([action]).completed().instants[-last_commits:]:
            for ws in self.table.timeline_store.commit_metadata(inst).write_stats():
                if ws.num_update_writes > 0 and ws.file_id:
                    out.add((ws.partition_path or "", ws.file_id))
        return out

    def pending_plan(self, time: str) -> PendingPlan | None:
        return next((p for p in self.pending if p.time == time), None)

    def group_files(self, plan_slices: Sequence[tuple[FileGroupId, str]]) -> list[BaseFile | None]:
        """The listed base file of each ``(file group, file name)``; None where the listing does not have it."""
        out: list[BaseFile | None] = []
        for gid, name in plan_slices:
            group = self.view.file_group(gid)
            found = None if group is None else next(
                (sl.base_file for sl in group.slices if sl.base_file is not None and sl.base_file.file_name == name),
                None)
            out.append(found)
        return out

    def oldest_pending_age_s(self, now: datetime | None = None) -> float | None:
        ages = [self.table.instant_age_seconds(p.time, now) for p in self.pending]
        return max(ages) if ages else None

    def compaction_blocked_s(self, now: datetime | None = None) -> float:
        """How long the oldest pending clustering may have kept Apache Hudi from scheduling compaction: on a
        merge-on-read table of version 6 any pending clustering does for a single writer with EAGER failed-writes
        cleaning (hudi-mor-reference §4.2; the writer settings beside the daemon avoid it); 0 otherwise."""
        if not self.table.config.clustering_blocks_compaction:
            return 0.0
        return self.oldest_pending_age_s(now) or 0.0

    def latest_files(self) -> list[BaseFile]:
        return self.view.latest_base_files()


def _unsettled(table: HoodieTable, timeline: Timeline, view: FileSystemView,
               files: Sequence[BaseFile | LogFile]) -> frozenset[FileGroupId]:
    """File groups whose newest committed file (by the completed writes' write stats: a base file, the log file a
    deltacommit appended to, or a compaction's base file, which timeline layout 2 keeps under its compaction
    action) is not in ``files``."""
    listed = {f.relative_path for f in files}
    newest: dict[FileGroupId, tuple[str, str]] = {}
    for inst in timeline.writes().completed():
        for ws in table.timeline_store.commit_metadata(inst).write_stats():
            if not ws.file_id or not ws.path:
                continue
            gid = (ws.partition_path or "", ws.file_id)
            known = newest.get(gid)
            if known is None or known[0] < inst.time:
                newest[gid] = (inst.time, ws.path)
    replaced = view.replaced.by_group
    return frozenset(gid for gid, (_, path) in newest.items() if path not in listed and gid not in replaced)
