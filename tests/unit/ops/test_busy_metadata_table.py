"""A metadata table that another writer's compaction (or upgrade) is half way through: the daemon waits for it.

Apache Hudi's writers compact the metadata table at the start of a write, under the table lock; a daemon that
reads the table without the lock sees the compaction pending for that moment (seen beside Hudi 1.2's streaming
sink). Under the lock it is pending only when a writer died during it, and that writer's next write finishes it.
Either way nothing is wrong with the table or the plan: ticks are deferred, not failed, and a clustering's commit
waits for the compaction outside the lock instead of throwing its work away.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.instant import State
from hudi_clusterd.errors import TableBusyError
from hudi_clusterd.lock import FileSystemLockProvider, LockOptions
from hudi_clusterd.ops.commit import complete
from tests.builders import TableGen, commit_while, scheduled_plan
from tests.support import add_metadata_table

COMPACTION = "20260101000000000001.compaction.requested"  # of the metadata table


def _sized(gen: TableGen, stats: list[list[WriteStat]]) -> list[list[WriteStat]]:
    """The write stats with their files' sizes (the metadata table lists every file with its size)."""
    return [[dataclasses.replace(ws, file_size_in_bytes=(gen.base / str(ws.path)).stat().st_size) for ws in group]
            for group in stats]


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_file())


def test_a_commit_waits_outside_the_lock_for_a_pending_metadata_compaction_then_commits(tmp_path: Path) -> None:
    gen, t, plan, stats = scheduled_plan(tmp_path)
    stats = _sized(gen, stats)
    timeline = add_metadata_table(gen.base)
    # Given a compaction of the metadata table left pending, which a writer finishes 1 s later under the lock
    (timeline / COMPACTION).write_bytes(b"")
    finished: list[float] = []

    def writer_finishes_it() -> None:
        with FileSystemLockProvider(gen.table.storage, LockOptions(timeout_s=5)).held():
            (timeline / COMPACTION).unlink()
            finished.append(time.monotonic())

    # When our clustering commits
    committed = commit_while(1.0, writer_finishes_it, gen, t, plan, stats)
    # Then the writer could take the lock while the commit waited, and the commit came after the compaction
    assert finished, "the writer could not take the table lock while the commit waited"
    assert committed.dropped_groups == ()
    assert (gen.base / ".hoodie" / f"{t}.replacecommit").exists()
    assert f"{t}.deltacommit" in _names(timeline)


def test_a_commit_still_blocked_at_its_deadline_raises_and_writes_nothing(tmp_path: Path) -> None:
    gen, t, plan, stats = scheduled_plan(tmp_path)
    stats = _sized(gen, stats)
    timeline = add_metadata_table(gen.base)
    (timeline / COMPACTION).write_bytes(b"")  # its writer died and nobody writes again
    before = _names(timeline)
    started = time.monotonic()
    with pytest.raises(TableBusyError, match="compaction 20260101000000000001 is pending"):
        complete(gen.table, t, plan, stats, {}, undecided_wait_s=1.5)
    assert 1.5 <= time.monotonic() - started < 15
    assert _names(timeline) == before
    assert [i.state for i in gen.table.timeline() if i.time == t] == [State.INFLIGHT]
