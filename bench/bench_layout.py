"""Layout benchmark: plain Spark range sort vs. our linear / Z-order / Hilbert layouts, side by side.

On the reference dataset (``../shared/bench/gen.py``; generated into ``bench/data/`` when absent), in ONE
local Spark session, each variant reads the same input, orders it and writes it with ``df.write.parquet``
into ``n = ceil(input bytes / target)`` files. For each we report the wall time and the CPU time (the
driver, the Spark JVM and its Python workers, from /proc) of order+write, medians of ``--repeat`` rounds with
the variants interleaved, each also as a ratio to plain Spark; and the layout quality of the output files,
measured from their footers by ``hudi_clusterd.ordering.quality`` (files-scanned ratio, row-groups-scanned ratio,
overlap depth). CPU time is the steadier figure on a shared machine.

    python bench/bench_layout.py                      # full size: 4M rows in 200 files, 8 MiB target
    python bench/bench_layout.py --rows 400000 --files 20 --repeat 3

Prints a table and writes ``bench/out/layout.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import math
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "daemon"))

from hudi_clusterd.domain.row_order import CurveBuildMethod, LayoutStrategy  # noqa: E402
from hudi_clusterd.engine.clustering.sorting import sort_for_layout  # noqa: E402
from hudi_clusterd.engine.session import get_or_create_session  # noqa: E402
from hudi_clusterd.ordering.quality import LayoutReport, layout_report  # noqa: E402
from procstats import CpuMeter  # noqa: E402

COLUMNS = ("lat", "lon")
MIB = 1 << 20


def ensure_dataset(shared: Path, data: Path, rows: int, files: int) -> Path:
    """The dataset directory, generated with the reference generator when absent."""
    target = data / f"events_{rows}_{files}"
    if len(list(target.glob("*.parquet"))) == files:
        return target
    gen_path = shared / "bench" / "gen.py"
    if not gen_path.exists():
        raise SystemExit(f"reference generator not found at {gen_path}; pass --shared")
    spec = importlib.util.spec_from_file_location("reference_gen", gen_path)
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    shutil.rmtree(target, ignore_errors=True)
    print(f"generating {rows:,} rows in {files} files into {target} ...", flush=True)
    gen.make(str(target), rows, files, 7)
    return target


def variants(n: int, sample_size: int) -> dict[str, Callable[[Any], Any]]:
    """name -> function ordering a DataFrame into n partitions."""

    def ours(strategy: LayoutStrategy, build: CurveBuildMethod) -> Callable[[Any], Any]:
        return lambda df: sort_for_layout(df, COLUMNS, strategy, build, sample_size, n)

    return {
        "spark repartitionByRange(lat,lon)": lambda df: df.repartitionByRange(n, *COLUMNS).sortWithinPartitions(
            *COLUMNS
        ),
        "linear": ours(LayoutStrategy.LINEAR, CurveBuildMethod.DIRECT),
        "z-order direct": ours(LayoutStrategy.ZORDER, CurveBuildMethod.DIRECT),
        "z-order sample": ours(LayoutStrategy.ZORDER, CurveBuildMethod.SAMPLE),
        "hilbert direct": ours(LayoutStrategy.HILBERT, CurveBuildMethod.DIRECT),
        "hilbert sample": ours(LayoutStrategy.HILBERT, CurveBuildMethod.SAMPLE),
    }


def parquet_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.parquet"))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _cell(value: float | None, base: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f}" + (f" ({value / base:.2f}x)" if base else "")


def report_row(
    name: str, wall: float | None, wall_base: float | None, cpu: float | None, cpu_base: float | None,
    rep: LayoutReport,
) -> str:  # fmt: skip
    lat, lon = rep.overlap
    return (
        f"| {name} | {_cell(wall, wall_base)} | {_cell(cpu, cpu_base)} | {rep.files} "
        f"| {rep.files_scanned_ratio:.3f} | {rep.row_groups_scanned_ratio:.3f} "
        f"| {lat.max_depth} / {lat.mean_depth:.1f} | {lon.max_depth} / {lon.mean_depth:.1f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--target-mib", type=float, default=8.0, help="target output file size (MiB)")
    parser.add_argument("--sample-size", type=int, default=200_000, help="curve sample size (Hudi's default)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; times are medians")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--shared", type=Path, default=REPO / ".." / "shared")
    parser.add_argument("--data", type=Path, default=REPO / "bench" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))

    source = ensure_dataset(args.shared.resolve(), args.data, args.rows, args.files)
    inputs = parquet_files(source)
    input_bytes = sum(p.stat().st_size for p in inputs)
    n = max(1, math.ceil(input_bytes / (args.target_mib * MIB)))
    print(f"input: {len(inputs)} files, {input_bytes / MIB:.1f} MiB -> {n} output files", flush=True)

    spark = get_or_create_session(
        args.master,
        app_name="bench-layout",
        conf={"spark.driver.memory": args.driver_memory, "spark.sql.shuffle.partitions": str(n)},
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(str(source))
    work = args.out / "layout"
    shutil.rmtree(work, ignore_errors=True)

    # Warm-up: JVM JIT, Python workers and the parquet path, on a slice of the data.
    warm = df.sample(fraction=0.05, seed=1)
    sort_for_layout(warm, COLUMNS, LayoutStrategy.HILBERT, CurveBuildMethod.SAMPLE, 10_000, 2).write.parquet(
        str(work / "warmup")
    )

    meter = CpuMeter()
    runs = variants(n, args.sample_size)
    times: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for round_no in range(args.repeat):
        for name, order in runs.items():
            out = work / name.replace(" ", "_").replace("(", "_").replace(")", "").replace(",", "_")
            shutil.rmtree(out, ignore_errors=True)
            cpu_start, start = meter.seconds(), time.perf_counter()
            order(df).write.parquet(str(out))
            elapsed, cpu_end = time.perf_counter() - start, meter.seconds()
            times[name].append(elapsed)
            if cpu_start is not None and cpu_end is not None:
                cpu[name].append(cpu_end - cpu_start)
            used = "" if not cpu[name] else f", cpu {cpu[name][-1]:.1f} s"
            print(f"round {round_no + 1}: {name}: {elapsed:.1f} s{used}", flush=True)

    source_report = layout_report(inputs, COLUMNS)
    reports = {}
    for name in runs:
        out = work / name.replace(" ", "_").replace("(", "_").replace(")", "").replace(",", "_")
        reports[name] = layout_report(parquet_files(out), COLUMNS)
    baseline = "spark repartitionByRange(lat,lon)"
    wall = {name: _median(ts) for name, ts in times.items()}
    cpu_used = {name: _median(ts) for name, ts in cpu.items()}

    print()
    print(
        f"rows={args.rows:,} files={args.files} input={input_bytes / MIB:.0f} MiB target={args.target_mib} MiB "
        f"-> n={n}; master={args.master}; sample={args.sample_size:,}; medians of {args.repeat}"
    )
    print("| variant | wall s (vs spark) | cpu s (vs spark) | files | files scanned | row groups scanned "
          "| lat depth max / mean | lon depth max / mean |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(report_row(f"source ({len(inputs)} small files)", None, None, None, None, source_report))
    for name in runs:
        print(report_row(name, wall[name], wall[baseline], cpu_used[name], cpu_used[baseline], reports[name]))

    result = {
        "config": {
            "rows": args.rows,
            "input_files": len(inputs),
            "input_bytes": input_bytes,
            "target_mib": args.target_mib,
            "output_files": n,
            "sample_size": args.sample_size,
            "master": args.master,
            "repeat": args.repeat,
            "spark": spark.version,
            "python": platform.python_version(),
            "columns": list(COLUMNS),
        },
        "baseline": baseline,
        "source": source_report.to_dict(),
        "variants": {
            name: {
                "wall_seconds": times[name],
                "cpu_seconds": cpu[name],
                "median_wall_seconds": wall[name],
                "median_cpu_seconds": cpu_used[name],
                "layout": reports[name].to_dict(),
            }
            for name in runs
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "layout.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.out / 'layout.json'}")
    meter.close()
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
