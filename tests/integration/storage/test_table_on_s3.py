"""A Hudi table on S3 (SeaweedFS): the daemon's worker polls an idle one with one listing, and clustering runs end
to end, its Spark tasks reading and writing the data files through the object storage (no Hadoop S3A): through the
operations in this process, and through ``hudi-clusterd cluster`` in a process of its own that finds the server
in its environment and locks the table with Hudi's storage lock."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hudi_clusterd.domain.instant import Action, State
from hudi_clusterd.ops.events import Outcome, PlanFinished
from hudi_clusterd.ops.execute import execute_pending
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.ordering.figures import clustering_figures
from hudi_clusterd.runtime.reload import SettingsHolder
from hudi_clusterd.runtime.service import Daemon, TableWorker
from hudi_clusterd.settings import settings_from_properties
from hudi_clusterd.storage import ObjectStorage, StorageSpec, open_storage
from hudi_clusterd.storage.requests import difference
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import TableGen, make_policy
from tests.harness.process_lock import ProcessLock
from tests.harness.s3_proxy import CountingS3Proxy


class _NoGroups:
    """A group runner for ticks that must not run any group."""

    def run_group(self, table: Any, instant: str, plan: Any, index: int, files: Any, merge: Any = None) -> list[Any]:
        raise AssertionError("an idle table ran a clustering group")

    def cancel(self, table: Any, instant: str) -> None:
        return None

    def close(self) -> None:
        return None


class _Events:
    def notify(self, event: Any) -> None:
        return None


def _table(storage: ObjectStorage, commits: int, rows: int = 50, seed: int = 1) -> TableGen:
    rng = random.Random(seed)
    gen = TableGen(Path("unused"), storage=storage, lock_provider=ProcessLock())
    for _ in range(commits):
        gen.commit({"p1": [rng.uniform(0, 100) for _ in range(rows)], "p2": [rng.uniform(0, 100) for _ in range(rows)]})
    return gen


def test_the_worker_polls_an_idle_table_on_s3_with_one_listing(s3_server: Any,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    with CountingS3Proxy(s3_server.endpoint) as proxy:
        # Given a table on S3 that the daemon reaches through the environment (as its pods would)
        for name, value in {**s3_server.env(), "AWS_ENDPOINT_URL_S3": proxy.endpoint}.items():
            monkeypatch.setenv(name, value)
        uri = s3_server.fresh_uri("poll")
        storage = open_storage(uri)
        assert isinstance(storage, ObjectStorage)
        gen = _table(storage, commits=2)
        props = {"clusterd.tables": "t", "clusterd.metrics.address": "off", "clusterd.table.t.base.path": uri,
                 "hoodie.clustering.async.max.commits": "4"}
        worker = TableWorker("t", Daemon(SettingsHolder(settings_from_properties(props, source="test")[0]),
                                         _NoGroups(), _Events()))
        # When its worker ticks once (nothing to do: 2 commits, 4 needed)
        with proxy.measure() as first:
            assert worker.poll(woken=True)
        assert worker.table is not None
        counts = worker.table.storage.requests
        assert counts is not None
        # Then each later poll of the idle table is one listing of the timeline folder, and no tick
        for _ in range(3):
            before = counts.snapshot()
            with proxy.measure() as seen:
                assert not worker.poll()
            assert difference(counts.snapshot(), before) == seen == {"LIST": 1}
        # (a tick lists every partition folder and reads the properties too)
        assert first.get("LIST", 0) >= 4 and first.get("GET", 0) >= 1, first
        # And a new commit makes the next poll tick
        gen.commit({"p1": [1.0]})
        with proxy.measure() as seen:
            assert worker.poll()
        assert seen.get("LIST", 0) >= 4, seen


@pytest.mark.spark
def test_clustering_a_table_on_s3_end_to_end(s3_server: Any, spark: Any) -> None:
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner

    # Given a small partitioned table on S3, its credentials in the spec's options (pickled to the Spark tasks)
    storage = open_storage(StorageSpec(s3_server.fresh_uri("cluster"), s3_server.storage_options()))
    assert isinstance(storage, ObjectStorage)
    gen = _table(storage, commits=4)
    policy = make_policy(**{"sort.columns": "x"})
    # When a plan is scheduled and executed on Spark
    planned = schedule(gen.table, policy, force=True)
    assert planned.instant is not None, planned.reason
    events: list[Any] = []
    result = execute_pending(gen.table, SparkGroupRunner(spark, owns_session=False), planned.instant,
                             parallelism=2, figures=clustering_figures, observer=_Recorder(events))
    # Then the replacecommit completed, its files are on S3, and every row is there once, sorted in its file
    assert result.outcome is Outcome.COMPLETED, result.message
    done = [i for i in gen.table.timeline() if i.time == planned.instant]
    assert [(i.action, i.state) for i in done] == [(Action.REPLACE_COMMIT, State.COMPLETED)]
    written = [s.path for s in result.write_stats]
    assert written and all(storage.exists(p) for p in written)
    rows = _rows(s3_server, storage.base_uri)
    assert sorted(rows.column("id").to_pylist()) == list(range(4 * 2 * 50))
    assert {r.rsplit("/", 1)[-1] for r in rows.column("_hoodie_file_name").to_pylist()} == {
        p.rsplit("/", 1)[-1] for p in written}
    # And the clustering reported the requests the daemon's process made to the store (the commit's among them;
    # the Spark tasks' reads and writes are their own processes') and how long it held the lock
    finished = [e for e in events if isinstance(e, PlanFinished)]
    assert len(finished) == 1
    assert finished[0].requests.get("PUT", 0) >= 1 and finished[0].requests.get("LIST", 0) >= 1, finished[0]
    assert 0 < finished[0].lock_held_s < 30


class _Recorder:
    def __init__(self, events: list[Any]) -> None:
        self.events = events

    def notify(self, event: Any) -> None:
        self.events.append(event)


def _rows(s3_server: Any, uri: str) -> pa.Table:
    """The table's snapshot as hudi-rs reads it (a second, independent reader)."""
    from hudi import HudiReadOptions

    from tests.harness.hudi_rs_checks import hudi_table, s3_storage_options

    return pa.Table.from_batches(hudi_table(uri, s3_storage_options(s3_server)).read(HudiReadOptions()))


