"""Log file names parse as Hudi parses them, and only log file names do."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.formats.log import (
    LogFileName,
)
from tests.support import FUZZ


@pytest.mark.parametrize(("name", "parts"), [
    (".files-0000-0_20260307162454799.log.1_3-243-630", ("files-0000-0", "20260307162454799", 1, "3-243-630")),
    (".files-0000-0_00000000000000000.log.1_0-0-0", ("files-0000-0", "00000000000000000", 1, "0-0-0")),
    (".e1d239c0-049d-43de-a138-e1915a3e29a7-0_20240101.log.12_1-0-1",
     ("e1d239c0-049d-43de-a138-e1915a3e29a7-0", "20240101", 12, "1-0-1")),
    (".f1_.log.0_1-2-3", ("f1", "", 0, "1-2-3")),
    # Hudi's pattern ends the file id at the first '_' (the rest goes to the instant)
    (".files_0000-0_20260307162454799.log.1_3-243-630", ("files", "0000-0_20260307162454799", 1, "3-243-630")),
])
def test_log_file_names_parse(name: str, parts: tuple[str, str, int, str]) -> None:
    parsed = LogFileName.parse(name)
    assert parsed == LogFileName(*parts) and str(parsed) == name


@pytest.mark.parametrize("name", [
    "files-0000-0_20260307162454799.log.1_3-243-630",  # no leading dot
    ".files-0000-0_20260307162454799.log.1",  # no write token
    ".files-0000-0_20260307162454799.archive.1_3-243-630",
    ".files-0000-0_20260307162454799.log.1_3-243-630.cdc",
    ".files-0000-0_20260307162454799.log.1_3-243",
    ".files-0000-0_2026.0307.log.1_3-243-630",
    ".files-0000-0_20260307162454799.log.1_3-243-630\n",
    ".files-0000-0_20260307162454799.log.\u0661_3-243-630",  # a non-ASCII digit
    ".files-0000-0_20260307162454799.hfile",
    "",
])
def test_other_names_do_not_parse(name: str) -> None:
    assert LogFileName.parse(name) is None


def test_bad_log_file_name_parts_are_refused() -> None:
    for parts in [("a_b", "1", 1, "1-0-1"), ("a", "1.2", 1, "1-0-1"), ("a", "1", -1, "1-0-1"), ("a", "1", 1, "x")]:
        with pytest.raises(ValueError):
            LogFileName(*parts)


@FUZZ
@given(st.from_regex(r"[A-Za-z0-9-]{1,20}", fullmatch=True), st.from_regex(r"[0-9]{0,17}", fullmatch=True),
       st.integers(0, 10**6), st.tuples(st.integers(0, 999), st.integers(0, 999), st.integers(0, 999)))
def test_log_file_name_round_trip(file_id: str, instant: str, version: int, token: tuple[int, int, int]) -> None:
    name = LogFileName(file_id, instant, version, "-".join(map(str, token)))
    assert LogFileName.parse(str(name)) == name
