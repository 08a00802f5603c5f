"""Unit tests run in one process with one clock."""

from __future__ import annotations

import pytest

from hudi_clusterd.table import hoodie_table


@pytest.fixture(autouse=True)
def _one_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The injected clock of the layout-2 tests: the 200 ms a layout-2 writer waits after taking a time under the
    lock (``CLOCK_SKEW_WAIT_S``, for writers on hosts whose clocks differ) orders nothing in one process, and
    was most of the time of the layout-2 unit tests. That the wait is made is shown by
    ``tests/unit/table/test_timeline_paths.py`` (with the real constant); the integration and interop tests,
    whose writers run in other processes (Apache Hudi's among them), keep it."""
    monkeypatch.setattr(hoodie_table, "CLOCK_SKEW_WAIT_S", 0.0)
