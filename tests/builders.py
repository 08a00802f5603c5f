"""Small data builders for tests (not fixtures): instants, base files, timelines."""

from __future__ import annotations

from hudi_clusterd.domain.file_group import BaseFile, base_file_name
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.timeline import Timeline


def make_instant(time: str, action: str = "commit", state: str = "completed") -> Instant:
    st = State.COMPLETED if state == "completed" else State(state)
    return Instant(time, Action(action), st)


def make_timeline(*specs: tuple[str, str, str] | str) -> Timeline:
    """``make_timeline("20240101000000000", ("20240101000000001", "replacecommit", "requested"))``."""
    out = []
    for spec in specs:
        if isinstance(spec, str):
            out.append(make_instant(spec))
        else:
            out.append(make_instant(*spec))
    return Timeline.from_states(out)


def make_base_file(partition: str, file_id: str, instant: str, size: int = 1000, token: str = "0-1-2") -> BaseFile:
    bf = BaseFile.parse(partition, base_file_name(file_id, token, instant), size)
    assert bf is not None
    return bf
