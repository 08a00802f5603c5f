"""``hudi-clusterd demo``: streaming ingestion writing small commits while the daemon clusters beside it.

Everything runs in this one process on local defaults: a Structured Streaming query (Spark's
``rate-micro-batch`` source, `demo_events`) writes one commit per micro-batch through ``HudiStreamingSink``,
one file per partition (``category``: 3 partitions); the daemon's table worker, on the same SparkSession,
schedules and executes clustering every `--max-commits` commits (Hilbert order on ``lat,lon``). Progress is
printed as it goes; when the time is up, ingestion stops, the daemon finishes the clustering the last commits
call for, and a snapshot read is compared with what the sink committed.

Sizes. Every base file carries Hudi's record-key bloom filter in its footer, `BLOOM_FOOTER_BYTES` (431 KB with
Hudi's defaults) whatever its rows, and the clustering target counts data bytes only, so a file's size is the
filter plus its data:

- `TARGET_BYTES` (256 KiB of data): clustering cuts each partition into files of about 90 % of it;
- ingestion: a micro-batch of the default 7,500 rows/s x 2 s = 15,000 rows writes 5,000 rows per partition,
  about 108 KB of data (gzip) or 0.41 of the target: files under `SMALL_BYTES`, the bloom filter plus half the
  target's data, which the progress line counts as small;
- clustering output: a group's rows come out at about 24 bytes each (snappy, sorted), split into equal files of
  0.6 to 0.9 of the target as soon as a group holds three commits (0.45 at worst for two), so above
  `SMALL_BYTES`;
- `SMALL_FILE_LIMIT` (1 MiB) is above every file of the demo (its output files included: none is near a
  megabyte), so every clustering re-sorts all of a partition's rows. The planner groups slices whose ``lat``
  ranges overlap, and an ingestion file spans them all, so each plan is one group per partition, which comes out
  as one Hilbert-ordered run of files, more of them as the table grows (the number of files is measured from a
  sample, `engine.clustering.sizing`): the files-scanned ratio falls from 1.0 (every file spans the whole
  domain) to about 0.2 to 0.4 after a minute, depending on how many commits the machine's cores allow. With
  production sizes (a limit well below a target of hundreds of MB) output files stay out of later plans;
- `--max-commits` 3: a clustering every three commits (about 6 s), or right after the previous one when
  clustering takes longer, as it does on two busy cores.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from hudi_clusterd.commands.status import human_bytes
from hudi_clusterd.exit_codes import EXIT_FAILURE, EXIT_OK
from hudi_clusterd.formats.bloom import DEFAULT_FPP, DEFAULT_NUM_ENTRIES, bit_size
from hudi_clusterd.ordering.figures import snapshot_ratio
from hudi_clusterd.table.hoodie_table import HoodieTable

log = structlog.get_logger(__name__)


def _bloom_footer_bytes() -> int:
    """Bytes of the record-key bloom filter footer of a base file under 60,000 keys (Hudi's defaults: one
    DYNAMIC_V0 row of 2,587,966 bits, Base64-encoded: 431,380)."""
    vector = 13 + math.ceil(bit_size(DEFAULT_NUM_ENTRIES, DEFAULT_FPP) / 8)  # its header, then the bits
    return 4 * math.ceil((13 + 12 + vector) / 3)


TABLE = "demo_events"
SORT_COLUMNS = ("lat", "lon")
BLOOM_FOOTER_BYTES = _bloom_footer_bytes()
TARGET_KIB = 256
"""``target.file.max.bytes`` in KiB: data bytes per clustering output file (the bloom footer comes on top)."""
PROGRESS_SECONDS = 5.0
DRAIN_SECONDS = 30.0
"""How long, once ingestion stopped, the daemon gets to finish the clustering the last commits call for."""


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "demo", help="streaming ingestion plus the daemon, on local defaults",
        description="Run a Structured Streaming query that writes small commits to a Hudi table while the "
                    "clustering daemon runs beside it; print progress, then a summary checked by a snapshot read.",
    )
    p.add_argument("--base-path", help="where to create the demo table: a folder, or an object store's URI "
                   "(s3://bucket/prefix, reached with the AWS_* variables; the table is then locked with Hudi's "
                   "StorageBasedLockProvider) (default: a new temporary folder)")
    p.add_argument("--duration", type=float, default=60.0,
                   help="seconds of ingestion (default: %(default)s); Ctrl-C stops")
    p.add_argument("--rows-per-second", type=int, default=7500,
                   help="events per second; each micro-batch holds rows-per-second x trigger-seconds rows "
                        "(default: %(default)s)")
    p.add_argument("--trigger-seconds", type=float, default=2.0, help="micro-batch interval (default: %(default)s)")
    p.add_argument("--max-commits", type=int, default=3,
                   help="hoodie.clustering.async.max.commits for the demo (default: %(default)s)")
    p.add_argument("--target-kib", type=_positive_int, default=TARGET_KIB,
                   help="data per clustering output file, in KiB; every file's bloom filter footer (431 KB) comes "
                        "on top (default: %(default)s)")
    p.add_argument("--spark-master", default="local[*]", help="Spark master (default: %(default)s)")
    p.add_argument("--metrics-address", default="127.0.0.1:0",
                   help="where to serve /metrics (default: a free port on 127.0.0.1; 'off' to disable)")
    p.add_argument("--keep", action="store_true", help="keep a temporary demo table after the run")
    p.set_defaults(func=run)


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class Sizes:
    """The demo's file sizes (see the module's text)."""

    target: int
    """``target.file.max.bytes``: data bytes per clustering output file."""

    @property
    def small(self) -> int:
        """What the progress line and the summary count as a small file: less than half the target's data."""
        return BLOOM_FOOTER_BYTES + self.target // 2

    @property
    def small_file_limit(self) -> int:
        """``small.file.limit``: above every file of the demo, so that each clustering re-sorts all of a
        partition's rows: 1 MiB, or the bloom footer plus two targets of data when that is more."""
        return max(1024 * 1024, BLOOM_FOOTER_BYTES + 2 * self.target)


