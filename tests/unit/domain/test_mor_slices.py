"""File slices of merge-on-read tables on hand-made timelines: log files joining slices by name (version 6) and
by completion time (versions 8 and 9), pending compactions, log-only groups, and what eligibility and the
commit-time requirement make of log files."""

from __future__ import annotations

from datetime import datetime

from hudi_clusterd.domain.compaction import PendingCompaction
from hudi_clusterd.domain.conflicts import ConflictKind, SliceRequirement, find_conflicts, requirements
from hudi_clusterd.domain.fs_view import FileSystemView
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.log_file import LogFile
from hudi_clusterd.domain.plan import ClusteringGroup, ClusteringPlan, ClusteringStrategy
from hudi_clusterd.domain.planner import clustering_group, eligible_slices, plan_clustering
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.domain.timeline_layout import LAYOUT_1, layout_2
from tests.builders import make_base_file, make_policy

T1, T2, T3, T4, T5, T6, T7 = (f"2024010100000000{i}" for i in range(1, 8))
NOW = datetime(2024, 3, 5, 7, 0, 0)


def log(file_id: str, instant: str, version: int = 1, partition: str = "p", size: int = 100,
        token: str = "0-1-2") -> LogFile:
    lf = LogFile.parse(partition, f".{file_id}_{instant}.log.{version}_{token}", size)
    assert lf is not None
    return lf


def inst(time: str, action: str, state: State = State.COMPLETED, done: str | None = None) -> Instant:
    return Instant(time, Action(action), state, completion_time=done)


def names(logs: tuple[LogFile, ...]) -> list[str]:
    return [lf.file_name for lf in logs]


def slices_of(view: FileSystemView, file_id: str) -> dict[str, tuple[str | None, list[str]]]:
    group = view.file_group(("p", file_id))
    assert group is not None
    return {sl.base_instant: (sl.base_file.file_name if sl.base_file else None, names(sl.log_files))
            for sl in group.slices}


# --- version 6: by the base instant in the log's name ----------------------------------------------------------

def v6_view(*instants: Instant, logs: list[LogFile], bases: list[str], compaction: str | None = None,
            log_compaction: str | None = None) -> FileSystemView:
    timeline = Timeline.from_states(instants)
    pending = PendingCompaction.from_plans([(compaction, [("p", "a")])] if compaction else [],
                                           [(log_compaction, [("p", "a")])] if log_compaction else [])
    return FileSystemView(timeline, [make_base_file("p", "a", b) for b in bases], log_files=logs,
                          pending_compaction=pending, slicing=LAYOUT_1.log_slicing(timeline))


def test_v6_logs_join_the_slice_their_name_gives_committed_or_not() -> None:
    view = v6_view(inst(T1, "deltacommit"), inst(T2, "deltacommit"), inst(T3, "deltacommit", State.INFLIGHT),
                   logs=[log("a", T1, 2, token="0-3-4"), log("a", T1, 1)], bases=[T1])
    latest = view.latest_slice_of(("p", "a"))
    assert latest is not None and latest.base_instant == T1 and latest.base_file is not None
    # T2 appended version 1, the inflight T3 version 2: both are in the slice named T1, in Hudi's log order
    assert names(latest.log_files) == [f".a_{T1}.log.1_0-1-2", f".a_{T1}.log.2_0-3-4"]


def test_v6_a_pending_compaction_starts_an_empty_slice_that_new_logs_name() -> None:
    view = v6_view(inst(T1, "deltacommit"), inst(T2, "deltacommit"), inst(T3, "compaction", State.REQUESTED),
                   inst(T4, "deltacommit"), logs=[log("a", T1), log("a", T3)], bases=[T1, T3], compaction=T3)
    assert slices_of(view, "a") == {
        T3: (make_base_file("p", "a", T3).file_name, [f".a_{T3}.log.1_0-1-2"]),
        T1: (make_base_file("p", "a", T1).file_name, [f".a_{T1}.log.1_0-1-2"]),
    }
    latest = view.latest_slice_of(("p", "a"))
    # the compaction's slice is the latest; its half-written base file is hidden
    assert latest is not None and latest.base_instant == T3 and latest.base_file is None
    assert names(latest.log_files) == [f".a_{T3}.log.1_0-1-2"]
    assert view.is_pending_compaction(("p", "a"))
    assert [bf.instant_time for bf in view.latest_base_files()] == [T1]


