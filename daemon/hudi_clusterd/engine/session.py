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

# Settings that keep a local session quiet, bounded and on loopback; user conf overrides any of them.
_LOCAL_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.scheduler.mode": "FAIR",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
}


def is_connect_master(master: str) -> bool:
    """True for a Spark Connect URL (``sc://``)."""
    return master.startswith("sc://")


def get_or_create_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "hudi-clusterd",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return the process-wide SparkSession, creating it on first use.

    Python workers run the same interpreter as the driver (``PYSPARK_PYTHON``), so executors see the same
    pyarrow and numpy. For a remote cluster set ``spark.pyspark.python`` in ``conf`` to the workers' path.
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
        settings = dict(_LOCAL_DEFAULTS)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    session: SparkSession = builder.getOrCreate()
    log.info("spark session ready", master=master, version=session.version)
    return session
