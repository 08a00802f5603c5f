"""What keeping Apache Hudi's metadata table (MDT) true costs a clustering's commit.

Target (the issue): a clustering's commit with the metadata table costs at most 0.5 s more than without, on the
reference dataset, and the column statistics come from the new files' parquet footers (no data page read).

The input is the reference dataset (``../shared/bench/gen.py``: 4M rows in 200 small files) loaded by our
ingestion into a **version-9** table, one ``bulk_insert`` commit per file (``bench/data/hudi_events_<rows>_<files>_v9``,
the table ``bench_vs_hudi.py --table-version 9`` caches), then given its metadata table **by Apache Hudi 1.2.0**:
a copy of that table gets one small Hudi write with ``hoodie.metadata.enable=true`` (an upsert of a few existing
rows, key ``event_id``; the writer settings of ``shared_table_writer_options(HUDI_1_2_V9)``, Hudi's defaults
otherwise) in a ``tests/harness/hudi_worker.py`` process, and Hudi initialises the metadata table over every
existing file (``files`` and ``column_stats``; the table is non-partitioned, so no ``partition_stats``). That table
is cached too (``bench/data/hudi_events_<rows>_<files>_v9_mdt``); Hudi runs only when it is missing.

Two cases, on fresh copies of that table (copied, synced to disk and read once, so the page cache is the same for
each), interleaved over ``--repeat`` rounds (the order alternating), in this one process with one SparkSession
(``local[2]``, ``spark.driver.memory=1g``), each ``schedule(force=True)`` + ``execute_pending`` with
``SparkGroupRunner`` and ``commit_wait_s=0`` (the commit waits for no writer), the properties of
``bench_vs_hudi.py`` for one strategy (``--strategy``, linear by default; the whole table one group):

* ``mdt``: the table with its metadata table: the commit completes a metadata deltacommit (``files`` and
  ``column_stats`` records) right before the replacecommit, under the lock;
* ``plain``: the same table with the metadata table removed (``.hoodie/metadata`` deleted,
  ``hoodie.table.metadata.partitions`` and ``.inflight`` dropped from ``.hoodie/hoodie.properties``).

Timed (``time.perf_counter``, and CPU seconds of the committing thread, ``time.thread_time``, which other work on
the machine inflates far less; by wrapping the functions where they are looked up): the whole commit step
(``hudi_clusterd.ops.commit.complete`` as ``ops/execute.py`` calls it), and within it ``MetadataTable.commit`` and
the column statistics records it builds (``index_records``: ``ColumnIndexes.records``). The new files' footers are
read before the commit step, while the clustering executes: ``ops/execute.py`` calls ``MetadataTable.prepare``
(``prepare_metadata``: ``ColumnIndexes.prepare``), which reads them in 4 threads and keeps their column ranges in
the table handle's metadata table, so ``index_records`` only looks them up. ``prepare_metadata`` is wrapped too, and
timed apart (outside the commit step, as Hudi's write tasks collect their statistics during the write): wall
seconds, and CPU seconds of this whole process (``time.process_time``: the reading threads' too). Around
``prepare_metadata``, ``MetadataTable.commit`` and ``index_records``, the bytes this process read (``rchar`` of
``/proc/self/io``: every ``read``/``pread`` of every thread, the footers and the metadata table's timeline and
listing) are compared with the new files' bytes and with their footers' bytes (Parquet footer length + 8):
"footers only" means that ``prepare_metadata`` and ``index_records`` together read at least the footers' bytes
(the footers were read, not skipped) and at most the footers' bytes + 64 KiB per file (pyarrow reads a file's
last 64 KiB, then a larger footer whole) + 64 KiB.

After every ``mdt`` run the metadata table is checked: its ``files`` partition (``MetadataTable.live_files``) lists
exactly the base files of completed instants on storage, with their sizes, and the new files' ``column_stats``
records equal their footers' statistics (min, max, value and null counts of ``lat``, ``lon``, ``event_id``).

``--profile`` (and any run that misses the target) adds one more ``mdt`` clustering with ``MetadataTable.commit``
under cProfile; the top functions are printed and saved to ``bench/out/metadata_commit_profile.txt``.

    python bench/bench_metadata_commit.py                                       # 4M rows / 200 files, 2 rounds
    python bench/bench_metadata_commit.py --rows 400000 --files 20 --repeat 1   # quick check
    python bench/bench_metadata_commit.py --strategy hilbert --repeat 3 --profile

Prints a table (median and every round) and writes ``bench/out/metadata_commit.json``. Needs the Hudi cache of
``python -m tests.harness.hudi_setup`` (the 1.2.0 bundle and its venv) unless the ``_mdt`` tables are cached.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import logging
import math
import os
import platform
import pstats
import shutil
import statistics
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import structlog

from bench_vs_hudi import STRATEGIES, clustering_props, ensure_tables, fresh_cached_copy
from benchlib import (
    MIB,
    TARGET_BYTES,
    ensure_dataset,
    hudi_base_files,
    hudi_table_cache,
    load_info,
    say,
    total_bytes,
)
from hudi_clusterd.domain.policy import ClusteringPolicy, parse_policy
from hudi_clusterd.formats.metadata import column_stats as cs
from hudi_clusterd.formats.metadata import records as rec
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.metadata.base import METADATA_FOLDER
from hudi_clusterd.table.metadata.commit import MetadataCommit
from hudi_clusterd.table.metadata.indexes import ColumnIndexes
from hudi_clusterd.table.metadata.writer import MetadataTable

TABLE_VERSION = 9
TARGET_EXTRA_S = 0.5
UPSERT_ROWS = 5
WRITE_TIMEOUT_S = 3600.0
WARM_UP_ROWS, WARM_UP_FILES = 100_000, 5
CASES = ("mdt", "plain")
LABELS = {"mdt": "with the metadata table", "plain": "without (metadata table removed)"}
METADATA_KEYS = ("hoodie.table.metadata.partitions", "hoodie.table.metadata.partitions.inflight")
CHECKED_COLUMNS = ("lat", "lon", "event_id")
PROFILE_TOP = 30
FOOTER_READ_AHEAD = 64 * 1024
"""pyarrow reads a parquet file's last 64 KiB first, then (a larger footer) the whole footer."""


