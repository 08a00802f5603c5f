"""What a table's timeline says about clustering: its pending plans, its last clustering, the writers' latest
schema and the commits since the last clustering."""

from __future__ import annotations

from hudi_clusterd.domain.file_group import join_partition
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import ClusteringPlan, PendingPlan
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.errors import MetadataDecodeError, StorageError
from hudi_clusterd.storage import Storage
from hudi_clusterd.table.timeline_store import TimelineStore


def pending_clustering_plans(store: TimelineStore, timeline: Timeline) -> list[PendingPlan]:
    """Pending (requested or inflight) replacecommits whose requested file is a clustering plan.

    Every slice's base file and log files must lie inside the table, in the slice's partition; a plan naming any
    other path is refused (``MetadataDecodeError`` naming its file): ``hudi-clusterd rollback --purge`` removes it."""
    out: list[PendingPlan] = []
    for inst in timeline.replaces().pending():
        meta = store.requested_replace(inst.time)
        if meta is not None and meta.is_clustering and meta.clustering_plan is not None:
            _check_plan_paths(store, inst, meta.clustering_plan)
            out.append(PendingPlan(inst, meta.clustering_plan))
    return out


def _check_plan_paths(store: TimelineStore, inst: Instant, plan: ClusteringPlan) -> None:
    storage: Storage = store.storage
    for s in (s for g in plan.input_groups for s in g.slices):
        paths = ([("base", s.data_file_path)] if s.data_file_path else []) + [("log", p) for p in s.delta_file_paths]
        wrong = ""
        for kind, path in paths:
            try:
                rel = storage.rel_from_uri(path)
                if rel != join_partition(s.partition_path, path.rsplit("/", 1)[-1]):
                    wrong = f"names {kind} file {path!r}, which is not in the table's partition {s.partition_path!r}"
            except StorageError as e:
                wrong = str(e)
            if wrong:
                break
        if wrong:
            source = storage.full_path(store.path(inst.with_state(State.REQUESTED)))
            raise MetadataDecodeError(f"{source}: slice {s.file_id}: {wrong}; the plan is refused (remove it with "
                                      f"hudi-clusterd rollback --instant {inst.time} --purge)")


def is_clustering_instant(store: TimelineStore, inst: Instant) -> bool:
    """Whether a replace instant is clustering: its completed metadata or its requested plan says CLUSTER."""
    if inst.action is Action.CLUSTERING:
        return True
    if inst.action is not Action.REPLACE_COMMIT:
        return False
    if inst.is_completed:
        return store.commit_metadata(inst).operation_type == "CLUSTER"
    meta = store.requested_replace(inst.time)
    return meta is not None and meta.is_clustering


def last_clustering_time(store: TimelineStore, timeline: Timeline) -> str | None:
    """The newest completed or pending clustering instant (Hudi 0.15 semantics)."""
    for inst in reversed(timeline.replaces().instants):
        if is_clustering_instant(store, inst):
            return inst.time
    return None


def latest_schema(store: TimelineStore, timeline: Timeline, create_schema: str | None) -> str | None:
    """The writer's Avro schema (``extraMetadata.schema``) of the newest completed write that may change it,
    else ``create_schema``. Clustering and compaction commits are skipped, as Hudi does (they cannot change the
    schema)."""
    for inst in reversed(timeline.commits().completed().instants):
        meta = store.commit_metadata(inst)
        if meta.operation_type in ("CLUSTER", "COMPACT", "LOG_COMPACT", "INDEX"):
            continue
        if meta.schema:
            return meta.schema
    return create_schema


def commits_since_last_clustering(store: TimelineStore, timeline: Timeline) -> int:
    return timeline.commits_since(last_clustering_time(store, timeline))
