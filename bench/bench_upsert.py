"""Upsert benchmark: a 100k-row update batch into a 10M-row copy-on-write table, on one local Spark session.

The table (``--rows``, default 10M; columns id, day, amount, ts, note; partitioned by ``day`` over
``--partitions`` days; base files of ``--file-mb`` MiB) is written once with our ``insert`` and cached under
``bench/data/upsert-<rows>/``; each case runs on a fresh copy of it:

* ``random``:  ``--batch`` (default 100k) updates of ids drawn uniformly from the whole table, plus 1% new ids;
               touches (nearly) every file group, so copy-on-write rewrites (nearly) the whole table: the
               worst case of COW, and what Hudi's own COW upsert would rewrite too;
* ``recent``:  the same number of updates of the newest ids (the usual pattern of late-arriving changes: ids
               grow with the day partition), plus 1% new ids: only the file groups holding them (in the last
               day) are rewritten.

Reported per case: wall time of ``upsert``, the time of the index alone (``tag_locations`` + count: reading the
record keys of the batch's partitions and joining), file groups merged, rows rewritten, new file groups, and
checks (row count, every batch row carries the upsert's commit time, a sample of updated values).

    python bench/bench_upsert.py                          # 10M rows, 100k batch
    python bench/bench_upsert.py --rows 1000000 --batch 10000

Prints a table and writes ``bench/out/upsert.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "daemon"))

from hudi_clusterd.domain.table_config import TableConfig  # noqa: E402
from hudi_clusterd.engine.ingest.snapshot import snapshot  # noqa: E402
from hudi_clusterd.engine.ingest.upsert import deduplicate_last, tag_locations, upsert  # noqa: E402
from hudi_clusterd.engine.ingest.writer import insert, prepare_insert, table_data_schema  # noqa: E402
from hudi_clusterd.engine.session import get_or_create_session  # noqa: E402
from hudi_clusterd.table.hoodie_table import HoodieTable  # noqa: E402

MB = 1024 * 1024


def day_of(rows: int, days: int) -> Any:
    """Ids are ingested in order: id i lands in day ``i * days // rows`` (new ids in the last day)."""
    from pyspark.sql import functions as F

    day = F.least(F.floor(F.col("id") * days / rows), F.lit(days - 1)) + 1
    return F.format_string("2024-01-%02d", day.cast("int")).alias("day")


