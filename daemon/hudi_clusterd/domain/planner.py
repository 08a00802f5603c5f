"""Clustering planning: a pure function from a file-system view and a policy to a plan (or a reason why not).

The rules, as Hudi 0.14/0.15 apply them, and one step beyond:

- Trigger: completed commits since the last clustering (a completed or pending CLUSTER replacecommit) must reach
  ``hoodie.clustering.async.max.commits``; ``force`` skips this check.
- Eligibility: the latest committed slice of each live file group, base file smaller than
  ``small.file.limit``, group not in a pending clustering, compaction or log compaction plan.
  On merge-on-read tables (``merge_logs``) a slice's log files go into the plan with it (``deltaFilePaths``) and
  are merged when the plan runs, as Hudi does; narrower than Hudi, a slice with a log file of a pending write, or
  without a base file (a log-only slice), or whose merge would take more memory than
  ``hoodie.memory.merge.max.size``, is left out. Without ``merge_logs`` a slice with any log file is left out, so
  a plan rewrites base files only.
  Beyond Hudi: groups the caller names as hot (updated by the latest upserts) are left out too, so a plan does
  not claim groups that ingestion keeps rewriting (ingestion wins conflicts, which would drop the plan).
- Grouping, per partition (size-based strategy): largest first, groups up to ``max.bytes.per.group``,
  ``numOutputFileGroups = ceil(group bytes / target.file.max.bytes)``, at most ``max.num.groups`` over all
  partitions, a single-slice group only when sorting or single-group clustering is on.
- Beyond Hudi: with sort columns and per-file column ranges, slices whose ranges on the leading sort column
  overlap are grouped together (runs of overlapping ranges, in range order, split at the size cap), so one
  group's output does not overlap another's. A group made only of files that a clustering wrote, without log
  files, is skipped: rewriting it would change nothing, and re-running on an unchanged table (even with
  ``force``) must be a no-op. A clustering's output that has log files since is planned: merging them changes it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hudi_clusterd.domain.binpack import output_groups, pack_largest_first
from hudi_clusterd.domain.file_group import BaseFile, FileGroupId, FileSlice
from hudi_clusterd.domain.fs_view import FileSystemView
from hudi_clusterd.domain.log_file import LogFile
from hudi_clusterd.domain.partition_filter import select_partitions
from hudi_clusterd.domain.plan import (
    METRIC_IO_MB,
    METRIC_IO_READ_MB,
    METRIC_IO_WRITE_MB,
    METRIC_LOG_FILES,
    METRIC_LOG_FILES_SIZE,
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    SliceInfo,
)
from hudi_clusterd.domain.policy import ClusteringPolicy, PlanStrategy

MB = 1024.0 * 1024.0
PLANNED_AGAINST_KEY = "hudi-clusterd.planned.against.instant"
SCHEDULER_KEY = "hudi-clusterd.scheduler"
"""Plan ``extraMetadata`` key stamping a plan as scheduled by hudi-clusterd (value ``SCHEDULER``)."""
SCHEDULER = "hudi-clusterd"


def scheduled_by_us(plan: ClusteringPlan) -> bool:
    """Whether hudi-clusterd scheduled ``plan`` (its stamp, or the planning key it has always written): only such
    plans are executed by the daemon and recovered after a crash; others belong to the writer that scheduled
    them (Apache Hudi rolls back and re-runs its own inflight plans without heartbeats)."""
    return plan.extra_metadata.get(SCHEDULER_KEY) == SCHEDULER or PLANNED_AGAINST_KEY in plan.extra_metadata

ColumnRange = tuple[Any, Any]
"""(min, max) of one column in one base file; None when the column holds only nulls."""
RangeLookup = Callable[[BaseFile], ColumnRange | None]
UriOf = Callable[[BaseFile | LogFile], str]
"""A data file's full path with scheme, as Hudi records it in a plan."""


@dataclass(frozen=True, slots=True)
class TriggerDecision:
    """Whether enough commits have accumulated since the last clustering."""

    commits_since: int
    needed: int
    last_clustering: str | None
    forced: bool = False

    @property
    def fire(self) -> bool:
        return self.forced or self.commits_since >= self.needed

    def explain(self) -> str:
        since = f"since the last clustering ({self.last_clustering})" if self.last_clustering else \
            "since the table was created (never clustered)"
        noun = "commit" if self.commits_since == 1 else "commits"
        return f"{self.commits_since} {noun} {since}, {self.needed} needed"


def trigger(commits_since: int, last_clustering: str | None, policy: ClusteringPolicy,
            force: bool = False) -> TriggerDecision:
    return TriggerDecision(commits_since, policy.async_max_commits, last_clustering, force)


@dataclass(frozen=True, slots=True)
class PlanningResult:
    """A plan, or None with the reason; plus what was looked at (for dry runs and logs)."""

    plan: ClusteringPlan | None
    reason: str
    partitions_considered: int = 0
    eligible_slices: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)


MERGE_MEMORY_PER_BYTE = 4
"""Memory a slice's merge takes per byte of its base and log files (decoded Arrow, the key index, the output)."""


