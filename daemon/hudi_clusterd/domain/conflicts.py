"""Has a plan's input moved since it was planned? One check, used when a plan is saved and when it commits.

A plan requires, for each input file group, that the group still has the slice it was planned with as its latest
committed slice, with the same log files (none for a slice planned without any, so that a log appended since,
committed or not, wins), that no completed replacecommit replaced it, that no other pending clustering plan
claims it, that no pending compaction or log compaction took it (one scheduled without the lock), and (at commit)
that no pending write is writing a new slice of it nor a write the merge of its log files did not read completed
meanwhile. `find_conflicts` checks these
requirements against a fresh `FileSystemView`; each `Conflict` names the file group, the slice the plan expected
and what is there now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from hudi_clusterd.domain.file_group import FileGroupId
from hudi_clusterd.domain.fs_view import FileSystemView
from hudi_clusterd.domain.plan import ClusteringPlan


class ConflictKind(Enum):
    NEWER_SLICE = "has a newer slice"
    GONE = "was replaced or removed"
    CLAIMED = "is claimed by another clustering plan"
    BEING_WRITTEN = "is being written by a pending instant"
    LOG_FILES = "has other log files than the plan read"
    COMPACTING = "is in a pending compaction plan"
    LATE_WRITE = "was written by a write completed after its log files were merged"


@dataclass(frozen=True, slots=True)
class SliceRequirement:
    """A file group a plan rewrites, the base instant of the slice it read and the names of that slice's log
    files."""

    group: FileGroupId
    base_instant: str
    log_files: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Conflict:
    """One requirement that no longer holds."""

    requirement: SliceRequirement
    kind: ConflictKind
    actual: str | None = None
    """The latest slice's base instant now, the instant claiming or writing the group, or its log files now."""

    @property
    def group(self) -> FileGroupId:
        return self.requirement.group

    def __str__(self) -> str:
        partition, file_id = self.requirement.group
        where = f"file group {file_id} ({partition or 'non-partitioned'})"
        planned = f"planned slice {self.requirement.base_instant}"
        if self.kind is ConflictKind.NEWER_SLICE:
            return f"{where} has a newer slice {self.actual} ({planned})"
        if self.kind is ConflictKind.LOG_FILES:
            return f"{where} {self.kind.value}: {self.actual or 'none'} ({planned})"
        if self.kind is ConflictKind.GONE:
            return f"{where} was replaced or removed ({planned})"
        return f"{where} {self.kind.value} {self.actual} ({planned})"


def requirements(plan: ClusteringPlan) -> tuple[SliceRequirement, ...]:
    """What ``plan`` needs to be still true when it is saved or committed."""
    return tuple(SliceRequirement(s.group_id, s.base_instant, s.log_file_names)
                 for g in plan.input_groups for s in g.slices)


def find_conflicts(required: Iterable[SliceRequirement], view: FileSystemView, *, own_instant: str | None = None,
                   pending_writes: Mapping[FileGroupId, str] | None = None,
                   late_writes: Mapping[FileGroupId, str] | None = None) -> list[Conflict]:
    """The requirements ``view`` breaks. ``own_instant`` is the plan's own instant (its claim is no conflict);
    ``pending_writes`` maps file groups to the pending instants writing them (from their markers);
    ``late_writes`` to the completed writes the merge of their log files did not apply."""
    writes = pending_writes or {}
    late = late_writes or {}
    out: list[Conflict] = []
    for req in required:
        claimed_by = view.pending_clustering.instant_for(req.group)
        latest = view.latest_slice_of(req.group)
        if claimed_by is not None and claimed_by != own_instant:
            out.append(Conflict(req, ConflictKind.CLAIMED, claimed_by))
        elif (compaction := view.pending_compaction.instant_for(req.group)) is not None:
            out.append(Conflict(req, ConflictKind.COMPACTING, compaction))
        elif latest is None:
            out.append(Conflict(req, ConflictKind.GONE))
        elif latest.base_instant != req.base_instant:
            out.append(Conflict(req, ConflictKind.NEWER_SLICE, latest.base_instant))
        elif (logs := {lf.file_name for lf in view.log_files_from_latest(req.group)}) != req.log_files:
            out.append(Conflict(req, ConflictKind.LOG_FILES, ", ".join(sorted(logs))))
        elif req.group in writes:
            out.append(Conflict(req, ConflictKind.BEING_WRITTEN, writes[req.group]))
        elif req.group in late:
            out.append(Conflict(req, ConflictKind.LATE_WRITE, late[req.group]))
    return out
