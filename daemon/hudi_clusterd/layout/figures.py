"""Layout quality of a table's latest snapshot, and before/after figures for one clustering."""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.plan import ClusteringPlan
from hudi_clusterd.errors import ClusterdError
from hudi_clusterd.io.table import HoodieTable
from hudi_clusterd.layout.quality import LayoutReport, files_scanned_ratio, layout_report, read_boxes

log = structlog.get_logger(__name__)


def snapshot_paths(table: HoodieTable, partitions: Sequence[str] | None = None) -> list[str]:
    view = table.file_system_view()
    wanted = None if partitions is None else set(partitions)
    return [table.storage.full_path(bf.relative_path) for bf in view.latest_base_files()
            if wanted is None or bf.partition_path in wanted]


def snapshot_report(table: HoodieTable, columns: Sequence[str]) -> LayoutReport:
    """Files-scanned ratio and overlap depth of the latest snapshot for ``columns``."""
    return layout_report(snapshot_paths(table), columns, filesystem=table.storage.fs)


def snapshot_ratio(table: HoodieTable, columns: Sequence[str]) -> float | None:
    try:
        return snapshot_report(table, columns).files_scanned_ratio
    except (ClusterdError, OSError, ValueError, KeyError) as e:
        log.warning("layout measurement failed", error=str(e))
        return None


def clustering_figures(table: HoodieTable, plan: ClusteringPlan, stats: list[WriteStat]) -> tuple[float, float] | None:
    """Files-scanned ratio of the plan's partitions before and after the clustering, on the same query domains.

    Before: the latest files of those partitions; after: the same without the replaced files, plus the new
    ones. None when the plan has no sort columns or the footers lack statistics."""
    columns = plan.strategy.sort_columns
    if not columns:
        return None
    partitions = sorted({g.partition_path for g in plan.input_groups})
    before = snapshot_paths(table, partitions)
    replaced = {table.storage.full_path(table.storage.rel_from_uri(s.data_file_path))
                for g in plan.input_groups for s in g.slices}
    written = [table.storage.full_path(ws.path) for ws in stats if ws.path]
    after = [p for p in before if p not in replaced] + written
    try:
        fs = table.storage.fs
        domains = dict(zip(columns, read_boxes(before + written, columns, filesystem=fs).domains, strict=True))
        return (files_scanned_ratio(before, columns, domains=domains, filesystem=fs),
                files_scanned_ratio(after, columns, domains=domains, filesystem=fs))
    except (ClusterdError, OSError, ValueError, KeyError) as e:
        log.warning("layout measurement failed", error=str(e))
        return None
