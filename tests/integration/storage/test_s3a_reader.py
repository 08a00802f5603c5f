"""Spark's S3A reader (``clusterd.spark.object.store.reader=s3a``) on a table on S3 (SeaweedFS): it reads exactly
the rows and schema the Python workers read, and ``hudi-clusterd cluster`` clusters a table through it. Both run
in processes of their own (the connector's jars go on the class path before the JVM starts); they skip, naming
the set-up command, when the jars are not fetched (and fail under ``CLUSTERD_REQUIRE_HUDI=1``, as in CI)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.domain.instant import Action, State
from hudi_clusterd.storage import ObjectStorage, StorageSpec, open_storage
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import TableGen
from tests.harness.process_lock import ProcessLock
from tests.harness.s3_proxy import CountingS3Proxy

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def s3a_jars() -> None:
    from hudi_clusterd.engine.s3a import SETUP_COMMAND, s3a_jars
    from hudi_clusterd.errors import ConfigError

    try:
        s3a_jars()
    except ConfigError as e:
        if os.environ.get("CLUSTERD_REQUIRE_HUDI") == "1":  # CI fetched them (.ci/run)
            pytest.fail(str(e))
        pytest.skip(f"{e} ({SETUP_COMMAND})")


def _table(storage: ObjectStorage, commits: int, seed: int) -> None:
    rng = random.Random(seed)
    gen = TableGen(Path("unused"), storage=storage, lock_provider=ProcessLock())
    for _ in range(commits):
        gen.commit({"p1": [rng.uniform(0, 100) for _ in range(40)], "p2": [rng.uniform(0, 100) for _ in range(40)]})


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, "AWS_EC2_METADATA_DISABLED": "true", "PYSPARK_PYTHON": sys.executable, **extra}


def test_the_s3a_reader_reads_what_the_python_workers_read(s3_server: Any, s3a_jars: None) -> None:
    # Given a small partitioned table on S3 in three commits (three files per partition)
    storage = open_storage(StorageSpec(s3_server.fresh_uri("s3a-read"), s3_server.storage_options()))
    assert isinstance(storage, ObjectStorage)
    _table(storage, commits=3, seed=3)
    # When both readers read each partition's files, S3A reaching the server through a counting proxy
    with CountingS3Proxy(s3_server.endpoint) as proxy:
        options = {**s3_server.storage_options(), "endpoint": proxy.endpoint}
        with proxy.measure() as seen:
            done = subprocess.run([sys.executable, "-m", "tests.harness.s3a_read_check", storage.base_uri,
                                   json.dumps(options)], capture_output=True, text=True, timeout=600, env=_env({}))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # Then every partition's schema, rows and scanned rows are equal, Spark's reader was given s3a:// files,
    # and the store was read (S3A's requests and the Python workers' both go through the proxy)
    assert sorted(report) == ["p1", "p2"]
    for partition, r in report.items():
        assert r["files"] == 3 and r["count"] == [120, 120], (partition, r)
        assert r["schema_equal"] and r["rows_equal"] and r["scan_rows_equal"], (partition, r)
        assert r["input_schemes"] == ["s3a"], (partition, r)
    assert seen.get("GET", 0) >= 12, seen
    assert s3_server.secret_key not in done.stdout + done.stderr


def test_hudi_clusterd_cluster_through_s3a(s3_server: Any, s3a_jars: None, tmp_path: Path) -> None:
    # Given a small table on S3 (s3:// this time: S3A serves it too), locked by Hudi's storage lock
    storage = open_storage(StorageSpec(s3_server.fresh_uri("s3a-cluster"), s3_server.storage_options()))
    assert isinstance(storage, ObjectStorage)
    _table(storage, commits=3, seed=11)
    props = tmp_path / "cluster.properties"
    props.write_text("hoodie.write.lock.provider=org.apache.hudi.client.transaction.lock.StorageBasedLockProvider\n"
                     "hoodie.clustering.plan.strategy.sort.columns=x\n")
    # When hudi-clusterd clusters it with the S3A reader, reaching the server through the environment only
    done = subprocess.run([sys.executable, "-m", "hudi_clusterd", "cluster", "--base-path", storage.base_uri,
                           "--props", str(props), "--force", "--spark-master", "local[1]",
                           "--spark-conf", "spark.sql.shuffle.partitions=2", "--object-store-reader", "s3a"],
                          capture_output=True, text=True, timeout=600, env=_env(s3_server.env()))
    assert done.returncode == 0, done.stderr[-3000:]
    # Then the replacecommit completed and every row is there once, sorted by x in each new file
    table = HoodieTable.open(storage.base_uri, storage, lock_provider=ProcessLock())
    replaced = [i for i in table.timeline() if i.action is Action.REPLACE_COMMIT]
    assert [i.state for i in replaced] == [State.COMPLETED], done.stdout
    import pyarrow.parquet as pq

    ids: list[int] = []
    for bf in table.file_system_view().latest_base_files():
        with storage.open_input_file(bf.relative_path) as f:
            rows = pq.read_table(f)
        xs = rows.column("x").to_pylist()
        assert xs == sorted(xs), bf.relative_path
        ids += rows.column("id").to_pylist()
    assert sorted(ids) == list(range(3 * 2 * 40))
    assert s3_server.secret_key not in done.stdout + done.stderr
