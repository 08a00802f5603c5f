"""``hudi-clusterd status``: what a table's timeline and latest snapshot look like."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from hudi_clusterd.domain.fs_view import FileSystemView
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.table.hoodie_table import HoodieTable

DEFAULT_SMALL_FILE_LIMIT = 314572800  # hoodie.clustering.plan.strategy.small.file.limit


@dataclass(slots=True)
class PartitionStatus:
    partition: str
    file_groups: int = 0
    base_files: int = 0
    bytes: int = 0
    small_files: int = 0


@dataclass(slots=True)
class TableStatus:
    base_path: str
    table_name: str
    table_version: int | None
    instants: dict[str, dict[str, int]]
    latest_instant: str | None
    commits_since_last_clustering: int
    last_clustering: str | None
    pending_clustering_plans: int
    partitions: list[PartitionStatus] = field(default_factory=list)
    total_file_groups: int = 0
    total_base_files: int = 0
    total_bytes: int = 0
    small_files: int = 0
    small_file_limit: int = DEFAULT_SMALL_FILE_LIMIT
    schema_fields: list[str] = field(default_factory=list)
    rows_written_by_latest_commit: int = 0


def table_status(table: HoodieTable, small_file_limit: int = DEFAULT_SMALL_FILE_LIMIT) -> TableStatus:
    """Summarise one table from a single timeline load and listing."""
    timeline: Timeline = table.timeline()
    view: FileSystemView = table.file_system_view(timeline)
    by_action: dict[str, Counter[str]] = {}
    for inst in timeline:
        by_action.setdefault(inst.action.value, Counter())[inst.state.name.lower()] += 1
    # Decode every completed commit: a damaged commit file is reported here, naming the file.
    latest_rows = 0
    for inst in timeline.commits().completed():
        latest_rows = sum(ws.num_writes for ws in table.timeline_store.commit_metadata(inst).write_stats())
    last_clustering = table.last_clustering_time(timeline)
    status = TableStatus(
        base_path=table.base_path,
        table_name=table.name,
        table_version=table.config.version,
        instants={a: dict(c) for a, c in sorted(by_action.items())},
        latest_instant=timeline.last.time if timeline.last else None,
        commits_since_last_clustering=timeline.commits_since(last_clustering),
        last_clustering=last_clustering,
        pending_clustering_plans=len(table.pending_clustering_plans(timeline)),
        small_file_limit=small_file_limit,
        schema_fields=schema_field_names(table.latest_schema(timeline)),
        rows_written_by_latest_commit=latest_rows,
    )
    parts: dict[str, PartitionStatus] = {p: PartitionStatus(p) for p in view.partitions()}
    for sl in view.latest_file_slices():
        ps = parts.setdefault(sl.partition_path, PartitionStatus(sl.partition_path))
        ps.file_groups += 1
        ps.base_files += int(sl.base_file is not None)
        ps.bytes += sl.size
        ps.small_files += int(sl.size < small_file_limit)
    status.partitions = sorted(parts.values(), key=lambda p: p.partition)
    status.total_file_groups = sum(p.file_groups for p in status.partitions)
    status.total_base_files = sum(p.base_files for p in status.partitions)
    status.total_bytes = sum(p.bytes for p in status.partitions)
    status.small_files = sum(p.small_files for p in status.partitions)
    return status


def schema_field_names(schema: str | None) -> list[str]:
    """Top-level field names of an Avro record schema (empty when unknown or unparsable)."""
    if not schema:
        return []
    try:
        parsed = json.loads(schema)
    except json.JSONDecodeError:
        return []
    fields = parsed.get("fields") if isinstance(parsed, dict) else None
    return [str(f.get("name")) for f in fields or [] if isinstance(f, dict)]


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def render(status: TableStatus) -> str:
    lines = [
        f"table {status.table_name} (version {status.table_version}) at {status.base_path}",
        f"latest instant: {status.latest_instant or '-'}",
        "instants:",
    ]
    if not status.instants:
        lines.append("  (none)")
    for action, states in status.instants.items():
        detail = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
        lines.append(f"  {action:<14} {detail}")
    lines.append(
        f"commits since the last clustering: {status.commits_since_last_clustering}"
        f" (last clustering: {status.last_clustering or 'never'})"
    )
    lines.append(f"pending clustering plans: {status.pending_clustering_plans}")
    lines.append(f"schema: {', '.join(status.schema_fields) or 'unknown'}")
    lines.append(f"rows written by the latest commit: {status.rows_written_by_latest_commit}")
    lines.append(
        f"latest snapshot: {status.total_file_groups} file groups, {status.total_base_files} base files, "
        f"{human_bytes(status.total_bytes)}, {status.small_files} small (< {human_bytes(status.small_file_limit)})"
    )
    if status.partitions:
        width = max(9, *(len(p.partition or '(root)') for p in status.partitions))
        lines.append(f"  {'partition':<{width}}  {'groups':>7}  {'files':>7}  {'bytes':>10}  {'small':>6}")
        for p in status.partitions:
            lines.append(
                f"  {p.partition or '(root)':<{width}}  {p.file_groups:>7}  {p.base_files:>7}  "
                f"{human_bytes(p.bytes):>10}  {p.small_files:>6}"
            )
    return "\n".join(lines)


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "status", help="show a table's timeline and latest snapshot",
        description="Instants by action and state, file groups and base files per partition, total bytes, "
                    "small files, and commits since the last clustering.",
    )
    p.add_argument("--base-path", required=True, help="the table's base path (folder or URI)")
    p.add_argument("--small-file-limit", type=int, default=DEFAULT_SMALL_FILE_LIMIT,
                   help="bytes under which a base file counts as small (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    status = table_status(HoodieTable.open(args.base_path), args.small_file_limit)
    if args.json:
        d: dict[str, Any] = asdict(status)
        print(json.dumps(d, indent=2))
    else:
        print(render(status))
    return 0
