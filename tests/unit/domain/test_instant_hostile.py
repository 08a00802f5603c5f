"""Hostile instant file names and times (fuzzed): an instant, nothing, or a TimelineError naming the input."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.domain.instant import Action, parse_instant_file_name, parse_instant_time
from hudi_clusterd.errors import TimelineError
from tests.support import FUZZ

INSTANT_NAMES = st.one_of(
    st.text(max_size=40),
    st.builds(lambda t, a, s: f"{t}.{a}{s}",
              st.text(alphabet="0123456789٠١٢३\n", min_size=0, max_size=20),
              st.sampled_from([*(a.value for a in Action), "inflight", "COMMIT", "bogus", ""]),
              st.sampled_from(["", ".requested", ".inflight", ".bogus", ".requested\n", "."])),
)


@FUZZ
@given(INSTANT_NAMES)
def test_parse_instant_file_name_fuzzed_gives_instant_none_or_timeline_error(name: str) -> None:
    try:
        inst = parse_instant_file_name(name)
    except TimelineError as e:
        assert repr(name) in str(e) or name in str(e)
        return
    if inst is None:
        return
    assert inst.time.isascii() and inst.time.isdigit() and len(inst.time) in (14, 17)
    assert name.startswith(inst.time + ".") and "\n" not in name
    with contextlib.suppress(TimelineError):  # an impossible date is a TimelineError, never a bare ValueError
        parse_instant_time(inst.time)


@pytest.mark.parametrize("name", ["20240101000000000.commit\n", "٢٠٢٤٠١٠١٠٠٠٠٠٠٠٠٠.commit",
                                  "20240101000000000.commit.requested\n"])
def test_parse_instant_file_name_trailing_newline_or_non_ascii_digits_is_not_an_instant(name: str) -> None:
    assert parse_instant_file_name(name) is None


@pytest.mark.parametrize("time", ["00000000000000000", "20249999000000000", "99999999999999"])
def test_parse_instant_time_impossible_date_is_timeline_error(time: str) -> None:
    with pytest.raises(TimelineError, match=time[:14]):
        parse_instant_time(time)
