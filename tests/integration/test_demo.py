"""``hudi-clusterd demo`` end to end in its own process, and the quiet Spark start-up every command relies on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from hudi_clusterd.engine import session

SPARK_NOISE = (
    "Using Spark's default log4j profile",
    "Setting default log level",
    "WARN Utils",
    "NativeCodeLoader",
    "FairSchedulableBuilder",
    "scheduler pool",
)
PROGRESS_RATIO = re.compile(r"^\[\s*\d+s\] commits .* files-scanned ratio (\d\.\d{3})$")


def _summary_value(lines: list[str], label: str) -> str:
    found = [line.split(":", 1)[1].strip() for line in lines if line.strip().startswith(label + ":")]
    assert len(found) == 1, f"expected one summary line {label!r} in:\n" + "\n".join(lines)
    return found[0]


@pytest.mark.spark
def test_demo_clusters_beside_streaming_ingestion_quietly(tmp_path: Path) -> None:
    # Given the demo run as a user runs it, shortened: two commits per clustering, micro-batches big enough that
    # two of them already make several sorted files per partition
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY_")}
    argv = [sys.executable, "-m", "hudi_clusterd", "demo", "--base-path", str(tmp_path / "demo_events"),
            "--duration", "25", "--max-commits", "2", "--rows-per-second", "30000", "--metrics-address", "off"]
    # When it runs to the end
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, check=False)
    report = f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    # Then it succeeded, and the snapshot read every committed row exactly once
    assert done.returncode == 0, report
    lines = done.stdout.splitlines()
    assert _summary_value(lines, "check").startswith("OK"), report
    # And the daemon clustered beside ingestion, which took the files-scanned ratio from that of unclustered
    # files (every query reads every file) to well below half, measured as the progress line measures it
    assert int(_summary_value(lines, "clusterings completed")) >= 1, report
    ratios = [float(m.group(1)) for m in map(PROGRESS_RATIO.match, lines) if m]
    assert ratios, report
    assert ratios[0] == pytest.approx(1.0), report
    final = float(_summary_value(lines, "files-scanned ratio (lat,lon)"))
    assert final < 0.5, report
    assert final < ratios[0], report
    # And Spark's start-up chatter and scheduler-pool warnings stayed out of the output
    for noise in SPARK_NOISE:
        assert noise not in done.stdout + done.stderr, f"{noise!r} in the output\n{report}"


@pytest.mark.spark
def test_the_demo_runs_on_s3_with_the_storage_lock(s3_server: Any) -> None:
    # Given the demo pointed at the S3 server, which it reaches through the environment as AWS's SDKs do
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY_")}, **s3_server.env()}
    base = s3_server.fresh_uri("demo")
    argv = [sys.executable, "-m", "hudi_clusterd", "demo", "--base-path", base, "--duration", "15",
            "--max-commits", "2", "--rows-per-second", "30000", "--metrics-address", "off",
            "--spark-master", "local[2]"]
    # When it runs to the end
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, check=False)
    report = f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    # Then ingestion and the daemon shared the table through Hudi's storage lock, and every row reads back once
    assert done.returncode == 0, report
    lines = done.stdout.splitlines()
    assert _summary_value(lines, "check").startswith("OK"), report
    assert int(_summary_value(lines, "clusterings completed")) >= 1, report
    key = base.split("/", 3)[3] + "/.hoodie/.locks/table_lock.json"
    lock = s3_server.boto3().get_object(Bucket=s3_server.bucket, Key=key)["Body"].read()
    assert b'"expired":true' in lock.replace(b" ", b""), lock  # taken, and given back at the end
    assert s3_server.secret_key not in done.stdout + done.stderr


@pytest.mark.spark
def test_the_runner_s_fair_pools_are_declared(spark: Any) -> None:
    # Given the shared session, built by get_or_create_session
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.scheduler.mode") == "FAIR"
    allocation = urlparse(conf.get("spark.scheduler.allocation.file")).path
    # Then its allocation file declares the pool of every group of a plan, however many groups it has ...
    declared = {pool.get("name") for pool in ET.parse(allocation).getroot().iter("pool")}
    assert {session.scheduler_pool(i) for i in range(500)} <= declared
    # ... which Spark created when it started, before any job asked for them
    sc = spark.sparkContext._jsc.sc()
    assert all(sc.getPoolForName(name).isDefined() for name in sorted(declared))


def test_user_configuration_wins_over_the_generated_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Given no Spark configuration of the user's
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    for name in ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS",
                 "LOG4J_CONFIGURATION_FILE", "SPARK_LOCAL_IP"):
        monkeypatch.delenv(name, raising=False)
    # Then the driver gets the generated log4j configuration and allocation file, and a local master loopback
    options = session.driver_java_options({}, "ERROR")
    assert [o.split("=", 1)[0] for o in options] == ["-Dlog4j2.configurationFile", "-Dspark.scheduler.allocation.file"]
    log4j = Path(options[0].split("=", 1)[1]).read_text()
    assert "rootLogger.level = error" in log4j
    assert "logger.pygateway.level = error" in log4j  # no "Setting default log level" banner
    env = session.driver_environment("local[2]", {}, "WARN")
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["SPARK_SUBMIT_OPTS"].endswith("fairscheduler.xml")
    assert "SPARK_LOCAL_IP" not in session.driver_environment("spark://master:7077", {}, "WARN")
    # When the user sets either, in the session's conf, the JVM options or Spark's conf folder, theirs is kept
    user_pools = {"spark.scheduler.allocation.file": "/etc/pools.xml"}
    assert [o.split("=", 1)[0] for o in session.driver_java_options(user_pools)] == ["-Dlog4j2.configurationFile"]
    user_log4j = {"spark.driver.extraJavaOptions": "-Xss4m -Dlog4j2.configurationFile=/etc/log4j2.properties"}
    assert [o.split("=", 1)[0] for o in session.driver_java_options(user_log4j)] == \
        ["-Dspark.scheduler.allocation.file"]
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Dlog4j.configurationFile=mine.xml")
    assert [o.split("=", 1)[0] for o in session.driver_java_options({})] == ["-Dspark.scheduler.allocation.file"]
    assert session.driver_environment("local", {}, "WARN")["SPARK_SUBMIT_OPTS"].startswith(
        "-Dlog4j.configurationFile=mine.xml -Dspark.scheduler.allocation.file=")
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    (conf_dir / "log4j2.properties").write_text("rootLogger.level = info\n")
    (conf_dir / "fairscheduler.xml").write_text("<allocations/>\n")
    assert session.driver_java_options({}) == []
    # And a log level Spark does not know is refused
    with pytest.raises(ValueError, match="log level"):
        session.driver_java_options({}, "LOUD")
