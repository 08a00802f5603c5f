"""Planning benchmark: a timeline and listing of 100,000 file groups in 1,000 partitions.

Measures, in one process: building the file-system view from the listing and timeline, and planning with
Hudi's default policy (size-based, no sort columns) and with overlap grouping on a sort column (column ranges
given, as footers would). Prints a table and writes JSON to bench/out/planning.json. Target: under 2 s per plan
with bounded memory (tracemalloc peak reported).

    python bench/bench_planning.py [--groups 100000] [--partitions 1000] [--commits 500] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hudi_clusterd.domain.file_group import BaseFile, base_file_name
from hudi_clusterd.domain.fs_view import FileSystemView, PendingClustering, ReplacedGroups
from hudi_clusterd.domain.instant import Action, Instant, State, format_instant_time
from hudi_clusterd.domain.planner import plan_clustering
from hudi_clusterd.domain.policy import parse_policy
from hudi_clusterd.domain.timeline import Timeline

MB = 1024 * 1024


def build_inputs(groups: int, partitions: int, commits: int, seed: int = 7):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    times = [format_instant_time(start + timedelta(seconds=i)) for i in range(commits)]
    timeline = Timeline.from_states(
        [Instant(t, Action.COMMIT, s) for t in times for s in (State.REQUESTED, State.INFLIGHT, State.COMPLETED)]
    )
    files: list[BaseFile] = []
    ranges: dict[tuple[str, str], tuple[float, float]] = {}
    for g in range(groups):
        partition = f"dt=2024-{1 + (g % partitions) // 28 % 12:02d}-{1 + g % partitions % 28:02d}/h={g % 24}"
        file_id = f"{g:08x}-0000-0000-0000-000000000000-0"
        t = times[g % commits]
        size = int(rng.uniform(0.5, 40) * MB) if rng.random() < 0.9 else int(rng.uniform(300, 900) * MB)
        bf = BaseFile.parse(partition, base_file_name(file_id, f"{g % 4}-{g % 97}-{g}", t), size)
        assert bf is not None
        files.append(bf)
        lo = rng.uniform(0, 1000)
        ranges[bf.group_id] = (lo, lo + rng.uniform(1, 30))
    return timeline, files, ranges


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=1_000)
    ap.add_argument("--commits", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "out" / "planning.json"))
    args = ap.parse_args()

    timeline, files, ranges = build_inputs(args.groups, args.partitions, args.commits)
    now = datetime(2024, 6, 1, tzinfo=UTC)
    default_policy = parse_policy({}, source="bench")[0]
    overlap_policy = parse_policy({"hoodie.clustering.plan.strategy.sort.columns": "x"}, source="bench")[0]
    uri = lambda bf: f"file:/lake/t/{bf.relative_path}"  # noqa: E731

    def view() -> FileSystemView:
        return FileSystemView(timeline, files, ReplacedGroups(), PendingClustering())

    cases = {
        "view from listing + timeline": lambda: view(),
        "plan: size-based (Hudi default)": lambda: plan_clustering(view(), default_policy, now, uri),
        "plan: overlap grouping on sort column": lambda: plan_clustering(
            view(), overlap_policy, now, uri, ranges=lambda bf: ranges.get(bf.group_id)),
    }
    results = {}
    print(f"planning benchmark: {args.groups:,} file groups, {args.partitions:,} partitions, "
          f"{args.commits} commits; median of {args.repeat}")
    print(f"  {'case':<40} {'median s':>9} {'min s':>7} {'peak MiB':>9}  result")
    for name, fn in cases.items():
        fn()  # warm-up
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
        tracemalloc.start()
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        plan = getattr(out, "plan", None)
        summary = (f"{len(plan.input_groups)} groups, {plan.num_slices} slices" if plan is not None
                   else f"{len(out.file_groups())} file groups" if isinstance(out, FileSystemView) else "no plan")
        results[name] = {"median_s": round(statistics.median(times), 4), "min_s": round(min(times), 4),
                         "peak_mib": round(peak / MB, 1), "result": summary}
        r = results[name]
        print(f"  {name:<40} {r['median_s']:>9.3f} {r['min_s']:>7.3f} {r['peak_mib']:>9.1f}  {summary}")
    target_ok = all(v["median_s"] < 2.0 for k, v in results.items() if k.startswith("plan"))
    print(f"target (< 2 s per plan): {'met' if target_ok else 'MISSED'}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"groups": args.groups, "partitions": args.partitions,
                                          "commits": args.commits, "cases": results,
                                          "target_met": target_ok}, indent=2))


if __name__ == "__main__":
    main()
