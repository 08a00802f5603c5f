"""``hudi-clusterd layout``: how well the latest snapshot is laid out for queries on some columns."""

from __future__ import annotations

import argparse
import json
from typing import Any

from hudi_clusterd.ordering.figures import snapshot_report
from hudi_clusterd.table.hoodie_table import HoodieTable


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "layout", help="report the files-scanned ratio and overlap depth of the latest snapshot",
        description="Files-scanned ratio: the mean share of files whose min/max box meets a fixed mixed workload "
                    "of range queries on the columns (1.0 = every query reads every file; lower is better). "
                    "Overlap depth: how many files' ranges cover a value of each column. Footers only.",
    )
    p.add_argument("--base-path", required=True, help="the table's base path")
    p.add_argument("--columns", required=True, help="comma-separated columns, e.g. lat,lon")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    columns = [c.strip() for c in args.columns.split(",") if c.strip()]
    report = snapshot_report(HoodieTable.open(args.base_path), columns)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    print(f"{report.files} files, {report.row_groups} row groups; columns {', '.join(report.columns)}")
    print(f"files-scanned ratio:      {report.files_scanned_ratio:.4f}")
    print(f"row-groups-scanned ratio: {report.row_groups_scanned_ratio:.4f}")
    for o in report.overlap:
        print(f"overlap depth of {o.column}: max {o.max_depth}, mean {o.mean_depth:.2f}"
              + (f" ({o.files_without_stats} files without statistics)" if o.files_without_stats else ""))
    return 0
