"""The clock a table handle reads time from: the system's, or a test's that never sleeps."""

from __future__ import annotations

import time
from datetime import datetime, tzinfo
from typing import Protocol


class Clock(Protocol):
    """Wall-clock time and waiting."""

    def now(self, tz: tzinfo | None) -> datetime:
        """The current time in ``tz`` (naive local time when None)."""
        ...

    def sleep(self, seconds: float) -> None:
        ...


class SystemClock:
    """This host's clock."""

    def now(self, tz: tzinfo | None) -> datetime:
        return datetime.now(tz)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM_CLOCK = SystemClock()