def merge_memory(sl: FileSlice) -> int:
    """About the memory a Spark task takes to merge ``sl`` (`MERGE_MEMORY_PER_BYTE` times its files' bytes)."""
    return MERGE_MEMORY_PER_BYTE * (sl.size + sum(lf.size for lf in sl.log_files))


def eligible_slices(
    view: FileSystemView, partitions: Sequence[str], policy: ClusteringPolicy, skipped: dict[str, int],
    hot_groups: Collection[FileGroupId] = (), unsettled_groups: Collection[FileGroupId] = (), *,
    merge_logs: bool = False,
) -> dict[str, list[FileSlice]]:
    """Latest committed, small, unclaimed, not hot and settled slices with a base file per partition: without
    log files, or (``merge_logs``) with log files of completed writes only."""
    out: dict[str, list[FileSlice]] = {}
    wanted = set(partitions)
    hot = set(hot_groups)
    unsettled = set(unsettled_groups)
    pending = set(view.timeline.pending().times())
    for sl in view.latest_file_slices():
        if sl.partition_path not in wanted:
            continue
        if sl.size >= policy.small_file_limit:
            skipped["not small"] = skipped.get("not small", 0) + 1
        elif view.is_pending_clustering(sl.group_id):
            skipped["in a pending clustering plan"] = skipped.get("in a pending clustering plan", 0) + 1
        elif view.is_pending_compaction(sl.group_id):
            skipped["in a pending compaction plan"] = skipped.get("in a pending compaction plan", 0) + 1
        elif sl.base_file is None:
            skipped["no base file"] = skipped.get("no base file", 0) + 1
        elif (logs := view.log_files_from_latest(sl.group_id)) and not merge_logs:
            skipped["has log files"] = skipped.get("has log files", 0) + 1
        elif any(lf.name.base_instant in pending for lf in logs) or logs != sl.log_files:
            skipped["log files being written"] = skipped.get("log files being written", 0) + 1
        elif logs and merge_memory(sl) > policy.merge_max_memory:
            skipped["merge over hoodie.memory.merge.max.size"] = \
                skipped.get("merge over hoodie.memory.merge.max.size", 0) + 1
        elif sl.group_id in hot:
            skipped["recently updated (hot)"] = skipped.get("recently updated (hot)", 0) + 1
        elif sl.group_id in unsettled:
            skipped["written while the table was listed"] = skipped.get("written while the table was listed", 0) + 1
        else:
            out.setdefault(sl.partition_path, []).append(sl)
    return out


def _overlap_groups(slices: list[FileSlice], ranges: RangeLookup, max_bytes: int) -> list[list[FileSlice]]:
    """Runs of slices whose leading-column ranges overlap, in range order, cut at the size cap.

    Slices without a range (no statistics, all nulls) form their own run at the front (nulls sort first)."""
    ranged: list[tuple[Any, Any, FileSlice]] = []
    unranged: list[FileSlice] = []
    for sl in slices:
        r = ranges(sl.base_file) if sl.base_file is not None else None
        if r is None or r[0] is None or r[1] is None:
            unranged.append(sl)
        else:
            ranged.append((r[0], r[1], sl))
    ranged.sort(key=lambda item: (item[0], item[1], item[2].file_id))
    runs: list[list[FileSlice]] = [unranged] if unranged else []
    current: list[FileSlice] = []
    current_max: Any = None
    for lo, hi, sl in ranged:
        if current and lo > current_max:
            runs.append(current)
            current, current_max = [], None
        current.append(sl)
        current_max = hi if current_max is None or hi > current_max else current_max
    if current:
        runs.append(current)
    # Adjacent runs share a group while it fits; a run larger than the cap is cut in range order.
    groups: list[list[FileSlice]] = []
    group: list[FileSlice] = []
    group_bytes = 0
    for run in runs:
        for sl in run:
            if group and group_bytes + sl.size > max_bytes:
                groups.append(group)
                group, group_bytes = [], 0
            group.append(sl)
            group_bytes += sl.size
        # close the group at a run boundary once it is at least half full, keeping ranges apart
        if group and group_bytes * 2 >= max_bytes:
            groups.append(group)
            group, group_bytes = [], 0
    if group:
        groups.append(group)
    return groups


def build_partition_groups(
    slices: list[FileSlice],
    policy: ClusteringPolicy,
    ranges: RangeLookup | None,
    clustered_instants: Collection[str],
) -> list[list[FileSlice]]:
    """Groups for one partition, before the plan-wide group cap."""
    if policy.plan_strategy is PlanStrategy.SINGLE_FILE_SORT:
        return [[sl] for sl in sorted(slices, key=lambda s: (-s.size, s.file_id))]
    if policy.sort_columns and ranges is not None:
        groups = _overlap_groups(slices, ranges, policy.max_bytes_per_group)
        groups.sort(key=lambda g: -sum(s.size for s in g))
        groups = groups[: policy.max_num_groups]
    else:
        groups = pack_largest_first(slices, lambda s: s.size, policy.max_bytes_per_group, policy.max_num_groups)
    single_ok = bool(policy.sort_columns) or policy.single_group_clustering_enabled
    kept: list[list[FileSlice]] = []
    for g in groups:
        if len(g) == 1 and not single_ok:
            continue
        if all(s.base_instant in clustered_instants and not s.log_files for s in g):
            continue  # only clustering output: rewriting it again gains nothing and breaks idempotence
        kept.append(g)
    return kept


