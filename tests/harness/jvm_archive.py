"""A class-data archive for the Spark driver JVMs the tests start: ``python -m tests.harness.jvm_archive``.

The integration tests start some forty driver JVMs (daemon processes, ``hudi-clusterd`` commands, streaming
jobs), and each spends seconds loading and verifying the same Spark classes. This script runs a small clustering
workload once on a ``local[2]`` session with ``-XX:ArchiveClassesAtExit`` (JDK CDS, a dynamic archive), which
saves the classes it loaded to ``<repo>/.cache/jvm/``. While the archive is there, ``tests/conftest.py`` hands
``-XX:SharedArchiveFile`` to every driver JVM started from the test process through ``SPARK_SUBMIT_OPTS``
(inherited by the processes it starts; the Apache Hudi workers, in their own venv, drop ``SPARK_*``), so they map
the classes instead of loading them. The JVM validates the archive (JDK build, class path); one that does not
match is ignored silently, and the tests run the same without it, only slower.

Idempotent: an archive made for the same ``java`` and PySpark is kept. Failures print a warning and exit 0.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
COMMAND = "python -m tests.harness.jvm_archive"
# silent when the archive cannot be used (another JDK, another class path): the JVM then loads classes as usual
_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def _pyspark_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("pyspark")
    except Exception:  # no pyspark: no Spark tests either
        return None


def archive_path() -> Path | None:
    """Where the archive for this ``java`` and PySpark lives; None without either."""
    java = shutil.which("java")
    spark = _pyspark_version()
    if java is None or spark is None:
        return None
    key = hashlib.sha1(f"{os.path.realpath(java)}|{spark}|{sys.prefix}".encode()).hexdigest()[:12]
    return REPO_ROOT / ".cache" / "jvm" / f"spark-{spark}-{key}.jsa"


def java_options() -> list[str]:
    """The driver JVM options that use the archive; none when it was not made."""
    path = archive_path()
    if path is None or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}", *_QUIET]


def use_archive(environ: dict[str, str] | os._Environ[str]) -> None:
    """Add `java_options` to ``SPARK_SUBMIT_OPTS`` in ``environ`` (once); nothing when there is no archive."""
    options = java_options()
    current = environ.get("SPARK_SUBMIT_OPTS", "")
    if options and options[0] not in current:
        environ["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, [current, *options]))


def workload(scratch: Path) -> None:
    """What the archive records: a table written, upserted, scheduled and clustered (Hilbert from a sample, then
    linear) with the project's code, and two micro-batches of a streaming query through its sink."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hudi_clusterd.domain.table_config import TableConfig
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner
    from hudi_clusterd.engine.ingest.sink import HudiStreamingSink
    from hudi_clusterd.engine.ingest.upsert import upsert
    from hudi_clusterd.engine.ingest.writer import insert
    from hudi_clusterd.engine.session import get_or_create_session
    from hudi_clusterd.ops.execute import execute_pending
    from hudi_clusterd.ops.schedule import schedule
    from hudi_clusterd.table.hoodie_table import HoodieTable
    from tests.builders import make_policy

    spark = get_or_create_session("local[2]", app_name="hudi-clusterd-jvm-archive",
                                  conf={"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2",
                                        "spark.ui.enabled": "false"})
    try:
        base = scratch / "t"
        HoodieTable.create(str(base), TableConfig.for_new_table(name="t", record_key_fields=["id"],
                                                                partition_fields=["part"]))
        table = HoodieTable.open(str(base))
        for n in range(3):
            rows = [(n * 500 + i, float((i * 7919) % 1000), f"p{i % 2}") for i in range(500)]
            insert(spark, table, spark.createDataFrame(rows, "id long, x double, part string"))
        upsert(spark, table, spark.createDataFrame([(i, -1.0, f"p{i % 2}") for i in range(0, 1500, 7)],
                                                   "id long, x double, part string"))
        runner = SparkGroupRunner(spark, owns_session=False)
        for layout in ({"hoodie.layout.optimize.strategy": "hilbert",
                        "hoodie.layout.optimize.curve.build.method": "sample"}, {}):
            policy = make_policy(**{"hoodie.clustering.plan.strategy.sort.columns": "x,id", **layout})
            scheduled = schedule(table, policy, force=True)
            if scheduled.pending is not None:
                execute_pending(table, runner, scheduled.pending.time, parallelism=2)
            insert(spark, table, spark.createDataFrame([(10_000 + i, float(i), "p0") for i in range(100)],
                                                       "id long, x double, part string"))
        source = scratch / "source"
        source.mkdir()
        for n in range(2):
            pq.write_table(pa.table({"id": [20_000 + n * 10 + i for i in range(10)], "x": [1.0] * 10}),
                           source / f"part-{n}.parquet")
        query = (spark.readStream.schema("id long, x double").parquet(str(source))
                 .writeStream.foreachBatch(HudiStreamingSink(str(scratch / "s"), record_key="id", table_name="s"))
                 .option("checkpointLocation", str(scratch / "checkpoint")).trigger(availableNow=True).start())
        query.awaitTermination(300)
    finally:
        spark.stop()


def build(path: Path) -> None:
    """Run `workload` in a new process whose driver JVM writes the archive at its exit, then move it in place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hudi-clusterd-jvm-archive-") as scratch:
        partial = Path(scratch) / "archive.jsa"
        env = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
        env["SPARK_SUBMIT_OPTS"] = f"-XX:ArchiveClassesAtExit={partial} " + " ".join(_QUIET)
        env["PYSPARK_PYTHON"] = sys.executable
        done = subprocess.run([sys.executable, "-m", "tests.harness.jvm_archive", "--workload", scratch],
                              cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0 or not partial.is_file():
            raise RuntimeError(f"the workload exited {done.returncode} without an archive:\n{done.stderr[-2000:]}")
        for old in path.parent.glob("spark-*.jsa"):
            old.unlink()
        os.replace(partial, path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="Make the class-data archive the tests' Spark "
                                                               "driver JVMs start with (kept under .cache/jvm).")
    parser.add_argument("--workload", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.workload:
        workload(Path(args.workload))
        return 0
    path = archive_path()
    if path is None:
        print("jvm_archive: no java or no pyspark; the Spark tests run without an archive", file=sys.stderr)
        return 0
    if path.is_file():
        print(f"jvm_archive: {path} is there")
        return 0
    print(f"jvm_archive: recording the classes of a small clustering run into {path} ...", flush=True)
    started = time.monotonic()
    try:
        build(path)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        print(f"jvm_archive: warning: no archive made, the Spark tests run without it: {exc}", file=sys.stderr)
        return 0
    print(f"jvm_archive: done in {time.monotonic() - started:.0f}s ({path.stat().st_size / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
