"""Clustering a merge-on-read table with log files: ours against Apache Hudi's own, side by side in one run.

The table: the reference dataset (``../shared/bench/gen.py``; scaled down by default) written by **Apache Hudi**
as a merge-on-read table (key ``event_id``, ordering ``event_ts``, non-partitioned, no metadata table, compaction
off): one ``insert`` per source file (one small file group each), then ``--upserts`` upserts of a random
``--update-fraction`` of all keys each (``event_ts`` later, ``amount``, ``lat`` and ``lon`` changed), which reach
nearly every file group as log files. One table per table version (cached under ``bench/data/``), each written by
the Hudi release of that version: Apache Hudi 1.2.0 on version 9 (setup ``HUDI_1_2_V9``) and Apache Hudi 0.15.0
on version 6 (``HUDI_0_15``).

Every case works on a fresh copy (synced and read once, as ``bench_vs_hudi.py`` does) and is a process of its own
on ``local[2]`` with ``spark.driver.memory=1g``:

* ``ours``: ``schedule(force=True, hot_commits=0)`` + ``execute_pending(commit_wait_s=0)`` with the
  ``SparkGroupRunner`` of ``build_runner`` (what ``hudi-clusterd cluster --force`` does, with every file group
  eligible: the CLI leaves out the groups of the last two commits as hot), in a child process of our venv;
* ``hudi``: Apache Hudi's ``CALL run_clustering(op => 'scheduleAndExecute')`` in a fresh ``hudi_worker.py``,
  with ``bench_vs_hudi.py``'s options (the same sort columns, layout strategy, curve build, target file size,
  small-file limit and group size: the whole table one group) and compaction off;
* ``compacted``: Hudi's ``CALL run_compaction(op => 'scheduleAndExecute')`` on a copy (a process, timed), then
  ours on the compacted copy (timed apart): the cost of merging the logs in the clustering against clustering the
  same rows already merged.

Per case: wall seconds of the process, CPU seconds of its process tree (``procstats.py``), the driver's and the
Python workers' peak RSS (``benchlib.sample_rss``), files out with their bytes, the files-scanned ratio of the
latest snapshot's base files (``hudi_clusterd.ordering``, cross-checked against ``../shared/bench/layout.py``).
At the end of each table version one Hudi worker reads every output (snapshot query) and the table before any
clustering; the rows must be equal (every column but ``_hoodie_file_name``).

``--memory-log-mib 100`` adds the memory case: a table of one file group whose latest slice carries about that
many MiB of log files (one insert, then upserts of every key until the logs reach the size), clustered by ours
(the merge runs in one Python worker: its peak RSS) and, as a second figure, the slice merged alone in a fresh
Python process (``merged.merge_slice``: its peak RSS over the interpreter's own).

    python bench/bench_mor_vs_hudi.py                                   # 400k rows / 20 files, both versions
    python bench/bench_mor_vs_hudi.py --rows 1000000 --files 50 --repeat 2
    python bench/bench_mor_vs_hudi.py --table-versions 9 --strategies linear,hilbert --memory-log-mib 0

Prints tables and writes ``bench/out/mor_vs_hudi.json``. Needs the Hudi cache of ``python -m tests.harness.hudi_setup``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import bench_vs_hudi as cow
from benchlib import (
    MIB,
    REPO,
    TARGET_BYTES,
    RssPeaks,
    ensure_dataset,
    hudi_base_files,
    layout_figures,
    load_info,
    load_module,
    sample_rss,
    say,
    source_files,
    total_bytes,
)
from procstats import CpuMeter

CASES = ("ours", "hudi", "compacted")
KEY, ORDERING = "event_id", "event_ts"
META_FILE_NAME = "_hoodie_file_name"
CASE_TIMEOUT_S = 3600.0
MOR_OPTIONS = {
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.compact.inline": "false",
    "hoodie.compact.schedule.inline": "false",
    "hoodie.metadata.enable": "false",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
}

# Ours, as `hudi-clusterd cluster --force` runs it but with every file group eligible (hot_commits=0): one process.
_OURS_CHILD = """
import json, sys, time
start = time.perf_counter()
sys.path.insert(0, sys.argv[1])
args = json.loads(sys.argv[2])
from hudi_clusterd.runtime.logging import configure_logging
configure_logging("WARNING", "json", sys.stderr)
from hudi_clusterd.commands.common import load_policy, open_table
from hudi_clusterd.engine.clustering.runner import build_runner
from hudi_clusterd.ops.execute import execute_pending
from hudi_clusterd.ops.schedule import schedule
policy = load_policy(args["props"])
table = open_table(args["table"], args["props"])
scheduled = schedule(table, policy, force=True, hot_commits=0)
if scheduled.plan is None:
    sys.exit("nothing scheduled: " + scheduled.reason)
