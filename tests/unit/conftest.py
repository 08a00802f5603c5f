"""Unit tests run in one process with one clock."""

from __future__ import annotations

import pytest

from hudi_clusterd.table.clock import SystemClock


@pytest.fixture(autouse=True)
def _one_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The system clock of the unit tests never waits: the 200 ms a layout-2 writer waits after taking a time under
    the lock (``CLOCK_SKEW_WAIT_S``, for writers on hosts whose clocks differ, made through the table's `Clock`)
    orders nothing in one process, and was most of the time of the layout-2 unit tests. That the wait is made, with
    the real constant, is shown with a recording clock (``tests/unit/table/test_timeline_paths.py``,
    ``tests.builders.FakeClock``); the integration and interop tests, whose writers run in other processes (Apache
    Hudi's among them), keep it."""
    monkeypatch.setattr(SystemClock, "sleep", lambda self, seconds: None)