STORAGE_LOCK: dict[str, str] = {
    "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"}
"""The lock of a demo table on an object store, shared by its ingestion and the daemon: no service to run."""


def _settings(base: Path | str, args: argparse.Namespace, sizes: Sizes, lock: dict[str, str]) -> Any:
    from hudi_clusterd.settings import settings_from_properties

    props = {
        "clusterd.tables": TABLE,
        f"clusterd.table.{TABLE}.base.path": str(base),
        "clusterd.metrics.address": args.metrics_address,
        "clusterd.spark.master": args.spark_master,
        "clusterd.poll.interval.seconds": "1",
        "clusterd.shutdown.grace.seconds": "30",
        "hoodie.clustering.async.max.commits": str(args.max_commits),
        "hoodie.clustering.plan.strategy.sort.columns": ",".join(SORT_COLUMNS),
        "hoodie.layout.optimize.strategy": "hilbert",
        "hoodie.layout.optimize.curve.build.method": "sample",
        "hoodie.clustering.plan.strategy.target.file.max.bytes": str(sizes.target),
        "hoodie.clustering.plan.strategy.small.file.limit": str(sizes.small_file_limit),
        **lock,
    }
    settings, warnings = settings_from_properties(props, source="demo")
    for w in warnings:
        log.warning("config warning", detail=w)
    return settings


def _snapshot_counts(table: HoodieTable, small_bytes: int) -> tuple[int, int, int]:
    """(files, small files, rows committed by ingestion) from the timeline and the latest snapshot."""
    timeline = table.timeline()
    view = table.file_system_view(timeline)
    files = view.latest_base_files()
    small = sum(1 for f in files if f.size < small_bytes)
    ingested = 0
    for inst in timeline.commits().completed():
        meta = table.timeline_store.commit_metadata(inst)
        if meta.operation_type != "CLUSTER":
            ingested += sum(ws.num_inserts for ws in meta.write_stats())
    return len(files), small, ingested


