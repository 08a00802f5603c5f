"""``hudi-clusterd plans``: list pending clustering plans with their age and size."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from hudi_clusterd.commands.status import human_bytes
from hudi_clusterd.table.hoodie_table import HoodieTable


def pending_plans(table: HoodieTable, now: datetime | None = None) -> list[dict[str, Any]]:
    out = []
    for p in table.pending_clustering_plans():
        out.append({
            "instant": p.instant.time,
            "state": p.instant.state.name.lower(),
            "age_seconds": round(table.instant_age_seconds(p.instant.time, now), 1),
            "groups": len(p.plan.input_groups),
            "slices": p.plan.num_slices,
            "input_bytes": p.plan.input_bytes,
            "output_file_groups": sum(g.num_output_file_groups for g in p.plan.input_groups),
            "sort_columns": list(p.plan.strategy.sort_columns),
        })
    return out


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "plans", help="list pending clustering plans", description="Pending clustering plans, oldest first.")
    p.add_argument("--base-path", required=True, help="the table's base path")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    plans = pending_plans(HoodieTable.open(args.base_path))
    if args.json:
        print(json.dumps(plans, indent=2))
        return 0
    if not plans:
        print("no pending clustering plans")
        return 0
    print(f"  {'instant':<17}  {'state':<9}  {'age':>9}  {'groups':>6}  {'slices':>6}  {'input':>10}")
    for p in plans:
        print(f"  {p['instant']:<17}  {p['state']:<9}  {p['age_seconds']:>8.0f}s  {p['groups']:>6}  "
              f"{p['slices']:>6}  {human_bytes(p['input_bytes']):>10}")
    return 0