def test_v6_log_only_group_is_keyed_by_the_deltacommit_that_created_it() -> None:
    logs = [log("a", T1), log("a", T1, 2)]
    view = v6_view(inst(T1, "deltacommit"), inst(T2, "deltacommit"), logs=logs, bases=[])
    latest = view.latest_slice_of(("p", "a"))
    assert latest is not None and latest.base_file is None and latest.base_instant == T1
    assert len(latest.log_files) == 2 and latest.size == 0
    # created by a deltacommit still in flight: no visible slice yet
    view = v6_view(inst(T1, "deltacommit", State.INFLIGHT), logs=logs, bases=[])
    assert view.latest_slice_of(("p", "a")) is None and view.latest_file_slices() == []


# --- versions 8 and 9: by the completion time of the log's deltacommit ------------------------------------------

def v9_view(*instants: Instant, logs: list[LogFile], bases: list[str],
            compaction: str | None = None) -> FileSystemView:
    timeline = Timeline.from_states(instants)
    pending = PendingCompaction.from_plans([(compaction, [("p", "a")])] if compaction else [])
    return FileSystemView(timeline, [make_base_file("p", "a", b) for b in bases], log_files=logs,
                          pending_compaction=pending, slicing=layout_2().log_slicing(timeline))


def test_v9_a_deltacommit_that_completes_after_a_compaction_is_requested_joins_its_slice() -> None:
    view = v9_view(
        inst(T1, "deltacommit", done=T1),
        inst(T2, "deltacommit", done=T3),   # completed before the compaction was requested
        inst(T4, "deltacommit", done=T6),   # started before the compaction, completed after it was requested
        inst(T5, "compaction", State.REQUESTED),
        inst(T7, "deltacommit", State.INFLIGHT),
        logs=[log("a", T2), log("a", T4), log("a", T7)], bases=[T1], compaction=T5)
    assert slices_of(view, "a") == {
        T5: (None, [f".a_{T4}.log.1_0-1-2", f".a_{T7}.log.1_0-1-2"]),  # the pending T7 joins the latest slice
        T1: (make_base_file("p", "a", T1).file_name, [f".a_{T2}.log.1_0-1-2"]),
    }
    latest = view.latest_slice_of(("p", "a"))
    assert latest is not None and latest.base_instant == T5


def test_v9_a_log_named_before_the_base_instant_belongs_to_the_newer_slice_when_it_completed_after() -> None:
    # T2 wrote a log, the group got a new base file at T3 (requested after T2), T2 completed at T4 >= T3
    view = v9_view(inst(T1, "deltacommit", done=T1), inst(T2, "deltacommit", done=T4),
                   inst(T3, "commit", done=T5), logs=[log("a", T2)], bases=[T1, T3])
    assert slices_of(view, "a")[T3] == (make_base_file("p", "a", T3).file_name, [f".a_{T2}.log.1_0-1-2"])
    assert slices_of(view, "a")[T1][1] == []


def test_v9_log_only_group_starts_at_its_first_deltacommit_and_keeps_later_logs() -> None:
    view = v9_view(inst(T2, "deltacommit", done=T3), inst(T4, "deltacommit", done=T5),
                   logs=[log("a", T4), log("a", T2)], bases=[])
    assert slices_of(view, "a") == {T2: (None, [f".a_{T2}.log.1_0-1-2", f".a_{T4}.log.1_0-1-2"])}


def test_v9_logs_of_archived_deltacommits_count_as_completed_at_their_own_time() -> None:
    view = v9_view(inst(T3, "deltacommit", done=T4), logs=[log("a", T2)], bases=[T1, T3])
    assert slices_of(view, "a")[T1][1] == [f".a_{T2}.log.1_0-1-2"]


