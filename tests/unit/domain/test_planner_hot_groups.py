"""The planner leaves hot file groups (updated by the latest upserts) out of a plan."""

from __future__ import annotations

from datetime import datetime

from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.fs_view import FileSystemView
from hudi_clusterd.domain.planner import plan_clustering
from tests.builders import make_base_file, make_policy, make_timeline

C1 = "20240101000000001"
MB = 1024 * 1024
NOW = datetime(2024, 3, 5, 7, 0, 0)


def _uri(bf: BaseFile) -> str:
    return f"file:/t/{bf.relative_path}"


def test_plan_clustering_hot_groups_are_skipped_and_counted() -> None:
    # Given four small file groups, two of them hot
    view = FileSystemView(make_timeline(C1), [make_base_file("a", f"a-f{i}", C1, MB) for i in range(4)])
    hot = {("a", "a-f0"), ("a", "a-f2")}
    # When planned with them named hot
    result = plan_clustering(view, make_policy(), NOW, _uri, hot_groups=hot)
    # Then the plan holds only the others, and the reason is counted
    assert result.plan is not None
    assert set(result.plan.group_ids()) == {("a", "a-f1"), ("a", "a-f3")}
    assert result.skipped["recently updated (hot)"] == 2


def test_plan_clustering_all_groups_hot_gives_no_plan_with_the_reason() -> None:
    view = FileSystemView(make_timeline(C1), [make_base_file("a", f"a-f{i}", C1, MB) for i in range(2)])
    result = plan_clustering(view, make_policy(), NOW, _uri,
                             hot_groups={("a", "a-f0"), ("a", "a-f1")})
    assert result.plan is None and "2 recently updated (hot)" in result.reason
