"""``hudi-clusterd schedule``: write a clustering plan when the trigger and eligibility allow."""

from __future__ import annotations

import argparse
import json
from typing import Any

from hudi_clusterd.commands.common import load_policy, open_table
from hudi_clusterd.commands.status import human_bytes
from hudi_clusterd.domain.plan import ClusteringPlan
from hudi_clusterd.ops.schedule import ScheduleResult, schedule


def plan_rows(plan: ClusteringPlan) -> list[dict[str, Any]]:
    return [
        {
            "partition": g.partition_path,
            "slices": len(g.slices),
            "input_bytes": g.input_bytes,
            "output_file_groups": g.num_output_file_groups,
            "file_ids": [s.file_id for s in g.slices],
        }
        for g in plan.input_groups
    ]


def render_plan(plan: ClusteringPlan) -> str:
    rows = plan_rows(plan)
    width = max(9, *(len(r["partition"] or "(root)") for r in rows))
    lines = [f"  {'partition':<{width}}  {'slices':>6}  {'input':>10}  {'output file groups':>18}"]
    for r in rows:
        lines.append(f"  {r['partition'] or '(root)':<{width}}  {r['slices']:>6}  "
                     f"{human_bytes(r['input_bytes']):>10}  {r['output_file_groups']:>18}")
    lines.append(f"  sort columns: {', '.join(plan.strategy.sort_columns) or '(none)'}; "
                 f"strategy: {plan.strategy.class_name.rsplit('.', 1)[-1]}")
    return "\n".join(lines)


def result_json(result: ScheduleResult, dry_run: bool) -> dict[str, Any]:
    plan = result.plan
    return {
        "scheduled": result.instant is not None,
        "dry_run": dry_run,
        "instant": result.instant,
        "reason": result.reason,
        "commits_since_last_clustering": result.trigger.commits_since,
        "commits_needed": result.trigger.needed,
        "groups": plan_rows(plan) if plan else [],
    }


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "schedule", help="write a clustering plan (a requested replacecommit) when one is due",
        description="Count commits since the last clustering against hoodie.clustering.async.max.commits, pick "
                    "eligible file slices, group them, and save the plan to the timeline.",
    )
    p.add_argument("--base-path", required=True, help="the table's base path")
    p.add_argument("--props", help="clustering properties file (Hudi's hoodie.clustering.* keys)")
    p.add_argument("--dry-run", action="store_true", help="write nothing; print the plan")
    p.add_argument("--force", action="store_true", help="ignore the commit-count trigger")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    policy = load_policy(args.props)
    table = open_table(args.base_path, args.props)
    result = schedule(table, policy, force=args.force, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(result_json(result, args.dry_run), indent=2))
        return 0
    plan = result.plan
    if plan is None:
        print(f"nothing scheduled: {result.reason}")
    elif result.instant is None:
        print(f"dry run: would schedule {result.reason}")
        print(render_plan(plan))
    else:
        print(f"scheduled clustering {result.instant}: {result.reason}")
        print(render_plan(plan))
    return 0
