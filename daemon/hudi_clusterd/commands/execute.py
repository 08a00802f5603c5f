"""``hudi-clusterd execute`` and ``hudi-clusterd cluster``: run clustering plans on Spark."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from hudi_clusterd.commands.common import load_policy
from hudi_clusterd.commands.status import human_bytes
from hudi_clusterd.errors import PlanError
from hudi_clusterd.io.table import HoodieTable
from hudi_clusterd.ops.execute import ExecutionResult, execute
from hudi_clusterd.ops.schedule import schedule


def print_progress(event: str, info: Mapping[str, Any]) -> None:
    """Progress lines for a person watching a one-shot run."""
    if event == "plan_started":
        print(f"executing clustering {info['instant']}: {info['groups']} groups, {info['slices']} files, "
              f"{human_bytes(info['input_bytes'])}", flush=True)
    elif event == "group_started":
        print(f"  [group {info['group'] + 1}/{info['groups']}] {info['partition'] or '(root)'}: "
              f"{info['slices']} files ...", flush=True)
    elif event == "group_finished":
        print(f"  [group {info['group'] + 1}/{info['groups']}] wrote {info['files']} files, "
              f"{human_bytes(info['bytes'])} in {info['seconds']}s", flush=True)


def report(result: ExecutionResult) -> int:
    if result.outcome == "completed":
        layout = ""
        if result.layout_before is not None and result.layout_after is not None:
            layout = f"; files-scanned ratio {result.layout_before:.3f} -> {result.layout_after:.3f}"
        print(f"completed {result.instant}: {result.files_replaced} files -> {result.files_written} files "
              f"({human_bytes(result.bytes_written)}) in {result.duration_s:.1f}s{layout}")
        return 0
    if result.outcome == "skipped":
        print(f"nothing executed: {result.message}")
        return 0
    print(f"{result.outcome} {result.instant}: {result.message}", file=sys.stderr)
    return 1


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base-path", required=True, help="the table's base path")
    p.add_argument("--props", help="clustering properties file (Hudi's hoodie.clustering.* keys)")
    p.add_argument("--spark-master", default="local[*]", help="Spark master (default: %(default)s)")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark configuration (repeatable)")


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "execute", help="execute a pending clustering plan on Spark",
        description="Execute the oldest pending clustering plan (or --instant), rolling back first any clustering "
                    "left inflight by a crashed process.",
    )
    _add_common(p)
    p.add_argument("--instant", help="the plan to execute (default: the oldest pending plan)")
    p.set_defaults(func=run_execute)
    c: argparse.ArgumentParser = subparsers.add_parser(
        "cluster", help="schedule and execute clustering once",
        description="Schedule a plan when one is due (or with --force), then execute it.",
    )
    _add_common(c)
    c.add_argument("--force", action="store_true", help="ignore the commit-count trigger")
    c.set_defaults(func=run_cluster)


def _engine(args: argparse.Namespace) -> Any:
    from hudi_clusterd.engine.clustering.runner import build_engine_for

    conf = {}
    for item in args.spark_conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise PlanError(f"--spark-conf expects KEY=VALUE, got {item!r}")
        conf[key] = value
    return build_engine_for(args.spark_master, conf)


def _run_plan(args: argparse.Namespace, table: HoodieTable, policy: Any, instant: str | None) -> int:
    engine = _engine(args)
    try:
        return report(execute(table, policy, engine.runner, instant, progress=print_progress, layout=engine.layout))
    finally:
        engine.close()


def run_execute(args: argparse.Namespace) -> int:
    return _run_plan(args, HoodieTable.open(args.base_path), load_policy(args.props), args.instant)


def run_cluster(args: argparse.Namespace) -> int:
    policy = load_policy(args.props)
    table = HoodieTable.open(args.base_path)
    scheduled = schedule(table, policy, force=args.force)
    if scheduled.instant is None:
        print(f"nothing scheduled: {scheduled.reason}")
        return 0
    print(f"scheduled clustering {scheduled.instant}: {scheduled.reason}")
    return _run_plan(args, table, policy, scheduled.instant)
