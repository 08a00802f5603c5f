"""Our clustering against Apache Hudi's own, side by side in one run, each clustering a process of its own.

On the reference dataset (``../shared/bench/gen.py``: 4M rows in 200 small files), loaded into a Hudi table one
``bulk_insert`` commit per file by our ingestion (the table ``bench_clustering.py`` caches too,
``bench/data/hudi_events_<rows>_<files>``), every case clusters a fresh copy of that table, sort columns
``lat,lon``, target file size 8 MiB, the whole table one group, on ``local[2]`` with ``spark.driver.memory=1g``:

* ``ours``: ``hudi-clusterd cluster --force --props P --spark-master local[2]``, a process of our venv (PySpark 4);
* ``hudi``: Apache Hudi's ``CALL run_clustering(op => 'scheduleAndExecute')`` (plan strategy
  ``SparkSizeBasedClusteringPlanStrategy``, execution strategy ``SparkSortAndSizeExecutionStrategy``) in a fresh
  ``tests/harness/hudi_worker.py`` process of the Hudi venv (PySpark 3.5.1, the Hudi bundle in ``spark.jars``);
  the daemon never loads a Hudi jar; the Hudi release is the one of the table version (below);
* ``spark`` (with ``--standalone``): plain Spark (our venv) on the same Hudi base files:
  ``repartitionByRange(n, lat, lon).sortWithinPartitions(lat, lon).write.parquet``, ``n = ceil(bytes / 8 MiB)``.

``--table-version`` picks the table and Hudi's side (``hudi_setup``: one code path, the setup chosen by the
version):

* ``6`` (the default): a version-6 table (timeline layout 1), ``bench/data/hudi_events_<rows>_<files>``, against
  Apache Hudi 0.15.0 (setup ``HUDI_0_15``);
* ``9``: a version-9 table (timeline layout 2: instants in ``.hoodie/timeline/``) built by our ingestion,
  ``bench/data/hudi_events_<rows>_<files>_v9``, against Apache Hudi 1.2.0 (setup ``HUDI_1_2_V9``, Hudi 1.2's
  default table version; the same bundle jar and venv the interop tests use).

Both clusterings get the same properties: ``hoodie.layout.optimize.strategy`` linear / z-order / hilbert,
``hoodie.layout.optimize.curve.build.method=sample`` (sample size 200,000), the same target size, small-file
limit and group size; Hudi also gets the writer settings the project asks of writers beside the daemon
(``tests/harness/hudi_versions.py``: ``shared_table_writer_options(setup)``, no metadata table, optimistic
concurrency with the file-system lock, passed through ``table_service_options``, which leaves out the writers'
conflict-resolution strategy), its
automatic clean and archive switched off (the daemon does neither), and by default our output codec, snappy
(``--hudi-codec gzip``: Hudi's default).

Rounds: ``for round in 1..R: for strategy: ours and hudi, in alternating order`` (the first system alternates
with the round and the strategy). Before every case the copy is made, synced to disk and read once, so the page
cache holds the same files for every case. One untimed warm-up of each system on a small table comes first.

Measured per case: wall seconds of the whole process (start to exit: JVM start, planning, the clustering, the
commit, the stop), and for Hudi the ``run_clustering`` call alone and for ours the execute time it prints; CPU
seconds of the case's process tree (from ``/proc``); the driver's peak RSS (its Python process + its Spark JVM,
sampled every 50 ms); files out and the files-scanned ratio of the latest snapshot's base files afterwards
(cross-checked against ``../shared/bench/layout.py``); rows in the output (checked against the input); the
instant files the clustering added (``check_clustered_table``: one clustering ``T``, requested and completed where
the table version puts them, ``T.replacecommit.requested`` + ``T.replacecommit`` in ``.hoodie/`` on version 6,
``T.clustering.requested`` + ``T_C.replacecommit`` in ``.hoodie/timeline/`` on version 9, and the table version
unchanged). The load average is recorded before and after the run and at every case.

``--standalone 4g`` runs every case on a Spark standalone master and one worker (2 cores, this much memory)
started on 127.0.0.1, one cluster per Spark version (ours from PySpark 4, Hudi's from the Hudi venv's PySpark
3.5.1), and adds plain Spark on the Hudi files; ``--memory-gb 2`` sizes the input to about 2 GB (34.4M rows in
400 files), as in ``bench_clustering.py --memory-gb``.

    python bench/bench_vs_hudi.py                                   # 4M rows / 200 files, 3 rounds
    python bench/bench_vs_hudi.py --rows 400000 --files 20 --repeat 1   # quick check
    python bench/bench_vs_hudi.py --table-version 9 --repeat 1      # a version-9 table against Hudi 1.2.0
    python bench/bench_vs_hudi.py --strategies hilbert --repeat 5
    python bench/bench_vs_hudi.py --memory-gb 2 --standalone 4g     # ours, Hudi's and plain Spark on ~2 GB

Prints a table of medians and writes ``bench/out/vs_hudi.json`` (``vs_hudi_v9.json`` with ``--table-version 9``).
Needs the Hudi cache of ``python -m tests.harness.hudi_setup`` (venv + the 0.15.0 and 1.2.0 bundles).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow.parquet as pq

from benchlib import (
    COLUMNS,
    GIB,
    MIB,
    REPO,
    TARGET_BYTES,
    RssPeaks,
    ensure_dataset,
    hudi_base_files,
    hudi_table_cache,
    layout_figures,
    load_info,
    load_module,
    sample_rss,
    say,
    source_files,
    total_bytes,
)
from procstats import CpuMeter

STRATEGIES = {"linear": "linear", "zorder": "z-order", "hilbert": "hilbert"}
SYSTEMS = ("ours", "hudi", "spark")
REFERENCE_BYTES_PER_ROW = 62.4  # gen.py output: 4M rows ~ 238 MiB (sizes --memory-gb inputs)
HUDI_EXECUTION_STRATEGY = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
HUDI_PLAN_STRATEGY = "org.apache.hudi.client.clustering.plan.strategy.SparkSizeBasedClusteringPlanStrategy"
SORT_COLUMNS_KEY = "hoodie.clustering.plan.strategy.sort.columns"
WARM_UP_ROWS, WARM_UP_FILES = 100_000, 5
CASE_TIMEOUT_S = 3600.0
TABLE_VERSIONS = (6, 9)  # the table the cases cluster; it picks Hudi's side (hudi_setup)


def hudi_setup(table_version: int) -> Any:
    """The Apache Hudi setup (``tests/harness/hudi_versions.py``) run against a table of ``table_version``:
    Hudi 0.15.0 on version 6, Hudi 1.2.0 on version 9 (its default: timeline layout 2)."""
    from tests.harness.hudi_versions import HUDI_0_15, HUDI_1_2_V9

    setups = {6: HUDI_0_15, 9: HUDI_1_2_V9}
    if table_version not in setups:
        raise SystemExit(f"--table-version {table_version}: known {', '.join(map(str, setups))}")
    return setups[table_version]


def labels(setup: Any) -> dict[str, str]:
    return {
        "ours": f"ours: hudi-clusterd cluster --force (table version {setup.table_version})",
        "hudi": f"Apache Hudi {setup.hudi_version} run_clustering (SparkSortAndSizeExecutionStrategy, table version "
                f"{setup.table_version})",
        "spark": "plain Spark on the Hudi base files (repartitionByRange + sortWithinPartitions + write)",
    }

# The Hudi table is loaded in a child process (with its own Spark JVM), so that no JVM of this process stays
# alive beside the measured ones.
_INGEST_CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from benchlib import ensure_hudi_table, source_files
from hudi_clusterd.engine.session import get_or_create_session
spark = get_or_create_session("local[2]", app_name="bench-vs-hudi-ingest", conf={"spark.driver.memory": "1g"})
spark.sparkContext.setLogLevel("ERROR")
for source, cache in zip(sys.argv[3::2], sys.argv[4::2]):
    ensure_hudi_table(spark, source_files(Path(source)), Path(cache), table_version=int(sys.argv[2]))
spark.stop()
"""

