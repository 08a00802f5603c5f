from __future__ import annotations

import pytest

from hudi_clusterd.domain.fs_view import FileSystemView, PendingClustering, ReplacedGroups
from hudi_clusterd.errors import TimelineError
from tests.builders import make_base_file, make_timeline

C1, C2, R3, P4 = "20240101000000001", "20240101000000002", "20240101000000003", "20240101000000004"


def _view(**kw):  # type: ignore[no-untyped-def]
    tl = make_timeline(C1, C2, (R3, "replacecommit", "completed"), (P4, "commit", "inflight"))
    files = [
        make_base_file("p1", "a-0", C1),
        make_base_file("p1", "a-0", C2),  # second slice of group a
        make_base_file("p1", "b-0", C1),
        make_base_file("p2", "c-0", R3),  # written by the replacecommit
        make_base_file("p2", "d-0", P4),  # pending instant: invisible
    ]
    return FileSystemView(tl, files, **kw)


def test_latest_file_slices_newest_committed_slice_per_group() -> None:
    v = _view()
    got = {(s.partition_path, s.file_id): s.base_instant for s in v.latest_file_slices()}
    assert got == {("p1", "a-0"): C2, ("p1", "b-0"): C1, ("p2", "c-0"): R3}


def test_latest_file_slices_drops_replaced_groups_as_of_replace_time() -> None:
    v = _view(replaced=ReplacedGroups.from_instants([(R3, {"p1": ["a-0", "b-0"]})]))
    assert {s.file_id for s in v.latest_file_slices()} == {"c-0"}
    as_of_c2 = {(s.file_id, s.base_instant) for s in v.latest_file_slices(as_of=C2)}
    assert as_of_c2 == {("a-0", C2), ("b-0", C1)}


def test_latest_file_slices_time_travel_picks_older_slice() -> None:
    v = _view()
    assert {(s.file_id, s.base_instant) for s in v.latest_file_slices("p1", as_of=C1)} == {("a-0", C1), ("b-0", C1)}


def test_pending_clustering_same_group_in_two_plans_raises() -> None:
    with pytest.raises(TimelineError, match="two pending clustering plans"):
        PendingClustering.from_plans([(C1, [("p", "f")]), (C2, [("p", "f")])])


def test_replaced_groups_later_instant_wins() -> None:
    r = ReplacedGroups.from_instants([(C2, {"p": ["f"]}), (C1, {"p": ["f"]})])
    assert r.by_group[("p", "f")] == C2
