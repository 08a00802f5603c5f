"""Which file slice a log file belongs to: the one rule that differs between table versions for file slices.

- Version 6 (`BY_NAME`): a log file names its slice's base instant (the base file's instant, a pending
  compaction's, or, for a log-only group, the deltacommit that created it).
- Versions 8 and 9 (`ByCompletionTime`): a log file names the deltacommit that wrote it, and belongs to the slice
  of the newest base instant at or before that deltacommit's *completion* time; a log of a deltacommit that has
  not completed belongs to the latest slice; the first log of a group with no slice yet starts one at its own
  deltacommit time. A deltacommit that started before a compaction was requested but completed after it belongs
  to the compaction's slice.

The timeline layout picks the rule (`TimelineLayout.log_slicing`). Log files are placed one by one in Hudi's log
order (`LogFileName.sort_key`), after the base files and a pending compaction's slice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hudi_clusterd.domain.log_file import LogFileName


class LogSlicing(Protocol):
    def slice_key(self, log: LogFileName, keys: Sequence[str]) -> str:
        """The base instant of the slice ``log`` belongs to, given the slices' base instants so far (``keys``,
        newest first; it may name a slice not among them, which then starts)."""
        ...


@dataclass(frozen=True, slots=True)
class ByName:
    """Version 6: the name's instant is the slice's base instant."""

    def slice_key(self, log: LogFileName, keys: Sequence[str]) -> str:
        return log.base_instant


BY_NAME = ByName()


@dataclass(frozen=True, slots=True)
class ByCompletionTime:
    """Versions 8 and 9: by the completion time of the deltacommit a log names.

    ``completion`` maps completed instants to their completion times; an instant older than ``archived_before``
    (the active timeline's first write) has been archived and counts as completed at its own time."""

    completion: Mapping[str, str] = field(default_factory=dict)
    archived_before: str | None = None

    def completion_of(self, time: str) -> str | None:
        done = self.completion.get(time)
        if done is None and self.archived_before is not None and time < self.archived_before:
            return time
        return done

    def slice_key(self, log: LogFileName, keys: Sequence[str]) -> str:
        if not keys:
            return log.base_instant
        done = self.completion_of(log.base_instant)
        if done is None:
            return keys[0]  # pending (or failed): the latest slice
        for key in keys:
            if done >= key:
                return key
        return log.base_instant