def source(spark: Any, start: int, stop: int, rows: int, days: int, amount_factor: float, ts: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(start, stop).select(
        F.col("id"),
        day_of(rows, days),
        (F.col("id") * amount_factor).alias("amount"),
        F.lit(ts).cast("long").alias("ts"),
        F.sha2(F.col("id").cast("string"), 256).substr(1, 24).alias("note"),
    )


def build_table(spark: Any, path: Path, rows: int, days: int, file_mb: int) -> float:
    if (path / ".hoodie" / "hoodie.properties").exists():
        return 0.0
    shutil.rmtree(path, ignore_errors=True)
    table = HoodieTable.create(str(path), TableConfig.for_new_table(
        name="upsert_bench", record_key_fields=["id"], partition_fields=["day"], precombine_field="ts"))
    t0 = time.monotonic()
    insert(spark, table, source(spark, 0, rows, rows, days, 1.0, 1), operation="bulk_insert",
           max_file_bytes=file_mb * MB)
    return time.monotonic() - t0


def batch(spark: Any, case: str, rows: int, n: int, days: int) -> Any:
    from pyspark.sql import functions as F

    new = max(1, n // 100)
    if case == "random":
        updates = (spark.range(0, n).select((F.abs(F.xxhash64(F.col("id"), F.lit(7))) % rows).alias("id"))
                   .dropDuplicates(["id"]))
    else:
        updates = spark.range(rows - n, rows)
    updated = updates.select(
        F.col("id"), day_of(rows, days),
        (F.col("id") * -1.0).alias("amount"), F.lit(2).cast("long").alias("ts"),
        F.lit("updated").alias("note"))
    return updated.unionByName(source(spark, rows, rows + new, rows, days, -1.0, 2))


def run_case(spark: Any, cached: Path, work: Path, case: str, rows: int, n: int, days: int) -> dict[str, Any]:
    from pyspark.sql import functions as F

    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(cached, work)
    table = HoodieTable.open(str(work))
    df = batch(spark, case, rows, n, days).cache()
    batch_rows = df.count()
    # the index alone
    t0 = time.monotonic()
    prepared, _ = prepare_insert(df, table, table_data_schema(table))
    prepared = deduplicate_last(prepared, "ts")
    view = table.file_system_view()
    parts = sorted(str(r[0]) for r in prepared.select("_hoodie_partition_path").distinct().collect())
    slices = [bf for p in parts for bf in view.latest_base_files(p)]
    matched = tag_locations(spark, table, prepared, slices, batch_rows).filter(
        F.col("__hudi_file_id").isNotNull()).count()
    index_s = time.monotonic() - t0
    # the upsert
    t0 = time.monotonic()
    instant = upsert(spark, table, df)
    upsert_s = time.monotonic() - t0
    meta = json.loads((work / ".hoodie" / f"{instant}.commit").read_text())
    stats = [ws for wss in meta["partitionToWriteStats"].values() for ws in wss]
    merged = [ws for ws in stats if ws["prevCommit"] != "null"]
    snap = snapshot(spark, table)
    total = snap.count()
    changed = snap.filter(F.col("_hoodie_commit_time") == instant).count()
    wrong = snap.filter((F.col("_hoodie_commit_time") == instant) & (F.col("amount") != -F.col("id"))).count()
    ok = total == rows + batch_rows - matched and changed == batch_rows and wrong == 0
    df.unpersist()
    shutil.rmtree(work, ignore_errors=True)
    return {
        "case": case, "batch_rows": batch_rows, "updates": matched, "inserts": batch_rows - matched,
        "index_s": round(index_s, 1), "upsert_s": round(upsert_s, 1),
        "file_groups_in_batch_partitions": len(slices), "file_groups_merged": len(merged),
        "rows_rewritten": sum(ws["numWrites"] for ws in merged),
        "new_file_groups": len(stats) - len(merged),
        "bytes_written_mb": round(sum(ws["totalWriteBytes"] for ws in stats) / MB, 1),
        "checks_ok": ok,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=10, help="days (table partitions)")
    ap.add_argument("--file-mb", type=int, default=32, help="base file size target in MiB")
    ap.add_argument("--cases", default="recent,random")
    ap.add_argument("--out", default=str(HERE / "out" / "upsert.json"))
    args = ap.parse_args()
    logging.getLogger("py4j").setLevel(logging.ERROR)
    spark = get_or_create_session("local[2]", app_name="bench-upsert",
                                  conf={"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "8"})
    spark.sparkContext.setLogLevel("ERROR")
    cached = HERE / "data" / f"upsert-{args.rows}"
    build_s = build_table(spark, cached, args.rows, args.partitions, args.file_mb)
    table_mb = sum(p.stat().st_size for p in cached.rglob("*.parquet") if ".hoodie" not in p.parts) / MB
    groups = len(HoodieTable.open(str(cached)).file_system_view().latest_file_slices())
    print(f"table: {args.rows:,} rows, {table_mb:.0f} MiB, {groups} file groups"
          + (f", built in {build_s:.0f} s" if build_s else ""), flush=True)
    print(f"{'case':8} {'batch':>8} {'updates':>8} {'index s':>8} {'upsert s':>9} {'groups':>11} "
          f"{'rewritten':>10} {'new':>4} {'MiB':>7} ok", flush=True)
    results: list[dict[str, Any]] = []
    for case in args.cases.split(","):
        r = run_case(spark, cached, HERE / "data" / f"upsert-{args.rows}-work", case, args.rows, args.batch,
                     args.partitions)
        results.append(r)
        print(f"{r['case']:8} {r['batch_rows']:>8,} {r['updates']:>8,} {r['index_s']:>8} {r['upsert_s']:>9} "
              f"{r['file_groups_merged']:>4}/{r['file_groups_in_batch_partitions']:<6} {r['rows_rewritten']:>10,} "
              f"{r['new_file_groups']:>4} {r['bytes_written_mb']:>7} {r['checks_ok']}", flush=True)
        report = {"rows": args.rows, "table_file_groups": groups, "batch": args.batch, "partitions": args.partitions,
                  "file_mb": args.file_mb, "table_mb": round(table_mb, 1),
                  "build_s": round(build_s, 1) if build_s else None,
                  "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "master": "local[2]"},
                  "cases": results}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")  # after every case
    spark.stop()
    return 0 if all(r["checks_ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
