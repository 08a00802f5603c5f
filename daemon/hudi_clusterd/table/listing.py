"""Listing a table: its partitions, base files and log files in one walk, the pending compactions on its timeline,
and the file-system view over them."""

from __future__ import annotations

from typing import NamedTuple

from hudi_clusterd.domain.compaction import PendingCompaction
from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.fs_view import FileSystemView, PendingClustering, ReplacedGroups
from hudi_clusterd.domain.instant import Action
from hudi_clusterd.domain.log_file import LogFile
from hudi_clusterd.domain.plan import PendingPlan
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.storage import Storage
from hudi_clusterd.table.partition_metadata import PARTITION_METAFILE
from hudi_clusterd.table.timeline_store import META_FOLDER, TimelineStore

_SKIP_DIRS = frozenset({META_FOLDER, "_delta_log"})


class Listing(NamedTuple):
    """What one walk of a table found: its partition paths (``""`` = non-partitioned), base files and log
    files."""

    partitions: list[str]
    base_files: list[BaseFile]
    log_files: list[LogFile]


class DataFiles(NamedTuple):
    """The base files and log files of some partitions."""

    base_files: list[BaseFile]
    log_files: list[LogFile]


def _classify(partition: str, name: str, size: int, out: DataFiles) -> bool:
    """Add a listed file to ``out`` when it is a base or log file; whether it was one."""
    bf = BaseFile.parse(partition, name, size)
    if bf is not None:
        out.base_files.append(bf)
        return True
    lf = LogFile.parse(partition, name, size)
    if lf is not None:
        out.log_files.append(lf)
        return True
    return False


def scan_files(storage: Storage) -> Listing:
    """One walk of the table: its partition paths (folders holding a partition metafile, base files or log
    files) and their data files. Each folder is listed once."""
    out = Listing([], [], [])
    stack = [""]
    while stack:
        rel = stack.pop()
        found = DataFiles([], [])
        is_partition = False
        for e in storage.list_dir(rel):
            if e.is_dir:
                if rel == "" and e.name in _SKIP_DIRS:
                    continue
                if not e.name.startswith("."):
                    stack.append(e.path)
                continue
            if e.name.startswith(PARTITION_METAFILE):
                is_partition = True
            if not _classify(rel, e.name, e.size, found) and e.name.endswith(".parquet"):
                is_partition = True
        if is_partition or found.base_files or found.log_files:
            out.partitions.append(rel)
            out.base_files.extend(found.base_files)
            out.log_files.extend(found.log_files)
    out.partitions.sort()
    return out


def list_data_files(storage: Storage, partitions: list[str]) -> DataFiles:
    """Base files and log files of the given partitions, each listed once."""
    out = DataFiles([], [])
    for partition in partitions:
        for e in storage.list_dir(partition):
            if not e.is_dir:
                _classify(partition, e.name, e.size, out)
    return out


def replaced_groups(store: TimelineStore, timeline: Timeline) -> ReplacedGroups:
    pairs = []
    for inst in timeline.replaces().completed():
        meta = store.commit_metadata(inst)
        pairs.append((inst.time, meta.partition_to_replace_file_ids or {}))
    return ReplacedGroups.from_instants(pairs)


def pending_compaction(store: TimelineStore, timeline: Timeline) -> PendingCompaction:
    """The file groups of the pending compactions and log compactions on ``timeline``, from their plans."""
    pending = timeline.pending()
    return PendingCompaction.from_plans(
        ((i.time, store.compaction_plan(i).group_ids()) for i in pending.of_actions([Action.COMPACTION])),
        ((i.time, store.compaction_plan(i).group_ids()) for i in pending.of_actions([Action.LOG_COMPACTION])))


def file_system_view(store: TimelineStore, timeline: Timeline, files: DataFiles, partitions: list[str] | None,
                     pending: list[PendingPlan]) -> FileSystemView:
    """The view of ``timeline`` over ``files`` (of ``partitions``), given its pending clustering plans; log files
    join slices by the table's layout (`TimelineLayout.log_slicing`)."""
    clustering = PendingClustering.from_plans((p.instant.time, p.plan.group_ids()) for p in pending)
    return FileSystemView(timeline, files.base_files, replaced_groups(store, timeline), clustering, partitions or (),
                          log_files=files.log_files, pending_compaction=pending_compaction(store, timeline),
                          slicing=store.layout.log_slicing(timeline))
