"""Clustering benchmark: our clustering against plain Spark and delta-rs, side by side, in one run.

On the reference dataset (``../shared/bench/gen.py``: 4M rows in 200 small files; generated into
``bench/data/`` when absent), loaded into a Hudi table one commit per file (200 small file groups; the table
is cached under ``bench/data/`` and copied fresh before every clustering run), each case is timed in ONE
local Spark session (``local[2]``, warmed up first), ``--repeat`` rounds with the cases interleaved, on fresh
copies; medians are reported, with the ratio to plain Spark:

* ``spark``        plain Spark on the 200 source files: ``repartitionByRange(n, lat, lon)`` +
                   ``sortWithinPartitions(lat, lon)`` + ``write.parquet``, ``n = ceil(input bytes / 8 MiB)``
                   (the baseline; Spark's default snappy compression);
* ``spark-hudi``   the same on the Hudi table's base files, every column (meta columns too), ``n`` from their
                   size: what plain Spark does with the very bytes our clustering reads;
* ``spark-gzip``   (not run by default) the baseline written with gzip, Hudi's default codec (our ingestion
                   writes it; clustering writes snappy);
* ``linear``, ``hilbert``, ``zorder``: ours, ``schedule(force=True)`` + ``execute`` on a fresh copy of the
                   Hudi table, sort columns ``lat,lon``, target 8 MiB, the whole table one group
                   (``hoodie.layout.optimize.strategy`` LINEAR / HILBERT / ZORDER, curve build ``SAMPLE``);
* ``delta``        delta-rs ``optimize.z_order(["lat", "lon"], target_size=8 MiB)`` on a Delta table made of
                   the 200 source files (one append each; cached too, one optimize per fresh copy).

For every case: files out, the files-scanned ratio of the output (``hudi_clusterd.ordering.quality``, cross-checked
against ``../shared/bench/layout.py``), and the peak RSS of the driver (this Python process + the Spark JVM,
sampled from ``/proc`` during the measured call; the Spark Python workers separately). delta-rs runs in a
child process (its peak RSS is that process's); it would otherwise keep this process's RSS high afterwards.

``--profile`` then times the steps of our Hilbert clustering one by one (a copy of the runner's logic: plan,
sampling, read + curve key + shuffle + sort without a write, the hand-over of the rows to Python, the write
with gzip / snappy / zstd: whatever codec the runner uses) to show where the time goes.

``--memory-gb 2`` instead generates about 2 GB of input (34M rows in 400 files), ingests it, clusters it once
(Hilbert, sample build) with ``spark.driver.memory=1g`` and reports the driver's peak RSS (goal < 1.5 GB) and
the time, next to plain Spark on the same rows. In ``local[2]`` the driver's JVM is also the executor, so its
RSS includes the executor's sort buffers and shuffle; ``--standalone 4g`` runs the same on a standalone master
and one worker started on 127.0.0.1 (pyspark's ``bin/spark-class``), as a cluster deployment would, and reports
the driver and the executor apart.

    python bench/bench_clustering.py                          # 4M rows / 200 files, 3 rounds
    python bench/bench_clustering.py --rows 400000 --files 20 --repeat 1
    python bench/bench_clustering.py --cases spark,hilbert --skip-delta
    python bench/bench_clustering.py --cases spark,hilbert --repeat 1 --profile
    python bench/bench_clustering.py --memory-gb 2
    python bench/bench_clustering.py --memory-gb 2 --standalone 4g

Prints a table and writes ``bench/out/clustering.json`` (``clustering_memory.json`` in memory mode).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))

from benchlib import (
    COLUMNS,
    GIB,
    MIB,
    REPO,
    TARGET_BYTES,
    RssPeaks,
    ensure_dataset,
    ensure_hudi_table,
    fresh_copy,
    hudi_base_files,
    jvm_pid,
    layout_figures,
    load_info,
    load_module,
    rss_bytes,
    sample_rss,
    say,
    source_files,
    total_bytes,
)
from hudi_clusterd.domain.policy import ClusteringPolicy, parse_policy
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.engine.clustering.exchange import exchange, ranges_per_partition, task_runs
from hudi_clusterd.engine.clustering.runner import SparkGroupRunner, row_group_bytes
from hudi_clusterd.engine.clustering.scan import GroupScan
from hudi_clusterd.engine.clustering.sorting import (
    key_words,
    plan_curve_partitioning,
    range_keys,
    sort_for_layout,
)
from hudi_clusterd.engine.files import spark_arrow_schema, write_file_groups
from hudi_clusterd.engine.ingest.writer import insert
from hudi_clusterd.engine.session import get_or_create_session
from hudi_clusterd.formats.avro_schema import arrow_to_avro_json, strip_meta_fields
from hudi_clusterd.ops.execute import execute_pending, group_inputs
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.ops.snapshot import TableSnapshot
from hudi_clusterd.ordering.quality import files_scanned_ratio
from hudi_clusterd.table.base_file_writer import BaseFileWriteSpec
from hudi_clusterd.table.hoodie_table import HoodieTable
from procstats import CpuMeter

REFERENCE_BYTES_PER_ROW = 62.4  # gen.py output: 4M rows ~ 238 MiB (used to size --memory-gb inputs)
BASELINE = "spark"
OURS = {"linear": ("LINEAR", "DIRECT"), "hilbert": ("HILBERT", "SAMPLE"), "zorder": ("ZORDER", "SAMPLE")}
SPARK_CASES = ("spark", "spark-hudi", "spark-gzip")
ALL_CASES = ("spark", "spark-hudi", "spark-gzip", "linear", "hilbert", "zorder", "delta", "delta-hudi")
DEFAULT_CASES = ("spark", "spark-hudi", "linear", "hilbert", "zorder", "delta", "delta-hudi")


# --- the cached inputs ----------------------------------------------------------------------------------------------


def ensure_delta_table(sources: Sequence[str | Path], cache: Path, compression: str | None = None) -> Path:
    """A Delta table with one append per source file (the shape streaming leaves), built once; ``compression``:
    the parquet codec of its files (delta-rs's default when None)."""
    if (cache / "_delta_log").is_dir():
        return cache
    import pyarrow.parquet as pq
    from deltalake import WriterProperties, write_deltalake

    props = WriterProperties(compression=compression) if compression else None

    partial = cache.with_name(cache.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    say(f"writing {len(sources)} files into the Delta table {cache} (one append per file) ...")
    start = time.perf_counter()
    for k, path in enumerate(sources, 1):
        write_deltalake(str(partial), pq.read_table(path), mode="append", writer_properties=props)
        if k == 1 or k % 50 == 0 or k == len(sources):
            say(f"  [{k}/{len(sources)}] {time.perf_counter() - start:.0f} s")
    partial.rename(cache)
    return cache


# --- the cases ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    seconds: float
    files: list[str]
    rows: int | None
    rss: RssPeaks
    phases: dict[str, float] = field(default_factory=dict)


def clustering_policy(strategy: str, build: str, sample_size: int) -> ClusteringPolicy:
    props = {
        "hoodie.clustering.plan.strategy.sort.columns": ",".join(COLUMNS),
        "hoodie.clustering.plan.strategy.target.file.max.bytes": str(TARGET_BYTES),
        "hoodie.clustering.plan.strategy.small.file.limit": str(4 * GIB),  # every input file is "small"
        "hoodie.clustering.plan.strategy.max.bytes.per.group": str(1 << 40),  # the whole table is one group
        "hoodie.layout.optimize.strategy": strategy,
        "hoodie.layout.optimize.curve.build.method": build,
        "hoodie.layout.optimize.build.curve.sample.size": str(sample_size),
    }
    policy, warnings = parse_policy(props, source="bench")
    for w in warnings:
        say(f"policy warning: {w}")
    return policy


def run_ours(runner: SparkGroupRunner, table_path: Path, policy: ClusteringPolicy) -> Run:
    table = HoodieTable.open(str(table_path))
    with sample_rss() as rss:
        start = time.perf_counter()
        scheduled = schedule(table, policy, force=True)
        planned = time.perf_counter()
        if scheduled.instant is None or scheduled.plan is None:
            raise SystemExit(f"nothing scheduled on {table_path}: {scheduled.reason}")
        groups = len(scheduled.plan.input_groups)
        result = execute_pending(table, runner, scheduled.instant, parallelism=policy.max_parallelism)
        end = time.perf_counter()
    if result.outcome != "completed":
        raise SystemExit(f"clustering {scheduled.instant} on {table_path}: {result.outcome}: {result.message}")
    if groups != 1:
        say(f"  note: the plan has {groups} groups (expected 1)")
    rows = sum(s.num_writes for s in result.write_stats)
    return Run(end - start, hudi_base_files(table_path), rows, rss,
               {"schedule_s": planned - start, "execute_s": end - planned, "groups": float(groups)})


def run_spark(spark: Any, inputs: Sequence[str], out: Path, n: int, compression: str | None = None) -> Run:
    shutil.rmtree(out, ignore_errors=True)
    with sample_rss() as rss:
        start = time.perf_counter()
        writer = (spark.read.parquet(*inputs).repartitionByRange(n, *COLUMNS).sortWithinPartitions(*COLUMNS)
                  .write)
        if compression:
            writer = writer.option("compression", compression)
        writer.parquet(str(out))
        end = time.perf_counter()
    return Run(end - start, [str(p) for p in sorted(out.glob("*.parquet"))], None, rss)


# delta-rs runs in a child process: its (Rust) allocations would otherwise stay in this process's RSS and
# blur the driver figures of the cases after it. The child times only the optimize call.
_DELTA_CHILD = """
import json, resource, sys, time
from deltalake import DeltaTable
dt = DeltaTable(sys.argv[1])
start = time.perf_counter()
metrics = dt.optimize.z_order(sys.argv[2].split(","), target_size=int(sys.argv[3]))
seconds = time.perf_counter() - start
numbers = {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
print(json.dumps({"seconds": seconds, "metrics": numbers,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def run_delta(table_path: Path) -> Run:
    import subprocess

    from deltalake import DeltaTable

    done = subprocess.run([sys.executable, "-c", _DELTA_CHILD, str(table_path), ",".join(COLUMNS), str(TARGET_BYTES)],
                          check=True, capture_output=True, text=True)
    child = json.loads(done.stdout.strip().splitlines()[-1])
    dt = DeltaTable(str(table_path))
    files = [u.removeprefix("file://") for u in dt.file_uris()]
    rows = None
    try:
        actions = dt.get_add_actions(flatten=True)
        rows = int(sum(v for v in actions.column("num_records").to_pylist() if v is not None))
    except Exception:  # statistics absent or a changed API: the row check is best effort
        pass
    peak = int(child["peak_rss_bytes"])
    run = Run(float(child["seconds"]), files, rows, RssPeaks(driver=peak, python=peak, samples=1))
    run.phases = {k: float(v) for k, v in child["metrics"].items()}
    return run


def warm_up(spark: Any, runner: SparkGroupRunner, sources: Sequence[Path], work: Path) -> None:
    """JIT, Python workers and both write paths, on small inputs, before anything is timed."""
    start = time.perf_counter()
    spark.range(1000).selectExpr("sum(id)").collect()
    few = [str(p) for p in sources[: max(1, len(sources) // 20)]]
    run_spark(spark, few, work / "warmup-spark", 2)
    small = work / "warmup-hudi"
    shutil.rmtree(small, ignore_errors=True)
    table = HoodieTable.create(str(small), TableConfig.for_new_table(name="warmup", record_key_fields=["event_id"]))
    for path in few[:3]:
        insert(spark, table, spark.read.parquet(path), operation="bulk_insert")
    run_ours(runner, small, clustering_policy("HILBERT", "SAMPLE", 10_000))
    shutil.rmtree(small, ignore_errors=True)
    shutil.rmtree(work / "warmup-spark", ignore_errors=True)
    say(f"warm-up done in {time.perf_counter() - start:.0f} s")


# --- profile: where our clustering's time goes --------------------------------------------------------------


def profile_steps(spark: Any, runner: SparkGroupRunner, hudi_cache: Path, work: Path, sample_size: int
                  ) -> dict[str, float]:
    """Seconds per step of a Hilbert clustering of the whole table, following ``SparkGroupRunner.run_group``.

    Each ``write ...`` step re-runs read + curve key + shuffle + sort (Spark does not cache), so the write's own
    cost is that step minus ``read+key+shuffle+sort (noop sink)``. The writes go into a scratch copy under
    instants that are never committed."""
    import pyarrow as pa

    dst = fresh_copy(hudi_cache, work / "profile")
    table = HoodieTable.open(str(dst))
    policy = clustering_policy("HILBERT", "SAMPLE", sample_size)
    out: dict[str, float] = {}

    def timed(step: str, fn: Any) -> Any:
        start = time.perf_counter()
        value = fn()
        out[step] = time.perf_counter() - start
        say(f"  profile: {step}: {out[step]:.1f} s")
        return value

    scheduled = timed("plan (schedule, footers)", lambda: schedule(table, policy, force=True, dry_run=True))
    plan = scheduled.plan
    assert plan is not None
    columns = ("lat", "lon")
    snapshot = TableSnapshot.load(table)
    files = runner.scan_files(table.storage, group_inputs(snapshot, plan)[0])
    df = runner.read_group(table.storage, files)
    scan = GroupScan(spark, table.storage.spec, tuple(files), df.schema)
    data_schema = strip_meta_fields(spark_arrow_schema(df))
    rows = timed("count", df.count)
    shape = timed("output sizing (sample)", lambda: runner.output_shape(
        table.storage, plan, 0, rows, sum(f.size for f in files)))
    n_out = shape.partitions
    per_partition = ranges_per_partition(rows, n_out, shape.memory_bytes_per_row)
    partitioning = timed("sample + split keys (sample job)", lambda: plan_curve_partitioning(
        df, columns, policy.layout_strategy, policy.curve_build_method, policy.curve_sample_size,
        n_out * per_partition, rows, scan))
    keys = range_keys(partitioning, columns)
    runs = exchange(scan, keys, key_words(len(columns), partitioning), n_out, per_partition)

    def counted(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_arrays([pa.array([sum(b.num_rows for b in batches)], pa.int64())], names=["n"])

    def keyed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        def with_keys() -> Iterator[pa.RecordBatch]:
            for batch in batches:
                keys(batch)
                yield batch

        return counted(with_keys())

    def cut(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return counted(task_runs(batches, keys, per_partition))

    timed("scan: read + conform (no shuffle)", lambda: scan.map_files(counted, "n long").collect())
    timed("... + layout keys", lambda: scan.map_files(keyed, "n long").collect())
    timed("... + sorted runs", lambda: scan.map_files(cut, "n long").collect())
    timed("... + shuffle (noop sink)", lambda: runs.frame.write.format("noop").mode("overwrite").save())
    decode = runs.decode()
    timed("... + merge in the writing tasks (no write)",
          lambda: runs.frame.mapInArrow(lambda b: counted(decode(b)), "n long").collect())
    for codec in ("gzip", "snappy", "zstd"):
        spec = BaseFileWriteSpec(
            storage=table.storage.spec, instant_time=table.new_instant_time(),
            data_schema=data_schema,
            avro_schema_json=arrow_to_avro_json(data_schema, table.name, with_meta_fields=True),
            populate_meta_fields=True, preserve_meta_fields=True, max_file_bytes=policy.target_file_max_bytes,
            row_group_bytes=row_group_bytes(policy.target_file_max_bytes), compression=codec,
            partition_path=plan.input_groups[0].partition_path, expected_task_rows=-(-rows // n_out),
            dictionary_columns=shape.dictionary_columns,
        )
        stats = timed(f"... + write {codec} (the whole group)",
                      lambda spec=spec: write_file_groups(runs.frame, spec, decode=decode))
        say(f"    {len(stats)} files, {sum(s.file_size_in_bytes for s in stats) / MIB:.0f} MiB")
    ordered = sort_for_layout(df, columns, policy.layout_strategy, policy.curve_build_method,
                              policy.curve_sample_size, n_out, rows=rows)
    timed("the same layout through Spark rows (key UDF, Spark sort; noop sink)",
          lambda: ordered.write.format("noop").mode("overwrite").save())
    timed("  ... + rows to Python workers (mapInArrow, no write)",
          lambda: ordered.mapInArrow(counted, "n long").collect())
    plain = spark.read.parquet(*hudi_base_files(dst)).repartitionByRange(n_out, "lat", "lon")
    timed("plain Spark on the Hudi files: read+shuffle+sort (noop sink)",
          lambda: plain.sortWithinPartitions("lat", "lon").write.format("noop").mode("overwrite").save())
    shutil.rmtree(dst, ignore_errors=True)
    return out


# --- reporting ---------------------------------------------------------------------------------------------


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "—" if value is None else format(value, spec)


def print_table(results: dict[str, dict[str, Any]], repeat: int) -> None:
    base = results.get(BASELINE, {}).get("median_s")
    say(f"\n| case | median s | min s | x plain Spark | cpu s | cpu x plain Spark | files out | files-scanned ratio "
        f"| peak driver RSS MiB | peak workers RSS MiB |   (medians of {repeat})")
    say("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results.values():
        ratio = r["median_s"] / base if base else None
        say(f"| {r['label']} | {_fmt(r['median_s'])} | {_fmt(r['min_s'])} | {_fmt(ratio, '.2f')} "
            f"| {_fmt(r['median_cpu_s'])} | {_fmt(r['cpu_ratio_to_plain_spark'], '.2f')} | {r['layout']['files']} "
            f"| {r['layout']['files_scanned_ratio']:.3f} "
            f"| {r['peak_rss']['driver_mib']:.0f} | {r['peak_rss']['python_workers_mib']:.0f} |")


LABELS = {
    "spark": "plain Spark repartitionByRange+sortWithinPartitions+write (source files, snappy)",
    "spark-hudi": "plain Spark, same, on the Hudi base files (meta columns too, snappy)",
    "spark-gzip": "plain Spark on the source files, gzip",
    "linear": "ours: linear (schedule+execute)",
    "hilbert": "ours: Hilbert, sample build (schedule+execute)",
    "zorder": "ours: Z-order, sample build (schedule+execute)",
    "delta": "delta-rs 1.6.6 optimize.z_order",
    "delta-hudi": "delta-rs, same, on a Delta table of the Hudi base files' rows (meta columns too, gzip)",
}


# --- the two modes -----------------------------------------------------------------------------------------


def session(args: argparse.Namespace, n: int) -> Any:
    conf = {"spark.driver.memory": args.driver_memory, "spark.sql.shuffle.partitions": str(n)}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--conf {item}: expected KEY=VALUE")
        conf[key.strip()] = value.strip()
    spark = get_or_create_session(args.master, app_name="bench-clustering", conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def timing_mode(args: argparse.Namespace, cases: list[str]) -> dict[str, Any]:
    shared = args.shared.resolve()
    reference = load_module(shared / "bench" / "layout.py", "reference_layout")
    source_dir = ensure_dataset(shared, args.data, args.rows, args.files)
    sources = source_files(source_dir)
    input_bytes = total_bytes(sources)
    n = max(1, math.ceil(input_bytes / TARGET_BYTES))
    say(f"input: {len(sources)} files, {input_bytes / MIB:.1f} MiB -> plain Spark writes {n} files")
    spark = session(args, n)
    runner = SparkGroupRunner(spark)
    key = f"{args.rows}_{args.files}"
    hudi_cache = ensure_hudi_table(spark, sources, args.data / f"hudi_events_{key}")
    hudi_files = hudi_base_files(hudi_cache)
    hudi_bytes = total_bytes(hudi_files)
    say(f"hudi table: {len(hudi_files)} base files, {hudi_bytes / MIB:.1f} MiB")
    delta_cache = ensure_delta_table(sources, args.data / f"delta_events_{key}") if "delta" in cases else None
    delta_hudi_cache = (ensure_delta_table(hudi_files, args.data / f"delta_hudi_events_{key}", "GZIP")
                        if "delta-hudi" in cases else None)
    work = args.out / "clustering"
    work.mkdir(parents=True, exist_ok=True)
    warm_up(spark, runner, sources, work)

    policies = {name: clustering_policy(*OURS[name], args.sample_size) for name in cases if name in OURS}
    runs: dict[str, list[Run]] = {name: [] for name in cases}
    layouts: dict[str, dict[str, Any]] = {}
    load_before = load_info()
    meter = CpuMeter()
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    for round_no in range(1, args.repeat + 1):
        for name in cases:
            dst = work / name
            cpu_start = meter.seconds()
            if name in OURS:
                run = run_ours(runner, fresh_copy(hudi_cache, dst), policies[name])
            elif name == "delta":
                assert delta_cache is not None
                run = run_delta(fresh_copy(delta_cache, dst))
            elif name == "delta-hudi":
                assert delta_hudi_cache is not None
                run = run_delta(fresh_copy(delta_hudi_cache, dst))
            elif name == "spark-hudi":
                run = run_spark(spark, hudi_files, dst, max(1, math.ceil(hudi_bytes / TARGET_BYTES)))
            else:
                run = run_spark(spark, [str(p) for p in sources], dst, n,
                                "gzip" if name == "spark-gzip" else None)
            cpu_end = meter.seconds()
            if cpu_start is not None and cpu_end is not None:
                cpu[name].append(cpu_end - cpu_start)
            runs[name].append(run)
            if run.rows is not None and run.rows != args.rows:
                say(f"  WARNING: {name} wrote {run.rows:,} rows, expected {args.rows:,}")
            if round_no == args.repeat:
                layouts[name] = layout_figures(run.files, reference)
            phases = "".join(f", {k} {v:.1f}" for k, v in run.phases.items() if k.endswith("_s"))
            used = f", cpu {cpu[name][-1]:.1f} s" if cpu[name] else ""
            say(f"round {round_no}/{args.repeat}: {name}: {run.seconds:.1f} s{used}, {len(run.files)} files{phases}, "
                f"peak driver RSS {run.rss.driver / MIB:.0f} MiB  (load {os.getloadavg()[0]:.1f})")
            shutil.rmtree(dst, ignore_errors=True)
    load_after = load_info()
    meter.close()
    profile: dict[str, float] = {}
    if args.profile:
        say("profiling our Hilbert clustering step by step (one pass) ...")
        profile = profile_steps(spark, runner, hudi_cache, work, args.sample_size)

    results: dict[str, dict[str, Any]] = {}
    for name in cases:
        times = [r.seconds for r in runs[name]]
        peak = RssPeaks()
        for r in runs[name]:
            peak.driver, peak.python = max(peak.driver, r.rss.driver), max(peak.python, r.rss.python)
            peak.jvm, peak.workers = max(peak.jvm, r.rss.jvm), max(peak.workers, r.rss.workers)
            peak.samples += r.rss.samples
        results[name] = {
            "label": LABELS[name], "seconds": [round(t, 3) for t in times],
            "median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
            "cpu_seconds": [round(c, 2) for c in cpu[name]],
            "median_cpu_s": round(statistics.median(cpu[name]), 2) if cpu[name] else None,
            "layout": layouts[name], "peak_rss": peak.to_dict(),
            "rows_written": runs[name][-1].rows,
            "phases": [{k: round(v, 3) for k, v in r.phases.items()} for r in runs[name]],
        }
    base = results.get(BASELINE, {}).get("median_s")
    base_cpu = results.get(BASELINE, {}).get("median_cpu_s")
    for entry in results.values():
        entry["ratio_to_plain_spark"] = round(entry["median_s"] / base, 3) if base else None
        cpu_s = entry["median_cpu_s"]
        entry["cpu_ratio_to_plain_spark"] = round(cpu_s / base_cpu, 3) if base_cpu and cpu_s else None
    source_layout = layout_figures([str(p) for p in sources], reference)
    say(f"\nrows={args.rows:,} files={args.files} input={input_bytes / MIB:.0f} MiB (hudi {hudi_bytes / MIB:.0f} MiB) "
        f"target=8 MiB master={args.master} driver.memory={args.driver_memory}; load before {load_before['loadavg']} "
        f"after {load_after['loadavg']} on {load_after['cpus']} cpus")
    say(f"source: {source_layout['files']} files, files-scanned ratio {source_layout['files_scanned_ratio']:.3f}")
    print_table(results, args.repeat)
    if profile:
        say("\nprofile of ours (Hilbert, sample build), one pass:")
        say("| step | s |\n| --- | ---: |")
        for step, seconds in profile.items():
            say(f"| {step} | {seconds:.1f} |")
    version = spark.version
    spark.stop()
    return {
        "mode": "timing",
        "config": {"rows": args.rows, "input_files": len(sources), "input_bytes": input_bytes,
                   "hudi_table_bytes": hudi_bytes, "hudi_base_files": len(hudi_files), "target_bytes": TARGET_BYTES,
                   "plain_spark_partitions": n, "sample_size": args.sample_size, "master": args.master,
                   "driver_memory": args.driver_memory, "extra_conf": args.conf, "repeat": args.repeat, "cases": cases,
                   "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX"),
                   "spark": version, "python": platform.python_version()},
        "load_before": load_before, "load_after": load_after, "baseline": BASELINE,
        "source": source_layout, "cases": results,
        "profile_seconds": {step: round(seconds, 3) for step, seconds in profile.items()},
    }


def memory_mode(args: argparse.Namespace, cases: list[str]) -> dict[str, Any]:
    if not args.standalone:
        return memory_run(args, cases)
    sys.path.insert(0, str(REPO))
    from tests.harness.spark_cluster import standalone_cluster

    with standalone_cluster(args.out / "standalone", cores=2, memory=args.standalone) as url:
        say(f"standalone master {url}: one worker, 2 cores, {args.standalone}")
        args.master = url
        args.conf = [*args.conf, "spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1",
                     "spark.cores.max=2", f"spark.executor.memory={args.executor_memory}"]
        return memory_run(args, cases)


def memory_run(args: argparse.Namespace, cases: list[str]) -> dict[str, Any]:
    shared = args.shared.resolve()
    rows = args.rows_given or int(round(args.memory_gb * GIB / REFERENCE_BYTES_PER_ROW / 1e5) * 1e5)
    files = args.files_given or 400
    source_dir = ensure_dataset(shared, args.data, rows, files)
    sources = source_files(source_dir)
    input_bytes = total_bytes(sources)
    n = max(1, math.ceil(input_bytes / TARGET_BYTES))
    say(f"input: {rows:,} rows in {len(sources)} files, {input_bytes / GIB:.2f} GiB")
    spark = session(args, n)
    runner = SparkGroupRunner(spark)
    hudi_cache = ensure_hudi_table(spark, sources, args.data / f"hudi_events_{rows}_{files}")
    hudi_files = hudi_base_files(hudi_cache)
    hudi_bytes = total_bytes(hudi_files)
    say(f"hudi table: {len(hudi_files)} base files, {hudi_bytes / GIB:.2f} GiB")
    work = args.out / "clustering-memory"
    work.mkdir(parents=True, exist_ok=True)
    spark.range(1000).selectExpr("sum(id)").collect()
    idle = RssPeaks(python=rss_bytes("self"), jvm=rss_bytes(jvm_pid() or 0))
    say(f"before: python {idle.python / MIB:.0f} MiB, JVM {idle.jvm / MIB:.0f} MiB")
    results: dict[str, dict[str, Any]] = {}
    for name in cases:
        say(f"running {name} ... (load {os.getloadavg()[0]:.1f})")
        dst = work / name
        if name in OURS:
            run = run_ours(runner, fresh_copy(hudi_cache, dst), clustering_policy(*OURS[name], args.sample_size))
        else:
            run = run_spark(spark, [str(p) for p in sources], dst, n, "gzip" if name == "spark-gzip" else None)
        if run.rows is not None and run.rows != rows:
            say(f"  WARNING: {name} wrote {run.rows:,} rows, expected {rows:,}")
        results[name] = {"label": LABELS[name], "seconds": round(run.seconds, 2), "files": len(run.files),
                         "files_scanned_ratio": round(files_scanned_ratio(run.files, list(COLUMNS)), 4),
                         "peak_rss": run.rss.to_dict(), "rows_written": run.rows,
                         "phases": {k: round(v, 3) for k, v in run.phases.items()}}
        say(f"  {name}: {run.seconds:.1f} s, {len(run.files)} files, peak driver RSS {run.rss.driver / MIB:.0f} MiB "
            f"(python {run.rss.python / MIB:.0f} + JVM {run.rss.jvm / MIB:.0f}), Python workers "
            f"{run.rss.workers / MIB:.0f} MiB")
        shutil.rmtree(dst, ignore_errors=True)
    version = spark.version
    spark.stop()
    say(f"\nmemory mode: {rows:,} rows, source {input_bytes / GIB:.2f} GiB, hudi table {hudi_bytes / GIB:.2f} GiB, "
        f"driver.memory={args.driver_memory}; goal: peak driver RSS < 1536 MiB")
    say("| case | seconds | files out | files-scanned ratio | peak driver RSS MiB (python + JVM) | workers MiB "
        "| executor JVM MiB |")
    say("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results.values():
        p = r["peak_rss"]
        say(f"| {r['label']} | {r['seconds']:.1f} | {r['files']} | {r['files_scanned_ratio']:.3f} "
            f"| {p['driver_mib']:.0f} ({p['python_mib']:.0f} + {p['jvm_mib']:.0f}) | {p['python_workers_mib']:.0f} "
            f"| {p['executor_jvm_mib']:.0f} |")
    return {
        "mode": "memory",
        "config": {"rows": rows, "input_files": len(sources), "input_bytes": input_bytes,
                   "hudi_table_bytes": hudi_bytes, "target_bytes": TARGET_BYTES, "master": args.master,
                   "driver_memory": args.driver_memory, "extra_conf": args.conf,
                   "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX"), "spark": version,
                   "python": platform.python_version()},
        "load": load_info(), "idle_rss_mib": {"python": round(idle.python / MIB, 1), "jvm": round(idle.jvm / MIB, 1)},
        "goal_driver_rss_mib": 1536, "cases": results,
    }


def parse_cases(text: str, known: Sequence[str]) -> list[str]:
    cases = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in cases if c not in known]
    if unknown:
        raise SystemExit(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=None, help="rows to generate (default 4,000,000)")
    parser.add_argument("--files", type=int, default=None, help="source files / ingestion commits (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per case; times are medians")
    parser.add_argument("--cases", default=None,
                        help=f"comma-separated, from {','.join(ALL_CASES)} (default {','.join(DEFAULT_CASES)}; "
                             "memory mode: hilbert,spark)")
    parser.add_argument("--skip-delta", action="store_true", help="leave out the delta-rs case")
    parser.add_argument("--memory-gb", type=float, default=None,
                        help="memory mode: generate about this many GB of input, cluster it once (Hilbert) and "
                             "report the driver's peak RSS")
    parser.add_argument("--standalone", metavar="WORKER_MEMORY", default=None,
                        help="memory mode: run on a Spark standalone master + one worker (2 cores, this much "
                             "memory) started on 127.0.0.1 from pyspark's bin/spark-class, so the driver is a "
                             "process of its own as in a cluster deployment (e.g. 4g)")
    parser.add_argument("--executor-memory", default="3g", help="spark.executor.memory with --standalone")
    parser.add_argument("--profile", action="store_true",
                        help="afterwards, time the steps of our Hilbert clustering one by one (one pass)")
    parser.add_argument("--sample-size", type=int, default=200_000, help="curve sample size (Hudi's default)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="1g", help="spark.driver.memory (set before the JVM starts)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark conf for the session (repeatable), e.g. spark.driver.extraJavaOptions=...")
    parser.add_argument("--shared", type=Path, default=REPO / ".." / "shared")
    parser.add_argument("--data", type=Path, default=REPO / "bench" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    args.data, args.out = args.data.resolve(), args.out.resolve()
    args.rows_given, args.files_given = args.rows, args.files
    args.rows = args.rows or 4_000_000
    args.files = args.files or 200
    if args.memory_gb is not None:
        cases = parse_cases(args.cases or "hilbert,spark", (*OURS, *SPARK_CASES))
        result = memory_mode(args, cases)
        name = "clustering_memory.json"
    else:
        cases = parse_cases(args.cases or ",".join(DEFAULT_CASES), ALL_CASES)
        if args.skip_delta:
            cases = [c for c in cases if not c.startswith("delta")]
        result = timing_mode(args, cases)
        name = "clustering.json"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / name).write_text(json.dumps(result, indent=2) + "\n")
    say(f"\nwrote {args.out / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
