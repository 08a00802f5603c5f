"""A Spark standalone master and one worker on 127.0.0.1, started from pyspark's own ``bin/spark-class``.

Used by the cluster-manager integration tests and by the memory benchmark (where the driver must be a process
of its own, apart from the executor that holds the data)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support import free_port


class ClusterUnavailable(RuntimeError):
    """pyspark's scripts or java are missing."""


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def start_logged(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    out = open(log, "wb")  # noqa: SIM115 - inherited by the child, closed with it
    return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _alive_workers(ui_port: int) -> int:
    try:
        page = urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2).read().decode()
    except OSError:
        return 0
    compact = page.replace(" ", "")
    marker = '"aliveworkers":'
    at = compact.find(marker)
    if at < 0:
        return 0
    digits = compact[at + len(marker):].split(",", 1)[0].strip("}\n")
    return int(digits) if digits.isdigit() else 0


@contextmanager
def standalone_cluster(workdir: Path, cores: int = 2, memory: str = "1g", timeout_s: float = 90,
                       home: Path | None = None, python: str | None = None) -> Iterator[str]:
    """Yield the master URL of a running master + one worker (``cores``, ``memory``); both stop on exit.

    ``home``: the Spark installation to run (default: this interpreter's pyspark); ``python``: the executors'
    Python (default: this interpreter). Another Spark version's drivers (Apache Hudi's venv) need its own."""
    home = home or spark_home()
    spark_class = home / "bin" / "spark-class"
    if not spark_class.exists() or shutil.which("java") is None:
        raise ClusterUnavailable("pyspark's bin/spark-class or java is not available")
    workdir.mkdir(parents=True, exist_ok=True)
    port, ui, worker_ui = free_port(), free_port(), free_port()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1",
           "PYSPARK_PYTHON": python or sys.executable, "SPARK_WORKER_DIR": str(workdir / "work"),
           "SPARK_LOCAL_DIRS": str(workdir / "local")}
    master = start_logged([str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(ui)], workdir / "master.log", env)
    url = f"spark://127.0.0.1:{port}"
    worker = start_logged([str(spark_class), "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                     "--cores", str(cores), "--memory", memory, "--webui-port", str(worker_ui),
                     "--work-dir", str(workdir / "work")], workdir / "worker.log", env)
    try:
        deadline = time.monotonic() + timeout_s
        while _alive_workers(ui) < 1:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standalone worker did not register within {timeout_s:.0f}s "
                                   f"(logs in {workdir})")
            if master.poll() is not None or worker.poll() is not None:
                raise RuntimeError(f"the standalone master or worker exited (logs in {workdir})")
            time.sleep(0.5)
        yield url
    finally:
        for proc in (worker, master):
            proc.terminate()
        for proc in (worker, master):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