def clustering_group(slices: list[FileSlice], policy: ClusteringPolicy, uri_of: UriOf) -> ClusteringGroup:
    """One clustering group over ``slices``: each slice with its base file and its log files (`SliceInfo`: full
    paths, as Hudi writes them); its metrics count the base files' bytes and the log files' number and bytes."""
    total = sum(s.size for s in slices)
    mb = total / MB
    logs = [lf for s in slices for lf in s.log_files]
    metrics = {METRIC_IO_READ_MB: mb, METRIC_IO_WRITE_MB: mb, METRIC_IO_MB: 2 * mb,
               METRIC_LOG_FILES_SIZE: float(sum(lf.size for lf in logs)), METRIC_LOG_FILES: float(len(logs))}
    n_out = 1 if policy.plan_strategy is PlanStrategy.SINGLE_FILE_SORT else \
        output_groups(total, policy.target_file_max_bytes)
    infos = tuple(SliceInfo(s.file_id, s.partition_path, "" if s.base_file is None else uri_of(s.base_file),
                            tuple(uri_of(lf) for lf in s.log_files), base_instant=s.base_instant)
                  for s in slices)
    return ClusteringGroup(infos, n_out, metrics)


def plan_clustering(
    view: FileSystemView,
    policy: ClusteringPolicy,
    now: datetime,
    uri_of: UriOf,
    *,
    ranges: RangeLookup | None = None,
    clustered_instants: Collection[str] = (),
    hot_groups: Collection[FileGroupId] = (),
    unsettled_groups: Collection[FileGroupId] = (),
    merge_logs: bool = False,
) -> PlanningResult:
    """Build a clustering plan over ``view`` (the trigger is checked by the caller).

    ``uri_of`` gives a data file's full path with scheme (what Hudi records in ``dataFilePath`` and
    ``deltaFilePaths``); ``ranges``
    gives the leading sort column's (min, max) per base file, from parquet footers; ``clustered_instants`` are
    the times of completed clustering instants (their single files are not rewritten alone); ``hot_groups`` are
    file groups recent upserts updated, and ``unsettled_groups`` those whose newest slice the listing missed, both
    left out of the plan; ``merge_logs``: slices with log files are planned with them (a merge-on-read table)."""
    partitions = select_partitions(view.partitions(), policy, now)
    if not partitions:
        return PlanningResult(None, "no partition passes the partition filters")
    skipped: dict[str, int] = {}
    by_partition = eligible_slices(view, partitions, policy, skipped, hot_groups, unsettled_groups,
                                   merge_logs=merge_logs)
    n_eligible = sum(len(v) for v in by_partition.values())
    if n_eligible == 0:
        detail = ", ".join(f"{n} {why}" for why, n in sorted(skipped.items())) or "no file slices"
        return PlanningResult(None, f"no eligible file slices ({detail})", len(partitions), 0, skipped)
    groups: list[ClusteringGroup] = []
    for partition in partitions:
        slices = by_partition.get(partition)
        if not slices:
            continue
        for g in build_partition_groups(slices, policy, ranges, clustered_instants):
            groups.append(clustering_group(g, policy, uri_of))
            if len(groups) >= policy.max_num_groups:
                break
        if len(groups) >= policy.max_num_groups:
            break
    if not groups:
        reason = (f"{n_eligible} eligible file slices, but no group has more than one slice (or it holds only "
                  "clustering output already)")
        return PlanningResult(None, reason, len(partitions), n_eligible, skipped)
    last = view.timeline.last_time()
    extra = {SCHEDULER_KEY: SCHEDULER, **({PLANNED_AGAINST_KEY: last} if last else {})}
    plan = ClusteringPlan(
        tuple(groups),
        ClusteringStrategy(policy.execution_strategy_class, policy.strategy_params()),
        extra,
    )
    summary = f"{len(groups)} groups, {plan.num_slices} slices, {plan.input_bytes / MB:.1f} MB"
    return PlanningResult(plan, summary, len(partitions), n_eligible, skipped)


def drop_groups(plan: ClusteringPlan, lost: Collection[FileGroupId]) -> ClusteringPlan | None:
    """The plan without every clustering group that touches a lost file group; None when nothing is left."""
    lost_set = set(lost)
    if not lost_set:
        return plan
    kept = tuple(g for g in plan.input_groups if not lost_set.intersection(g.group_ids()))
    if not kept:
        return None
    return ClusteringPlan(kept, plan.strategy, plan.extra_metadata, plan.version, plan.preserve_hoodie_metadata)
