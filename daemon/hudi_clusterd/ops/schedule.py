"""Scheduling: decide whether to cluster, build the plan, and save it as ``<T>.replacecommit.requested``.

The table is listed outside the lock, and the footers of its small files are read there too (each file once per
table object: base files never change; a footer the storage fails to read raises its `StorageError` before anything
is decided, see `table.footers`). The decision is made first without the lock: most calls find that the
trigger does not fire, or that nothing is eligible, and return without ever taking it, so the writers beside an
idle daemon never wait for it. Only when a plan would be made is the table lock taken: the timeline is listed
again, the `TableSnapshot` built, the trigger checked, the plan made (pure, in memory), checked with
`domain.conflicts` against the snapshot, and saved with a fresh instant time; when asked, the new plan is claimed
for execution in the same lock hold. Nothing else is read under the lock, so ingestion is never held up for
longer than planning takes.

A decision made without the lock is the decision a locked call would have made a moment earlier, before any
instant it did not see: such an instant wakes the daemon again, and the next call sees it.

File groups that the last ``hot_commits`` completed ingestion commits updated (write stats with
``numUpdateWrites`` > 0) are hot and left out of the plan: ingestion wins conflicts with clustering, so planning
them would most likely only get the plan rolled back. They become eligible again once that many commits have
passed without updating them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

import structlog

from hudi_clusterd.domain.conflicts import find_conflicts, requirements
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import ClusteringPlan, PendingPlan, RequestedReplaceMetadata
from hudi_clusterd.domain.planner import (
    PlanningResult,
    RangeLookup,
    TriggerDecision,
    drop_groups,
    plan_clustering,
    trigger,
)
from hudi_clusterd.domain.policy import ClusteringKey, ClusteringPolicy
from hudi_clusterd.domain.sort_columns import avro_column_kinds, sort_column_problems
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.errors import ConfigError, InstantCollisionError
from hudi_clusterd.ops.ownership import Claim, Ownership
from hudi_clusterd.ops.snapshot import TableSnapshot
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.listing import Listing, pending_compaction

log = structlog.get_logger(__name__)

DEFAULT_HOT_COMMITS = 2


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    """What ``schedule`` did: the snapshot it decided on, the trigger, the planning, and the saved plan (None on a
    dry run or when nothing was planned) with its claim when one was asked for."""

    snapshot: TableSnapshot
    trigger: TriggerDecision
    planning: PlanningResult | None
    pending: PendingPlan | None = None
    claim: Claim | None = None

    @property
    def instant(self) -> str | None:
        return self.pending.time if self.pending else None

    @property
    def plan(self) -> ClusteringPlan | None:
        return self.planning.plan if self.planning else None

    @property
    def reason(self) -> str:
        if not self.trigger.fire:
            return self.trigger.explain()
        assert self.planning is not None
        return self.planning.reason


def check_sort_columns(snapshot: TableSnapshot, policy: ClusteringPolicy) -> None:
    """Refuse sort columns the table's schema cannot order by (missing, or nested values), naming the key."""
    if not policy.sort_columns:
        return
    schema = snapshot.schema()
    kinds = avro_column_kinds(schema) if schema else None
    if kinds is None:
        return  # never written: nothing to plan either
    problems = sort_column_problems(policy.sort_columns, kinds, key=ClusteringKey.SORT_COLUMNS.value)
    if problems:
        raise ConfigError(f"sort columns do not match the schema of {snapshot.table.base_path}", problems)


TIME_ATTEMPTS = 3


def _save(table: HoodieTable, snapshot: TableSnapshot, data: bytes) -> Instant:
    """Create the requested plan with a fresh instant time; when another writer took the same time for another
    action meanwhile (ingestion takes its times without the lock), withdraw it and take the next time."""
    after = snapshot.timeline
    for _ in range(TIME_ATTEMPTS):
        requested = Instant(table.new_instant_time(after), Action.CLUSTERING, State.REQUESTED)
        table.timeline_store.create(requested, data)
        taken = table.instant_time_taken(requested.time)
        if taken is None:
            return requested
        table.timeline_store.delete(requested)
        log.warning("instant time taken by another writer; taking the next one", instant=requested.time, by=taken)
        after = Timeline.from_states([*after, requested])
    raise InstantCollisionError(f"{table.base_path}: {TIME_ATTEMPTS} instant times in a row were taken by another "
                                "writer while the plan was saved; try again")