def test_the_same_logs_slice_otherwise_by_name() -> None:
    instants = (inst(T1, "deltacommit", done=T1), inst(T2, "deltacommit", done=T4), inst(T3, "commit", done=T5))
    timeline = Timeline.from_states(instants)
    by_name = FileSystemView(timeline, [make_base_file("p", "a", T1), make_base_file("p", "a", T3)],
                             log_files=[log("a", T1)], slicing=LAYOUT_1.log_slicing(timeline))
    assert slices_of(by_name, "a")[T1][1] == [f".a_{T1}.log.1_0-1-2"]


# --- eligibility and the commit-time requirement -------------------------------------------------------------

def _eligible(view: FileSystemView, *, merge_logs: bool = False) -> tuple[set[str], dict[str, int]]:
    skipped: dict[str, int] = {}
    out = eligible_slices(view, view.partitions(), make_policy(), skipped, merge_logs=merge_logs)
    return {sl.file_id for sls in out.values() for sl in sls}, skipped


def test_groups_with_log_files_or_in_a_pending_compaction_are_not_eligible() -> None:
    timeline = Timeline.from_states([inst(T1, "deltacommit"), inst(T2, "deltacommit", State.INFLIGHT),
                                     inst(T3, "compaction", State.REQUESTED),
                                     inst(T4, "logcompaction", State.INFLIGHT)])
    bases = [make_base_file("p", f, T1) for f in ("clean", "logged", "pending-log", "compacting", "log-compacting")]
    logs = [log("logged", T1), log("pending-log", T1), log("only-logs", T1)]  # v6 names: the T1 slice
    pending = PendingCompaction.from_plans([(T3, [("p", "compacting")])], [(T4, [("p", "log-compacting")])])
    view = FileSystemView(timeline, bases, log_files=logs, pending_compaction=pending)
    eligible, skipped = _eligible(view)
    assert eligible == {"clean"}
    assert skipped == {"has log files": 2, "no base file": 1, "in a pending compaction plan": 2}
    # merged: slices with log files are eligible (a v6 log's writer is known by its markers, not its name)
    eligible, skipped = _eligible(view, merge_logs=True)
    assert eligible == {"clean", "logged", "pending-log"}
    assert skipped == {"no base file": 1, "in a pending compaction plan": 2}


def test_merged_slices_with_a_log_of_a_pending_write_are_not_eligible() -> None:
    # v9: a log names the deltacommit that writes it; T3's is still inflight
    timeline = Timeline.from_states([inst(T1, "deltacommit", done=T1), inst(T2, "deltacommit", done=T2),
                                     inst(T3, "deltacommit", State.INFLIGHT)])
    view = FileSystemView(timeline, [make_base_file("p", f, T1) for f in ("a", "b")],
                          log_files=[log("a", T2), log("b", T2), log("b", T3)],
                          slicing=layout_2().log_slicing(timeline))
    view_b = view.latest_slice_of(("p", "b"))
    assert view_b is not None and names(view_b.log_files) == [f".b_{T2}.log.1_0-1-2", f".b_{T3}.log.1_0-1-2"]
    eligible, skipped = _eligible(view, merge_logs=True)
    assert eligible == {"a"}
    assert skipped == {"log files being written": 1}


def test_a_log_in_a_newer_slice_not_yet_visible_makes_the_group_ineligible() -> None:
    # v6: an inflight write at T2 gave the group a base file and a log named after it; the T1 slice is the latest
    timeline = Timeline.from_states([inst(T1, "commit"), inst(T2, "deltacommit", State.INFLIGHT)])
    view = FileSystemView(timeline, [make_base_file("p", "a", T1), make_base_file("p", "a", T2)],
                          log_files=[log("a", T2)])
    latest = view.latest_slice_of(("p", "a"))
    assert latest is not None and latest.base_instant == T1 and latest.log_files == ()
    assert names(view.log_files_from_latest(("p", "a"))) == [f".a_{T2}.log.1_0-1-2"]
    assert _eligible(view)[0] == set()


