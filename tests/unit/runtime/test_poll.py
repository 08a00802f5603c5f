"""The poll of a table on an object store: between quiet ticks, one listing per timeline folder, and a tick as soon as
an instant file or the properties change."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hudi_clusterd.runtime.poll import TimelinePoll
from hudi_clusterd.storage import ObjectStorage, StorageSpec, open_storage
from hudi_clusterd.storage.requests import difference
from hudi_clusterd.table.hoodie_table import PROPERTIES_FILE
from tests.builders import TableGen, small_table
from tests.harness.process_lock import ProcessLock


@pytest.fixture
def bucket() -> Iterator[str]:
    name = f"poll-{uuid.uuid4().hex[:12]}"
    yield name
    ObjectStorage.memory_buckets.drop(name)


def _table(bucket: str, table_version: int = 6) -> TableGen:
    storage = open_storage(StorageSpec(f"s3://{bucket}/t", {"store": "memory"}))
    gen = TableGen(Path("unused"), storage=storage, lock_provider=ProcessLock(), table_version=table_version)
    for _ in range(2):
        gen.commit({"p1": [1.0, 2.0], "p2": [3.0]})
    return gen


def _due(poll: TimelinePoll, gen: TableGen, woken: bool = False) -> tuple[bool, dict[str, int]]:
    requests = gen.table.storage.requests
    assert requests is not None
    before = requests.snapshot()
    due = poll.due(gen.table, woken)
    return due, difference(requests.snapshot(), before)


@pytest.mark.parametrize(("table_version", "listings"), [(6, 1), (8, 2)])
def test_an_idle_table_costs_one_listing_per_timeline_folder(bucket: str, table_version: int, listings: int) -> None:
    gen = _table(bucket, table_version)
    poll = TimelinePoll()
    assert poll.due(None)  # not yet open
    assert poll.due(gen.table)  # no tick yet
    poll.ticked(quiet=True)
    # an idle table: nothing but the timeline listed
    for _ in range(3):
        assert _due(poll, gen) == (False, {"LIST": listings})
    # a new instant makes the next poll tick
    gen.commit({"p1": [4.0]})
    assert _due(poll, gen) == (True, {"LIST": listings})
    poll.ticked(quiet=True)
    assert not poll.due(gen.table)
    # so does a change of the properties (a writer upgrading the table, whatever its layout)
    storage = gen.table.storage
    storage.put(PROPERTIES_FILE, storage.read_bytes(PROPERTIES_FILE) + b"#\n")
    assert poll.due(gen.table)


def test_a_tick_that_left_work_a_wake_up_and_the_safety_net_tick_anyway(bucket: str) -> None:
    gen = _table(bucket)
    poll = TimelinePoll(full_check_every=3)
    assert poll.due(gen.table)
    poll.ticked(quiet=False)  # e.g. a pending plan, a failure, a deferral, a trigger that fired
    assert poll.due(gen.table) and poll.due(gen.table)
    poll.ticked(quiet=True)
    assert poll.due(gen.table, woken=True)  # a settings reload
    poll.ticked(quiet=True)
    assert [poll.due(gen.table) for _ in range(3)] == [False, False, True]


def test_a_table_with_file_system_events_always_ticks(tmp_path: Path) -> None:
    gen = small_table(tmp_path)
    poll = TimelinePoll()
    poll.ticked(quiet=True)
    assert poll.due(gen.table) and gen.table.storage.requests is None
