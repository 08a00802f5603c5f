"""Scheduling: decide whether to cluster, build the plan, and save it as ``<T>.replacecommit.requested``.

The plan is computed outside the table lock (listing and footer reads can take a while); under the lock the
timeline is reloaded, groups that another plan claimed or a commit touched meanwhile are dropped, and the
requested instant is created with a fresh instant time. Ingestion is never held up for more than that.

File groups that the last ``hot_commits`` completed ingestion commits updated (write stats with
``numUpdateWrites`` > 0) are hot and left out of the plan: ingestion wins conflicts with clustering, so planning
them would most likely only get the plan rolled back. They become eligible again once that many commits have
passed without updating them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from hudi_clusterd.domain.file_group import FileGroupId
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import ClusteringPlan, RequestedReplaceMetadata
from hudi_clusterd.domain.planner import (
    PlanningResult,
    TriggerDecision,
    drop_groups,
    lost_file_groups,
    plan_clustering,
    trigger,
)
from hudi_clusterd.domain.policy import ClusteringPolicy
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.io.avro import encode_requested_replace
from hudi_clusterd.io.footers import column_ranges
from hudi_clusterd.io.table import HoodieTable

log = structlog.get_logger(__name__)

DEFAULT_HOT_COMMITS = 2


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    """What ``schedule`` did: the saved instant (None on a dry run or when nothing was planned) and why."""

    trigger: TriggerDecision
    planning: PlanningResult | None
    instant: str | None = None

    @property
    def plan(self) -> ClusteringPlan | None:
        return self.planning.plan if self.planning else None

    @property
    def reason(self) -> str:
        if not self.trigger.fire:
            return self.trigger.explain()
        assert self.planning is not None
        return self.planning.reason


def schema_columns(table: HoodieTable) -> list[str] | None:
    """Top-level column names of the table's current schema, or None when no schema is known yet."""
    import json

    schema = table.latest_schema()
    if not schema:
        return None
    try:
        return [str(f["name"]) for f in json.loads(schema).get("fields", [])]
    except (ValueError, AttributeError, KeyError, TypeError):
        return None


def hot_file_groups(table: HoodieTable, timeline: Timeline, last_commits: int) -> set[FileGroupId]:
    """File groups updated (``numUpdateWrites`` > 0) by the last ``last_commits`` completed ingestion commits."""
    out: set[FileGroupId] = set()
    if last_commits <= 0:
        return out
    for inst in timeline.of_actions([Action.COMMIT]).completed().instants[-last_commits:]:
        for ws in table.timeline_store.commit_metadata(inst).write_stats():
            if ws.num_update_writes > 0 and ws.file_id:
                out.add((ws.partition_path or "", ws.file_id))
    return out


def schedule(
    table: HoodieTable,
    policy: ClusteringPolicy,
    *,
    force: bool = False,
    dry_run: bool = False,
    now: datetime | None = None,
    hot_commits: int = DEFAULT_HOT_COMMITS,
) -> ScheduleResult:
    """Plan clustering for ``table`` and save the plan unless ``dry_run``; see the module docstring."""
    now = now or datetime.now(UTC)
    timeline = table.timeline()
    last = table.last_clustering_time(timeline)
    decision = trigger(timeline.commits_since(last), last, policy, force)
    if not decision.fire:
        return ScheduleResult(decision, None)
    if policy.sort_columns:
        columns = schema_columns(table)
        if columns is not None:
            policy.validate_against_schema(columns)
    view = table.file_system_view(timeline)
    ranges = None
    if policy.sort_columns:
        candidates = [sl.base_file for sl in view.latest_file_slices() if sl.size < policy.small_file_limit]
        found = column_ranges(table.storage, candidates, policy.sort_columns[0])
        ranges = lambda bf: found.get(bf.group_id)  # noqa: E731
    clustered = {i.time for i in timeline.of_actions([Action.REPLACE_COMMIT]).completed()
                 if table.is_clustering_instant(i)}
    hot = hot_file_groups(table, timeline, hot_commits)
    planning = plan_clustering(view, policy, now, table.base_file_uri, ranges=ranges, clustered_instants=clustered,
                               hot_groups=hot)
    if planning.plan is None or dry_run:
        return ScheduleResult(decision, planning)
    with table.lock():
        fresh = table.timeline()
        fresh_view = table.file_system_view(fresh)
        plan = drop_groups(planning.plan, lost_file_groups(planning.plan, fresh_view))
        if plan is None:
            reason = "every planned file group was claimed or rewritten concurrently"
            return ScheduleResult(decision, PlanningResult(None, reason))
        instant_time = table.new_instant_time(fresh)
        requested = Instant(instant_time, Action.REPLACE_COMMIT, State.REQUESTED)
        table.timeline_store.create(requested, encode_requested_replace(RequestedReplaceMetadata.for_plan(plan)))
    if plan is not planning.plan:
        planning = PlanningResult(plan, planning.reason + " (some groups dropped: touched concurrently)",
                                  planning.partitions_considered, planning.eligible_slices, planning.skipped)
    log.info("clustering plan saved", instant=instant_time, groups=len(plan.input_groups),
             slices=plan.num_slices, input_bytes=plan.input_bytes)
    return ScheduleResult(decision, planning, instant_time)
