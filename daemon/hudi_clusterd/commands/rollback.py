"""``hudi-clusterd rollback``: roll back a pending clustering instant."""

from __future__ import annotations

import argparse
from typing import Any

from hudi_clusterd.commands.common import load_policy, open_table
from hudi_clusterd.domain.instant import Action, State
from hudi_clusterd.errors import MetadataDecodeError, PlanError
from hudi_clusterd.ops.commit import rollback_clustering
from hudi_clusterd.ops.ownership import Ownership


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "rollback", help="roll back a pending clustering instant",
        description="Delete the files a pending clustering wrote (named by its markers) and its inflight state. "
                    "The plan stays requested for a retry unless --purge removes it too.",
    )
    p.add_argument("--base-path", required=True, help="the table's base path")
    p.add_argument("--instant", required=True, help="the clustering instant time")
    p.add_argument("--props", help="properties file naming the writers' lock (hoodie.write.lock.*)")
    p.add_argument("--purge", action="store_true", help="also delete the requested plan")
    p.add_argument("--force", action="store_true",
                   help="roll back even if a live executor seems to own it, or its plan cannot be read")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    load_policy(args.props)  # a file with invalid keys is refused, as for the other commands
    table = open_table(args.base_path, args.props)
    inst = table.timeline().find(args.instant, Action.CLUSTERING)
    if inst is None:
        raise PlanError(f"no replacecommit {args.instant} on the timeline of {table.base_path}")
    if inst.is_completed:
        raise PlanError(f"clustering {args.instant} is completed; a completed clustering is not rolled back here")
    try:
        clustering = table.is_clustering_instant(inst)
    except MetadataDecodeError as e:
        if not args.force:
            raise MetadataDecodeError(f"{e}; --force rolls back an instant whose plan cannot be read") from e
        clustering = True
    if not clustering:
        raise PlanError(f"replacecommit {args.instant} is not a clustering plan; refusing to roll it back")
    live = inst.state is State.INFLIGHT and Ownership().owner_alive(table, args.instant)
    if live and not args.force:
        raise PlanError(f"clustering {args.instant} is being executed by a live process; stop it first or use "
                        "--force")
    result = rollback_clustering(table, args.instant, purge=args.purge)
    deleted = len(result.deleted_files) if result else 0
    kept = "plan purged" if args.purge else "plan kept as requested"
    print(f"rolled back {args.instant}: {deleted} files deleted, {kept}")
    return 0
