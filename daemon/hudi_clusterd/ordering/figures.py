"""Layout quality of a table's latest snapshot, and before/after figures for one clustering.

The figures of a clustering are computed from the file-system view the executor already holds (no listing):
before, the latest files of the plan's partitions; after, the same without the replaced files plus the new ones,
on the same query domains. The whole-table ratio after a clustering is the view's latest files with the same
substitution.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.fs_view import FileSystemView
from hudi_clusterd.domain.plan import ClusteringPlan
from hudi_clusterd.errors import ClusterdError
from hudi_clusterd.ordering.quality import LayoutReport, files_scanned_ratio, layout_report, read_boxes
from hudi_clusterd.storage import Storage
from hudi_clusterd.table.hoodie_table import HoodieTable

log = structlog.get_logger(__name__)


def _latest_paths(storage: Storage, view: FileSystemView, partitions: Sequence[str] | None = None) -> list[str]:
    wanted = None if partitions is None else set(partitions)
    return [storage.full_path(bf.relative_path) for bf in view.latest_base_files()
            if wanted is None or bf.partition_path in wanted]


Clustered = tuple[ClusteringPlan, Sequence[WriteStat]]
"""A committed clustering: its plan and the write stats of the files it wrote."""


def _after(storage: Storage, before: list[str], done: Sequence[Clustered]) -> list[str]:
    replaced = {storage.full_path(storage.rel_from_uri(s.data_file_path))
                for plan, _ in done for g in plan.input_groups for s in g.slices}
    written = [storage.full_path(ws.path) for _, stats in done for ws in stats if ws.path]
    return [p for p in before if p not in replaced] + written


def snapshot_report(table: HoodieTable, columns: Sequence[str]) -> LayoutReport:
    """Files-scanned ratio and overlap depth of the latest snapshot for ``columns`` (lists the table)."""
    return layout_report(_latest_paths(table.storage, table.file_system_view()), columns,
                         filesystem=table.storage.fs)


def snapshot_ratio(table: HoodieTable, columns: Sequence[str]) -> float | None:
    """The latest snapshot's files-scanned ratio for ``columns`` (lists the table); None when not measurable."""
    try:
        return snapshot_report(table, columns).files_scanned_ratio
    except (ClusterdError, OSError, ValueError, KeyError) as e:
        _failed("snapshot", e)
        return None


def _failed(what: str, error: Exception) -> None:
    log.warning("layout measurement failed", measurement=what, error=str(error))


def ratio_after(storage: Storage, view: FileSystemView, done: Sequence[Clustered], columns: Sequence[str]
                ) -> float | None:
    """The whole table's files-scanned ratio once the clusterings ``done`` committed over ``view``; None when
    the footers do not tell."""
    try:
        paths = _after(storage, _latest_paths(storage, view), done)
        return files_scanned_ratio(paths, columns, filesystem=storage.fs)
    except (ClusterdError, OSError, ValueError, KeyError) as e:
        _failed("snapshot", e)
        return None


def clustering_figures(storage: Storage, view: FileSystemView, plan: ClusteringPlan, stats: Sequence[WriteStat]
                       ) -> tuple[float, float] | None:
    """Files-scanned ratio of the plan's partitions before and after the clustering, on the same query domains.
    None when the plan has no sort columns or the footers lack statistics."""
    columns = plan.strategy.work_order.sort_columns
    if not columns:
        return None
    partitions = sorted({g.partition_path for g in plan.input_groups})
    before = _latest_paths(storage, view, partitions)
    after = _after(storage, before, [(plan, stats)])
    written = [storage.full_path(ws.path) for ws in stats if ws.path]
    try:
        fs = storage.fs
        domains = dict(zip(columns, read_boxes(before + written, columns, filesystem=fs).domains, strict=True))
        return (files_scanned_ratio(before, columns, domains=domains, filesystem=fs),
                files_scanned_ratio(after, columns, domains=domains, filesystem=fs))
    except (ClusterdError, OSError, ValueError, KeyError) as e:
        _failed("clustering", e)
        return None
