"""The file-system view: which base files make up a snapshot, as Hudi's readers resolve it.

Built from a storage listing plus the timeline:
1. base files are grouped into file groups by ``(partition path, file id)``;
2. a slice is visible only if its base instant is committed (completed, or older than the active timeline);
3. file groups replaced by a completed replacecommit are dropped (as of the query time);
4. file groups claimed by a pending clustering plan are tracked so the planner leaves them alone. They stay
   visible to readers until the replacecommit completes.

A copy-on-write table (the only type the daemon opens) has no compaction, so no file group is claimed by one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hudi_clusterd.domain.file_group import BaseFile, FileGroup, FileGroupId, FileSlice
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
    ) -> None:
        self.timeline = timeline
        self.replaced = replaced or ReplacedGroups()
        self.pending_clustering = pending_clustering or PendingClustering()
        # partition -> file id -> base files (newest first once finalised); no per-file objects beyond BaseFile
        by_partition: dict[str, dict[str, list[BaseFile]]] = defaultdict(dict)
        for bf in base_files:
            files = by_partition[bf.partition_path].get(bf.file_id)
            if files is None:
                by_partition[bf.partition_path][bf.file_id] = [bf]
            else:
                files.append(bf)
        for groups in by_partition.values():
            for files in groups.values():
                if len(files) > 1:
                    files.sort(key=lambda f: f.instant_time, reverse=True)
        self._by_partition = by_partition
        self._partitions = sorted(set(partitions) | set(by_partition))
        self._latest_index: CommitIndex | None = None

    def partitions(self) -> list[str]:
        """Every partition that has a base file or was listed as a partition folder."""
        return list(self._partitions)

    def _partition_keys(self, partition: str | None) -> list[str]:
        return self._partitions if partition is None else [partition]

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        """All file groups (replaced ones included), ordered by partition then file id."""
        out: list[FileGroup] = []
        for p in self._partition_keys(partition):
            groups = self._by_partition.get(p, {})
            for file_id in sorted(groups):
                out.append(FileGroup(p, file_id, tuple(FileSlice(bf) for bf in groups[file_id])))
        return out

    def file_group(self, group: FileGroupId) -> FileGroup | None:
        files = self._by_partition.get(group[0], {}).get(group[1])
        return None if files is None else FileGroup(group[0], group[1], tuple(FileSlice(bf) for bf in files))

    def _commit_index(self, as_of: str | None) -> CommitIndex:
        if as_of is None:
            if self._latest_index is None:
                self._latest_index = CommitIndex.of(self.timeline)
            return self._latest_index
        return CommitIndex.of(self.timeline.up_to(as_of))

    def latest_file_slices(self, partition: str | None = None, as_of: str | None = None) -> list[FileSlice]:
        """The newest committed slice of every live (not replaced) file group, optionally as of an instant.

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
                for bf in groups[file_id]:
                    if as_of is not None and bf.instant_time > as_of:
                        continue
                    if index.is_committed(bf.instant_time):
                        out.append(FileSlice(bf))
                        break
        return out

    def latest_slice_of(self, group: FileGroupId) -> FileSlice | None:
        """The newest committed slice of one file group; None when the group is unknown, replaced or has no
        committed slice."""
        if group in self.replaced.by_group:
            return None
        index = self._commit_index(None)
        for bf in self._by_partition.get(group[0], {}).get(group[1], ()):
            if index.is_committed(bf.instant_time):
                return FileSlice(bf)
        return None

    def latest_base_files(self, partition: str | None = None, as_of: str | None = None) -> list[BaseFile]:
        return [sl.base_file for sl in self.latest_file_slices(partition, as_of)]

    def is_pending_clustering(self, group: FileGroupId) -> bool:
        return self.pending_clustering.instant_for(group) is not None
