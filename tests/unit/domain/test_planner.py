from __future__ import annotations

from datetime import datetime

import pytest

from hudi_clusterd.domain.conflicts import find_conflicts, requirements
from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.fs_view import FileSystemView, PendingClustering
from hudi_clusterd.domain.planner import drop_groups, plan_clustering, trigger
from tests.builders import make_base_file, make_policy, make_timeline

C1 = "20240101000000001"
MB = 1024 * 1024
NOW = datetime(2024, 3, 5, 7, 0, 0)


def uri(bf: BaseFile) -> str:
    return f"file:/t/{bf.relative_path}"


def view_of(files: dict[str, list[int]], pending: PendingClustering | None = None) -> FileSystemView:
    bfs = [make_base_file(p, f"{p.replace('/', '-')}-f{i}", C1, size) for p, sizes in files.items()
           for i, size in enumerate(sizes)]
    return FileSystemView(make_timeline(C1), bfs, pending_clustering=pending)


def test_trigger_counts_commits_against_async_max_commits() -> None:
    d = trigger(3, "20240101000000000", make_policy())
    assert not d.fire and d.explain() == "3 commits since the last clustering (20240101000000000), 4 needed"
    assert trigger(4, None, make_policy()).fire
    assert trigger(0, None, make_policy(), force=True).fire
    assert trigger(1, None, make_policy(**{"hoodie.clustering.async.max.commits": "1"})).fire


def test_plan_size_based_groups_largest_first_with_output_counts() -> None:
    p = make_policy(**{"max.bytes.per.group": str(100 * MB), "target.file.max.bytes": str(40 * MB)})
    view = view_of({"a": [60 * MB, 30 * MB, 20 * MB, 50 * MB, 10 * MB]})
    plan = plan_clustering(view, p, NOW, uri).plan
    assert plan is not None
    sizes = [[s.file_id for s in g.slices] for g in plan.input_groups]
    # sorted desc: 60 | 50, 30, 20 (= 100, fits) | 10
    assert sizes == [["a-f0"], ["a-f3", "a-f1", "a-f2"], ["a-f4"]]
    assert [g.num_output_file_groups for g in plan.input_groups] == [2, 3, 1]  # ceil(60/40), ceil(100/40), 1


def test_plan_excludes_files_at_or_above_small_file_limit() -> None:
    p = make_policy(**{"small.file.limit": str(10 * MB)})
    plan = plan_clustering(view_of({"a": [10 * MB, 9 * MB, 1 * MB]}), p, NOW, uri).plan
    assert plan is not None and {s.file_id for s in plan.input_groups[0].slices} == {"a-f1", "a-f2"}


def test_plan_excludes_groups_in_pending_plans_so_no_group_is_in_two_plans() -> None:
    pending = PendingClustering.from_plans([("20240101000000005", [("a", "a-f0"), ("a", "a-f1")])])
    result = plan_clustering(view_of({"a": [MB, MB, MB, MB]}, pending), make_policy(), NOW, uri)
    assert result.plan is not None
    claimed = {("a", "a-f0"), ("a", "a-f1")}
    assert not claimed & set(result.plan.group_ids())
    assert result.skipped["in a pending clustering plan"] == 2


def test_plan_max_num_groups_applies_across_partitions() -> None:
    p = make_policy(**{"max.num.groups": "3", "max.bytes.per.group": str(2 * MB)})
    view = view_of({f"p{i}": [MB, MB, MB, MB] for i in range(4)})  # 2 groups per partition
    plan = plan_clustering(view, p, NOW, uri).plan
    assert plan is not None and len(plan.input_groups) == 3
    assert [g.partition_path for g in plan.input_groups] == ["p0", "p0", "p1"]


def test_plan_single_slice_group_dropped_only_when_single_group_disabled_and_unsorted() -> None:
    view = view_of({"a": [MB], "b": [MB, MB]})
    on = plan_clustering(view, make_policy(), NOW, uri).plan
    assert on is not None and sorted(g.partition_path for g in on.input_groups) == ["a", "b"]
    off = plan_clustering(view, make_policy(**{"single.group.clustering.enabled": "false"}), NOW, uri).plan
    assert off is not None and [g.partition_path for g in off.input_groups] == ["b"]
    sorted_off = plan_clustering(view, make_policy(**{"single.group.clustering.enabled": "false",
                                                  "sort.columns": "x"}), NOW, uri).plan
    assert sorted_off is not None and len(sorted_off.input_groups) == 2


def test_plan_clustering_output_alone_is_not_rewritten_again() -> None:
    view = view_of({"a": [MB], "b": [MB, MB, MB]})
    result = plan_clustering(view, make_policy(), NOW, uri, clustered_instants={C1})
    assert result.plan is None and "clustering output already" in result.reason


