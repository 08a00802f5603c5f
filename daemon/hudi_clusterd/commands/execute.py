"""``hudi-clusterd execute`` and ``hudi-clusterd cluster``: run clustering plans on Spark."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hudi_clusterd.commands.common import load_policy, open_table
from hudi_clusterd.commands.progress import ProgressPrinter
from hudi_clusterd.commands.status import human_bytes
from hudi_clusterd.domain.plan import PendingPlan
from hudi_clusterd.domain.policy import ClusteringPolicy
from hudi_clusterd.errors import PlanError
from hudi_clusterd.ops.events import Outcome
from hudi_clusterd.ops.execute import ExecutionResult, Executor, execute, execute_pending
from hudi_clusterd.ops.ownership import Claim, Ownership
from hudi_clusterd.ops.ports import GroupRunner
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.ops.snapshot import TableSnapshot
from hudi_clusterd.ordering.figures import clustering_figures
from hudi_clusterd.settings_keys import DAEMON_KEYS, ObjectStoreReader


def report(result: ExecutionResult) -> int:
    if result.outcome is Outcome.COMPLETED:
        layout = ""
        if result.layout_before is not None and result.layout_after is not None:
            layout = f"; files-scanned ratio {result.layout_before:.3f} -> {result.layout_after:.3f}"
        print(f"completed {result.instant}: {result.files_replaced} files -> {result.files_written} files "
              f"({human_bytes(result.bytes_written)}) in {result.duration_s:.1f}s{layout}")
        return 0
    if result.outcome is Outcome.SKIPPED:
        print(f"nothing executed: {result.message}")
        return 0
    print(f"{result.outcome.value} {result.instant}: {result.message}", file=sys.stderr)
    return 1


COMMIT_WAIT = DAEMON_KEYS["clusterd.commit.wait.seconds"]
OBJECT_STORE_READER = DAEMON_KEYS["clusterd.spark.object.store.reader"]


def _seconds(text: str) -> float:
    try:
        value: float = COMMIT_WAIT.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base-path", required=True, help="the table's base path")
    p.add_argument("--props", help="clustering properties file (Hudi's hoodie.clustering.* keys)")
    p.add_argument("--spark-master", default="local[*]", help="Spark master (default: %(default)s)")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark configuration (repeatable)")
    p.add_argument("--commit-wait", type=_seconds, default=_seconds(COMMIT_WAIT.default or ""), metavar="SECONDS",
                   help="how long, in all, the commit waits for writers beside it (a write only requested, or the "
                        "next write right after one completed); 0 commits at once (default: %(default)s)")
    p.add_argument("--object-store-reader", choices=[r.value for r in ObjectStoreReader],
                   default=OBJECT_STORE_READER.default,
                   help="who reads a group's files on S3: Spark's Python workers through the daemon's client, or "
                        "Spark's reader through Hadoop's S3A connector (default: %(default)s)")


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


def _runner(args: argparse.Namespace) -> GroupRunner:
    from hudi_clusterd.engine.clustering.runner import build_runner

    conf = {}
    for item in args.spark_conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise PlanError(f"--spark-conf expects KEY=VALUE, got {item!r}")
        conf[key] = value
    return build_runner(args.spark_master, conf, s3a_reader=args.object_store_reader == ObjectStoreReader.S3A)


def _run_plan(args: argparse.Namespace, policy: ClusteringPolicy, snapshot: TableSnapshot, pending: PendingPlan,
              ownership: Ownership, claim: Claim | None = None) -> int:
    runner = _runner(args)
    try:
        executor = Executor(runner, ownership, policy.max_parallelism, ProgressPrinter(), clustering_figures,
                            args.commit_wait)
        return report(execute(snapshot, pending, executor, claim=claim))
    finally:
        runner.close()


def run_execute(args: argparse.Namespace) -> int:
    policy = load_policy(args.props)
    table = open_table(args.base_path, args.props)
    table.check_clusterable()  # before Spark starts: the table, and its pending plans, can be worked on
    table.pending_clustering_plans()
    runner = _runner(args)
    try:
        return report(execute_pending(table, runner, args.instant, parallelism=policy.max_parallelism,
                                      observer=ProgressPrinter(), figures=clustering_figures,
                                      commit_wait_s=args.commit_wait))
    finally:
        runner.close()


def run_cluster(args: argparse.Namespace) -> int:
    policy = load_policy(args.props)
    table = open_table(args.base_path, args.props)
    ownership = Ownership()
    scheduled = schedule(table, policy, force=args.force, claim_with=ownership)
    if scheduled.pending is None:
        print(f"nothing scheduled: {scheduled.reason}")
        return 0
    print(f"scheduled clustering {scheduled.instant}: {scheduled.reason}")
    return _run_plan(args, policy, scheduled.snapshot, scheduled.pending, ownership, scheduled.claim)
