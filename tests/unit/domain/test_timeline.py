from __future__ import annotations

from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.timeline import CommitIndex, Timeline
from tests.builders import make_instant, make_timeline


def test_timeline_from_states_highest_state_wins() -> None:
    t = "20240101000000001"
    tl = Timeline.from_states([
        make_instant(t, "commit", "requested"), make_instant(t, "commit", "inflight"), make_instant(t),
    ])
    assert len(tl) == 1 and tl.instants[0].is_completed


def test_timeline_completed_compaction_keeps_compaction_action() -> None:
    t = "20240101000000001"
    tl = Timeline.from_states(
        [Instant(t, Action.COMPACTION, State.REQUESTED), Instant(t, Action.COMMIT, State.COMPLETED)]
    )
    assert [(i.action, i.state) for i in tl] == [(Action.COMPACTION, State.COMPLETED)]


def test_timeline_commits_since_counts_completed_commit_actions_after() -> None:
    tl = make_timeline(
        "20240101000000001",
        ("20240101000000002", "replacecommit", "completed"),
        "20240101000000003",
        ("20240101000000004", "commit", "inflight"),
        ("20240101000000005", "clean", "completed"),
        "20240101000000006",
    )
    assert tl.commits_since(None) == 4
    assert tl.commits_since("20240101000000002") == 2


def test_commit_index_pending_and_unknown_newer_instants_are_not_committed() -> None:
    tl = make_timeline("20240101000000005", ("20240101000000006", "commit", "inflight"))
    idx = CommitIndex.of(tl)
    assert idx.is_committed("20240101000000005")
    assert not idx.is_committed("20240101000000006")  # pending
    assert not idx.is_committed("20240101000000009")  # unknown, newer
    assert idx.is_committed("20240101000000001")  # older than the active timeline: archived


def test_commit_index_pending_oldest_instant_hides_its_files() -> None:
    tl = make_timeline(("20240101000000001", "commit", "inflight"), "20240101000000002")
    assert not CommitIndex.of(tl).is_committed("20240101000000001")


def test_timeline_last_time_covers_every_action_and_state() -> None:
    tl = make_timeline("20240101000000001", ("20240101000000009", "rollback", "requested"))
    assert tl.last_time() == "20240101000000009"
