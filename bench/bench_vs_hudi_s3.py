"""Our clustering against Apache Hudi 0.15.0's own on a table on S3 (SeaweedFS), every request counted.

Reuses ``bench_vs_hudi.py`` (the cached table, the clustering properties both systems get, Hudi's options, the
order of the rounds, the layout figures). The bench starts its own servers on 127.0.0.1 through
``tests/harness/servers.py`` (SeaweedFS, moto's DynamoDB, ZooKeeper; stopped by pid at the end) and a
``CountingS3Proxy`` in front of SeaweedFS: both systems are given the proxy's endpoint, so every S3 request of
either (the daemon's object-store client in the driver and its Python workers; Hadoop's S3A connector in Hudi's
JVM) is counted the same way, by kind.

Cases, interleaved round by round (each on a fresh copy of the cached table, uploaded with boto3 straight to
SeaweedFS, uncounted, under a fresh prefix):

* ``ours-s3``: ``hudi-clusterd cluster --force`` on ``s3a://hudi/<prefix>``, the lock ZooKeeper's;
* ``hudi-s3``: ``CALL run_clustering(op => 'scheduleAndExecute')`` in a Hudi 0.15.0 worker with the S3A
  connector (``tests/harness/hudi_s3.py``), the same lock (ZooKeeper: no S3 requests for the lock on either side);
* ``ours-local``: ours on a local copy (the cost of the store);
* ``ours-s3-dynamodb``, ``ours-s3-storage``: ours on S3 with the DynamoDB lock (moto) and with the storage lock on
  S3 (``--locks``), for the lock hold time per provider;
* ``ours-s3-s3a`` (only when ``--cases`` names it): ours on S3 with Spark reading the group's files through
  Hadoop's S3A connector (``--object-store-reader s3a``; ``ours-s3`` reads them in the Python workers), the same
  lock as ``ours-s3``: the two readers of the Spark side on the same table. Needs the connector's jars
  (``python -m hudi_clusterd.engine.s3a``).

Per case: wall seconds of the process, CPU seconds of its process tree, S3 requests by kind (the proxy's counts
during the case), files out, rows, files-scanned ratio of the latest snapshot (base files downloaded after the
case), and for ours on S3 every holding of the table's lock (``HoodieTable.lock()``, recorded by
``LockUsage.record``, which a wrapper of ``hudi-clusterd`` prints as it happens).

    python bench/bench_vs_hudi_s3.py                                          # 400k rows / 20 files, 2 rounds
    python bench/bench_vs_hudi_s3.py --rows 4000000 --files 200 --repeat 3    # the reference size
    python bench/bench_vs_hudi_s3.py --strategies linear,zorder,hilbert --locks zookeeper,dynamodb,storage
    python bench/bench_vs_hudi_s3.py --cases ours-s3,ours-s3-s3a --repeat 3  # Spark's two readers on S3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_vs_hudi as vs
from benchlib import COLUMNS, MIB, REPO, ensure_dataset, hudi_table_cache, layout_figures, load_info, load_module, say
from procstats import CpuMeter

STORAGE_LOCK = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"
_HELD = re.compile(r"^bench-lock-hold-s ([0-9.]+)$", re.M)
# ``hudi-clusterd`` run with every holding of a table's lock (``LockUsage.record``, called as
# ``HoodieTable.lock()`` gives it back) printed to stderr as it is recorded.
_OURS_TIMED = """
import runpy, sys
from hudi_clusterd.lock.usage import LockUsage
_record = LockUsage.record
def record(self, seconds):
    print(f"bench-lock-hold-s {seconds:.6f}", file=sys.stderr, flush=True)
    _record(self, seconds)
