from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.domain.instant import (
    METADATA_TIMES,
    Action,
    Instant,
    State,
    instant_file_name,
    next_instant_time,
    parse_instant_file_name,
    parse_instant_time,
)
from hudi_clusterd.errors import TimelineError

T = "20240707001301554"


@pytest.mark.parametrize(
    ("name", "action", "state"),
    [
        (f"{T}.commit", Action.COMMIT, State.COMPLETED),
        (f"{T}.commit.requested", Action.COMMIT, State.REQUESTED),
        (f"{T}.inflight", Action.COMMIT, State.INFLIGHT),
        (f"{T}.deltacommit.inflight", Action.DELTA_COMMIT, State.INFLIGHT),
        (f"{T}.replacecommit.requested", Action.REPLACE_COMMIT, State.REQUESTED),
        (f"{T}.replacecommit.inflight", Action.REPLACE_COMMIT, State.INFLIGHT),
        (f"{T}.replacecommit", Action.REPLACE_COMMIT, State.COMPLETED),
        (f"{T}.clean.requested", Action.CLEAN, State.REQUESTED),
        (f"{T}.clean", Action.CLEAN, State.COMPLETED),
        (f"{T}.rollback.inflight", Action.ROLLBACK, State.INFLIGHT),
        (f"{T}.savepoint.inflight", Action.SAVEPOINT, State.INFLIGHT),
        (f"{T}.savepoint", Action.SAVEPOINT, State.COMPLETED),
        (f"{T}.compaction.requested", Action.COMPACTION, State.REQUESTED),
        (f"{T}.logcompaction.inflight", Action.LOG_COMPACTION, State.INFLIGHT),
        (f"{T}.restore.requested", Action.RESTORE, State.REQUESTED),
        (f"{T}.indexing.inflight", Action.INDEXING, State.INFLIGHT),
        (f"{T}.schemacommit.inflight", Action.SCHEMA_COMMIT, State.INFLIGHT),
        ("20240707001301.commit", Action.COMMIT, State.COMPLETED),
    ],
)
def test_parse_instant_file_name_every_action_and_state_round_trips(name: str, action: Action, state: State) -> None:
    inst = parse_instant_file_name(name)
    assert inst is not None
    assert (inst.action, inst.state) == (action, state)
    assert instant_file_name(inst.time, inst.action, inst.state) == name


@pytest.mark.parametrize("name", ["hoodie.properties", "lock", ".aux", f"{T}.commit.tmp", f"{T}.bogus",
                                  "archived", f".{T}.commit.abc.tmp", f"{T}.commit.weird"])
def test_parse_instant_file_name_non_instant_returns_none(name: str) -> None:
    assert parse_instant_file_name(name) is None


def test_parse_instant_file_name_bad_time_raises_naming_file() -> None:
    with pytest.raises(TimelineError, match=r"12345\.commit"):
        parse_instant_file_name("12345.commit")


def test_completed_compaction_is_stored_as_commit() -> None:
    assert instant_file_name(T, Action.COMPACTION, State.COMPLETED) == f"{T}.commit"


@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2200, 1, 1)))
def test_next_instant_time_is_17_digits_and_strictly_greater(moment: datetime) -> None:
    after = "20991231235959999"
    t = next_instant_time(moment.replace(tzinfo=UTC), after)
    assert len(t) == 17 and t.isdigit()
    assert t > after


def test_next_instant_time_uses_clock_when_ahead() -> None:
    now = datetime(2026, 11, 22, 1, 2, 3, 456789, tzinfo=UTC)
    assert next_instant_time(now, "20240101000000000") == "20261122010203456"
    assert next_instant_time(now, None) == "20261122010203456"


def test_next_instant_time_after_legacy_14_digit_time() -> None:
    now = datetime(2020, 1, 1, tzinfo=UTC)
    assert next_instant_time(now, "20240101000000") > "20240101000000999"


def test_parse_instant_time_pads_legacy_times() -> None:
    assert parse_instant_time("20240101000000").microsecond == 999000


def test_instant_rejects_bad_time() -> None:
    with pytest.raises(TimelineError):
        Instant("2024", Action.COMMIT, State.COMPLETED)


@pytest.mark.parametrize("name", ["00000000000000010.deltacommit", f"{T}001.compaction.requested",
                                  f"{T}006_{T}999.rollback"])
def test_one_parser_reads_metadata_table_times_only_when_told(name: str) -> None:
    # a metadata table's own times (initialisation, version 6's suffixed times) are no data table's
    inst = parse_instant_file_name(name, with_completion=True, times=METADATA_TIMES)
    assert inst is not None and name.startswith(inst.time)
    if len(inst.time) != 17:
        with pytest.raises(TimelineError, match="14 or 17 digits"):
            parse_instant_file_name(name, with_completion=True)


@pytest.mark.parametrize("name", [f"{T}.compaction", f"{T}.logcompaction", f"{T}.clustering"])
def test_a_completed_name_of_an_action_that_completes_as_another_is_no_instant(name: str) -> None:
    assert parse_instant_file_name(name) is None
    assert parse_instant_file_name(name, times=METADATA_TIMES) is None
