"""The file-system view: which files make up a snapshot, as Hudi's readers resolve them.

Built from a storage listing plus the timeline:
1. base files and log files are grouped into file groups by ``(partition path, file id)``;
2. each group's slices form as Hudi forms them: one per base file, an empty one at the instant of a pending
   compaction of the group, then the log files placed one by one by the table version's rule
   (`domain.slicing`), which may start a slice without a base file (a log-only group);
3. a slice is visible only if its base instant is committed (completed, or older than the active timeline) or
   is the group's pending compaction; a pending compaction's half-written base file is hidden;
4. file groups replaced by a completed replacecommit are dropped (as of the query time);
5. file groups claimed by a pending clustering plan, compaction or log compaction are tracked so the planner
   leaves them alone. They stay visible to readers.

Log files of deltacommits that have not completed stay in their slices (Hudi's readers skip their blocks, or
their files, but a clustering must know they are there). A copy-on-write table has no log file and no
compaction: each slice is one base file.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hudi_clusterd.domain.compaction import PendingCompaction
from hudi_clusterd.domain.file_group import BaseFile, FileGroup, FileGroupId, FileSlice
from hudi_clusterd.domain.log_file import LogFile
from hudi_clusterd.domain.slicing import BY_NAME, LogSlicing
from hudi_clusterd.domain.timeline import CommitIndex, Timeline
from hudi_clusterd.errors import TimelineError


@dataclass(frozen=True, slots=True)
class ReplacedGroups:
    """File groups replaced by completed replacecommits: group → the (latest) replacing instant time."""

    by_group: Mapping[FileGroupId, str] = field(default_factory=dict)

    @classmethod
    def from_instants(cls, replaced: Iterable[tuple[str, Mapping[str, Iterable[str]]]]) -> ReplacedGroups:
        """From ``(instant time, partitionToReplaceFileIds)`` pairs of completed replacecommits."""
        out: dict[FileGroupId, str] = {}
        for time, by_partition in sorted(replaced, key=lambda item: item[0]):
            for partition, file_ids in by_partition.items():
                for file_id in file_ids:
                    out[(partition, file_id)] = time  # the later instant wins
        return cls(out)


@dataclass(frozen=True, slots=True)
class PendingClustering:
    """File groups in pending clustering plans: group → plan instant time. A group may be in one plan only."""

    by_group: Mapping[FileGroupId, str] = field(default_factory=dict)

    @classmethod
    def from_plans(cls, plans: Iterable[tuple[str, Iterable[FileGroupId]]]) -> PendingClustering:
        out: dict[FileGroupId, str] = {}
        for time, groups in plans:
            for group in groups:
                other = out.get(group)
                if other is not None and other != time:
                    raise TimelineError(
                        f"file group {group[1]!r} in partition {group[0]!r} is in two pending clustering plans "
                        f"({other} and {time}); the timeline is corrupt, roll one of them back"
                    )
                out[group] = time
        return cls(out)

    def instant_for(self, group: FileGroupId) -> str | None:
        return self.by_group.get(group)


class FileSystemView:
    """Resolves file groups and their visible slices; immutable once built."""

    def __init__(
        self,
        timeline: Timeline,
        base_files: Iterable[BaseFile],
        replaced: ReplacedGroups | None = None,
        pending_clustering: PendingClustering | None = None,
        partitions: Iterable[str] = (),
        *,
        log_files: Iterable[LogFile] = (),
        pending_compaction: PendingCompaction | None = None,
        slicing: LogSlicing = BY_NAME,
    ) -> None:
        self.timeline = timeline
        self.replaced = replaced or ReplacedGroups()
        self.pending_clustering = pending_clustering or PendingClustering()
        self.pending_compaction = pending_compaction or PendingCompaction()
        bases: dict[FileGroupId, list[BaseFile]] = defaultdict(list)
        for bf in base_files:
            bases[bf.group_id].append(bf)
        logs: dict[FileGroupId, list[LogFile]] = defaultdict(list)
        for lf in log_files:
            logs[lf.group_id].append(lf)
        compacting = self.pending_compaction.compaction
        # partition -> file id -> slices, newest base instant first
        by_partition: dict[str, dict[str, tuple[FileSlice, ...]]] = defaultdict(dict)
        for gid in bases.keys() | logs.keys():
            by_partition[gid[0]][gid[1]] = _slices(gid, bases.get(gid, ()), logs.get(gid, ()),
                                                   compacting.get(gid), slicing)
        self._by_partition = by_partition
        self._partitions = sorted(set(partitions) | set(by_partition))
        self._latest_index: CommitIndex | None = None

    def partitions(self) -> list[str]:
        """Every partition that has a data file or was listed as a partition folder."""
        return list(self._partitions)

    def _partition_keys(self, partition: str | None) -> list[str]:
        return self._partitions if partition is None else [partition]

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        """All file groups (replaced ones included) with all their slices, ordered by partition then file id."""
        out: list[FileGroup] = []
        for p in self._partition_keys(partition):
            groups = self._by_partition.get(p, {})
            for file_id in sorted(groups):
                out.append(FileGroup(p, file_id, groups[file_id]))
        return out

    def file_group(self, group: FileGroupId) -> FileGroup | None:
        slices = self._by_partition.get(group[0], {}).get(group[1])
        return None if slices is None else FileGroup(group[0], group[1], slices)

    def _commit_index(self, as_of: str | None) -> CommitIndex:
        if as_of is None:
            if self._latest_index is None:
                self._latest_index = CommitIndex.of(self.timeline)
            return self._latest_index
        return CommitIndex.of(self.timeline.up_to(as_of))

    def _latest(self, group: FileGroupId, slices: tuple[FileSlice, ...], index: CommitIndex,
                as_of: str | None) -> FileSlice | None:
        """The newest visible slice of one group; a pending compaction's slice without its half-written base."""
        compaction = self.pending_compaction.compaction.get(group)
        for sl in slices:
            if as_of is not None and sl.base_instant > as_of:
                continue
            if sl.base_instant == compaction:
                return sl if sl.base_file is None else FileSlice(sl.partition_path, sl.file_id, sl.base_instant,
                                                                 None, sl.log_files)
            if index.is_committed(sl.base_instant):
                return sl
        return None

    def latest_file_slices(self, partition: str | None = None, as_of: str | None = None) -> list[FileSlice]:
        """The newest visible slice of every live (not replaced) file group, optionally as of an instant.

        Ordered by partition, then file id."""
        index = self._commit_index(as_of)
        replaced = self.replaced.by_group
        out: list[FileSlice] = []
        for p in self._partition_keys(partition):
            groups = self._by_partition.get(p)
            if not groups:
                continue
            for file_id in sorted(groups):
                if replaced:
                    at = replaced.get((p, file_id))
                    if at is not None and (as_of is None or at <= as_of):
                        continue
                sl = self._latest((p, file_id), groups[file_id], index, as_of)
                if sl is not None:
                    out.append(sl)
        return out

    def latest_slice_of(self, group: FileGroupId) -> FileSlice | None:
        """The newest visible slice of one file group; None when the group is unknown, replaced or has no
        visible slice."""
        if group in self.replaced.by_group:
            return None
        slices = self._by_partition.get(group[0], {}).get(group[1], ())
        return self._latest(group, slices, self._commit_index(None), None)

    def log_files_from_latest(self, group: FileGroupId) -> tuple[LogFile, ...]:
        """Every log file of the group's newest visible slice and of any newer slice (one whose instant has not
        completed): what a write appended since that slice's base file, committed or not."""
        latest = self.latest_slice_of(group)
        if latest is None:
            return ()
        slices = self._by_partition.get(group[0], {}).get(group[1], ())
        return tuple(lf for sl in reversed(slices) if sl.base_instant >= latest.base_instant
                     for lf in sl.log_files)

    def latest_base_files(self, partition: str | None = None, as_of: str | None = None) -> list[BaseFile]:
        """The newest committed base file of every live file group (a read-optimized snapshot)."""
        index = self._commit_index(as_of)
        replaced = self.replaced.by_group
        out: list[BaseFile] = []
        for p in self._partition_keys(partition):
            for file_id, slices in sorted(self._by_partition.get(p, {}).items()):
                at = replaced.get((p, file_id))
                if at is not None and (as_of is None or at <= as_of):
                    continue
                bf = next((sl.base_file for sl in slices if sl.base_file is not None
                           and (as_of is None or sl.base_instant <= as_of)
                           and index.is_committed(sl.base_file.instant_time)), None)
                if bf is not None:
                    out.append(bf)
        return out

    def is_pending_clustering(self, group: FileGroupId) -> bool:
        return self.pending_clustering.instant_for(group) is not None

    def is_pending_compaction(self, group: FileGroupId) -> bool:
        """Whether a pending compaction or log compaction holds the group."""
        return self.pending_compaction.instant_for(group) is not None


def _slices(group: FileGroupId, bases: Iterable[BaseFile], logs: Iterable[LogFile], compaction: str | None,
            slicing: LogSlicing) -> tuple[FileSlice, ...]:
    """One group's slices, newest base instant first: its base files (the first listed of one instant), an empty
    slice at its pending compaction, then its log files in Hudi's order, each where ``slicing`` puts it."""
    base_of: dict[str, BaseFile | None] = {}
    for bf in bases:
        base_of.setdefault(bf.instant_time, bf)
    if compaction is not None:
        base_of.setdefault(compaction, None)
    logs_of: dict[str, list[LogFile]] = defaultdict(list)
    for lf in sorted(logs, key=lambda f: f.name.sort_key):
        key = slicing.slice_key(lf.name, sorted(base_of, reverse=True))
        base_of.setdefault(key, None)
        logs_of[key].append(lf)
    return tuple(FileSlice(group[0], group[1], key, base_of[key], tuple(logs_of.get(key, ())))
                 for key in sorted(base_of, reverse=True))