LockUsage.record = record
sys.argv = ["hudi-clusterd", *sys.argv[1:]]
runpy.run_module("hudi_clusterd", run_name="__main__")
"""


def upload(client: Any, bucket: str, local: Path, prefix: str) -> None:
    for path in sorted(local.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(local).as_posix()}")


def download_latest(uri: str, options: Mapping[str, str], into: Path) -> list[str]:
    """The latest snapshot's base files of the table at ``uri``, copied into ``into`` (for the layout figures)."""
    from tests.harness.process_lock import ProcessLock

    from hudi_clusterd.storage import StorageSpec, open_storage
    from hudi_clusterd.table.hoodie_table import HoodieTable

    storage = open_storage(StorageSpec(uri, dict(options)))
    table = HoodieTable.open(uri, storage, lock_provider=ProcessLock())
    into.mkdir(parents=True, exist_ok=True)
    out = []
    for bf in table.file_system_view().latest_base_files():
        dst = into / bf.relative_path.replace("/", "_")
        dst.write_bytes(storage.read_bytes(bf.relative_path))
        out.append(str(dst))
    return out


def lock_props(lock: str, servers: Any, uri: str) -> dict[str, str]:
    from tests.harness.hudi_s3 import dynamodb_lock_options, zookeeper_lock_options

    if lock == "zookeeper":
        return zookeeper_lock_options(servers.zookeeper)
    if lock == "dynamodb":
        return dynamodb_lock_options(servers.dynamodb)
    return {"hoodie.write.lock.provider": STORAGE_LOCK}


def run_ours_s3(uri: str, strategy: str, s: vs.Setting, lock: Mapping[str, str], env: Mapping[str, str],
                reader: str = "python") -> tuple[float, dict[str, Any]]:
    props = s.work / f"ours-s3-{strategy}.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in {**vs.clustering_props(strategy, s.sample_size),
                                                         "hoodie.table.name": "events", **lock}.items()))
    argv = [sys.executable, "-c", _OURS_TIMED, "--log-level", "WARNING", "cluster", "--base-path", uri,
            "--props", str(props), "--force", "--spark-master", s.master, "--object-store-reader", reader]
    for key, value in {"spark.driver.memory": s.driver_memory, **s.conf}.items():
        argv += ["--spark-conf", f"{key}={value}"]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env={**vs.child_env(), **env,
                                                                      "PYSPARK_PYTHON": sys.executable},
                          timeout=vs.CASE_TIMEOUT_S)
    seconds = time.perf_counter() - start
    with open(s.work / "ours-s3-stderr.log", "a") as log:
        log.write(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"ours failed on {uri} (exit {done.returncode}): {done.stderr[-3000:]}")
    held = [float(m.group(1)) for m in _HELD.finditer(done.stdout + done.stderr)]
    return seconds, {"lock_held_s": held, "stdout": done.stdout.splitlines()[-2:]}