def run(args: argparse.Namespace) -> int:
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner
    from hudi_clusterd.engine.ingest.demo_events import skewed_events
    from hudi_clusterd.engine.ingest.sink import HudiStreamingSink
    from hudi_clusterd.engine.ingest.snapshot import snapshot
    from hudi_clusterd.engine.session import get_or_create_session
    from hudi_clusterd.runtime.app import App

    remote = args.base_path is not None and "://" in args.base_path  # an object store: the checkpoint stays here
    temporary = args.base_path is None
    root = Path(tempfile.mkdtemp(prefix="hudi-clusterd-demo-")) if temporary or remote else Path(args.base_path)
    base: Path | str = args.base_path.rstrip("/") if remote else root / TABLE if temporary else root
    checkpoint = root / "_checkpoint" if temporary or remote else root.parent / f".{root.name}_checkpoint"
    lock = STORAGE_LOCK if remote else {}
    sizes = Sizes(args.target_kib * 1024)
    settings = _settings(base, args, sizes, lock)
    print(f"demo table: {base}")
    print(f"starting Spark ({args.spark_master}) ...", flush=True)
    spark = get_or_create_session(args.spark_master, app_name="hudi-clusterd-demo", log_level="ERROR")
    app = App(settings, runner=SparkGroupRunner(spark, owns_session=False))
    app.start_metrics()
    if app.server is not None:
        print(f"metrics: {app.server.url}/metrics")

    sink = HudiStreamingSink(str(base), record_key="event_id", partition_by=["category"], precombine="event_ts",
                             table_name=TABLE, identifier="hudi-clusterd-demo", parallelism=1,
                             lock_properties=lock)
    ingestion = _Switchable(sink)
    rows_per_batch = max(1, round(args.rows_per_second * args.trigger_seconds))
    query = (skewed_events(spark, rows_per_batch, round(args.trigger_seconds * 1000)).writeStream
             .foreachBatch(ingestion).option("checkpointLocation", str(checkpoint))
             .trigger(processingTime=f"{args.trigger_seconds} seconds").start())
    started = time.monotonic()
    daemon_started = interrupted = False
    code = EXIT_OK

    def start_daemon() -> None:  # once the first micro-batch committed, after a line with the unclustered layout
        nonlocal daemon_started
        _progress(HoodieTable.open(str(base)), started, app.metrics, sizes.small)
        app.start()
        daemon_started = True

    try:
        next_line = started + PROGRESS_SECONDS
        while time.monotonic() - started < args.duration:
            if query.exception() is not None:
                raise RuntimeError(f"the streaming query failed: {query.exception()}")
            if not daemon_started and _first_commit_done(str(base)):
                start_daemon()
                next_line = time.monotonic() + PROGRESS_SECONDS
            elif time.monotonic() >= next_line:
                _progress(HoodieTable.open(str(base)) if daemon_started else None, started, app.metrics,
                          sizes.small)
                next_line += PROGRESS_SECONDS
            time.sleep(max(0.0, min(0.25, args.duration - (time.monotonic() - started))))
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted; stopping ...", flush=True)
    finally:
        _stop_between_batches(query, ingestion)
        if not interrupted:
            if not daemon_started and _first_commit_done(str(base)):
                start_daemon()  # the first micro-batch took all the time there was
            if daemon_started:
                _progress(HoodieTable.open(str(base)), started, app.metrics, sizes.small)
                _let_the_daemon_finish(str(base), args.max_commits, started)
        if daemon_started:
            app.stop()
        app.close()
    if not HoodieTable.exists(str(base)):
        print("no micro-batch was committed; nothing to summarise", file=sys.stderr)
        spark.stop()
        return EXIT_FAILURE
    table = HoodieTable.open(str(base))
    files, small, ingested = _snapshot_counts(table, sizes.small)
    df = snapshot(spark, table)
    rows = df.count()
    distinct = df.select("event_id").distinct().count()
    clusterings = sum(1 for i in table.timeline().commits().completed() if table.is_clustering_instant(i))
    ratio = snapshot_ratio(table, SORT_COLUMNS)
    print("\nsummary")
    print(f"  commits by ingestion: {sum(1 for i in table.timeline().commits().completed()) - clusterings}")
    print(f"  clusterings completed: {clusterings}")
    size = sum(f.size for f in table.file_system_view().latest_base_files())
    print(f"  latest snapshot: {files} files ({small} small), {human_bytes(size)}")
    print(f"  files-scanned ratio ({','.join(SORT_COLUMNS)}): {ratio:.3f}" if ratio is not None
          else "  files-scanned ratio: n/a")
    print(f"  rows ingested: {ingested}; rows read by a snapshot: {rows}; distinct keys: {distinct}")
    if rows == ingested == distinct:
        print("  check: OK (every ingested row read exactly once)")
    else:
        print("  check: MISMATCH", file=sys.stderr)
        code = EXIT_FAILURE
    spark.stop()
    if remote:
        shutil.rmtree(root, ignore_errors=True)  # the checkpoint; the table stays in the store
    elif temporary and not args.keep and code == EXIT_OK:
        shutil.rmtree(root, ignore_errors=True)
    elif temporary:
        print(f"  table kept at {base}")
    return code


