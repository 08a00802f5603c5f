"""What differs between timeline layouts 1 and 2 is asked of the layout object."""

from __future__ import annotations

import pytest

from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.timeline_layout import CLOCK_SKEW_WAIT_S, LAYOUT_1, layout_2
from hudi_clusterd.errors import TimelineError

T = "20240707001301554"
C = "20240707001302000"


def test_layout_1_names_a_completed_instant_without_a_listing_and_records_no_completion_times() -> None:
    done = Instant(T, Action.COMMIT, State.COMPLETED)
    assert LAYOUT_1.known_path(done) == f".hoodie/{T}.commit"
    assert LAYOUT_1.completion_times([done]) is None
    assert LAYOUT_1.clock_skew_wait_s == 0.0 and LAYOUT_1.max_pending_s is None
    assert LAYOUT_1.archive_folder("history") == ".hoodie/archived"


def test_layout_2_needs_the_completion_time_to_name_a_completed_instant() -> None:
    layout = layout_2()
    done = Instant(T, Action.COMMIT, State.COMPLETED)
    assert layout.known_path(done) is None
    assert layout.known_path(Instant(T, Action.COMMIT, State.REQUESTED)) == f".hoodie/timeline/{T}.commit.requested"
    assert layout.known_path(Instant(T, Action.COMMIT, State.COMPLETED, completion_time=C)) == \
        f".hoodie/timeline/{T}_{C}.commit"
    assert layout.completion_times([Instant(T, Action.COMMIT, State.COMPLETED, completion_time=C), done]) == {T: C}
    assert layout.clock_skew_wait_s == CLOCK_SKEW_WAIT_S and layout.max_pending_s is not None
    assert layout.archive_folder(None) == ".hoodie/timeline/history"


def test_a_metadata_tables_layout_parses_its_own_instant_times() -> None:
    name = f"{T}006_{C}.rollback"
    with pytest.raises(TimelineError, match="14 or 17 digits"):
        layout_2().parse(name)
    inst = layout_2().for_metadata().parse(name)
    assert inst is not None and (inst.time, inst.action, inst.completion_time) == (f"{T}006", Action.ROLLBACK, C)