# Plain Spark (our venv) on the Hudi base files, as a process like the two clusterings.
_SPARK_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from hudi_clusterd.engine.session import get_or_create_session
args = json.loads(sys.argv[2])
spark = get_or_create_session(args["master"], app_name="bench-vs-hudi-spark", conf=args["conf"])
spark.sparkContext.setLogLevel("ERROR")
(spark.read.parquet(*args["inputs"]).repartitionByRange(args["n"], "lat", "lon").sortWithinPartitions("lat", "lon")
 .write.parquet(args["out"]))
spark.stop()
"""


# --- the inputs -----------------------------------------------------------------------------------------------


def ensure_tables(pairs: Sequence[tuple[Path, Path]], table_version: int) -> None:
    """Each source folder loaded into its Hudi table of ``table_version`` (one bulk_insert commit per file, by our
    ingestion) unless cached."""
    from hudi_clusterd.table.hoodie_table import HoodieTable

    todo = [(s, c) for s, c in pairs if not HoodieTable.exists(str(c))]
    if not todo:
        return
    argv = [sys.executable, "-c", _INGEST_CHILD, str(Path(__file__).resolve().parent), str(table_version)]
    for source, cache in todo:
        argv += [str(source), str(cache)]
    subprocess.run(argv, check=True, env=child_env())


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"  # ours prints "scheduled ..." and "completed ..." as they happen
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "daemon"), env.get("PYTHONPATH")) if p)
    return env


def clustering_props(strategy: str, sample_size: int) -> dict[str, str]:
    """The clustering properties both systems get (Hudi's key names; the daemon reads the same keys)."""
    return {
        SORT_COLUMNS_KEY: ",".join(COLUMNS),
        "hoodie.clustering.plan.strategy.target.file.max.bytes": str(TARGET_BYTES),
        "hoodie.clustering.plan.strategy.small.file.limit": str(4 * GIB),  # every input file is "small"
        "hoodie.clustering.plan.strategy.max.bytes.per.group": str(1 << 40),  # the whole table is one group
        "hoodie.layout.optimize.strategy": STRATEGIES[strategy],
        "hoodie.layout.optimize.curve.build.method": "sample",
        "hoodie.layout.optimize.build.curve.sample.size": str(sample_size),
    }


def hudi_options(strategy: str, sample_size: int, codec: str, setup: Any) -> dict[str, str]:
    """Hudi's procedure options: the same properties but the sort columns (passed as the procedure's ``order``),
    with the writer settings of ``setup`` (its table version's options too) as a table service takes them."""
    from tests.harness.hudi_versions import shared_table_writer_options, table_service_options

    same = {k: v for k, v in clustering_props(strategy, sample_size).items() if k != SORT_COLUMNS_KEY}
    return {
        **table_service_options(shared_table_writer_options(setup)),
        **same,
        "hoodie.clustering.plan.strategy.class": HUDI_PLAN_STRATEGY,
        "hoodie.clustering.execution.strategy.class": HUDI_EXECUTION_STRATEGY,
        "hoodie.parquet.compression.codec": codec,
        "hoodie.clean.automatic": "false",
        "hoodie.archive.automatic": "false",
        # the benchmark's tables have no metadata table (our ingestion writes none); Hudi would build one first
        "hoodie.metadata.enable": "false",
    }


def fresh_cached_copy(src: Path, dst: Path) -> Path:
    """A copy of ``src`` at ``dst``, flushed to disk and read once: every case starts with the same page cache
    (its input files cached, no write-back of the copy pending)."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    os.sync()
    for path in sorted(dst.rglob("*")):
        if path.is_file():
            with open(path, "rb") as f:
                while f.read(8 * MIB):
                    pass
    return dst


def parquet_rows(paths: Sequence[str]) -> int:
    return sum(pq.ParquetFile(p).metadata.num_rows for p in paths)


_INSTANT_FILE = re.compile(r"^(\d+)(?:_(\d+))?\.([a-z]+)(?:\.(requested|inflight))?$")


def instant_files(base: Path) -> dict[str, list[str]]:
    """Instant file names, by folder: ``.hoodie/`` (layout 1) and ``.hoodie/timeline/`` (layout 2)."""
    out: dict[str, list[str]] = {}
    for key, folder in (("hoodie", base / ".hoodie"), ("timeline", base / ".hoodie" / "timeline")):
        names = [p.name for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
        out[key] = sorted(n for n in names if _INSTANT_FILE.match(n))
    return out


def check_clustered_table(base: Path, before: Mapping[str, Sequence[str]], table_version: int) -> dict[str, Any]:
    """The instant files the clustering added, where the table version puts them: one clustering ``T`` requested
    and completed, ``T.replacecommit.requested`` + ``T.replacecommit`` in ``.hoodie/`` on version 6 (layout 1),
    ``T.clustering.requested`` + ``T_C.replacecommit`` in ``.hoodie/timeline/`` on versions 8 and 9 (layout 2),
    nothing added in the other folder; and ``hoodie.table.version`` unchanged."""
    from tests.harness.apache_hudi import read_hoodie_properties

    layout2 = table_version >= 8
    where, other = ("timeline", "hoodie") if layout2 else ("hoodie", "timeline")
    after = instant_files(base)
    added = [n for n in after[where] if n not in set(before[where])]
    stray = [n for n in after[other] if n not in set(before[other])]
    problems: list[str] = []
    completed = [m for m in map(_INSTANT_FILE.match, added)
                 if m and m.group(3) == "replacecommit" and m.group(4) is None and (m.group(2) is not None) == layout2]
    instant = completed[0].group(1) if len(completed) == 1 else None
    if instant is None:
        problems.append(f"expected one completed replacecommit in .hoodie/{'timeline/' if layout2 else ''}, "
                        f"found {[m.group(0) for m in completed]}")
    else:
        requested = f"{instant}.clustering.requested" if layout2 else f"{instant}.replacecommit.requested"
        if requested not in added:
            problems.append(f"no {requested}")
    if stray:
        problems.append(f"instant files added to .hoodie/{'' if layout2 else 'timeline/'}: {stray}")
    version = read_hoodie_properties(base).get("hoodie.table.version")
    if version != str(table_version):
        problems.append(f"hoodie.table.version is {version}, not {table_version}")
    return {"instant": instant, "added": added, "table_version": version, "ok": not problems, "problems": problems}


# --- the cases ------------------------------------------------------------------------------------------------


@dataclass
class Run:
    system: str
    strategy: str
    seconds: float  # the whole process
    call_seconds: float | None  # hudi: the run_clustering call; ours: the execute time it prints
    cpu_seconds: float | None
    files: list[str]
    rows: int
    rss: RssPeaks
    load1: float
    layout: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Setting:
    master: str
    conf: dict[str, str]
    hudi_master: str
    driver_memory: str
    hudi_codec: str
    sample_size: int
    work: Path
    setup: Any  # the Hudi setup of the table version (hudi_setup)


def ours_command() -> list[str]:
    script = Path(sys.executable).parent / "hudi-clusterd"
    return [str(script)] if script.exists() else [sys.executable, "-m", "hudi_clusterd"]


_COMPLETED = re.compile(r"^completed (\S+): (\d+) files -> (\d+) files .* in ([0-9.]+)s")


def run_ours(table: Path, strategy: str, s: Setting) -> tuple[float, float | None, dict[str, Any]]:
    props = s.work / f"ours-{strategy}.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in clustering_props(strategy, s.sample_size).items()))
    argv = [*ours_command(), "--log-level", "WARNING", "cluster", "--base-path", str(table), "--props", str(props),
            "--force", "--spark-master", s.master]
    for key, value in {"spark.driver.memory": s.driver_memory, **s.conf}.items():
        argv += ["--spark-conf", f"{key}={value}"]
    log = s.work / "ours-stderr.log"
    marks: dict[str, float] = {}
    lines: list[str] = []
    start = time.perf_counter()
    with open(log, "ab") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, env=child_env())
        assert proc.stdout is not None
        for line in proc.stdout:  # each line timed as it arrives: planning done, clustering done
            now = time.perf_counter()
            lines.append(line.rstrip("\n"))
            if line.startswith("scheduled clustering"):
                marks["scheduled"] = now
            elif line.startswith("completed "):
                marks["completed"] = now
        code = proc.wait(timeout=CASE_TIMEOUT_S)
    end = time.perf_counter()
    if code != 0 or "completed" not in marks:
        tail = "\n".join(lines[-20:])
        raise SystemExit(f"ours failed on {table} (exit {code}): {tail}\nlog: {log}")
    execute_s = None
    for line in lines:
        m = _COMPLETED.match(line.strip())
        if m:
            execute_s = float(m.group(4))
    scheduled = marks.get("scheduled", start)
    phases = {"start_and_plan_s": round(scheduled - start, 3),
              "spark_start_and_execute_s": round(marks["completed"] - scheduled, 3),
              "exit_s": round(end - marks["completed"], 3)}
    return end - start, execute_s, {"phases": phases, "stdout": lines[-2:]}


def run_hudi(table: Path, strategy: str, s: Setting, installation: Any) -> tuple[float, float | None, dict[str, Any]]:
    from tests.harness.apache_hudi import HudiWorker

    conf = {k: v for k, v in s.conf.items() if k not in ("spark.driver.host", "spark.driver.bindAddress")}
    start = time.perf_counter()
    worker = HudiWorker(installation, scratch=s.work / "hudi-scratch", master=s.hudi_master,
                        driver_memory=s.driver_memory, spark_conf=conf, startup_timeout=600)
    try:
        started = time.perf_counter()
        rows = worker.run_clustering(table, "scheduleAndExecute",
                                     options=hudi_options(strategy, s.sample_size, s.hudi_codec, s.setup),
                                     order=COLUMNS, timeout=CASE_TIMEOUT_S)
        called = time.perf_counter()
    finally:
        worker.close(timeout=120)
    end = time.perf_counter()
    phases = {"start_s": round(started - start, 3), "run_clustering_s": round(called - started, 3),
              "stop_s": round(end - called, 3)}
    return end - start, called - started, {"phases": phases, "procedure_rows": rows,
                                       "hudi_version": worker.info.get("hudi_version"),
                                       "spark_version": worker.info.get("spark_version")}


def run_spark(inputs: Sequence[str], out: Path, n: int, s: Setting) -> tuple[float, float | None, dict[str, Any]]:
    shutil.rmtree(out, ignore_errors=True)
    spec = {"master": s.master, "conf": {"spark.driver.memory": s.driver_memory, **s.conf}, "inputs": list(inputs),
            "n": n, "out": str(out)}
    start = time.perf_counter()
    with open(s.work / "spark-stderr.log", "ab") as err:
        subprocess.run([sys.executable, "-c", _SPARK_CHILD, str(REPO / "daemon"), json.dumps(spec)], check=True,
                       stdout=err, stderr=err, env=child_env(), timeout=CASE_TIMEOUT_S)
    return time.perf_counter() - start, None, {}


def run_case(system: str, strategy: str, cache: Path, s: Setting, meter: CpuMeter, installation: Any,
             hudi_files: Sequence[str], n: int, reference: ModuleType | None) -> Run:
    dst = s.work / f"{system}-{strategy}"
    if system == "spark":
        shutil.rmtree(dst, ignore_errors=True)
        for path in hudi_files:  # the same page-cache state: the input read once just before
            with open(path, "rb") as f:
                while f.read(8 * MIB):
                    pass
    else:
        fresh_cached_copy(cache, dst)
        before = instant_files(dst)
    load1 = os.getloadavg()[0]
    cpu_start = meter.seconds()
    with sample_rss(child=True) as rss:
        if system == "ours":
            seconds, call, extra = run_ours(dst, strategy, s)
        elif system == "hudi":
            seconds, call, extra = run_hudi(dst, strategy, s, installation)
        else:
            seconds, call, extra = run_spark(hudi_files, dst, n, s)
    cpu_end = meter.seconds()
    cpu = cpu_end - cpu_start if cpu_start is not None and cpu_end is not None else None
    files = [str(p) for p in sorted(dst.glob("*.parquet"))] if system == "spark" else hudi_base_files(dst)
    layout = layout_figures(files, reference)
    if system != "spark":
        extra["timeline"] = check_clustered_table(dst, before, s.setup.table_version)
        if not extra["timeline"]["ok"]:
            say(f"  WARNING: {system} {strategy}: {'; '.join(extra['timeline']['problems'])}")
    run = Run(system, strategy, seconds, call, cpu, files, parquet_rows(files), rss, load1, layout, extra)
    shutil.rmtree(dst, ignore_errors=True)
    return run


def schedule_order(systems: Sequence[str], strategies: Sequence[str], repeat: int) -> Iterator[tuple[int, str, str]]:
    """``(round, system, strategy)``: per round and strategy, the clustering systems in an order that rotates with
    the round and the strategy; plain Spark (no strategy) once per round, its place rotating too."""
    clusterers = [x for x in systems if x != "spark"]
    for round_no in range(1, repeat + 1):
        jobs: list[tuple[str, str]] = []
        for k, strategy in enumerate(strategies):
            shift = (round_no - 1 + k) % max(1, len(clusterers))
            jobs += [(system, strategy) for system in clusterers[shift:] + clusterers[:shift]]
        if "spark" in systems:
            jobs.insert((round_no - 1) % (len(jobs) + 1), ("spark", "-"))
        for system, strategy in jobs:
            yield round_no, system, strategy


# --- reporting ------------------------------------------------------------------------------------------------


def median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "—" if value is None else format(value, spec)


def summarize(runs: Sequence[Run], expected_rows: int, names: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        key = f"{run.system}/{run.strategy}"
        entry = out.setdefault(key, {"system": run.system, "strategy": run.strategy, "label": names[run.system],
                                     "runs": []})
        entry["runs"].append(run)
    for entry in out.values():
        rs: list[Run] = entry.pop("runs")
        peak = max(r.rss.driver for r in rs)
        entry.update({
            "seconds": [round(r.seconds, 2) for r in rs],
            "median_s": round(statistics.median(r.seconds for r in rs), 2),
            "min_s": round(min(r.seconds for r in rs), 2),
            "call_seconds": [None if r.call_seconds is None else round(r.call_seconds, 2) for r in rs],
            "median_call_s": _round(median([r.call_seconds for r in rs])),
            "cpu_seconds": [None if r.cpu_seconds is None else round(r.cpu_seconds, 2) for r in rs],
            "median_cpu_s": _round(median([r.cpu_seconds for r in rs])),
            "files_out": [len(r.files) for r in rs],
            "layout": rs[-1].layout,
            "files_scanned_per_run": [r.layout["files_scanned_ratio"] for r in rs],
            "rows_out": [r.rows for r in rs],
            "rows_ok": all(r.rows == expected_rows for r in rs),
            "timeline_ok": all(r.extra.get("timeline", {}).get("ok", True) for r in rs),
            "peak_driver_rss_mib": round(peak / MIB, 1),
            "peak_rss": [r.rss.to_dict() for r in rs],
            "load1_at_start": [round(r.load1, 2) for r in rs],
            "extra": [_jsonable(r.extra) for r in rs],
            "median_phases_s": {k: _round(median([r.extra.get("phases", {}).get(k) for r in rs]))
                                for k in rs[-1].extra.get("phases", {})},
        })
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def print_tables(results: Mapping[str, Mapping[str, Any]], strategies: Sequence[str], repeat: int, setup: Any
                 ) -> dict[str, Any]:
    hudi = f"Hudi {setup.hudi_version}"
    shown = {"ours": "ours", "hudi": hudi, "spark": "plain Spark"}
    say(f"\ntable version {setup.table_version} (timeline layout {setup.timeline_layout_version}); {hudi}: Apache "
        f"Hudi's run_clustering, setup {setup.name}")
    say(f"\n| strategy | system | wall s (median of {repeat}) | min s | clustering call s | CPU s | files out "
        "| files-scanned ratio | driver peak RSS MiB | load (1 min) | rows, timeline |")
    say("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in results.values():
        checks = "ok" if r["rows_ok"] and r["timeline_ok"] else (
            f"{'rows ok' if r['rows_ok'] else 'ROWS WRONG'}, {'timeline ok' if r['timeline_ok'] else 'TIMELINE WRONG'}")
        say(f"| {r['strategy']} | {shown[r['system']]} | {_fmt(r['median_s'])} | {_fmt(r['min_s'])} "
            f"| {_fmt(r['median_call_s'])} | {_fmt(r['median_cpu_s'])} | {r['layout']['files']} "
            f"| {r['layout']['files_scanned_ratio']:.3f} | {r['peak_driver_rss_mib']:.0f} "
            f"| {_fmt(median(r['load1_at_start']))} | {checks} |")
    say("\nwhere the wall time goes (medians): ours: start + plan | Spark start + execute | exit; "
        "Hudi: start (JVM, session) | run_clustering | stop")
    for r in results.values():
        if r["median_phases_s"]:
            say(f"  {r['strategy']} {shown[r['system']]}: " + " | ".join(f"{k.removesuffix('_s')} {_fmt(v)}"
                                                                   for k, v in r["median_phases_s"].items()))
    verdict: dict[str, Any] = {}
    if not all(f"{x}/{st}" in results for st in strategies for x in ("ours", "hudi")):
        return verdict
    say(f"\n| strategy | wall ours / {hudi} | CPU ours / {hudi} | files-scanned ours vs {hudi} | goal |")
    say("| --- | ---: | ---: | --- | --- |")
    for st in strategies:
        ours, hudi = results[f"ours/{st}"], results[f"hudi/{st}"]
        wall = ours["median_s"] / hudi["median_s"]
        cpu = (ours["median_cpu_s"] / hudi["median_cpu_s"]
               if ours["median_cpu_s"] and hudi["median_cpu_s"] else None)
        fo, fh = ours["layout"]["files_scanned_ratio"], hudi["layout"]["files_scanned_ratio"]
        met = wall < 1.0 and fo <= fh + 5e-4
        verdict[st] = {"wall_ratio": round(wall, 3), "cpu_ratio": _round(cpu), "files_scanned_ours": fo,
                       "files_scanned_hudi": fh, "faster": wall < 1.0, "layout_as_good": fo <= fh + 5e-4, "met": met}
        say(f"| {st} | {wall:.2f} | {_fmt(cpu, '.2f')} | {fo:.3f} vs {fh:.3f} | {'met' if met else 'NOT met'} |")
    return verdict


# --- main -----------------------------------------------------------------------------------------------------


def out_suffix(table_version: int) -> str:
    """Table version 6 writes ``vs_hudi.json`` (and works in ``vs-hudi/``), version 9 ``vs_hudi_v9.json``."""
    return "" if table_version == 6 else f"_v{table_version}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tests.harness.apache_hudi import HudiUnavailableError, locate

    setup = hudi_setup(args.table_version)
    names = labels(setup)
    try:
        installation = locate(setup)
    except HudiUnavailableError as exc:
        raise SystemExit(str(exc)) from None
    shared = args.shared.resolve()
    reference = load_module(shared / "bench" / "layout.py", "reference_layout")
    source_dir = ensure_dataset(shared, args.data, args.rows, args.files)
    warm_dir = ensure_dataset(shared, args.data, WARM_UP_ROWS, WARM_UP_FILES)
    input_bytes = total_bytes(source_files(source_dir))
    cache = hudi_table_cache(args.data, args.rows, args.files, args.table_version)
    warm_cache = hudi_table_cache(args.data, WARM_UP_ROWS, WARM_UP_FILES, args.table_version)
    ensure_tables([(warm_dir, warm_cache), (source_dir, cache)], args.table_version)
    hudi_files = hudi_base_files(cache)
    hudi_bytes = total_bytes(hudi_files)
    n = max(1, math.ceil(hudi_bytes / TARGET_BYTES))
    say(f"input: {args.rows:,} rows in {args.files} files ({input_bytes / MIB:.0f} MiB); Hudi table {cache} "
        f"(table version {args.table_version}): {len(hudi_files)} base files, {hudi_bytes / MIB:.0f} MiB; "
        f"Hudi's side: Apache Hudi {setup.hudi_version} ({setup.name})")
    work = args.out / ("vs-hudi" + out_suffix(args.table_version))
    work.mkdir(parents=True, exist_ok=True)
    conf = {"spark.sql.shuffle.partitions": str(n)}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--conf {item}: expected KEY=VALUE")
        conf[key.strip()] = value.strip()
    setting = Setting(args.master, conf, args.master, args.driver_memory, args.hudi_codec, args.sample_size, work,
                      setup)
    systems = [x for x in args.systems.split(",") if x]
    strategies = [x for x in args.strategies.split(",") if x]
    for name, known, given in (("system", SYSTEMS, systems), ("strategy", STRATEGIES, strategies)):
        unknown = [x for x in given if x not in known]
        if unknown:
            raise SystemExit(f"unknown {name}(s) {', '.join(unknown)}; known: {', '.join(known)}")

    with ExitStack() as stack:
        if args.standalone:
            from tests.harness.spark_cluster import standalone_cluster

            cluster_conf = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                            "spark.cores.max": "2", "spark.executor.memory": args.executor_memory}
            setting.master = stack.enter_context(standalone_cluster(work / "standalone-ours", cores=2,
                                                                    memory=args.standalone))
            hudi_home = installation.python.parent.parent / "lib"
            homes = list(hudi_home.glob("python3*/site-packages/pyspark"))
            if not homes:
                raise SystemExit(f"no pyspark under {hudi_home}")
            setting.hudi_master = stack.enter_context(standalone_cluster(
                work / "standalone-hudi", cores=2, memory=args.standalone, home=homes[0],
                python=str(installation.python)))
            setting.conf = {**setting.conf, **cluster_conf}
            say(f"standalone masters (one worker each, 2 cores, {args.standalone}): ours {setting.master}, "
                f"Hudi's {setting.hudi_master}")
        meter = CpuMeter(interval=0.1)
        say("warm-up (untimed): each system once on a small table ...")
        warm_files = hudi_base_files(warm_cache)
        for system in systems:
            warm = run_case(system, strategies[0], warm_cache, setting, meter, installation, warm_files, 1, None)
            say(f"  warm-up {system}: {warm.seconds:.1f} s, {len(warm.files)} files, {warm.rows:,} rows")
        load_before = load_info()
        runs: list[Run] = []
        for round_no, system, strategy in schedule_order(systems, strategies, args.repeat):
            run_ = run_case(system, strategy, cache, setting, meter, installation, hudi_files, n, reference)
            runs.append(run_)
            call = f", call {run_.call_seconds:.1f} s" if run_.call_seconds is not None else ""
            say(f"round {round_no}/{args.repeat}: {system} {strategy}: {run_.seconds:.1f} s{call}, "
                f"cpu {_fmt(run_.cpu_seconds)} s, {len(run_.files)} files, {run_.rows:,} rows, peak driver RSS "
                f"{run_.rss.driver / MIB:.0f} MiB (load {run_.load1:.1f})")
            if run_.rows != args.rows:
                say(f"  WARNING: {system} {strategy} left {run_.rows:,} rows, expected {args.rows:,}")
            partial = {"done": len(runs), "load": load_info(), "cases": summarize(runs, args.rows, names)}
            (args.out / f"vs_hudi{out_suffix(args.table_version)}.partial.json").write_text(
                json.dumps(partial, indent=2) + "\n")
        load_after = load_info()
        meter.close()
    results = summarize(runs, args.rows, names)
    say(f"\nrows={args.rows:,} files={args.files} source={input_bytes / MIB:.0f} MiB hudi table={hudi_bytes / MIB:.0f} "
        f"MiB table version {args.table_version}, Apache Hudi {setup.hudi_version} target=8 MiB "
        f"master={setting.master} driver.memory={args.driver_memory} Hudi codec={args.hudi_codec}; "
        f"load before {load_before['loadavg']} after {load_after['loadavg']} on {load_after['cpus']} cpus")
    verdict = print_tables(results, strategies, args.repeat, setup)
    return {
        "config": {"table_version": args.table_version, "hudi_setup": setup.name, "hudi_version": setup.hudi_version,
                   "timeline_layout": setup.timeline_layout_version, "hudi_table": str(cache),
                   "rows": args.rows, "input_files": args.files, "input_bytes": input_bytes,
                   "hudi_table_bytes": hudi_bytes, "hudi_base_files": len(hudi_files), "target_bytes": TARGET_BYTES,
                   "sample_size": args.sample_size, "master": args.master, "standalone": args.standalone,
                   "executor_memory": args.executor_memory if args.standalone else None,
                   "driver_memory": args.driver_memory, "spark_conf": setting.conf, "hudi_codec": args.hudi_codec,
                   "repeat": args.repeat, "systems": systems, "strategies": strategies,
                   "hudi_options": {st: hudi_options(st, args.sample_size, args.hudi_codec, setup)
                                    for st in strategies},
                   "ours_props": {st: clustering_props(st, args.sample_size) for st in strategies},
                   "python": platform.python_version()},
        "load_before": load_before, "load_after": load_after,
        "order": [f"{r.system}/{r.strategy}" for r in runs],
        "cases": results, "verdict": verdict,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=None, help="rows to generate (default 4,000,000)")
    parser.add_argument("--files", type=int, default=None, help="source files = ingestion commits (default 200)")
    parser.add_argument("--memory-gb", type=float, default=None,
                        help="size the input to about this many GB instead (2 -> 34.4M rows in 400 files)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; figures are medians")
    parser.add_argument("--strategies", default="linear,zorder,hilbert", help=f"from {','.join(STRATEGIES)}")
    parser.add_argument("--table-version", type=int, choices=TABLE_VERSIONS, default=6,
                        help="the table clustered, built by our ingestion: 6 (against Apache Hudi 0.15.0) or 9 "
                             "(timeline layout 2, against Apache Hudi 1.2.0)")
    parser.add_argument("--systems", default=None,
                        help="from ours,hudi,spark (default ours,hudi; with --standalone ours,hudi,spark)")
    parser.add_argument("--hudi-codec", default="snappy",
                        help="Hudi's hoodie.parquet.compression.codec (default snappy, the codec our clustering "
                             "writes; Hudi's own default is gzip)")
    parser.add_argument("--sample-size", type=int, default=200_000, help="curve sample size (Hudi's default)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--standalone", metavar="WORKER_MEMORY", default=None,
                        help="run on standalone masters (one worker each: 2 cores, this memory) on 127.0.0.1")
    parser.add_argument("--executor-memory", default="3g", help="spark.executor.memory with --standalone")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark conf for every process (repeatable)")
    parser.add_argument("--shared", type=Path, default=REPO / ".." / "shared")
    parser.add_argument("--data", type=Path, default=REPO / "bench" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args = parser.parse_args(argv)
    args.data, args.out = args.data.resolve(), args.out.resolve()
    if args.memory_gb is not None:
        args.rows = args.rows or int(round(args.memory_gb * GIB / REFERENCE_BYTES_PER_ROW / 1e5) * 1e5)
        args.files = args.files or 400
    args.rows = args.rows or 4_000_000
    args.files = args.files or 200
    args.systems = args.systems or ("ours,hudi,spark" if args.standalone else "ours,hudi")
    result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"vs_hudi{out_suffix(args.table_version)}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    say(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