def test_plan_regex_and_selected_partitions() -> None:
    view = view_of({"2024/01/01": [MB, MB], "2024/01/02": [MB, MB], "2023/12/31": [MB, MB]})
    by_regex = plan_clustering(view, make_policy(**{"partition.regex.pattern": "2024/.*"}), NOW, uri).plan
    assert by_regex is not None and {g.partition_path for g in by_regex.input_groups} == {"2024/01/01", "2024/01/02"}
    selected = plan_clustering(view, make_policy(**{"partition.selected": "2023/12/31"}), NOW, uri).plan
    assert selected is not None and {g.partition_path for g in selected.input_groups} == {"2023/12/31"}


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"hoodie.clustering.plan.partition.filter.mode": "NONE"}, {"d1", "d2", "d3", "d4"}),
        ({"hoodie.clustering.plan.partition.filter.mode": "RECENT_DAYS", "daybased.lookback.partitions": "2",
          "daybased.skipfromlatest.partitions": "1"}, {"d2", "d3"}),
        ({"hoodie.clustering.plan.partition.filter.mode": "SELECTED_PARTITIONS", "cluster.begin.partition": "d2",
          "cluster.end.partition": "d3"}, {"d2", "d3"}),
        ({"hoodie.clustering.plan.partition.filter.mode": "DAY_ROLLING"}, set()),  # hour 7: index 7 % 24 absent
    ],
)
def test_plan_partition_filter_modes(props: dict[str, str], expected: set[str]) -> None:
    view = view_of({d: [MB, MB] for d in ("d1", "d2", "d3", "d4")})
    result = plan_clustering(view, make_policy(**props), NOW, uri)
    got = {g.partition_path for g in result.plan.input_groups} if result.plan else set()
    assert got == expected


def test_plan_day_rolling_picks_partition_of_the_hour() -> None:
    view = view_of({f"d{i:02d}": [MB, MB] for i in range(10)})
    result = plan_clustering(view, make_policy(**{"hoodie.clustering.plan.partition.filter.mode": "DAY_ROLLING"}),
                             NOW, uri)
    assert result.plan is not None and {g.partition_path for g in result.plan.input_groups} == {"d07"}


def test_plan_overlap_grouping_keeps_disjoint_ranges_apart() -> None:
    view = view_of({"a": [MB] * 6})
    ranges = {"a-f0": (0, 10), "a-f1": (5, 15), "a-f2": (100, 110), "a-f3": (105, 120), "a-f4": (50, 60),
              "a-f5": (12, 20)}
    p = make_policy(**{"sort.columns": "x", "max.bytes.per.group": str(3 * MB)})
    plan = plan_clustering(view, p, NOW, uri, ranges=lambda bf: ranges[bf.file_id]).plan
    assert plan is not None
    groups = sorted(sorted(s.file_id for s in g.slices) for g in plan.input_groups)
    # overlapping runs: {f0, f1, f5} (0..20), {f4} (50..60), {f2, f3} (100..120); adjacent runs share a
    # group while it fits under the cap, but a run is never split while it fits
    assert groups == [["a-f0", "a-f1", "a-f5"], ["a-f2", "a-f3", "a-f4"]]
    for g in plan.input_groups:  # no two groups' ranges overlap
        lo = min(ranges[s.file_id][0] for s in g.slices)
        hi = max(ranges[s.file_id][1] for s in g.slices)
        for other in plan.input_groups:
            if other is g:
                continue
            assert all(ranges[s.file_id][1] < lo or ranges[s.file_id][0] > hi for s in other.slices)


def test_plan_records_slices_with_full_uri_and_sort_params() -> None:
    plan = plan_clustering(view_of({"a": [MB, MB]}), make_policy(**{"sort.columns": "x,y"}), NOW, uri).plan
    assert plan is not None
    s = plan.input_groups[0].slices[0]
    assert s.data_file_path.startswith("file:/t/a/") and s.bootstrap_file_path == "" and s.delta_file_paths == ()
    assert plan.strategy.params["hoodie.clustering.plan.strategy.sort.columns"] == "x,y"
    assert plan.strategy.work_order.sort_columns == ("x", "y")
    assert plan.preserve_hoodie_metadata


def test_lost_groups_are_dropped_before_saving() -> None:
    view = view_of({"a": [MB, MB], "b": [MB, MB]})
    plan = plan_clustering(view, make_policy(), NOW, uri).plan
    assert plan is not None
    newer = FileSystemView(view.timeline, [*(sl.base_file for sl in view.latest_file_slices()),
                                             make_base_file("a", "a-f0", "20240101000000002")],
                           pending_clustering=PendingClustering.from_plans([]))
    newer = FileSystemView(make_timeline(C1, "20240101000000002"),
                           [sl.base_file for sl in newer.file_groups()[0].slices] +
                           [sl.base_file for g in newer.file_groups()[1:] for sl in g.slices])
    lost = {c.group for c in find_conflicts(requirements(plan), newer)}
    assert lost == {("a", "a-f0")}
    trimmed = drop_groups(plan, lost)
    assert trimmed is not None and {g.partition_path for g in trimmed.input_groups} == {"b"}
    assert drop_groups(plan, set()) is plan
