"""The one owner of the JVM: builds (or attaches to) the process-wide SparkSession.

Every Spark job of the daemon, the writer and the tests runs on the session this module returns. Masters:
``local[*]`` (default), ``local[N]``, ``spark://host:port`` (standalone), ``k8s://...``, ``yarn``, or a Spark
Connect URL ``sc://host:port``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = structlog.get_logger(__name__)

DEFAULT_MASTER = "local[*]"

# Settings for every classic session (user conf overrides any of them).
_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.scheduler.mode": "FAIR",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    # range partitions cut from 1000 sampled rows per output partition (Spark's default is 100) come out within a
    # few percent of equal size, so a linear clustering's output files land on the target, not just over it
    "spark.sql.execution.rangeExchange.sampleSizePerPartition": "1000",
}
# A local session stays on loopback; a cluster's executors must reach the driver, so there the driver address
# is Spark's own choice unless the configuration sets spark.driver.host / spark.driver.bindAddress.
_LOCAL_ONLY: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def is_connect_master(master: str) -> bool:
    """True for a Spark Connect URL (``sc://``)."""
    return master.startswith("sc://")


def is_connect_session(spark: object) -> bool:
    """True for a Spark Connect session (it has no SparkContext)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def get_or_create_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "hudi-clusterd",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return the process-wide SparkSession, creating it on first use.

    Python workers run the same interpreter as the driver (``PYSPARK_PYTHON``, set to this interpreter unless
    the environment already sets it), so executors see the same pyarrow and numpy. On a cluster whose workers
    keep Python elsewhere, export ``PYSPARK_PYTHON`` with the workers' path before starting the daemon. With a
    Spark Connect URL the server's Python workers run the UDFs, so the server needs this package installed.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder: Any = SparkSession.builder.appName(app_name)
    if is_connect_master(master):
        builder = builder.remote(master)
        settings: dict[str, str] = {}
    else:
        builder = builder.master(master)
        settings = dict(_DEFAULTS)
        if master.startswith("local"):
            settings.update(_LOCAL_ONLY)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    session: SparkSession = builder.getOrCreate()
    log.info("spark session ready", master=master, version=session.version)
    return session


def default_parallelism(spark: SparkSession) -> int:
    """Cores the session's jobs run on at once: the SparkContext's default parallelism, or on Spark Connect
    (no SparkContext) ``spark.default.parallelism`` when set, else 1."""
    if not is_connect_session(spark):
        return max(1, int(spark.sparkContext.defaultParallelism))
    try:
        return max(1, int(str(spark.conf.get("spark.default.parallelism", "1"))))
    except ValueError:
        return 1
