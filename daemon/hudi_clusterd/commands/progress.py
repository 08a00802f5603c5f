"""Progress lines for a person watching a one-shot command: an observer of table-operation events."""

from __future__ import annotations

import sys
from typing import TextIO

from hudi_clusterd.commands.status import human_bytes
from hudi_clusterd.ops.events import Event, GroupFinished, GroupStarted, PlanStarted


class ProgressPrinter:
    """Prints a plan's start and each group's start and end to ``stream`` (stdout by default)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    def _print(self, text: str) -> None:
        print(text, file=self.stream or sys.stdout, flush=True)

    def notify(self, event: Event) -> None:
        if isinstance(event, PlanStarted):
            self._print(f"executing clustering {event.instant}: {event.groups} groups, {event.slices} files, "
                        f"{human_bytes(event.input_bytes)}")
        elif isinstance(event, GroupStarted):
            self._print(f"  [group {event.group + 1}/{event.groups}] {event.partition or '(root)'}: "
                        f"{event.slices} files ...")
        elif isinstance(event, GroupFinished) and event.ok:
            self._print(f"  [group {event.group + 1}/{event.groups}] wrote {event.files} files, "
                        f"{human_bytes(event.bytes)} in {event.seconds}s")