plan = scheduled.plan
slices = [s for g in plan.input_groups for s in g.slices]
planned = time.perf_counter()
runner = build_runner(args["master"], args["conf"])
result = execute_pending(table, runner, scheduled.instant, parallelism=policy.max_parallelism, commit_wait_s=0)
executed = time.perf_counter()
runner.close()
print("RESULT " + json.dumps({
    "outcome": result.outcome.value, "message": result.message, "instant": result.instant,
    "groups": len(plan.input_groups), "slices": len(slices), "slices_with_logs": sum(bool(s.delta_file_paths)
    for s in slices), "log_files": sum(len(s.delta_file_paths) for s in slices), "execute_s": result.duration_s,
    "phases": {"start_and_plan_s": round(planned - start, 3),
               "spark_start_and_execute_s": round(executed - planned, 3)},
}), flush=True)
"""

# One slice merged alone (`merged.merge_slice`) in a fresh interpreter: its peak RSS over the RSS right before.
_MERGE_CHILD = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
args = json.loads(sys.argv[2])
import pyarrow as pa
from hudi_clusterd.engine.clustering.merged import MergedSlice, merge_slice
from hudi_clusterd.table.hoodie_table import HoodieTable
table = HoodieTable.open(args["table"])
merge = table.slice_merge(table.timeline(), "99991231235959999")
before = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmRSS:"))
start_cpu, start = time.process_time(), time.perf_counter()
rows = merge_slice(table.storage, MergedSlice(args["base"], tuple(args["logs"])), merge)
seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print("RESULT " + json.dumps({"rows": rows.num_rows, "arrow_bytes": rows.nbytes, "seconds": round(seconds, 2),
                              "cpu_seconds": round(cpu, 2), "rss_before": before, "rss_peak": peak,
                              "arrow_pool_peak": pa.default_memory_pool().max_memory()}), flush=True)
"""


# --- the tables, written by Apache Hudi -------------------------------------------------------------------------


def hudi_input(source: Path, data: Path, upserts: int, fraction: float) -> tuple[list[Path], list[Path]]:
    """The source files as Hudi writes them (``event_ts`` a UTC timestamp in microseconds, which Spark and Avro
    both read as ``timestamp-micros``) and ``upserts`` files of a random ``fraction`` of every key each (cached)."""
    folder = data / f"{source.name}_mor_in_u{upserts}_f{fraction:g}"
    files = source_files(source)
    inserts = [folder / f"insert-{k:05d}.parquet" for k in range(len(files))]
    updates = [folder / f"upsert-{k:02d}.parquet" for k in range(upserts)]
    if all(p.exists() for p in (*inserts, *updates)):
        return inserts, updates
    folder.mkdir(parents=True, exist_ok=True)
    tables = []
    for src, dst in zip(files, inserts, strict=True):
        t = as_hudi_rows(pq.read_table(src))
        pq.write_table(t, dst)
        tables.append(t)
    everything = pa.concat_tables(tables)
    for k, dst in enumerate(updates):
        rng = np.random.default_rng(100 + k)
        picked = everything.take(np.sort(rng.choice(everything.num_rows, int(fraction * everything.num_rows),
                                                    replace=False)))
        pq.write_table(changed(picked, k + 1, rng), dst)
    return inserts, updates


def as_hudi_rows(t: pa.Table) -> pa.Table:
    return t.set_column(t.schema.get_field_index(ORDERING), ORDERING,
                        t.column(ORDERING).cast(pa.timestamp("us")).cast(pa.timestamp("us", tz="UTC")))


def changed(rows: pa.Table, hours: int, rng: np.random.Generator) -> pa.Table:
    """``rows`` updated: ``event_ts`` ``hours`` later (the update wins by ordering), ``amount`` and ``lat``/``lon``
    moved (the merge changes the layout's input)."""
    n = rows.num_rows
    ts = pc.add(rows.column(ORDERING), pa.scalar(hours * 3_600_000_000, pa.duration("us")))
    out = rows.set_column(rows.schema.get_field_index(ORDERING), ORDERING, ts.cast(rows.schema.field(ORDERING).type))
    for name, delta in (("amount", rng.exponential(5, n)), ("lat", rng.normal(0, 1, n)), ("lon", rng.normal(0, 1, n))):
        out = out.set_column(out.schema.get_field_index(name), name, pc.add(out.column(name), pa.array(delta)))
    return out