@pytest.mark.spark
def test_hudi_clusterd_cluster_on_s3_in_its_own_process(s3_server: Any, tmp_path: Path) -> None:
    # Given a small table on S3 (s3a://, as Spark writers name it), locked by Hudi's storage lock
    storage = open_storage(StorageSpec(s3_server.fresh_uri("cli").replace("s3://", "s3a://", 1),
                                       s3_server.storage_options()))
    assert isinstance(storage, ObjectStorage)
    _table(storage, commits=3, seed=7)
    props = tmp_path / "cluster.properties"
    props.write_text("hoodie.write.lock.provider=org.apache.hudi.client.transaction.lock.StorageBasedLockProvider\n"
                     "hoodie.clustering.plan.strategy.sort.columns=x\n")
    # When hudi-clusterd clusters it, reaching the server through the environment only (driver and Python workers)
    env = {**os.environ, **s3_server.env(), "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-m", "hudi_clusterd", "cluster", "--base-path", storage.base_uri,
                           "--props", str(props), "--force", "--spark-master", "local[1]",
                           "--spark-conf", "spark.sql.shuffle.partitions=2"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    # Then the replacecommit completed, the storage lock was taken and given back, and every row is there once
    table = HoodieTable.open(storage.base_uri, storage, lock_provider=ProcessLock())
    replaced = [i for i in table.timeline() if i.action is Action.REPLACE_COMMIT]
    assert [i.state for i in replaced] == [State.COMPLETED], done.stdout
    lock = storage.read_bytes(".hoodie/.locks/table_lock.json")
    assert b'"expired":true' in lock.replace(b" ", b"")
    assert sorted(_rows(s3_server, storage.base_uri).column("id").to_pylist()) == list(range(3 * 2 * 50))
    assert s3_server.secret_key not in done.stdout + done.stderr