def test_copy_on_write_slices_are_unchanged() -> None:
    timeline = Timeline.from_states([inst(T1, "commit"), inst(T2, "commit")])
    view = FileSystemView(timeline, [make_base_file("p", "a", T1), make_base_file("p", "a", T2)])
    latest = view.latest_slice_of(("p", "a"))
    assert latest is not None and latest.base_instant == T2 and latest.log_files == ()
    assert _eligible(view) == ({"a"}, {})


def test_a_log_appended_after_planning_is_a_conflict_and_the_same_logs_are_not() -> None:
    timeline = Timeline.from_states([inst(T1, "deltacommit"), inst(T2, "deltacommit", State.INFLIGHT)])
    base = make_base_file("p", "a", T1)
    planned = FileSystemView(timeline, [base])
    group = clustering_group(planned.latest_file_slices(), make_policy(), lambda f: f"file:/t/{f.relative_path}")
    [req] = requirements_of(group)
    assert req == SliceRequirement(("p", "a"), T1, frozenset())
    now = FileSystemView(timeline, [base], log_files=[log("a", T1)])  # appended by the inflight T2
    [conflict] = find_conflicts([req], now)
    assert conflict.kind is ConflictKind.LOG_FILES and conflict.actual == f".a_{T1}.log.1_0-1-2"
    assert "has other log files than the plan read" in str(conflict)
    # a plan that read that log (a slice planned with it) still holds
    with_log = clustering_group(now.latest_file_slices(), make_policy(), lambda f: f"file:/t/{f.relative_path}")
    assert find_conflicts(requirements_of(with_log), now) == []


def requirements_of(group: ClusteringGroup) -> tuple[SliceRequirement, ...]:
    return requirements(ClusteringPlan((group,), ClusteringStrategy("x")))


def test_a_slice_whose_merge_would_exceed_the_memory_budget_is_left_out() -> None:
    timeline = Timeline.from_states([inst(T1, "deltacommit")])
    bases = [make_base_file("p", f, T1, size=1000) for f in ("small", "big")]
    view = FileSystemView(timeline, bases, log_files=[log("small", T1, size=1000), log("big", T1, size=300_000)])
    skipped: dict[str, int] = {}
    out = eligible_slices(view, view.partitions(), make_policy(**{"hoodie.memory.merge.max.size": "1000000"}),
                          skipped, merge_logs=True)
    assert [sl.file_id for sls in out.values() for sl in sls] == ["small"]
    assert skipped == {"merge over hoodie.memory.merge.max.size": 1}


def test_a_clusterings_output_with_log_files_since_is_planned_and_without_them_is_not() -> None:
    # v9: the clustering T1 wrote "a" and "b"; a deltacommit T2 then logged updates to "a"
    timeline = Timeline.from_states([inst(T1, "replacecommit", done=T1), inst(T2, "deltacommit", done=T2)])
    view = FileSystemView(timeline, [make_base_file("p", f, T1) for f in ("a", "b")], log_files=[log("a", T2)],
                          slicing=layout_2().log_slicing(timeline))
    policy = make_policy(**{"sort.columns": "x"})  # single-slice groups allowed

    def planned(v: FileSystemView) -> list[tuple[str, int]]:
        result = plan_clustering(v, policy, NOW, lambda f: f"file:/t/{f.relative_path}", clustered_instants={T1},
                                 merge_logs=True)
        return sorted((s.file_id, len(s.delta_file_paths)) for g in (result.plan.input_groups if result.plan
                                                                     else ()) for s in g.slices)

    assert planned(view) == [("a", 1), ("b", 0)]  # one group of the partition's slices
    unlogged = FileSystemView(timeline, [make_base_file("p", f, T1) for f in ("a", "b")],
                              slicing=layout_2().log_slicing(timeline))
    assert planned(unlogged) == []