def run_hudi_s3(uri: str, strategy: str, s: vs.Setting, installation: Any, profile: Any,
                lock: Mapping[str, str]) -> tuple[float, dict[str, Any]]:
    from tests.harness.apache_hudi import HudiWorker
    from tests.harness.hudi_s3 import OCC_OPTIONS, s3a_uri

    options = {**vs.hudi_options(strategy, s.sample_size, s.hudi_codec, s.setup), **OCC_OPTIONS, **lock,
               "hoodie.table.name": "events"}
    options = {k: v for k, v in options.items() if not k.startswith("hoodie.write.lock.filesystem")}
    start = time.perf_counter()
    worker = HudiWorker(installation, scratch=s.work / "hudi-scratch", master=s.hudi_master,
                        driver_memory=s.driver_memory, spark_conf=s.conf, startup_timeout=600, profile=profile)
    try:
        started = time.perf_counter()
        worker.run_clustering(s3a_uri(uri), "scheduleAndExecute", options=options, order=COLUMNS,
                              timeout=vs.CASE_TIMEOUT_S)
        called = time.perf_counter()
    finally:
        worker.close(timeout=120)
    end = time.perf_counter()
    phases = {"start_s": round(started - start, 3), "run_clustering_s": round(called - started, 3),
              "stop_s": round(end - called, 3)}
    return end - start, {"phases": phases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--strategies", default="hilbert")
    parser.add_argument("--locks", default="zookeeper,dynamodb,storage",
                        help="lock providers of ours on S3 (zookeeper is also the comparison's)")
    parser.add_argument("--cases", default="",
                        help="only these cases, comma-separated (ours-s3, hudi-s3, ours-local, ours-s3-<lock>, "
                             "ours-s3-s3a); default: every case but ours-s3-s3a")
    parser.add_argument("--hudi-codec", default="snappy")
    parser.add_argument("--sample-size", type=int, default=200_000)
    parser.add_argument("--shared", type=Path, default=REPO / ".." / "shared")
    parser.add_argument("--data", type=Path, default=REPO / "bench" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args = parser.parse_args(argv)
    from tests.harness import servers as srv
    from tests.harness.apache_hudi import locate
    from tests.harness.hudi_s3 import s3_profile
    from tests.harness.s3_proxy import CountingS3Proxy

    setup = vs.hudi_setup(6)
    installation = locate(setup)
    shared, data, out = args.shared.resolve(), args.data.resolve(), args.out.resolve()
    reference = load_module(shared / "bench" / "layout.py", "reference_layout")
    source = ensure_dataset(shared, data, args.rows, args.files)
    cache = hudi_table_cache(data, args.rows, args.files, 6)
    vs.ensure_tables([(source, cache)], 6)
    work = out / "vs-hudi-s3"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    hudi_bytes = vs.total_bytes(vs.hudi_base_files(cache))
    n = max(1, -(-hudi_bytes // vs.TARGET_BYTES))
    s = vs.Setting("local[2]", {"spark.sql.shuffle.partitions": str(n)}, "local[2]", "1g", args.hudi_codec,
                   args.sample_size, work, setup)
    strategies = [x for x in args.strategies.split(",") if x]
    locks = [x for x in args.locks.split(",") if x]
    root = Path(tempfile.mkdtemp(prefix="bench-s3-srv-"))
    servers = srv.Servers(root)
    runs: list[dict[str, Any]] = []
    try:
        servers.s3, p = srv.start_seaweedfs(root)
        servers.processes.append(p)
        servers.dynamodb, p = srv.start_moto(root)
        servers.processes.append(p)
        srv.prepare_zookeeper()
        servers.zookeeper, p = srv.start_zookeeper(root)
        servers.processes.append(p)
        with CountingS3Proxy(servers.s3.endpoint) as proxy:
            proxied = srv.S3Server(endpoint=proxy.endpoint)
            profile = s3_profile(setup, proxied)
            client = servers.s3.boto3()
            meter = CpuMeter(interval=0.1)
            cases = [("ours-s3", "zookeeper"), ("hudi-s3", "zookeeper"), ("ours-local", "-")]
            cases += [(f"ours-s3-{lk}", lk) for lk in locks if lk != "zookeeper"]
            wanted = [c for c in args.cases.split(",") if c]
            cases = [c for c in [*cases, ("ours-s3-s3a", "zookeeper")] if c[0] in wanted] if wanted else cases
            for round_no in range(1, args.repeat + 1):
                for k, strategy in enumerate(strategies):
                    shift = (round_no - 1 + k) % len(cases)
                    for system, lock in cases[shift:] + cases[:shift]:
                        runs.append(run_case(system, lock, strategy, round_no, cache, s, servers, proxied,
                                             proxy, client, installation, profile, meter, reference, args.rows))
                        (out / "vs_hudi_s3.partial.json").write_text(json.dumps(runs, indent=2) + "\n")
            meter.close()
    finally:
        servers.stop()
        shutil.rmtree(root, ignore_errors=True)
    result = {"config": {"rows": args.rows, "files": args.files, "repeat": args.repeat, "strategies": strategies,
                         "locks": locks, "hudi_table_bytes": hudi_bytes, "hudi_version": setup.hudi_version},
              "runs": runs, "summary": summarize(runs)}
    print_summary(result["summary"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "vs_hudi_s3.json").write_text(json.dumps(result, indent=2) + "\n")
    say(f"\nwrote {out / 'vs_hudi_s3.json'}")
    return 0


def run_case(system: str, lock: str, strategy: str, round_no: int, cache: Path, s: vs.Setting, servers: Any,
             proxied: Any, proxy: Any, client: Any, installation: Any, profile: Any, meter: CpuMeter,
             reference: Any, rows: int) -> dict[str, Any]:
    local = system == "ours-local"
    if local:
        dst = vs.fresh_cached_copy(cache, s.work / f"local-{strategy}")
        uri = str(dst)
    else:
        prefix = f"{system}-{strategy}-{uuid.uuid4().hex[:8]}"
        upload(client, servers.s3.bucket, cache, prefix)
        uri = f"s3a://{servers.s3.bucket}/{prefix}"
    load1 = os.getloadavg()[0]
    cpu0 = meter.seconds()
    with proxy.measure() as requests:
        if system == "hudi-s3":
            seconds, extra = run_hudi_s3(uri, strategy, s, installation, profile, lock_props(lock, servers, uri))
        elif local:
            seconds, _, extra = vs.run_ours(dst, strategy, s)
        else:
            seconds, extra = run_ours_s3(uri, strategy, s, lock_props(lock, servers, uri), proxied.env(),
                                         "s3a" if system == "ours-s3-s3a" else "python")
    cpu1 = meter.seconds()
    files = vs.hudi_base_files(dst) if local else download_latest(
        uri, servers.s3.storage_options(), s.work / f"files-{system}")
    layout = layout_figures(files, reference)
    n_rows = vs.parquet_rows(files)
    run = {"round": round_no, "system": system, "lock": lock, "strategy": strategy, "seconds": round(seconds, 2),
           "cpu_seconds": None if cpu0 is None or cpu1 is None else round(cpu1 - cpu0, 2),
           "requests": dict(sorted(requests.items())), "files_out": len(files), "rows": n_rows,
           "rows_ok": n_rows == rows,
           "layout": layout, "load1": round(load1, 2), "extra": extra}
    say(f"round {round_no}: {system} ({lock}) {strategy}: {seconds:.1f} s, cpu {run['cpu_seconds']} s, "
        f"{len(files)} files, {n_rows:,} rows, files-scanned {layout['files_scanned_ratio']:.3f}, requests "
        f"{run['requests']}, lock held {extra.get('lock_held_s')} (load {load1:.1f})")
    for path in [s.work / f"files-{system}", s.work / f"local-{strategy}"]:
        shutil.rmtree(path, ignore_errors=True)
    return run


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarize(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in sorted({(r["system"], r["strategy"]) for r in runs}):
        rs = [r for r in runs if (r["system"], r["strategy"]) == key]
        kinds = sorted({k for r in rs for k in r["requests"]})
        held = [h for r in rs for h in r["extra"].get("lock_held_s") or []]
        out[f"{key[0]}/{key[1]}"] = {
            "lock": rs[0]["lock"], "median_s": statistics.median(r["seconds"] for r in rs),
            "median_cpu_s": statistics.median(r["cpu_seconds"] or 0 for r in rs),
            "median_requests": {k: statistics.median(r["requests"].get(k, 0) for r in rs) for k in kinds},
            "files_out": rs[-1]["files_out"], "files_scanned": rs[-1]["layout"]["files_scanned_ratio"],
            "rows_ok": all(r["rows_ok"] for r in rs),
            "lock_held_median_s": statistics.median(held) if held else None, "lock_held_p99_s": _pct(held, 0.99)}
    return out


def print_summary(summary: Mapping[str, Any]) -> None:
    say("\n| case | lock | wall s | CPU s | S3 requests (median, by kind) | files out | files-scanned | rows | "
        "lock held s (median / p99) |")
    say("| --- | --- | ---: | ---: | --- | ---: | ---: | --- | --- |")
    for key, r in summary.items():
        req = ", ".join(f"{k} {v:g}" for k, v in r["median_requests"].items()) or "—"
        held = ("—" if r["lock_held_median_s"] is None
                else f"{r['lock_held_median_s']:.3f} / {r['lock_held_p99_s']:.3f}")
        say(f"| {key} | {r['lock']} | {r['median_s']:.1f} | {r['median_cpu_s']:.1f} | {req} | {r['files_out']} "
            f"| {r['files_scanned']:.3f} | {'ok' if r['rows_ok'] else 'WRONG'} | {held} |")
    say(f"(MiB = {MIB} bytes; load now {load_info()['loadavg']})")


if __name__ == "__main__":
    raise SystemExit(main())
