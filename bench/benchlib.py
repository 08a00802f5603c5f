"""Pieces the clustering benchmarks share: the reference inputs (generated and loaded into a Hudi table once, cached
under ``bench/data/``), fresh copies, the peak RSS of a Spark driver sampled from ``/proc``, the load average and
the layout figures of output files (files-scanned ratio, cross-checked against ``../shared/bench/layout.py``).

Used by ``bench_clustering.py`` (everything in one Spark session) and ``bench_vs_hudi.py`` (each case a process
of its own); CPU seconds come from ``procstats.py``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "daemon"))

from hudi_clusterd.domain.table_config import TableConfig  # noqa: E402
from hudi_clusterd.engine.ingest.writer import insert  # noqa: E402
from hudi_clusterd.ordering.quality import files_scanned_ratio  # noqa: E402
from hudi_clusterd.table.hoodie_table import HoodieTable  # noqa: E402
from procstats import proc_table  # noqa: E402

COLUMNS = ("lat", "lon")
MIB = 1 << 20
GIB = 1 << 30
TARGET_BYTES = 8 * MIB
SAMPLE_INTERVAL_S = 0.05


def say(message: str) -> None:
    print(message, flush=True)


# --- the reference scripts and the cached inputs -------------------------------------------------------------


def load_module(path: Path, name: str) -> ModuleType:
    if not path.exists():
        raise SystemExit(f"{path} not found; pass --shared pointing at the shared folder")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ensure_dataset(shared: Path, data: Path, rows: int, files: int) -> Path:
    """The generated source files (``bench/data/events_<rows>_<files>``), generated when absent."""
    target = data / f"events_{rows}_{files}"
    if len(list(target.glob("*.parquet"))) == files:
        return target
    gen = load_module(shared / "bench" / "gen.py", "reference_gen")
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    say(f"generating {rows:,} rows in {files} files into {target} ...")
    start = time.perf_counter()
    gen.make(str(partial), rows, files, 7)
    partial.rename(target)
    say(f"generated in {time.perf_counter() - start:.0f} s")
    return target


def source_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.parquet"))


def hudi_table_cache(data: Path, rows: int, files: int, table_version: int = 6) -> Path:
    """Where the Hudi table of ``events_<rows>_<files>`` is cached: ``hudi_events_<rows>_<files>`` for table
    version 6, ``hudi_events_<rows>_<files>_v<version>`` for the others."""
    suffix = "" if table_version == 6 else f"_v{table_version}"
    return data / f"hudi_events_{rows}_{files}{suffix}"


def ensure_hudi_table(spark: Any, sources: Sequence[Path], cache: Path, table_version: int = 6) -> Path:
    """A Hudi table of ``table_version`` (6, 8 or 9) with one bulk_insert commit per source file, built once by our
    ingestion (into ``<cache>.partial``, then renamed, so an interrupted ingestion is never mistaken for a finished
    one). A cached table of another version is an error, not a table to reuse."""
    if HoodieTable.exists(str(cache)):
        found = HoodieTable.open(str(cache)).config.version
        if found != table_version:
            raise SystemExit(f"{cache} is a table of version {found}, not {table_version}; remove it or use another "
                             "cache folder")
        return cache
    partial = cache.with_name(cache.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    config = TableConfig.for_new_table(name="events", record_key_fields=["event_id"], table_version=table_version)
    table = HoodieTable.create(str(partial), config)
    say(f"ingesting {len(sources)} files into {cache} (table version {table_version}, one commit per file) ...")
    start = time.perf_counter()
    for k, path in enumerate(sources, 1):
        insert(spark, table, spark.read.parquet(str(path)), operation="bulk_insert")
        if k == 1 or k % 10 == 0 or k == len(sources):
            say(f"  [{k}/{len(sources)}] {time.perf_counter() - start:.0f} s")
    partial.rename(cache)
    return cache


def hudi_base_files(base_path: Path) -> list[str]:
    table = HoodieTable.open(str(base_path))
    return [table.storage.full_path(bf.relative_path) for bf in table.file_system_view().latest_base_files()]


def fresh_copy(src: Path, dst: Path) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def total_bytes(paths: Sequence[str | Path]) -> int:
    return sum(os.path.getsize(p) for p in paths)


# --- memory: peak RSS of the driver (Python + its Spark JVM) and the Python workers, sampled from /proc ----------


def descendants(root: int) -> dict[int, str]:
    """Every process below ``root``: pid -> command name."""
    table = proc_table()
    children: dict[int, list[int]] = {}
    for pid, stat in table.items():
        children.setdefault(stat.parent, []).append(pid)
    out: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out[pid] = table[pid].command
        todo.extend(children.get(pid, []))
    return out


def jvm_pid() -> int | None:
    """The Spark driver JVM below this process: the ``java`` descendant running ``SparkSubmit`` (not a
    standalone master or worker that ``--standalone`` started); with a driver of its own, the one it launched."""
    found = [pid for pid, comm in descendants(os.getpid()).items() if comm == "java" and is_spark_submit(pid)]
    return min(found) if found else None


def is_spark_submit(pid: int) -> bool:
    """A JVM running ``SparkSubmit`` (not the short-lived ``launcher.Main`` that ``spark-class`` runs first to
    build that JVM's command line, which names ``SparkSubmit`` among its arguments)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"org.apache.spark.deploy.SparkSubmit" in cmdline and b"org.apache.spark.launcher.Main" not in cmdline


def rss_bytes(pid: int | str) -> int:
    """VmRSS of a process (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class RssPeaks:
    driver: int = 0  # this Python process + the JVM, summed at each sample
    python: int = 0
    jvm: int = 0
    workers: int = 0  # the Spark Python workers (below the driver JVM, or below standalone executors), summed
    worker_max: int = 0  # the largest one Spark Python worker reached alone
    executor: int = 0  # a standalone executor JVM (not ours: the worker's child), when there is one
    samples: int = 0

    def to_dict(self) -> dict[str, float]:
        return {"driver_mib": round(self.driver / MIB, 1), "python_mib": round(self.python / MIB, 1),
                "jvm_mib": round(self.jvm / MIB, 1), "python_workers_mib": round(self.workers / MIB, 1),
                "python_worker_max_mib": round(self.worker_max / MIB, 1),
                "executor_jvm_mib": round(self.executor / MIB, 1), "samples": self.samples}


def executor_pids() -> list[int]:
    """Standalone executor JVMs (``CoarseGrainedExecutorBackend``) below this process: those of the workers a
    benchmark started (another user's executors on a shared machine are not counted)."""
    return [pid for pid, comm in descendants(os.getpid()).items() if comm == "java" and _is_executor(pid)]


def _is_executor(pid: int) -> bool:
    try:
        return b"CoarseGrainedExecutorBackend" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def launching_process(jvm: int) -> int | None:
    """The process that launched a Spark JVM: its nearest ancestor that is not one of ``spark-submit``'s shell
    scripts (the driver's Python process)."""
    table = proc_table()
    stat = table.get(jvm)
    while stat is not None and stat.parent in table:
        parent = table[stat.parent]
        if parent.command not in ("bash", "sh", "dash", "spark-submit", "spark-class"):
            return stat.parent
        stat = parent
    return None


@contextmanager
def sample_rss(interval_s: float = SAMPLE_INTERVAL_S, child: bool = False, root: int | None = None
               ) -> Iterator[RssPeaks]:
    """Sample RSS in a background thread while the block runs; the peaks are final when it exits.

    By default the driver is this process and the Spark JVM it launched. With ``child``, the driver is another
    process below this one that launches its own Spark JVM while the block runs (``hudi-clusterd``, Apache Hudi's
    worker): its JVM is looked for every 0.2 s until found, and the driver's Python process is ``root`` when
    given, else the process that launched the JVM."""
    peaks = RssPeaks()
    stop = threading.Event()

    def sample() -> None:
        jvm = None if child else jvm_pid()
        driver: int | str | None = root if child else "self"
        workers: list[int] = []
        executors: list[int] = []
        last_scan = 0.0
        while True:
            now = time.monotonic()
            if now - last_scan > (0.2 if jvm is None else 1.0):  # workers come and go; rescan each second
                if child and (jvm is None or not Path(f"/proc/{jvm}").exists()):
                    jvm = jvm_pid()
                    if jvm is not None and root is None:
                        driver = launching_process(jvm)
                if jvm is not None:
                    executors = executor_pids()
                    workers = [pid for parent in (jvm, *executors) for pid, comm in descendants(parent).items()
                               if comm.startswith("python")]
                last_scan = now
            peaks.executor = max(peaks.executor, sum(rss_bytes(pid) for pid in executors))
            py = rss_bytes(driver) if driver is not None else 0
            jv = rss_bytes(jvm) if jvm is not None else 0
            each = [rss_bytes(pid) for pid in workers]
            wk = sum(each)
            peaks.worker_max = max(peaks.worker_max, *each, 0)
            peaks.python, peaks.jvm = max(peaks.python, py), max(peaks.jvm, jv)
            peaks.driver, peaks.workers = max(peaks.driver, py + jv), max(peaks.workers, wk)
            peaks.samples += 1
            if stop.wait(interval_s):
                return

    thread = threading.Thread(target=sample, name="rss-sampler", daemon=True)
    thread.start()
    try:
        yield peaks
    finally:
        stop.set()
        thread.join()


# --- reporting --------------------------------------------------------------------------------------------------


def load_info() -> dict[str, Any]:
    one, five, fifteen = os.getloadavg()
    return {"loadavg": [round(one, 2), round(five, 2), round(fifteen, 2)], "cpus": os.cpu_count()}


def layout_figures(paths: Sequence[str], reference: ModuleType | None) -> dict[str, Any]:
    ours = files_scanned_ratio(paths, list(COLUMNS))
    out: dict[str, Any] = {"files": len(paths), "bytes": total_bytes(paths), "files_scanned_ratio": round(ours, 4)}
    if reference is not None:
        ref = reference.report(list(paths), COLUMNS)
        out["reference_files_scanned"] = ref["files_scanned"]
        out["reference_rowgroups_scanned"] = ref["rowgroups_scanned"]
        if abs(ref["files_scanned"] - ours) > 5e-4:
            say(f"  WARNING: files-scanned ratio {ours:.4f} disagrees with layout.py's {ref['files_scanned']}")
    return out
