"""``hudi-clusterd demo``: streaming ingestion writing small commits while the daemon clusters beside it.

Everything runs in this one process on local defaults: a Structured Streaming query (Spark's ``rate`` source)
writes one commit per micro-batch through ``HudiStreamingSink``; the daemon's table worker, on the same
SparkSession, schedules and executes clustering every few commits (Hilbert order on ``lat,lon``). Progress is
printed as it goes; at the end a snapshot read is compared with what the sink committed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import structlog

from hudi_clusterd.commands.status import human_bytes
from hudi_clusterd.exit_codes import EXIT_FAILURE, EXIT_OK
from hudi_clusterd.io.table import HoodieTable
from hudi_clusterd.runtime.logging import configure_logging

log = structlog.get_logger(__name__)

TABLE = "demo_events"
TARGET_BYTES = 256 * 1024  # small, so that a minute of demo data clusters into several sorted files
SMALL_BYTES = 128 * 1024


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "demo", help="streaming ingestion plus the daemon, on local defaults",
        description="Run a Structured Streaming query that writes small commits to a Hudi table while the "
                    "clustering daemon runs beside it; print progress, then a summary checked by a snapshot read.",
    )
    p.add_argument("--base-path", help="where to create the demo table (default: a new temporary folder)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds to run (default: %(default)s); Ctrl-C stops")
    p.add_argument("--rows-per-second", type=int, default=2000, help="rate of the source (default: %(default)s)")
    p.add_argument("--trigger-seconds", type=float, default=2.0, help="micro-batch interval (default: %(default)s)")
    p.add_argument("--max-commits", type=int, default=4,
                   help="hoodie.clustering.async.max.commits for the demo (default: %(default)s)")
    p.add_argument("--spark-master", default="local[*]", help="Spark master (default: %(default)s)")
    p.add_argument("--metrics-address", default="127.0.0.1:0",
                   help="where to serve /metrics (default: a free port on 127.0.0.1; 'off' to disable)")
    p.add_argument("--keep", action="store_true", help="keep a temporary demo table after the run")
    p.set_defaults(func=run)


def _settings(base: Path, args: argparse.Namespace) -> Any:
    from hudi_clusterd.settings import settings_from_properties

    props = {
        "clusterd.tables": TABLE,
        f"clusterd.table.{TABLE}.base.path": str(base),
        "clusterd.metrics.address": args.metrics_address,
        "clusterd.spark.master": args.spark_master,
        "clusterd.poll.interval.seconds": "1",
        "clusterd.shutdown.grace.seconds": "30",
        "hoodie.clustering.async.max.commits": str(args.max_commits),
        "hoodie.clustering.plan.strategy.sort.columns": "lat,lon",
        "hoodie.layout.optimize.strategy": "hilbert",
        "hoodie.layout.optimize.curve.build.method": "sample",
        "hoodie.clustering.plan.strategy.target.file.max.bytes": str(TARGET_BYTES),
        "hoodie.clustering.plan.strategy.small.file.limit": str(SMALL_BYTES),
    }
    settings, warnings = settings_from_properties(props, source="demo")
    for w in warnings:
        log.warning("config warning", detail=w)
    return settings


def _source(spark: Any, rows_per_second: int) -> Any:
    """Events from the rate source: skewed points around a few hot spots, like the reference dataset."""
    from pyspark.sql import functions as F

    v = F.col("value")
    hot = (v % 8).cast("double")
    jitter_a = (F.hash(v, F.lit(1)) % 1000) / 250.0
    jitter_b = (F.hash(v, F.lit(2)) % 1000) / 250.0
    return (spark.readStream.format("rate").option("rowsPerSecond", rows_per_second).load()
            .select(v.alias("event_id"), F.col("timestamp").alias("event_ts"),
                    (hot * 12.0 + jitter_a).alias("lat"), (F.lit(90.0) - hot * 11.0 + jitter_b).alias("lon"),
                    F.element_at(F.array(F.lit("a"), F.lit("b"), F.lit("c")), (v % 3 + 1).cast("int"))
                    .alias("category")))


def _snapshot_counts(table: HoodieTable) -> tuple[int, int, int]:
    """(files, small files, rows committed by ingestion) from the timeline and the latest snapshot."""
    timeline = table.timeline()
    view = table.file_system_view(timeline)
    files = view.latest_base_files()
    small = sum(1 for f in files if f.size < SMALL_BYTES)
    ingested = 0
    for inst in timeline.commits().completed():
        meta = table.timeline_store.commit_metadata(inst)
        if meta.operation_type != "CLUSTER":
            ingested += sum(ws.num_inserts for ws in meta.write_stats())
    return len(files), small, ingested


def run(args: argparse.Namespace) -> int:
    from hudi_clusterd.engine.clustering.runner import engine_for_session
    from hudi_clusterd.engine.ingest.sink import HudiStreamingSink
    from hudi_clusterd.engine.ingest.snapshot import snapshot
    from hudi_clusterd.engine.session import get_or_create_session
    from hudi_clusterd.layout.figures import snapshot_ratio
    from hudi_clusterd.runtime.metrics import Metrics, MetricsServer
    from hudi_clusterd.runtime.reload import SettingsHolder
    from hudi_clusterd.runtime.service import Daemon

    configure_logging("WARNING", "auto", sys.stderr)
    temporary = args.base_path is None
    root = Path(tempfile.mkdtemp(prefix="hudi-clusterd-demo-")) if temporary else Path(args.base_path)
    base = root / TABLE if temporary else root
    checkpoint = root / "_checkpoint" if temporary else root.parent / f".{root.name}_checkpoint"
    settings = _settings(base, args)
    print(f"demo table: {base}")
    print(f"starting Spark ({args.spark_master}) ...", flush=True)
    spark = get_or_create_session(args.spark_master, app_name="hudi-clusterd-demo")
    spark.sparkContext.setLogLevel("ERROR")
    metrics = Metrics()
    daemon = Daemon(SettingsHolder(settings), metrics, engine_for_session(spark, owns_session=False))
    server = None
    if settings.metrics_address is not None:
        host, port = settings.metrics_address
        server = MetricsServer(host, port, metrics, daemon.healthy)
        server.start()
        print(f"metrics: {server.url}/metrics")

    sink = HudiStreamingSink(str(base), record_key="event_id", partition_by=["category"], precombine="event_ts",
                             table_name=TABLE, identifier="hudi-clusterd-demo", parallelism=1)
    query = (_source(spark, args.rows_per_second).writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(checkpoint)).trigger(processingTime=f"{args.trigger_seconds} seconds")
             .start())
    started = time.monotonic()
    daemon_started = threading.Event()
    code = EXIT_OK
    try:
        while time.monotonic() - started < args.duration:
            if query.exception() is not None:
                raise RuntimeError(f"the streaming query failed: {query.exception()}")
            if not daemon_started.is_set() and HoodieTable.exists(str(base)):
                daemon.start()  # the table exists once the first micro-batch committed
                daemon_started.set()
            time.sleep(min(5.0, max(0.5, args.duration - (time.monotonic() - started))))
            if HoodieTable.exists(str(base)):
                _progress(HoodieTable.open(str(base)), started, metrics)
    except KeyboardInterrupt:
        print("\ninterrupted; stopping ...", flush=True)
    finally:
        _stop_between_batches(query)
        if daemon_started.is_set():
            daemon.stop(30.0)
            daemon.join(60.0)
        if server is not None:
            server.stop()
    if not HoodieTable.exists(str(base)):
        print("no micro-batch was committed; nothing to summarise", file=sys.stderr)
        spark.stop()
        return EXIT_FAILURE
    table = HoodieTable.open(str(base))
    files, small, ingested = _snapshot_counts(table)
    df = snapshot(spark, table)
    rows = df.count()
    distinct = df.select("event_id").distinct().count()
    clusterings = sum(1 for i in table.timeline().commits().completed() if table.is_clustering_instant(i))
    ratio = snapshot_ratio(table, ("lat", "lon"))
    print("\nsummary")
    print(f"  commits by ingestion: {sum(1 for i in table.timeline().commits().completed()) - clusterings}")
    print(f"  clusterings completed: {clusterings}")
    size = sum(f.size for f in table.file_system_view().latest_base_files())
    print(f"  latest snapshot: {files} files ({small} small), {human_bytes(size)}")
    print(f"  files-scanned ratio (lat,lon): {ratio:.3f}" if ratio is not None else "  files-scanned ratio: n/a")
    print(f"  rows ingested: {ingested}; rows read by a snapshot: {rows}; distinct keys: {distinct}")
    if rows == ingested == distinct:
        print("  check: OK (every ingested row read exactly once)")
    else:
        print("  check: MISMATCH", file=sys.stderr)
        code = EXIT_FAILURE
    spark.stop()
    if temporary and not args.keep and code == EXIT_OK:
        shutil.rmtree(root, ignore_errors=True)
    elif temporary:
        print(f"  table kept at {base}")
    return code


def _stop_between_batches(query: Any, timeout_s: float = 15.0) -> None:
    """Stop the query when no micro-batch is running, so the last batch is not interrupted half-written (it
    would be rolled back, safely, but Spark reports the interruption at length)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = query.status
        if not status.get("isTriggerActive", False):
            break
        time.sleep(0.05)
    query.stop()


def _progress(table: HoodieTable, started: float, metrics: Any) -> None:
    timeline = table.timeline()
    commits = timeline.commits().completed()
    clusterings = sum(1 for i in commits if table.is_clustering_instant(i))
    files = table.file_system_view(timeline).latest_base_files()
    small = sum(1 for f in files if f.size < SMALL_BYTES)
    pending = len(table.pending_clustering_plans(timeline))
    rewritten = metrics.registry.get_sample_value("hudi_clusterd_rewritten_files_total", {"table": TABLE}) or 0
    ratio = metrics.registry.get_sample_value("hudi_clusterd_layout_files_scanned_ratio", {"table": TABLE})
    layout = f"{ratio:.3f}" if ratio is not None and clusterings else "-"
    print(f"[{time.monotonic() - started:5.0f}s] commits {len(commits) - clusterings:4d}  clusterings {clusterings:3d}"
          f" (pending {pending})  files {len(files):4d} ({small} small; {int(rewritten)} rewritten)"
          f"  files-scanned ratio {layout}", flush=True)