def writer_options(setup: Any, operation: str) -> dict[str, str]:
    from tests.harness.apache_hudi import hudi_write_options

    return hudi_write_options(setup, "events", record_key=KEY, partition_path=None, precombine=ORDERING,
                              operation=operation, extra={**MOR_OPTIONS, "hoodie.parquet.small.file.limit": "0"})


def log_files(table: Path) -> list[Path]:
    return [p for p in table.glob(".*.log.*") if p.is_file()]


def ensure_mor_table(cache: Path, installation: Any, inserts: Sequence[Path], upserts: Sequence[Path],
                     work: Path) -> Path:
    """The MOR table Hudi writes from ``inserts`` (one insert each) and ``upserts``, built once (into
    ``<cache>.partial``, then renamed)."""
    from tests.harness.apache_hudi import HudiWorker

    if (cache / ".hoodie" / "hoodie.properties").exists():
        return cache
    partial = cache.with_name(cache.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    setup = installation.setup
    say(f"Apache Hudi {setup.hudi_version} writes {cache.name}: {len(inserts)} inserts, {len(upserts)} upserts ...")
    start = time.perf_counter()
    with HudiWorker(installation, scratch=work / "hudi-build", startup_timeout=600) as hudi:
        for k, path in enumerate(inserts, 1):
            hudi.write_parquet(path, partial, writer_options(setup, "insert"))
            if k == 1 or k % 10 == 0 or k == len(inserts):
                say(f"  insert {k}/{len(inserts)}: {time.perf_counter() - start:.0f} s")
        for k, path in enumerate(upserts, 1):
            hudi.write_parquet(path, partial, writer_options(setup, "upsert"))
            say(f"  upsert {k}/{len(upserts)}: {time.perf_counter() - start:.0f} s, "
                f"{total_bytes(log_files(partial)) / MIB:.0f} MiB of log files")
    partial.rename(cache)
    return cache


def ensure_memory_table(cache: Path, installation: Any, inserts: Sequence[Path], rows: int, log_mib: float,
                        work: Path) -> Path:
    """One file group of ``rows`` rows whose slice carries about ``log_mib`` MiB of log files: one insert, then
    upserts of every key (each a log block of all the rows) until the logs reach the size (at most 40)."""
    from tests.harness.apache_hudi import HudiWorker

    if (cache / ".hoodie" / "hoodie.properties").exists():
        return cache
    partial = cache.with_name(cache.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    scratch = work / "memory-input"
    scratch.mkdir(parents=True, exist_ok=True)
    base = pa.concat_tables(pq.read_table(p) for p in inserts)
    base = base.slice(0, min(rows, base.num_rows))
    pq.write_table(base, scratch / "insert.parquet")
    setup = installation.setup
    # one file group: inserts are bucketed by hoodie.parquet.max.file.size / the record size estimate (1 KiB)
    options = {**writer_options(setup, "insert"), "hoodie.copyonwrite.insert.split.size": str(10 * base.num_rows),
               "hoodie.copyonwrite.record.size.estimate": "64"}
    say(f"Apache Hudi {setup.hudi_version} writes {cache.name}: one file group of {base.num_rows:,} rows, upserts "
        f"of every key until its logs reach {log_mib:g} MiB ...")
    with HudiWorker(installation, scratch=work / "hudi-build", startup_timeout=600) as hudi:
        hudi.write_parquet(scratch / "insert.parquet", partial, options)
        for k in range(1, 41):
            path = scratch / f"upsert-{k:02d}.parquet"
            pq.write_table(changed(base, k, np.random.default_rng(1000 + k)), path)
            hudi.write_parquet(path, partial, writer_options(setup, "upsert"))
            logs = total_bytes(log_files(partial))
            say(f"  upsert {k}: {logs / MIB:.0f} MiB of log files")
            if logs >= log_mib * MIB:
                break
    partial.rename(cache)
    return cache


# --- the cases ----------------------------------------------------------------------------------------------------


@dataclass
class Setting:
    master: str
    conf: dict[str, str]
    driver_memory: str
    hudi_codec: str
    sample_size: int
    work: Path
    setup: Any
    installation: Any


@dataclass
class Run:
    case: str
    strategy: str
    seconds: float
    cpu_seconds: float | None
    rss: RssPeaks
    load1: float
    layout: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)


def spark_conf(s: Setting) -> dict[str, str]:
    return {"spark.driver.memory": s.driver_memory, **s.conf}


def run_ours(table: Path, strategy: str, s: Setting) -> dict[str, Any]:
    props = s.work / f"ours-{strategy}.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in cow.clustering_props(strategy, s.sample_size).items()))
    spec = {"props": str(props), "table": str(table), "master": s.master, "conf": spark_conf(s)}
    with open(s.work / "ours-stderr.log", "ab") as err:
        proc = subprocess.run([sys.executable, "-c", _OURS_CHILD, str(REPO / "daemon"), json.dumps(spec)],
                              stdout=subprocess.PIPE, stderr=err, text=True, env=cow.child_env(),
                              timeout=CASE_TIMEOUT_S)
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not results or results[0]["outcome"] != "completed":
        raise SystemExit(f"ours failed on {table} (exit {proc.returncode}): {proc.stdout[-2000:]}\n"
                         f"log: {s.work / 'ours-stderr.log'}")
    return dict(results[0])


def hudi_options(strategy: str, s: Setting) -> dict[str, str]:
    return {**cow.hudi_options(strategy, s.sample_size, s.hudi_codec, s.setup),
            "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.compact.inline": "false",
            "hoodie.compact.schedule.inline": "false"}


def hudi_worker(s: Setting) -> Any:
    from tests.harness.apache_hudi import HudiWorker

    return HudiWorker(s.installation, scratch=s.work / "hudi-scratch", master=s.master,
                      driver_memory=s.driver_memory, spark_conf=s.conf, startup_timeout=600)


def run_hudi(table: Path, strategy: str, s: Setting) -> dict[str, Any]:
    start = time.perf_counter()
    worker = hudi_worker(s)
    try:
        started = time.perf_counter()
        rows = worker.run_clustering(table, "scheduleAndExecute", options=hudi_options(strategy, s),
                                     order=cow.COLUMNS, timeout=CASE_TIMEOUT_S)
        called = time.perf_counter()
    finally:
        worker.close(timeout=120)
    return {"phases": {"start_s": round(started - start, 3), "run_clustering_s": round(called - started, 3),
                       "stop_s": round(time.perf_counter() - called, 3)}, "procedure_rows": rows}


def run_compaction(table: Path, s: Setting) -> dict[str, Any]:
    from tests.harness.apache_hudi import procedure_options
    from tests.harness.hudi_versions import shared_table_writer_options, table_service_options

    options = {**table_service_options(shared_table_writer_options(s.setup)), **MOR_OPTIONS,
               "hoodie.compact.inline.max.delta.commits": "1", "hoodie.parquet.compression.codec": s.hudi_codec}
    start = time.perf_counter()
    worker = hudi_worker(s)
    try:
        started = time.perf_counter()
        rows = worker.sql(f"CALL run_compaction(op => 'scheduleAndExecute', path => '{table}', "
                          f"options => '{procedure_options(options)}')", timeout=CASE_TIMEOUT_S)
        called = time.perf_counter()
    finally:
        worker.close(timeout=120)
    return {"phases": {"start_s": round(started - start, 3), "run_compaction_s": round(called - started, 3),
                       "stop_s": round(time.perf_counter() - called, 3)}, "procedure_rows": rows}


def measured(fn: Any, meter: CpuMeter) -> tuple[float, float | None, RssPeaks, Any]:
    cpu_start = meter.seconds()
    start = time.perf_counter()
    with sample_rss(child=True) as rss:
        out = fn()
    seconds = time.perf_counter() - start
    cpu_end = meter.seconds()
    cpu = cpu_end - cpu_start if cpu_start is not None and cpu_end is not None else None
    return seconds, cpu, rss, out


def run_case(case: str, strategy: str, cache: Path, s: Setting, meter: CpuMeter, reference: Any,
             keep: Path | None) -> list[Run]:
    """One case on a fresh copy of ``cache``: the clustering run(s), then the layout of the latest base files.
    ``compacted`` gives two runs: Hudi's compaction, then ours on the compacted copy."""
    dst = s.work / f"{case}-{strategy}"
    cow.fresh_cached_copy(cache, dst)
    runs: list[Run] = []
    if case == "compacted":
        load1 = os.getloadavg()[0]
        seconds, cpu, rss, extra = measured(lambda: run_compaction(dst, s), meter)
        runs.append(Run("compaction", "-", seconds, cpu, rss, load1, {}, extra))
        extra["logs_left"] = len(log_files(dst))
    before = cow.instant_files(dst)
    load1 = os.getloadavg()[0]
    run_fn = {"ours": run_ours, "hudi": run_hudi, "compacted": run_ours}[case]
    seconds, cpu, rss, extra = measured(lambda: run_fn(dst, strategy, s), meter)
    files = hudi_base_files(dst)
    layout = layout_figures(files, reference)
    layout["file_bytes"] = sorted(os.path.getsize(f) for f in files)
    extra["timeline"] = cow.check_clustered_table(dst, before, s.setup.table_version)
    extra["logs_in_latest_slices"] = latest_log_count(dst)
    if not extra["timeline"]["ok"]:
        say(f"  WARNING: {case} {strategy}: {'; '.join(extra['timeline']['problems'])}")
    runs.append(Run(case, strategy, seconds, cpu, rss, load1, layout, extra))
    if keep is not None:
        shutil.rmtree(keep, ignore_errors=True)
        dst.rename(keep)
    else:
        shutil.rmtree(dst, ignore_errors=True)
    return runs


def latest_log_count(table: Path) -> int:
    from hudi_clusterd.table.hoodie_table import HoodieTable

    return sum(len(fs.log_files) for fs in HoodieTable.open(str(table)).file_system_view().latest_file_slices())


# --- the rows: Hudi's snapshot read of every output against the table before ----------------------------------


def snapshot_check(installation: Any, s: Setting, original: Path, outputs: Mapping[str, Path]) -> dict[str, Any]:
    """Hudi's snapshot read of the table before any clustering and of each output; each must hold the same rows
    (every column but ``_hoodie_file_name``), compared sorted by key."""
    def rows_of(table: pa.Table) -> pa.Table:
        keep = [n for n in table.column_names if n != META_FILE_NAME]
        return table.select(keep).sort_by(KEY)

    out: dict[str, Any] = {}
    with hudi_worker(s) as hudi:
        expected = rows_of(hudi.read(original))
        out["expected_rows"] = expected.num_rows
        data_columns = [n for n in expected.column_names if not n.startswith("_hoodie_")]
        for name, path in outputs.items():
            got = rows_of(hudi.read(path))
            same = got.num_rows == expected.num_rows and got.select(expected.column_names).equals(expected)
            data_same = got.num_rows == expected.num_rows and got.select(data_columns).equals(
                expected.select(data_columns))
            out[name] = {"rows": got.num_rows, "equal": same, "data_columns_equal": data_same}
            if not same:
                differing = [c for c in expected.column_names if got.num_rows != expected.num_rows
                             or not got.column(c).equals(expected.column(c))]
                out[name]["differing_columns"] = differing
                say(f"  WARNING: {name}: Hudi's snapshot read differs from the table before (columns {differing})")
    return out


# --- the memory case ------------------------------------------------------------------------------------------------


def memory_case(cache: Path, s: Setting, meter: CpuMeter, strategy: str) -> dict[str, Any]:
    from hudi_clusterd.table.hoodie_table import HoodieTable

    slices = [fs for fs in HoodieTable.open(str(cache)).file_system_view().latest_file_slices() if fs.log_files]
    piece = max(slices, key=lambda fs: sum(lf.size for lf in fs.log_files))  # one, unless Hudi split the insert
    assert piece.base_file is not None
    base_rel, log_rels = piece.base_file.relative_path, [lf.relative_path for lf in piece.log_files]
    logs = total_bytes([cache / r for r in log_rels])
    base = (cache / base_rel).stat().st_size
    rows = pq.ParquetFile(cache / base_rel).metadata.num_rows
    say(f"memory case: {len(slices)} slice(s) with logs; the largest: base file {base / MIB:.1f} MiB "
        f"({rows:,} rows), {len(log_rels)} log files {logs / MIB:.1f} MiB")
    spec = {"table": str(cache), "base": base_rel, "logs": log_rels}
    proc = subprocess.run([sys.executable, "-c", _MERGE_CHILD, str(REPO / "daemon"), json.dumps(spec)],
                          capture_output=True, text=True, env=cow.child_env(), timeout=CASE_TIMEOUT_S)
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not results:
        raise SystemExit(f"the merge alone failed (exit {proc.returncode}): {proc.stderr[-3000:]}")
    alone = results[0]
    say(f"  merge alone: {alone['rows']:,} rows in {alone['seconds']} s (CPU {alone['cpu_seconds']} s), peak RSS "
        f"{alone['rss_peak'] / MIB:.0f} MiB ({(alone['rss_peak'] - alone['rss_before']) / MIB:.0f} MiB over the "
        f"{alone['rss_before'] / MIB:.0f} MiB before), Arrow pool peak {alone['arrow_pool_peak'] / MIB:.0f} MiB")
    [run] = run_case("ours", strategy, cache, s, meter, None, None)
    say(f"  ours: {run.seconds:.1f} s, CPU {cow._fmt(run.cpu_seconds)} s, Python worker peak RSS "
        f"{run.rss.worker_max / MIB:.0f} MiB (all workers {run.rss.workers / MIB:.0f} MiB), driver "
        f"{run.rss.driver / MIB:.0f} MiB")
    return {"base_bytes": base, "base_rows": rows, "log_files": len(log_rels), "log_bytes": logs,
            "merge_alone": alone, "ours": run_dict(run)}


# --- reporting ------------------------------------------------------------------------------------------------------


def run_dict(r: Run) -> dict[str, Any]:
    return {"case": r.case, "strategy": r.strategy, "seconds": round(r.seconds, 2),
            "cpu_seconds": cow._round(r.cpu_seconds), "rss": r.rss.to_dict(), "load1": round(r.load1, 2),
            "layout": r.layout, "extra": cow._jsonable(r.extra)}


def summary(runs: Sequence[Run]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in runs:
        out.setdefault(f"{r.case}/{r.strategy}", {"runs": []})["runs"].append(r)
    for entry in out.values():
        rs: list[Run] = entry.pop("runs")
        last = rs[-1]
        entry.update({
            "case": last.case, "strategy": last.strategy, "seconds": [round(r.seconds, 2) for r in rs],
            "median_s": round(cow.median([r.seconds for r in rs]) or 0, 2),
            "median_cpu_s": cow._round(cow.median([r.cpu_seconds for r in rs])),
            "files_out": last.layout.get("files"), "bytes_out": last.layout.get("bytes"),
            "files_scanned": last.layout.get("files_scanned_ratio"),
            "files_scanned_per_run": [r.layout.get("files_scanned_ratio") for r in rs],
            "peak_driver_rss_mib": round(max(r.rss.driver for r in rs) / MIB, 1),
            "peak_worker_rss_mib": round(max(r.rss.worker_max for r in rs) / MIB, 1),
            "load1": [round(r.load1, 2) for r in rs], "runs": [run_dict(r) for r in rs],
        })
    return out


def print_version(setup: Any, info: Mapping[str, Any], results: Mapping[str, Any], strategies: Sequence[str],
                  repeat: int) -> dict[str, Any]:
    hudi = f"Hudi {setup.hudi_version}"
    names = {"ours": "ours (merge in the clustering)", "hudi": f"{hudi} run_clustering",
             "compaction": f"{hudi} run_compaction", "compacted": "ours on the compacted copy"}
    say(f"\ntable version {setup.table_version}, written by Apache {hudi}: {info['base_files']} file groups, "
        f"{info['base_bytes'] / MIB:.0f} MiB of base files, {info['log_files']} log files "
        f"{info['log_bytes'] / MIB:.0f} MiB in {info['slices_with_logs']} slices; median of {repeat}")
    say("\n| strategy | case | wall s | CPU s | files out | MiB out | files-scanned | driver RSS MiB "
        "| worker RSS MiB | load |")
    say("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results.values():
        files = "—" if r["files_out"] is None else str(r["files_out"])
        mib = "—" if r["bytes_out"] is None else f"{r['bytes_out'] / MIB:.1f}"
        scanned = "—" if r["files_scanned"] is None else f"{r['files_scanned']:.3f}"
        say(f"| {r['strategy']} | {names[r['case']]} | {r['median_s']:.1f} | {cow._fmt(r['median_cpu_s'])} | {files} "
            f"| {mib} | {scanned} | {r['peak_driver_rss_mib']:.0f} | {r['peak_worker_rss_mib']:.0f} "
            f"| {cow._fmt(cow.median(r['load1']))} |")
    verdict: dict[str, Any] = {}
    say(f"\n| strategy | wall ours / {hudi} | CPU ours / {hudi} | files-scanned ours vs {hudi} | goal "
        "| ours with the merge / ours on compacted (wall, CPU) | compaction + ours / ours with the merge (wall) |")
    say("| --- | ---: | ---: | --- | --- | --- | ---: |")
    for st in strategies:
        ours, theirs = results.get(f"ours/{st}"), results.get(f"hudi/{st}")
        if ours is None or theirs is None:
            continue
        wall = ours["median_s"] / theirs["median_s"]
        cpu = ours["median_cpu_s"] / theirs["median_cpu_s"] if ours["median_cpu_s"] and theirs["median_cpu_s"] \
            else None
        fo, fh = ours["files_scanned"], theirs["files_scanned"]
        met = wall < 1.0 and fo <= fh + 5e-4
        entry: dict[str, Any] = {"wall_ratio": round(wall, 3), "cpu_ratio": cow._round(cpu), "files_scanned_ours": fo,
                                 "files_scanned_hudi": fh, "met": met}
        merge_cost, total = "—", "—"
        comp, compacted = results.get("compaction/-"), results.get(f"compacted/{st}")
        if compacted is not None:
            w = ours["median_s"] / compacted["median_s"]
            c = ours["median_cpu_s"] / compacted["median_cpu_s"] if ours["median_cpu_s"] and \
                compacted["median_cpu_s"] else None
            entry.update({"merge_vs_compacted_wall": round(w, 3), "merge_vs_compacted_cpu": cow._round(c)})
            merge_cost = f"{w:.2f}, {cow._fmt(c, '.2f')}"
            if comp is not None:
                t = (comp["median_s"] + compacted["median_s"]) / ours["median_s"]
                entry["compaction_plus_ours_vs_ours"] = round(t, 3)
                total = f"{t:.2f}"
        verdict[st] = entry
        say(f"| {st} | {wall:.2f} | {cow._fmt(cpu, '.2f')} | {fo:.3f} vs {fh:.3f} | {'met' if met else 'NOT met'} "
            f"| {merge_cost} | {total} |")
    return verdict


# --- main -----------------------------------------------------------------------------------------------------------


def table_info(table: Path) -> dict[str, Any]:
    from hudi_clusterd.table.hoodie_table import HoodieTable

    slices = HoodieTable.open(str(table)).file_system_view().latest_file_slices()
    bases = [table / fs.base_file.relative_path for fs in slices if fs.base_file is not None]
    logs = [table / lf.relative_path for fs in slices for lf in fs.log_files]
    return {"file_groups": len(slices), "base_files": len(bases), "base_bytes": total_bytes(bases),
            "log_files": len(logs), "log_bytes": total_bytes(logs),
            "slices_with_logs": sum(bool(fs.log_files) for fs in slices)}


def run_version(version: int, args: argparse.Namespace, reference: Any, meter: CpuMeter) -> dict[str, Any]:
    from tests.harness.apache_hudi import HudiUnavailableError, locate

    setup = cow.hudi_setup(version)
    try:
        installation = locate(setup)
    except HudiUnavailableError as exc:
        raise SystemExit(str(exc)) from None
    source = ensure_dataset(args.shared, args.data, args.rows, args.files)
    inserts, upserts = hudi_input(source, args.data, args.upserts, args.update_fraction)
    work = args.out / f"mor-vs-hudi-v{version}"
    work.mkdir(parents=True, exist_ok=True)
    cache = args.data / f"hudi_mor_{args.rows}_{args.files}_u{args.upserts}_f{args.update_fraction:g}_v{version}"
    ensure_mor_table(cache, installation, inserts, upserts, work)
    info = table_info(cache)
    n = max(1, math.ceil(info["base_bytes"] / TARGET_BYTES))
    s = Setting(args.master, {"spark.sql.shuffle.partitions": str(n)}, args.driver_memory, args.hudi_codec,
                args.sample_size, work, setup, installation)
    say(f"\ntable version {version} ({cache.name}): {info}")
    strategies = [x for x in args.strategies.split(",") if x]
    cases = [x for x in args.cases.split(",") if x]
    runs: list[Run] = []
    kept: dict[str, Path] = {}
    for round_no in range(1, args.repeat + 1):
        for k, strategy in enumerate(strategies):
            shift = (round_no - 1 + k) % len(cases)
            for case in cases[shift:] + cases[:shift]:
                keep = work / f"kept-{case}-{strategy}" if round_no == args.repeat else None
                for r in run_case(case, strategy, cache, s, meter, reference, keep):
                    runs.append(r)
                    extra = r.extra
                    plan = f", {extra.get('slices_with_logs')}/{extra.get('slices')} slices with logs " \
                           f"({extra.get('log_files')} log files)" if "slices" in extra else ""
                    scanned = f", files-scanned {r.layout['files_scanned_ratio']:.3f}, {r.layout['files']} files" \
                        if r.layout else ""
                    phases = " | ".join(f"{k.removesuffix('_s')} {v:.1f}" for k, v in extra["phases"].items())
                    say(f"round {round_no}/{args.repeat}: v{version} {r.case} {r.strategy}: {r.seconds:.1f} s "
                        f"({phases}), CPU {cow._fmt(r.cpu_seconds)} s{scanned}{plan}, worker RSS "
                        f"{r.rss.worker_max / MIB:.0f} MiB (load {r.load1:.1f})")
                if keep is not None:
                    kept[f"{case}/{strategy}"] = keep
    say(f"v{version}: Hudi's snapshot reads of the table and of each output ...")
    rows = snapshot_check(installation, s, cache, kept)
    for path in kept.values():
        shutil.rmtree(path, ignore_errors=True)
    results = summary(runs)
    for key, entry in results.items():
        entry["snapshot"] = rows.get(key)
    verdict = print_version(setup, info, results, strategies, args.repeat)
    say(f"rows: Hudi's snapshot of the table before: {rows['expected_rows']:,}; outputs: " + ", ".join(
        f"{k} {v['rows']:,} {'equal' if v['equal'] else 'DIFFERENT'}" for k, v in rows.items() if k != "expected_rows"))
    out: dict[str, Any] = {"setup": setup.name, "hudi_version": setup.hudi_version, "table": str(cache),
                           "table_info": info, "cases": results, "verdict": verdict, "snapshot_check": rows}
    if args.memory_log_mib > 0:
        mem_cache = args.data / f"hudi_mor_memory_{args.memory_rows}_{args.memory_log_mib:g}mib_v{version}"
        ensure_memory_table(mem_cache, installation, inserts, args.memory_rows, args.memory_log_mib, work)
        out["memory"] = memory_case(mem_cache, s, meter, strategies[0])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=400_000, help="rows of the generated dataset")
    parser.add_argument("--files", type=int, default=20, help="source files = Hudi inserts = file groups")
    parser.add_argument("--upserts", type=int, default=2, help="upserts after the inserts (log files)")
    parser.add_argument("--update-fraction", type=float, default=0.1, help="share of all keys each upsert updates")
    parser.add_argument("--table-versions", default="9,6", help="from 9 (Apache Hudi 1.2.0) and 6 (0.15.0)")
    parser.add_argument("--strategies", default="linear", help=f"from {','.join(cow.STRATEGIES)}")
    parser.add_argument("--cases", default=",".join(CASES), help=f"from {','.join(CASES)}")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; figures are medians")
    parser.add_argument("--memory-log-mib", type=float, default=100, help="the memory case's log MiB (0: skip it)")
    parser.add_argument("--memory-rows", type=int, default=200_000, help="rows of the memory case's file group")
    parser.add_argument("--hudi-codec", default="snappy", help="Hudi's hoodie.parquet.compression.codec")
    parser.add_argument("--sample-size", type=int, default=200_000, help="curve sample size (Hudi's default)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--shared", type=Path, default=REPO / ".." / "shared")
    parser.add_argument("--data", type=Path, default=REPO / "bench" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args = parser.parse_args(argv)
    args.data, args.out, args.shared = args.data.resolve(), args.out.resolve(), args.shared.resolve()
    for name, known, given in (("strategy", cow.STRATEGIES, args.strategies.split(",")),
                               ("case", CASES, args.cases.split(","))):
        unknown = [x for x in given if x and x not in known]
        if unknown:
            raise SystemExit(f"unknown {name}(s) {', '.join(unknown)}; known: {', '.join(known)}")
    args.out.mkdir(parents=True, exist_ok=True)
    reference = load_module(args.shared / "bench" / "layout.py", "reference_layout")
    meter = CpuMeter(interval=0.1)
    load_before = load_info()
    versions: dict[str, Any] = {}
    for version in (int(v) for v in args.table_versions.split(",") if v):
        versions[f"v{version}"] = run_version(version, args, reference, meter)
        (args.out / "mor_vs_hudi.partial.json").write_text(json.dumps(versions, indent=2, default=str) + "\n")
    meter.close()
    result = {"config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "load_before": load_before, "load_after": load_info(), "versions": versions}
    path = args.out / "mor_vs_hudi.json"
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    say(f"\nload before {load_before['loadavg']}, after {result['load_after']['loadavg']}; wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
