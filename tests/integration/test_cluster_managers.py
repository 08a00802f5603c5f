"""The daemon against real cluster managers started on 127.0.0.1 from pyspark's own scripts: a standalone master
with one worker (``bin/spark-class``), and a Spark Connect server (``bin/spark-submit``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.builders import TableGen, commit_some
from tests.harness.daemon_harness import wait_for
from tests.harness.hudi_rs_checks import assert_no_orphan_files, completed_clusterings, hudi_rs_rows, without_file_name
from tests.harness.spark_cluster import ClusterUnavailable, spark_home, standalone_cluster, start_logged
from tests.support import free_port

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    try:
        with standalone_cluster(tmp_path) as url:
            yield url
    except ClusterUnavailable as e:
        pytest.skip(str(e))


def run_once_against(tmp_path: Path, master: str, *conf: str) -> Path:
    """Cluster a fresh table with ``hudi-clusterd run --once`` on ``master``; returns its base path."""
    gen = TableGen(tmp_path / "events")
    commit_some(gen, 4, rows=500)
    before = without_file_name(hudi_rs_rows(gen.base))
    props = tmp_path / "clusterd.properties"
    props.write_text("\n".join([
        "clusterd.tables=events",
        f"clusterd.table.events.base.path={gen.base}",
        "clusterd.metrics.address=off",
        f"clusterd.spark.master={master}",
        *conf,
        "hoodie.clustering.async.max.commits=4",
        "hoodie.clustering.plan.strategy.sort.columns=x,id",
        "hoodie.layout.optimize.strategy=hilbert",
        "hoodie.layout.optimize.curve.build.method=sample",
        "",
    ]))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    result = subprocess.run([sys.executable, "-m", "hudi_clusterd", "run", "--once", "--props", str(props)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(completed_clusterings(gen.base)) == 1
    assert without_file_name(hudi_rs_rows(gen.base)) == before
    assert_no_orphan_files(gen.base, at_rest=True)
    return gen.base


def test_daemon_clusters_on_standalone_master(tmp_path: Path, standalone: str) -> None:
    run_once_against(tmp_path, standalone,
                     "clusterd.spark.conf.spark.driver.host=127.0.0.1",
                     "clusterd.spark.conf.spark.driver.bindAddress=127.0.0.1",
                     "clusterd.spark.conf.spark.executor.memory=512m",
                     "clusterd.spark.conf.spark.cores.max=2")
    assert "app-" in "".join(p.name for p in (tmp_path / "work").iterdir())  # executors ran on the worker


@pytest.fixture
def connect_server(tmp_path: Path) -> Iterator[str]:
    home = spark_home()
    submit = home / "bin" / "spark-submit"
    if not submit.exists() or shutil.which("java") is None or not list((home / "jars").glob("spark-connect_*.jar")):
        pytest.skip("pyspark's spark-submit, its Spark Connect server jar, or java is not available")
    port = free_port()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    server = start_logged([str(submit), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
                     "--master", "local[2]", "--conf", f"spark.connect.grpc.binding.port={port}",
                     "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                     "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
                     "--conf", "spark.ui.enabled=false", "spark-internal"], tmp_path / "connect.log", env)

    def listening() -> bool:
        import socket

        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(listening, 120, "the Spark Connect server to listen")
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_daemon_clusters_through_spark_connect(tmp_path: Path, connect_server: str) -> None:
    run_once_against(tmp_path, connect_server)
