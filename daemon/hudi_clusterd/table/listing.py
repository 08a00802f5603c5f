"""Listing a table: its partitions and base files in one walk, and the file-system view over them."""

from __future__ import annotations

from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.fs_view import FileSystemView, PendingClustering, ReplacedGroups
from hudi_clusterd.domain.plan import PendingPlan
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.storage import Storage
from hudi_clusterd.table.partition_metadata import PARTITION_METAFILE
from hudi_clusterd.table.timeline_store import META_FOLDER, TimelineStore

_SKIP_DIRS = frozenset({META_FOLDER, "_delta_log"})


def scan_files(storage: Storage) -> tuple[list[str], list[BaseFile]]:
    """One walk of the table: its partition paths (folders holding a partition metafile or base files;
    ``""`` = non-partitioned) and their base files. Each folder is listed once."""
    partitions: list[str] = []
    files: list[BaseFile] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        found: list[BaseFile] = []
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
            bf = BaseFile.parse(rel, e.name, e.size)
            if bf is not None:
                found.append(bf)
            elif e.name.endswith(".parquet"):
                is_partition = True
        if is_partition or found:
            partitions.append(rel)
            files.extend(found)
    return sorted(partitions), files


def list_base_files(storage: Storage, partitions: list[str]) -> list[BaseFile]:
    """Base files of the given partitions, each listed once."""
    out: list[BaseFile] = []
    for partition in partitions:
        for e in storage.list_dir(partition):
            if not e.is_dir:
                bf = BaseFile.parse(partition, e.name, e.size)
                if bf is not None:
                    out.append(bf)
    return out


def replaced_groups(store: TimelineStore, timeline: Timeline) -> ReplacedGroups:
    pairs = []
    for inst in timeline.replaces().completed():
        meta = store.commit_metadata(inst)
        pairs.append((inst.time, meta.partition_to_replace_file_ids or {}))
    return ReplacedGroups.from_instants(pairs)


def file_system_view(store: TimelineStore, timeline: Timeline, base_files: list[BaseFile],
                     partitions: list[str] | None, pending: list[PendingPlan]) -> FileSystemView:
    """The view of ``timeline`` over ``base_files`` (of ``partitions``), given its pending clustering plans."""
    clustering = PendingClustering.from_plans((p.instant.time, p.plan.group_ids()) for p in pending)
    return FileSystemView(timeline, base_files, replaced_groups(store, timeline), clustering, partitions or ())