class _Switchable:
    """The sink behind a switch: once `close` is called, micro-batches are left unwritten (the demo is over:
    their rows never reach the table, and the summary counts only committed rows)."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self._changed = threading.Condition()
        self._closed = False
        self._writing = False

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        with self._changed:
            if self._closed:
                return
            self._writing = True
        try:
            self.sink(batch_df, batch_id)
        finally:
            with self._changed:
                self._writing = False
                self._changed.notify_all()

    def close(self, timeout_s: float) -> bool:
        """Write no more batches; True once the batch being written, if any, is committed."""
        with self._changed:
            self._closed = True
            return self._changed.wait_for(lambda: not self._writing, timeout_s)


def _stop_between_batches(query: Any, ingestion: _Switchable, timeout_s: float = 60.0) -> None:
    """Stop the query once the batch being written is committed, so that no write is interrupted half-way (it
    would be rolled back, safely, but Spark and py4j report the interruption at length)."""
    ingestion.close(timeout_s)
    query.stop()


def _let_the_daemon_finish(base: str, max_commits: int, started: float, timeout_s: float = DRAIN_SECONDS) -> None:
    """With ingestion stopped, give the daemon up to ``timeout_s`` to finish the clustering the last commits
    call for: until no plan is pending and fewer than ``max_commits`` commits wait for the next one."""
    deadline = time.monotonic() + timeout_s
    announced = False
    while time.monotonic() < deadline:
        table = HoodieTable.open(base)
        timeline = table.timeline()
        pending = len(table.pending_clustering_plans(timeline))
        waiting = timeline.commits_since(table.last_clustering_time(timeline))
        if not pending and waiting < max_commits:
            return
        if not announced:
            print(f"[{time.monotonic() - started:5.0f}s] ingestion stopped; the daemon finishes its clustering ...",
                  flush=True)
            announced = True
        time.sleep(0.5)


def _first_commit_done(base: str) -> bool:
    """Whether the first micro-batch committed (the sink creates the table when that batch starts)."""
    return HoodieTable.exists(base) and len(HoodieTable.open(base).timeline().commits().completed()) > 0


def _progress(table: HoodieTable | None, started: float, metrics: Any, small_bytes: int) -> None:
    """One progress line; the files-scanned ratio is the summary's: the latest snapshot's, from its footers."""
    elapsed = f"[{time.monotonic() - started:5.0f}s]"
    if table is None:
        print(f"{elapsed} waiting for the first micro-batch to commit ...", flush=True)
        return
    timeline = table.timeline()
    commits = timeline.commits().completed()
    clusterings = sum(1 for i in commits if table.is_clustering_instant(i))
    files = table.file_system_view(timeline).latest_base_files()
    small = sum(1 for f in files if f.size < small_bytes)
    pending = len(table.pending_clustering_plans(timeline))
    rewritten = metrics.registry.get_sample_value("hudi_clusterd_rewritten_files_total", {"table": TABLE}) or 0
    ratio = snapshot_ratio(table, SORT_COLUMNS) if files else None
    layout = f"{ratio:.3f}" if ratio is not None else "-"
    print(f"{elapsed} commits {len(commits) - clusterings:4d}  clusterings {clusterings:3d} (pending {pending})"
          f"  files {len(files):4d} ({small} small; {int(rewritten)} rewritten)  files-scanned ratio {layout}",
          flush=True)