# --- the inputs: our version-9 table, given its metadata table by Apache Hudi 1.2 ---------------------------------


def mdt_cache(cache: Path) -> Path:
    """Where the copy of ``cache`` that Hudi 1.2 gave a metadata table is cached: ``<cache>_mdt``."""
    return cache.with_name(cache.name + "_mdt")


def ensure_mdt_tables(caches: Sequence[Path], work: Path, master: str, driver_memory: str) -> None:
    """For each version-9 table whose ``_mdt`` copy is not cached: copy the table, and let one
    Apache Hudi 1.2 upsert of a few existing rows (``hoodie.metadata.enable=true``) build its metadata table. One
    Hudi worker serves every table, and is stopped before this process starts its own Spark."""
    todo = [c for c in caches if not (mdt_cache(c) / METADATA_FOLDER).is_dir()]
    if not todo:
        return
    from tests.harness.apache_hudi import HudiUnavailableError, HudiWorker, hudi_write_options, locate
    from tests.harness.hudi_versions import HUDI_1_2_V9

    try:
        installation = locate(HUDI_1_2_V9)
    except HudiUnavailableError as exc:
        raise SystemExit(str(exc)) from None
    options = hudi_write_options(HUDI_1_2_V9, "events", record_key="event_id", partition_path=None, precombine=None,
                                 operation="upsert", extra={"hoodie.metadata.enable": "true"})
    say(f"starting Apache Hudi {HUDI_1_2_V9.hudi_version} ({HUDI_1_2_V9.name}) to build metadata tables ...")
    worker = HudiWorker(installation, scratch=work / "hudi-scratch", master=master, driver_memory=driver_memory,
                        startup_timeout=600)
    try:
        for cache in todo:
            target = mdt_cache(cache)
            partial = target.with_name(target.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(cache, partial)
            rows, first = existing_rows(partial)
            upsert = work / "upsert.parquet"
            pq.write_table(rows, upsert)
            start = time.perf_counter()
            # (HudiWorker.write's 300 s are too few for 4M rows on a busy machine: Hudi looks the keys up in every
            # file, then lists every file and reads every footer to build the metadata table)
            instants = worker.request("write", timeout=WRITE_TIMEOUT_S, source=str(upsert), path=str(partial),
                                      options=options, mode="append")["instants"]
            upsert.unlink()
            say(f"  {target.name}: Hudi upserted {rows.num_rows} rows of {first} (amount + 1) with the metadata "
                f"table on (instant {', '.join(instants)}) in {time.perf_counter() - start:.0f} s")
            table = HoodieTable.open(str(partial))
            mdt = table.metadata_table()
            if mdt is None:
                raise SystemExit(f"{partial}: Hudi's write left no metadata table (hoodie.table.metadata.partitions "
                                 "unset)")
            mdt.check_supported()
            partial.rename(target)
    finally:
        worker.close(timeout=120)


def existing_rows(base: Path) -> tuple[pa.Table, str]:
    """The first few rows of the table's first latest base file, data columns only, ``amount`` + 1: rows as the
    table holds them (``event_ts`` a UTC-adjusted timestamp, which Hudi's Spark writer maps to ``timestamp-micros``,
    the table schema's type; the source files' local timestamps would map to ``local-timestamp-micros``, which
    Hudi's schema check refuses)."""
    path = sorted(hudi_base_files(base))[0]
    table = pq.read_table(path).slice(0, UPSERT_ROWS)
    table = table.select([c for c in table.column_names if not c.startswith("_hoodie_")])
    amount = table.schema.get_field_index("amount")
    return table.set_column(amount, "amount", pc.add(table.column("amount"), 1.0)), Path(path).name


def drop_metadata_table(base: Path) -> None:
    """Remove a table's metadata table: ``.hoodie/metadata`` and the data table's metadata partition keys."""
    shutil.rmtree(base / METADATA_FOLDER)
    props = base / ".hoodie" / "hoodie.properties"
    lines = props.read_text(encoding="iso-8859-1").splitlines()
    kept = [line for line in lines if line.split("=", 1)[0].strip() not in METADATA_KEYS]
    props.write_text("\n".join(kept) + "\n", encoding="iso-8859-1")


def describe_mdt(base: Path) -> dict[str, Any]:
    """The metadata partitions the data table declares, and the file groups and files of each."""
    table = HoodieTable.open(str(base))
    mdt = table.metadata_table()
    assert mdt is not None
    out: dict[str, Any] = {"partitions": list(mdt.partitions), "file_groups": {}, "files": {}}
    for p in mdt.partitions:
        folder = base / METADATA_FOLDER / p
        names = [f.name for f in folder.iterdir()
                 if f.is_file() and not f.name.endswith(".crc") and not f.name.startswith(".hoodie_partition")]
        out["file_groups"][p] = len({n.lstrip(".").split("_", 1)[0] for n in names})
        out["files"][p] = len(names)
    timeline = base / METADATA_FOLDER / ".hoodie" / "timeline"
    out["mdt_instants"] = sorted(f.name for f in timeline.iterdir() if f.is_file() and not f.name.endswith(".crc")
                                 and "_" in f.name) if timeline.is_dir() else []
    out["data_instants_completed"] = len(list(table.timeline().completed()))
    out["index_defs"] = (base / ".hoodie" / ".index_defs" / "index.json").is_file()
    return out


# --- probes around the commit step ----------------------------------------------------------------------------


def rchar() -> int:
    """Bytes this process has read (``read``/``pread`` and the like, page cache or not): ``/proc/self/io``."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise RuntimeError("no rchar in /proc/self/io")


@dataclass
class Probe:
    """What one clustering's commit step measured."""

    commit_s: float | None = None  # ops.commit.complete, as ops/execute.py calls it
    mdt_commit_s: float | None = None  # MetadataTable.commit
    index_records_s: float | None = None  # column statistics from the new files' footers
    commit_cpu_s: float | None = None  # the same three in CPU seconds of the committing thread
    mdt_commit_cpu_s: float | None = None
    index_records_cpu_s: float | None = None
    mdt_read_bytes: int | None = None  # rchar during MetadataTable.commit
    index_read_bytes: int | None = None  # rchar during index_records
    prepare_s: float | None = None  # prepare_metadata: the footers read during the execution, before the commit
    prepare_cpu_s: float | None = None  # in CPU seconds of the whole process (it reads in threads)
    prepare_read_bytes: int | None = None  # rchar during prepare_metadata (every thread's reads)
    records: dict[str, int] = field(default_factory=dict)  # per MDT partition
    log_files: int = 0
    profiler: cProfile.Profile | None = None


@contextmanager
def probes() -> Iterator[list[Probe]]:
    """Wrap ``complete`` (where ``ops/execute.py`` looks it up), ``MetadataTable.commit`` and the metadata table's
    ``ColumnIndexes.prepare`` and ``ColumnIndexes.records`` with timers; each clustering appends one `Probe` to the
    list before it runs. The originals are put back on exit."""
    import hudi_clusterd.ops.execute as execute_mod

    runs: list[Probe] = []
    # (owner, name) of each wrapped function: looked up by name, as the modules that call them do
    complete_at, mdt_commit_at, index_records_at = (execute_mod, "complete"), (MetadataTable, "commit"), \
        (ColumnIndexes, "records")
    prepare_at = (ColumnIndexes, "prepare")
    original_complete = getattr(*complete_at)
    original_prepare = getattr(*prepare_at)
    original_mdt_commit = getattr(*mdt_commit_at)
    original_index_records = getattr(*index_records_at)

    def timed_complete(*args: Any, **kwargs: Any) -> Any:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return original_complete(*args, **kwargs)
        finally:
            runs[-1].commit_s, runs[-1].commit_cpu_s = time.perf_counter() - start, time.thread_time() - cpu

    def timed_mdt_commit(self: MetadataTable, *args: Any, **kwargs: Any) -> MetadataCommit:
        probe = runs[-1]
        read0, start, cpu = rchar(), time.perf_counter(), time.thread_time()
        if probe.profiler is not None:
            probe.profiler.enable()
        try:
            done: MetadataCommit = original_mdt_commit(self, *args, **kwargs)
        finally:
            if probe.profiler is not None:
                probe.profiler.disable()
            probe.mdt_commit_s, probe.mdt_read_bytes = time.perf_counter() - start, rchar() - read0
            probe.mdt_commit_cpu_s = time.thread_time() - cpu
        probe.records, probe.log_files = dict(done.records), len(done.log_files)
        return done

    def timed_index_records(*args: Any, **kwargs: Any) -> Any:
        read0, start, cpu = rchar(), time.perf_counter(), time.thread_time()
        try:
            return original_index_records(*args, **kwargs)
        finally:
            runs[-1].index_records_s = time.perf_counter() - start
            runs[-1].index_records_cpu_s = time.thread_time() - cpu
            runs[-1].index_read_bytes = rchar() - read0

    def timed_prepare(*args: Any, **kwargs: Any) -> Any:
        # (it reads the footers in threads: wall seconds, the process's CPU seconds and every thread's reads)
        read0, start, cpu = rchar(), time.perf_counter(), time.process_time()
        try:
            return original_prepare(*args, **kwargs)
        finally:
            runs[-1].prepare_s = time.perf_counter() - start
            runs[-1].prepare_cpu_s = time.process_time() - cpu
            runs[-1].prepare_read_bytes = rchar() - read0

    wrapped = ((complete_at, timed_complete, original_complete), (mdt_commit_at, timed_mdt_commit, original_mdt_commit),
               (index_records_at, timed_index_records, original_index_records),
               (prepare_at, timed_prepare, original_prepare))
    for (owner, name), timed, _original in wrapped:
        setattr(owner, name, timed)
    try:
        yield runs
    finally:
        for (owner, name), _timed, original in wrapped:
            setattr(owner, name, original)


# --- one case -----------------------------------------------------------------------------------------------------


@dataclass
class CaseRun:
    case: str
    round: int
    clustering_s: float  # schedule + execute_pending
    commit_s: float
    mdt_commit_s: float | None
    index_records_s: float | None
    commit_cpu_s: float | None
    mdt_commit_cpu_s: float | None
    index_records_cpu_s: float | None
    mdt_read_bytes: int | None
    index_read_bytes: int | None
    prepare_s: float | None
    prepare_cpu_s: float | None
    prepare_read_bytes: int | None
    records: dict[str, int]
    log_files: int
    files_in: int
    rows_in: int
    files_out: int
    new_bytes: int
    footer_bytes: int
    rows_out: int
    load1: float
    checks: dict[str, Any] = field(default_factory=dict)


def policy_for(strategy: str, sample_size: int) -> ClusteringPolicy:
    policy, warnings = parse_policy(clustering_props(strategy, sample_size), source="bench")
    for w in warnings:
        say(f"policy warning: {w}")
    return policy


def footer_bytes(path: str) -> int:
    """A parquet file's footer as stored: the Thrift ``FileMetaData`` and its 8-byte trailer."""
    with open(path, "rb") as f:
        f.seek(-8, os.SEEK_END)
        tail = f.read(8)
    return int.from_bytes(tail[:4], "little") + 8


def cluster(base: Path, runner: Any, policy: ClusteringPolicy, runs: list[Probe], profile: bool = False
            ) -> tuple[float, Probe, Any, list[str]]:
    """One clustering of ``base`` (``schedule(force=True)`` + ``execute_pending``, no writer wait), probed."""
    from hudi_clusterd.ops.execute import execute_pending
    from hudi_clusterd.ops.schedule import schedule

    runs.append(Probe(profiler=cProfile.Profile() if profile else None))
    table = HoodieTable.open(str(base))
    start = time.perf_counter()
    scheduled = schedule(table, policy, force=True)
    if scheduled.instant is None or scheduled.plan is None:
        raise SystemExit(f"nothing scheduled on {base}: {scheduled.reason}")
    result = execute_pending(table, runner, scheduled.instant, parallelism=policy.max_parallelism, commit_wait_s=0)
    seconds = time.perf_counter() - start
    if result.outcome != "completed":
        raise SystemExit(f"clustering {scheduled.instant} on {base}: {result.outcome}: {result.message}")
    inputs = [table.storage.full_path(table.storage.rel_from_uri(s.data_file_path))
              for g in scheduled.plan.input_groups for s in g.slices]
    return seconds, runs[-1], result, inputs


def run_case(case: str, round_no: int, cache: Path, work: Path, runner: Any, policy: ClusteringPolicy,
             runs: list[Probe]) -> CaseRun:
    base = fresh_cached_copy(cache, work / case) if case == "mdt" else prepare_plain(cache, work / case)
    load1 = os.getloadavg()[0]
    seconds, probe, result, inputs = cluster(base, runner, policy, runs)
    if probe.commit_s is None:
        raise SystemExit("the commit step was not timed: ops.execute no longer calls ops.commit.complete by that name")
    table = HoodieTable.open(str(base))
    new_paths = [table.storage.full_path(ws.path) for ws in result.write_stats if ws.path]
    run = CaseRun(case, round_no, seconds, probe.commit_s, probe.mdt_commit_s, probe.index_records_s,
                  probe.commit_cpu_s, probe.mdt_commit_cpu_s, probe.index_records_cpu_s,
                  probe.mdt_read_bytes, probe.index_read_bytes, probe.prepare_s, probe.prepare_cpu_s,
                  probe.prepare_read_bytes, probe.records, probe.log_files, len(inputs),
                  sum(pq.ParquetFile(p).metadata.num_rows for p in inputs), len(new_paths),
                  total_bytes(new_paths), sum(footer_bytes(p) for p in new_paths),
                  sum(ws.num_writes for ws in result.write_stats), load1)
    if case == "mdt":
        if probe.mdt_commit_s is None:
            raise SystemExit(f"{base}: the clustering committed no metadata deltacommit")
        run.checks = check_mdt(base, result.instant, new_paths)
    elif probe.mdt_commit_s is not None or (base / METADATA_FOLDER).exists():
        raise SystemExit(f"{base}: the case without a metadata table wrote one")
    return run


def prepare_plain(cache: Path, dst: Path) -> Path:
    """A fresh copy of the table with its metadata table removed (then synced and read once, as the other)."""
    fresh_cached_copy(cache, dst)
    drop_metadata_table(dst)
    os.sync()
    return dst


# --- what the metadata table holds afterwards -------------------------------------------------------------------


def footer_range(path: str, column: str) -> tuple[Any, Any, int, int]:
    """min, max, value count and null count of ``column`` from a file's footer (its row groups' statistics)."""
    meta = pq.ParquetFile(path).metadata
    index = [meta.row_group(0).column(j).path_in_schema for j in range(meta.num_columns)].index(column)
    stats = [meta.row_group(i).column(index).statistics for i in range(meta.num_row_groups)]
    return (min(s.min for s in stats), max(s.max for s in stats), sum(meta.row_group(i).num_rows
            for i in range(meta.num_row_groups)), sum(s.null_count for s in stats))


def check_mdt(base: Path, instant: str, new_paths: Sequence[str]) -> dict[str, Any]:
    """The metadata table after the clustering: its files partition lists exactly the completed base files on
    storage, and the new files' column statistics equal their footers'."""
    from tests.harness.metadata_checks import committed_base_files

    table = HoodieTable.open(str(base))
    mdt = table.metadata_table()
    assert mdt is not None
    done = [i.time for i in table.timeline().completed()]
    listed = {p: f for p, f in mdt.live_files(done).items() if f}
    on_storage = committed_base_files(table)
    files_ok = listed == on_storage
    missing = sorted(n for p, fs in on_storage.items() for n in fs if n not in listed.get(p, {}))
    extra = sorted(n for p, fs in listed.items() for n in fs if n not in on_storage.get(p, {}))
    names = {Path(p).name: p for p in new_paths}
    ranges = [cs.range_from_record(r) for r in mdt.read(rec.COLUMN_STATS, done, return_record_name=True).values()]
    got = {(r.file_path, r.column): r for r in ranges if r.file_path in names}
    wrong: list[str] = []
    for name, path in names.items():
        for column in CHECKED_COLUMNS:
            r = got.get((name, column))
            footer = footer_range(path, column)
            if r is None or (r.min_value, r.max_value, r.value_count, r.null_count) != footer:
                wrong.append(f"{name}:{column}")
    return {"instant": instant, "files_partition_equals_storage": files_ok,
            "files_listed": sum(len(f) for f in listed.values()),
            "files_on_storage": sum(len(f) for f in on_storage.values()), "missing": missing[:5], "extra": extra[:5],
            "column_stats_new_files": len({n for n, _c in got}), "column_stats_records_new_files": len(got),
            "column_stats_match_footers": not wrong, "column_stats_mismatches": wrong[:5]}


# --- the run ---------------------------------------------------------------------------------------------------


def median(values: Sequence[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value / MIB:.2f}"


def summarize(runs: Sequence[CaseRun], repeat: int) -> dict[str, Any]:
    """Per round the pair (with, without) and its difference; medians over the rounds."""
    rounds: list[dict[str, Any]] = []
    for round_no in range(1, repeat + 1):
        pair = {r.case: r for r in runs if r.round == round_no}
        if set(pair) != set(CASES):
            continue
        a, b = pair["mdt"], pair["plain"]
        rounds.append({"round": round_no, "commit_mdt_s": a.commit_s, "commit_plain_s": b.commit_s,
                       "difference_s": a.commit_s - b.commit_s, "mdt_commit_s": a.mdt_commit_s,
                       "index_records_s": a.index_records_s, "commit_mdt_cpu_s": a.commit_cpu_s,
                       "commit_plain_cpu_s": b.commit_cpu_s, "difference_cpu_s": _minus(a.commit_cpu_s, b.commit_cpu_s),
                       "mdt_commit_cpu_s": a.mdt_commit_cpu_s, "index_records_cpu_s": a.index_records_cpu_s,
                       "records": a.records, "log_files": a.log_files,
                       "mdt_read_bytes": a.mdt_read_bytes, "index_read_bytes": a.index_read_bytes,
                       "prepare_s": a.prepare_s, "prepare_cpu_s": a.prepare_cpu_s,
                       "prepare_read_bytes": a.prepare_read_bytes,
                       "stats_read_bytes": None if a.prepare_read_bytes is None and a.index_read_bytes is None
                       else (a.prepare_read_bytes or 0) + (a.index_read_bytes or 0),
                       "new_files": a.files_out, "new_bytes": a.new_bytes, "footer_bytes": a.footer_bytes,
                       "footer_read_bound": a.footer_bytes + FOOTER_READ_AHEAD * (a.files_out + 1),
                       "files_in": a.files_in, "rows_in": a.rows_in, "rows_ok": a.rows_out == a.rows_in
                       and b.rows_out == b.rows_in,
                       "clustering_mdt_s": a.clustering_s, "clustering_plain_s": b.clustering_s,
                       "load1": [a.load1, b.load1], "checks": a.checks})
    keys = ("commit_mdt_s", "commit_plain_s", "difference_s", "mdt_commit_s", "index_records_s", "commit_mdt_cpu_s",
            "commit_plain_cpu_s", "difference_cpu_s", "mdt_commit_cpu_s", "index_records_cpu_s", "mdt_read_bytes",
            "index_read_bytes", "prepare_s", "prepare_cpu_s", "prepare_read_bytes", "stats_read_bytes", "new_bytes",
            "footer_bytes", "clustering_mdt_s", "clustering_plain_s")
    medians = {k: median([r[k] for r in rounds]) for k in keys}
    diffs = [r["difference_s"] for r in rounds]
    # the column statistics' reads: prepare_metadata's (during the execution) and index_records' (in the commit)
    # together cover the footers and stay within the footers' bound
    read_ok = bool(rounds) and all(
        r["index_read_bytes"] is not None and r["stats_read_bytes"] is not None
        and r["footer_bytes"] <= r["stats_read_bytes"] <= r["footer_read_bound"] for r in rounds)
    during_execution = bool(rounds) and all(
        r["prepare_read_bytes"] is not None and r["prepare_read_bytes"] >= r["footer_bytes"] for r in rounds)
    checks_ok = all(r["checks"].get("files_partition_equals_storage") and r["checks"].get("column_stats_match_footers")
                    for r in rounds)
    verdict = {"target_extra_s": TARGET_EXTRA_S, "median_difference_s": medians["difference_s"],
               "median_difference_cpu_s": medians["difference_cpu_s"],
               "max_difference_s": max(diffs) if diffs else None,
               "commit_cost_met": bool(diffs) and statistics.median(diffs) <= TARGET_EXTRA_S,
               "footers_only": read_ok, "footers_read_during_execution": during_execution,
               "mdt_consistent": checks_ok,
               "rows_ok": all(r["rows_ok"] for r in rounds)}
    verdict["met"] = verdict["commit_cost_met"] and read_ok and checks_ok and verdict["rows_ok"]
    return {"rounds": rounds, "medians": medians, "verdict": verdict}


def print_table(summary: Mapping[str, Any]) -> None:
    rounds, med = summary["rounds"], summary["medians"]
    say("\n| round | commit s, with MDT | commit s, without | difference s | MDT commit s | of which column stats s "
        "| footers read during execution, s | records (files / column_stats) | read by the MDT commit MiB "
        "| of which column stats MiB | read during execution MiB | new files' footers MiB | new files MiB |")
    say("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")

    def line(name: str, r: Mapping[str, Any]) -> None:
        records = r.get("records") or {}
        shown = " / ".join(str(records.get(p, 0)) for p in (rec.FILES, rec.COLUMN_STATS))
        if records.get(rec.PARTITION_STATS):
            shown += f" / partition_stats {records[rec.PARTITION_STATS]}"
        say(f"| {name} | {_fmt(r['commit_mdt_s'])} | {_fmt(r['commit_plain_s'])} | {_fmt(r['difference_s'])} "
            f"| {_fmt(r['mdt_commit_s'])} | {_fmt(r['index_records_s'])} | {_fmt(r['prepare_s'])} | {shown} "
            f"| {_mib(r['mdt_read_bytes'])} | {_mib(r['index_read_bytes'])} | {_mib(r['prepare_read_bytes'])} "
            f"| {_mib(r['footer_bytes'])} | {_mib(r['new_bytes'])} |")

    line("**median**", {**med, "records": rounds[-1]["records"] if rounds else {}})
    for r in rounds:
        line(str(r["round"]), r)
    say("\nthe same in CPU seconds of the committing thread (time.thread_time; what other work on the machine inflates "
        "far less than wall time); the footers read during execution in CPU seconds of this whole process "
        "(time.process_time: they are read in threads):")
    say("\n| round | commit CPU s, with MDT | without | difference | MDT commit CPU s | of which column stats "
        "| footers read during execution, process CPU s |")
    say("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, r in (("**median**", med), *((str(r["round"]), r) for r in rounds)):
        say(f"| {name} | {_fmt(r['commit_mdt_cpu_s'])} | {_fmt(r['commit_plain_cpu_s'])} "
            f"| {_fmt(r['difference_cpu_s'])} | {_fmt(r['mdt_commit_cpu_s'])} | {_fmt(r['index_records_cpu_s'])} "
            f"| {_fmt(r['prepare_cpu_s'])} |")
    say("\nper round: " + "; ".join(
        f"round {r['round']}: clustering {r['clustering_mdt_s']:.1f} s with, {r['clustering_plain_s']:.1f} s without "
        f"(load {r['load1'][0]:.1f} / {r['load1'][1]:.1f}), {r['files_in']} files ({r['rows_in']:,} rows) into "
        f"{r['new_files']}" for r in rounds))
    for r in rounds:
        c = r["checks"]
        say(f"round {r['round']}: metadata table after the clustering {c['instant']}: files partition lists "
            f"{c['files_listed']} files, storage holds {c['files_on_storage']}: "
            f"{'equal' if c['files_partition_equals_storage'] else 'DIFFERENT'}"
            + (f" (missing {c['missing']}, extra {c['extra']})" if not c["files_partition_equals_storage"] else "")
            + f"; column_stats of {c['column_stats_new_files']} new files "
            f"{'equal' if c['column_stats_match_footers'] else 'DIFFER FROM'} their footers' "
            f"({', '.join(CHECKED_COLUMNS)})"
            + (f": {c['column_stats_mismatches']}" if not c["column_stats_match_footers"] else ""))
    v = summary["verdict"]
    say(f"\ntarget: the commit with the metadata table costs at most {TARGET_EXTRA_S} s more than without: median "
        f"difference {_fmt(v['median_difference_s'])} s (max {_fmt(v['max_difference_s'])} s; in CPU seconds "
        f"{_fmt(v['median_difference_cpu_s'])}): {'met' if v['commit_cost_met'] else 'NOT met'}")
    say("column statistics from the footers only (bytes read while building them, during the execution and in the "
        "commit, at least the footers' bytes and at most the footers' bytes + "
        f"{FOOTER_READ_AHEAD // 1024} KiB per file + {FOOTER_READ_AHEAD // 1024} KiB): "
        f"{'yes' if v['footers_only'] else 'NO'}; the footers read during the execution, before the commit: "
        f"{'yes' if v['footers_read_during_execution'] else 'NO'}; metadata table consistent after every run: "
        f"{'yes' if v['mdt_consistent'] else 'NO'}; rows out = rows in, every run: {'yes' if v['rows_ok'] else 'NO'}; "
        f"overall: {'met' if v['met'] else 'NOT met'}")


def profile_commit(cache: Path, work: Path, runner: Any, policy: ClusteringPolicy, runs: list[Probe],
                   out: Path) -> dict[str, Any]:
    """One more clustering with the metadata table, ``MetadataTable.commit`` under cProfile: its top functions."""
    base = fresh_cached_copy(cache, work / "profile")
    _seconds, probe, _result, _inputs = cluster(base, runner, policy, runs, profile=True)
    assert probe.profiler is not None
    text = io.StringIO()
    stats = pstats.Stats(probe.profiler, stream=text)
    stats.sort_stats("cumulative").print_stats(PROFILE_TOP)
    stats.sort_stats("tottime").print_stats(PROFILE_TOP)
    out.write_text(text.getvalue())
    say(f"\nprofile of MetadataTable.commit ({_fmt(probe.mdt_commit_s)} s under cProfile; the commit step "
        f"{_fmt(probe.commit_s)} s), top by cumulative time (both orders in {out}):")
    entries = stats.stats  # type: ignore[attr-defined]  # (file, line, function) -> (cc, nc, own s, cumulative s, ...)
    top = sorted(entries.items(), key=lambda kv: -kv[1][3])[:PROFILE_TOP]
    for (filename, lineno, function), (_cc, calls, own, cumulative, _callers) in top:
        where = f"{Path(filename).name}:{lineno}({function})" if lineno else function
        say(f"  {cumulative:8.3f} s cumulative {own:8.3f} s own {calls:>8} calls  {where}")
    return {"mdt_commit_s": probe.mdt_commit_s, "commit_s": probe.commit_s, "file": str(out),
            "top_cumulative": [{"function": f"{f[0]}:{f[1]}({f[2]})", "calls": v[1], "cumulative_s": round(v[3], 4),
                                "own_s": round(v[2], 4)} for f, v in top]}


def warm_up(caches: Sequence[Path], work: Path, runner: Any, policy: ClusteringPolicy, runs: list[Probe]) -> None:
    """JIT, Python workers, the footer reader and both commit paths, on the small tables, untimed."""
    start = time.perf_counter()
    for cache in caches:
        base = fresh_cached_copy(cache, work / "warm-up")
        cluster(base, runner, policy, runs)
        plain = prepare_plain(cache, work / "warm-up")
        cluster(plain, runner, policy, runs)
    shutil.rmtree(work / "warm-up", ignore_errors=True)
    say(f"warm-up done in {time.perf_counter() - start:.0f} s")


def run(args: argparse.Namespace) -> dict[str, Any]:
    shared = args.shared.resolve()
    source_dir = ensure_dataset(shared, args.data, args.rows, args.files)
    warm_dir = ensure_dataset(shared, args.data, WARM_UP_ROWS, WARM_UP_FILES)
    cache = hudi_table_cache(args.data, args.rows, args.files, TABLE_VERSION)
    warm_cache = hudi_table_cache(args.data, WARM_UP_ROWS, WARM_UP_FILES, TABLE_VERSION)
    ensure_tables([(warm_dir, warm_cache), (source_dir, cache)], TABLE_VERSION)
    work = args.out / "metadata-commit"
    work.mkdir(parents=True, exist_ok=True)
    ensure_mdt_tables([warm_cache, cache], work, args.master, args.driver_memory)
    table_cache, warm_table = mdt_cache(cache), mdt_cache(warm_cache)
    files = hudi_base_files(table_cache)
    table_bytes = total_bytes(files)
    described = describe_mdt(table_cache)
    say(f"input: {args.rows:,} rows in {args.files} files; {table_cache}: version-9 table, {len(files)} latest base "
        f"files, {table_bytes / MIB:.0f} MiB; metadata table built by Apache Hudi 1.2.0")
    say(f"metadata partitions: {', '.join(described['partitions'])} ("
        + ", ".join(f"{p}: {described['file_groups'][p]} file groups, {described['files'][p]} files"
                    for p in described["partitions"])
        + f"); completed metadata deltacommits: {', '.join(described['mdt_instants'])}; the data timeline holds "
        f"{described['data_instants_completed']} completed instants; index definitions "
        f"{'present' if described['index_defs'] else 'absent'}")

    logging.getLogger("py4j").setLevel(logging.ERROR)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner
    from hudi_clusterd.engine.session import get_or_create_session

    n = max(1, math.ceil(table_bytes / TARGET_BYTES))
    conf = {"spark.driver.memory": args.driver_memory, "spark.sql.shuffle.partitions": str(n)}
    spark = get_or_create_session(args.master, app_name="bench-metadata-commit", conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    runner = SparkGroupRunner(spark)
    policy = policy_for(args.strategy, args.sample_size)
    results: list[CaseRun] = []
    profile: dict[str, Any] | None = None
    with probes() as runs:
        warm_up([warm_table], work, runner, policy, runs)
        load_before = load_info()
        for round_no in range(1, args.repeat + 1):
            order = CASES if round_no % 2 else tuple(reversed(CASES))
            for case in order:
                r = run_case(case, round_no, table_cache, work, runner, policy, runs)
                results.append(r)
                mdt = (f", MDT commit {r.mdt_commit_s:.3f} s (CPU {_fmt(r.mdt_commit_cpu_s)} s; column stats "
                       f"{_fmt(r.index_records_s)} s), records "
                       f"{r.records}, read {_mib(r.mdt_read_bytes)} MiB; footers read during execution "
                       f"{_fmt(r.prepare_s)} s (process CPU {_fmt(r.prepare_cpu_s)} s), "
                       f"{_mib(r.prepare_read_bytes)} MiB" if r.case == "mdt" else "")
                say(f"round {round_no}/{args.repeat}: {case}: commit {r.commit_s:.3f} s (CPU "
                    f"{_fmt(r.commit_cpu_s)} s){mdt}; clustering "
                    f"{r.clustering_s:.1f} s, {r.files_in} files into {r.files_out}, {r.rows_out:,} rows "
                    f"(load {r.load1:.1f})")
                if r.rows_out != r.rows_in:
                    say(f"  WARNING: {r.rows_out:,} rows written, the plan's input holds {r.rows_in:,}")
        load_after = load_info()
        summary = summarize(results, args.repeat)
        print_table(summary)
        if args.profile or not summary["verdict"]["met"]:
            profile = profile_commit(table_cache, work, runner, policy, runs,
                                     args.out / "metadata_commit_profile.txt")
    runner.close()
    for case in (*CASES, "profile"):
        shutil.rmtree(work / case, ignore_errors=True)
    say(f"\nrows={args.rows:,} files={args.files} table={table_bytes / MIB:.0f} MiB strategy={args.strategy} "
        f"master={args.master} driver.memory={args.driver_memory}; load before {load_before['loadavg']} after "
        f"{load_after['loadavg']} on {load_after['cpus']} cpus")
    return {
        "config": {"rows": args.rows, "input_files": args.files, "table": str(table_cache), "table_version": 9,
                   "table_bytes": table_bytes, "base_files": len(files), "strategy": args.strategy,
                   "props": clustering_props(args.strategy, args.sample_size), "repeat": args.repeat,
                   "master": args.master, "driver_memory": args.driver_memory, "commit_wait_s": 0, "cases": LABELS,
                   "python": platform.python_version()},
        "metadata_table": described, "load_before": load_before, "load_after": load_after,
        "runs": [asdict(r) for r in results], **summary, "profile": profile,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4_000_000, help="rows to generate (default 4,000,000)")
    parser.add_argument("--files", type=int, default=200, help="source files = ingestion commits (default 200)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds, each both cases; figures are medians")
    parser.add_argument("--strategy", default="linear", choices=sorted(STRATEGIES),
                        help="layout strategy of the clustering (default linear)")
    parser.add_argument("--sample-size", type=int, default=200_000, help="curve sample size (Hudi's default)")
    parser.add_argument("--profile", action="store_true",
                        help="add one clustering with MetadataTable.commit under cProfile (done anyway when the "
                             "target is missed)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[1] / ".." / "shared")
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parent / "data")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    args = parser.parse_args(argv)
    args.data, args.out = args.data.resolve(), args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    result = run(args)
    path = args.out / "metadata_commit.json"
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    say(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
