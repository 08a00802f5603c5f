"""Has a plan's input moved? One check, naming the file group, the planned slice and what is there now."""

from __future__ import annotations

from hudi_clusterd.domain.compaction import PendingCompaction
from hudi_clusterd.domain.conflicts import ConflictKind, find_conflicts, requirements
from hudi_clusterd.domain.fs_view import FileSystemView, PendingClustering, ReplacedGroups
from hudi_clusterd.domain.plan import ClusteringGroup, ClusteringPlan, ClusteringStrategy, SliceInfo
from hudi_clusterd.formats.log import MergeMode, MergeRule, SliceMerge
from tests.builders import make_base_file, make_timeline

T1, T2, T3, PLAN, OTHER = ("20240101000000001", "20240101000000002", "20240101000000003", "20240101000000004",
                           "20240101000000005")


def _plan(*groups: str) -> ClusteringPlan:
    slices = tuple(SliceInfo(g, "p", f"file:/t/p/{g}_0-1-1_{T1}.parquet") for g in groups)
    return ClusteringPlan((ClusteringGroup(slices),), ClusteringStrategy("x"))


def _view(*, newer: str = "", replaced: str = "", claimed: str = "") -> FileSystemView:
    files = [make_base_file("p", g, T1) for g in ("a", "b", "c")]
    if newer:
        files.append(make_base_file("p", newer, T2))
    pending = [(PLAN, [("p", "a"), ("p", "b"), ("p", "c")])]
    if claimed:
        pending = [(PLAN, [("p", g) for g in "abc" if g != claimed]), (OTHER, [("p", claimed)])]
    return FileSystemView(make_timeline(T1, T2, T3), files,
                          ReplacedGroups.from_instants([(T3, {"p": [replaced]})] if replaced else []),
                          PendingClustering.from_plans(pending))


def test_requirements_carry_each_slice_base_instant() -> None:
    reqs = requirements(_plan("a", "b"))
    assert [(r.group, r.base_instant) for r in reqs] == [(("p", "a"), T1), (("p", "b"), T1)]


def test_no_conflict_when_nothing_moved_and_the_plan_claims_its_own_groups() -> None:
    assert find_conflicts(requirements(_plan("a", "b", "c")), _view(), own_instant=PLAN) == []


def test_each_kind_of_move_is_named() -> None:
    reqs = requirements(_plan("a", "b", "c"))
    newer = find_conflicts(reqs, _view(newer="a"), own_instant=PLAN)
    assert [(c.group, c.kind, c.actual) for c in newer] == [(("p", "a"), ConflictKind.NEWER_SLICE, T2)]
    assert str(newer[0]) == f"file group a (p) has a newer slice {T2} (planned slice {T1})"
    gone = find_conflicts(reqs, _view(replaced="b"), own_instant=PLAN)
    assert [(c.group, c.kind) for c in gone] == [(("p", "b"), ConflictKind.GONE)]
    claimed = find_conflicts(reqs, _view(claimed="c"), own_instant=PLAN)
    assert [(c.group, c.kind, c.actual) for c in claimed] == [(("p", "c"), ConflictKind.CLAIMED, OTHER)]
    assert "claimed by another clustering plan 20240101000000005" in str(claimed[0])
    written = find_conflicts(reqs, _view(), own_instant=PLAN, pending_writes={("p", "b"): T3})
    assert [(c.group, c.kind, c.actual) for c in written] == [(("p", "b"), ConflictKind.BEING_WRITTEN, T3)]


def test_at_scheduling_a_plan_claiming_the_groups_is_a_conflict() -> None:
    reqs = requirements(_plan("a"))
    assert [c.kind for c in find_conflicts(reqs, _view())] == [ConflictKind.CLAIMED]


def test_a_compaction_or_a_write_the_merge_did_not_read_takes_the_group() -> None:
    reqs = requirements(_plan("a", "b", "c"))
    compacting = PendingCompaction.from_plans([(T3, [("p", "a")])])
    view = FileSystemView(make_timeline(T1, T2), [make_base_file("p", g, T1) for g in "abc"],
                          pending_clustering=PendingClustering.from_plans([(PLAN, [("p", g) for g in "abc"])]),
                          pending_compaction=compacting)
    found = find_conflicts(reqs, view, own_instant=PLAN, late_writes={("p", "c"): T2})
    assert [(c.group, c.kind, c.actual) for c in found] == [
        (("p", "a"), ConflictKind.COMPACTING, T3), (("p", "c"), ConflictKind.LATE_WRITE, T2)]
    assert str(found[0]) == f"file group a (p) is in a pending compaction plan {T3} (planned slice {T1})"
    assert "was written by a write completed after its log files were merged 20240101000000002" in str(found[1])


def test_a_merge_counts_its_completed_instants_and_the_archived_ones_only() -> None:
    rule = MergeRule.of_mode(MergeMode.EVENT_TIME, "ts")
    merge = SliceMerge.as_of_instant(rule, {T1, T3, OTHER}, PLAN, archived_before=T1)
    assert merge.completed == frozenset({T1, T3})  # OTHER is after the clustering instant
    assert T1 in merge and T3 in merge and "20231231000000000" in merge  # archived: before the timeline starts
    assert T2 not in merge and OTHER not in merge and None not in merge
