"""A tick reads the table once and re-checks only under the lock; a plan executes as it was scheduled.

Both run the real daemon parts (table worker, schedule, execute, Spark group runner on the shared local
session) on a table written without Spark.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.file_group import BaseFile, base_file_name
from hudi_clusterd.domain.instant import Action, State
from hudi_clusterd.domain.plan import ClusteringPlan, WorkOrder
from hudi_clusterd.domain.row_order import LayoutStrategy
from hudi_clusterd.engine.clustering.runner import SparkGroupRunner
from hudi_clusterd.lock import LOCK_FILE
from hudi_clusterd.ops.events import NoObserver
from hudi_clusterd.runtime.reload import SettingsHolder
from hudi_clusterd.runtime.service import Daemon, TableWorker
from hudi_clusterd.settings import Settings, settings_from_properties
from hudi_clusterd.storage import FileInfo, LocalStorage, Storage
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.table_ref import TableRef
from tests.builders import TableGen

pytestmark = pytest.mark.spark


class CountingStorage(LocalStorage):
    """A table's storage that counts the folder listings made through it (the driver's reads)."""

    def __init__(self, base_uri: str) -> None:
        super().__init__(base_uri)
        self.listings: Counter[str] = Counter()
        self.under_lock: Counter[str] = Counter()
        """Listings made while the table lock file existed (this process is the table's only writer)."""

    def list_dir(self, rel: str = "") -> list[FileInfo]:
        self.listings[rel] += 1
        if self.exists(LOCK_FILE):
            self.under_lock[rel] += 1
        return super().list_dir(rel)


class RecordingRunner:
    """The Spark runner, noting the work order of every group it runs."""

    def __init__(self, spark: Any) -> None:
        self.inner = SparkGroupRunner(spark, owns_session=False)
        self.orders: list[WorkOrder] = []

    def run_group(self, table: TableRef, instant: str, plan: ClusteringPlan, index: int,
                  files: Sequence[BaseFile], merge: object = None) -> list[WriteStat]:
        self.orders.append(plan.strategy.work_order)
        return self.inner.run_group(table, instant, plan, index, files, merge)

    def cancel(self, table: TableRef, instant: str) -> None:
        self.inner.cancel(table, instant)

    def close(self) -> None:
        self.inner.close()


def _settings(base: Path, **policy: str) -> Settings:
    props = {"clusterd.tables": "t", "clusterd.table.t.base.path": str(base), "clusterd.metrics.address": "off",
             "hoodie.clustering.async.max.commits": "3", **policy}
    return settings_from_properties(props, source="test")[0]


def _table(tmp_path: Path, commits: int = 3) -> TableGen:
    gen = TableGen(tmp_path / "t")
    rng = random.Random(7)
    for _ in range(commits):
        gen.commit({p: [rng.uniform(0, 100) for _ in range(300)] for p in ("p1", "p2", "p3")})
    return gen


def _worker(settings: SettingsHolder[Settings], runner: RecordingRunner, storage: Storage | None = None
            ) -> TableWorker:
    worker = TableWorker("t", Daemon(settings, runner, NoObserver()))
    if storage is not None:
        worker._table_key = TableWorker.table_key(settings.current, settings.current.table("t"))
        spec = settings.current.table("t")
        worker.table = HoodieTable.open(storage.base_uri, storage, lock_provider=worker.daemon.lock_provider(
            settings.current, spec, storage))
    return worker


def _completed_clusterings(base: Path) -> list[Path]:
    return sorted((base / ".hoodie").glob("*.replacecommit"))


def test_one_tick_that_schedules_and_executes_lists_hoodie_thrice_and_each_partition_twice_at_most(
        spark: Any, tmp_path: Path) -> None:
    # Given a table due for clustering, opened over a storage that counts listings
    gen = _table(tmp_path)
    storage = CountingStorage(str(gen.base))
    runner = RecordingRunner(spark)
    worker = _worker(SettingsHolder(_settings(gen.base, **{
        "hoodie.clustering.plan.strategy.sort.columns": "x"})), runner, storage)
    # When one tick runs
    worker.tick()
    # Then it scheduled and executed one plan (every partition rewritten)
    assert len(_completed_clusterings(gen.base)) == 1 and len(runner.orders) == 3
    # And it listed .hoodie at most three times (the decision without the lock, the decision again under it to save
    # the plan, the commit's re-check under it) and each partition at most twice (the walk, the commit's re-check)
    assert storage.listings[".hoodie"] <= 3, storage.listings
    assert storage.under_lock[".hoodie"] <= 2, storage.under_lock
    for partition in ("p1", "p2", "p3"):
        assert storage.listings[partition] <= 2, storage.listings
    assert storage.listings[""] == 1, storage.listings  # the table's root: one walk
    # And under the table lock only .hoodie, its own folders and each planned partition once: no table walk
    assert storage.under_lock[""] == 0, storage.under_lock
    for partition in ("p1", "p2", "p3"):
        assert storage.under_lock[partition] <= 1, storage.under_lock
    # And the next tick, with nothing due, lists .hoodie once and nothing under the lock
    before, locked = storage.listings.copy(), storage.under_lock.copy()
    worker.tick()
    assert storage.listings[".hoodie"] - before[".hoodie"] == 1, storage.listings
    assert storage.under_lock == locked, storage.under_lock


def test_a_rollback_without_markers_lists_only_the_partitions_of_its_plan(tmp_path: Path) -> None:
    # Given an inflight clustering of partition p1 only, that wrote a file and left no markers
    gen = _table(tmp_path)
    from hudi_clusterd.ops.schedule import schedule
    from hudi_clusterd.table.rollback import rollback_pending
    from tests.builders import make_policy

    pending = schedule(gen.table, make_policy(**{"partition.selected": "p1"}), force=True).pending
    assert pending is not None and {g.partition_path for g in pending.plan.input_groups} == {"p1"}
    gen.table.timeline_store.create(pending.instant.with_state(State.INFLIGHT))
    written = gen.base / "p1" / base_file_name("0f0f0f0f-0000-4000-8000-000000000001-0", "1-2-3", pending.time)
    written.write_bytes(b"PAR1")
    # When it is rolled back, over a storage that counts listings
    storage = CountingStorage(str(gen.base))
    result = rollback_pending(HoodieTable.open(str(gen.base), storage), pending.time, Action.REPLACE_COMMIT)
    # Then its file is gone, and only p1 (and .hoodie) were listed: never the other partitions or the table root
    assert result is not None and not written.exists()
    assert storage.listings["p1"] == 1 and storage.listings["p2"] == storage.listings["p3"] == 0, storage.listings
    assert storage.listings[""] == 0, storage.listings


def test_a_reload_between_scheduling_and_execution_does_not_change_the_executed_plan(
        spark: Any, tmp_path: Path) -> None:
    # Given a plan scheduled under one policy: linear on x, 64 KiB files
    gen = _table(tmp_path)
    scheduled_with = {"hoodie.clustering.plan.strategy.sort.columns": "x",
                      "hoodie.clustering.plan.strategy.target.file.max.bytes": str(64 * 1024),
                      "hoodie.layout.optimize.strategy": "linear"}
    holder = SettingsHolder(_settings(gen.base, **scheduled_with, **{
        "hoodie.clustering.max.parallelism": "1"}))
    from hudi_clusterd.ops.schedule import schedule

    pending = schedule(gen.table, holder.current.table("t").policy).pending
    assert pending is not None
    planned = pending.plan.strategy.work_order
    # When the configuration is reloaded with another target size and layout before the plan runs
    assert holder.try_reload(lambda: _settings(gen.base, **{
        "hoodie.clustering.plan.strategy.sort.columns": "x",
        "hoodie.clustering.plan.strategy.target.file.max.bytes": str(1024 ** 3),
        "hoodie.layout.optimize.strategy": "hilbert", "hoodie.layout.optimize.curve.build.method": "sample"}))
    runner = RecordingRunner(spark)
    _worker(holder, runner).tick()
    # Then the plan executed with the work order it was scheduled with
    assert planned == WorkOrder(("x",), LayoutStrategy.LINEAR, target_file_max_bytes=64 * 1024)
    assert runner.orders and set(runner.orders) == {planned}
    assert [p.name.split(".")[0] for p in _completed_clusterings(gen.base)] == [pending.time]