def _check_compactions(table: HoodieTable, plan: ClusteringPlan, instant: str) -> None:
    """Warn when a compaction that another writer scheduled without the table lock took planned file groups
    (Hudi's compactor leaves out groups of a pending clustering only once it sees the plan): the commit leaves
    them out (`domain.conflicts`)."""
    if not table.config.merge_on_read:
        return
    compacting = pending_compaction(table.timeline_store, table.timeline())
    taken = sorted({t for g in plan.group_ids() if (t := compacting.instant_for(g)) is not None})
    if taken:
        log.warning("compactions scheduled beside the plan took some of its file groups; they are left out at the "
                    "commit", instant=instant, compactions=taken)


def _decide(table: HoodieTable, listing: Listing, policy: ClusteringPolicy, *, force: bool, now: datetime,
            hot_commits: int, ranges: RangeLookup | None) -> ScheduleResult:
    """Read the timeline, check the trigger and plan (nothing saved)."""
    snapshot = TableSnapshot.load(table, listing)
    last = snapshot.last_clustering
    decision = trigger(snapshot.timeline.commits_since(last), last, policy, force)
    if not decision.fire:
        return ScheduleResult(snapshot, decision, None)
    check_sort_columns(snapshot, policy)
    planning = plan_clustering(snapshot.view, policy, now, table.base_file_uri, ranges=ranges,
                               clustered_instants=snapshot.clustered_instants(),
                               hot_groups=snapshot.hot_groups(hot_commits), unsettled_groups=snapshot.unsettled,
                               merge_logs=table.config.merge_on_read)
    return ScheduleResult(snapshot, decision, planning)


def schedule(
    table: HoodieTable,
    policy: ClusteringPolicy,
    *,
    force: bool = False,
    dry_run: bool = False,
    now: datetime | None = None,
    hot_commits: int = DEFAULT_HOT_COMMITS,
    claim_with: Ownership | None = None,
) -> ScheduleResult:
    """Plan clustering for ``table`` and save the plan unless ``dry_run``; see the module docstring."""
    now = now or datetime.now(UTC)
    table.check_clusterable()
    listing = table.scan_files()
    ranges: RangeLookup | None = None
    if policy.sort_columns:
        small = [bf for bf in listing[1] if bf.size < policy.small_file_limit]
        found = table.footer_ranges.ranges(small, policy.sort_columns[0])
        ranges = lambda bf: found.get(bf.relative_path)  # noqa: E731
    decide = partial(_decide, table, listing, policy, force=force, now=now, hot_commits=hot_commits, ranges=ranges)
    glance = decide()
    if dry_run or glance.plan is None:
        return glance
    with table.lock():
        decided = decide()
        snapshot, decision, planning = decided.snapshot, decided.trigger, decided.planning
        if planning is None or planning.plan is None:
            return decided
        lost = {c.group for c in find_conflicts(requirements(planning.plan), snapshot.view)}
        plan = drop_groups(planning.plan, lost)
        if plan is None:
            reason = "every planned file group moved while it was planned"
            return ScheduleResult(snapshot, decision, PlanningResult(None, reason))
        table.check_writer_zones(snapshot.meta_files)
        requested = _save(table, snapshot,
                          table.timeline_store.serde.encode_plan(RequestedReplaceMetadata.for_plan(plan)))
        log.info("clustering plan saved", instant=requested.time, groups=len(plan.input_groups),
                 slices=plan.num_slices, input_bytes=plan.input_bytes)
        _check_compactions(table, plan, requested.time)
        pending = PendingPlan(requested, plan)
        claim = claim_with.claim(table, pending, locked=True) if claim_with is not None else None
    if plan is not planning.plan:
        planning = PlanningResult(plan, planning.reason + " (some groups dropped: they moved while planned)",
                                  planning.partitions_considered, planning.eligible_slices, planning.skipped)
    return ScheduleResult(snapshot, decision, planning, pending, claim)
