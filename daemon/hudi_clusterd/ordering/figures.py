"""Layout quality of a table's latest snapshot, and before/after figures for one clustering.

The figures of a clustering are computed from the file-system view the executor already holds (no listing):
before, the latest files of the plan's partitions; after, the same without the replaced files plus the new ones,
on the same query domains. The whole-table ratio after a clustering is the view's latest files with the same
substitution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow.parquet as pq
import structlog

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.fs_view import FileSystemView
from hudi_clusterd.domain.plan import ClusteringPlan
from hudi_clusterd.errors import ClusterdError
from hudi_clusterd.ordering.quality import FooterReader, LayoutReport, files_scanned_ratio, layout_report, read_boxes
from hudi_clusterd.storage import Storage
from hudi_clusterd.table.hoodie_table import HoodieTable

log = structlog.get_logger(__name__)


def _footers(storage: Storage) -> FooterReader:
    """Reads the footer of a file of ``storage`` (paths relative to its base path)."""

    def read(rel: str) -> Any:
        with storage.open_input_file(rel) as f:
            return pq.read_metadata(f)

    return read


def _latest_paths(view: FileSystemView, partitions: Sequence[str] | None = None) -> list[str]:
    wanted = None if partitions is None else set(partitions)
    return [bf.relative_path for bf in view.latest_base_files()
            if wanted is None or bf.partition_path in wanted]


Clustered = tuple[ClusteringPlan, Sequence[WriteStat]]
"""A committed clustering: its plan and the write stats of the files it wrote."""


def _after(storage: Storage, before: list[str], done: Sequence[Clustered]) -> list[str]:
    replaced = {storage.rel_from_uri(s.data_file_path) for plan, _ in done for g in plan.input_groups for s in g.slices}
    written = [ws.path for _, stats in done for ws in stats if ws.path]
    return [p for p in before if p not in replaced] + written


def snapshot_report(table: HoodieTable, columns: Sequence[str]) -> LayoutReport:
    """Files-scanned ratio and overlap depth of the latest snapshot for ``columns`` (lists the table)."""
    return layout_report(_latest_paths(table.file_system_view()), columns, read_footer=_footers(table.storage))


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
        paths = _after(storage, _latest_paths(view), done)
        return files_scanned_ratio(paths, columns, read_footer=_footers(storage))
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
    before = _latest_paths(view, partitions)
    after = _after(storage, before, [(plan, stats)])
    written = [ws.path for ws in stats if ws.path]
    try:
        read = _footers(storage)
        domains = dict(zip(columns, read_boxes(before + written, columns, read_footer=read).domains, strict=True))
        return (files_scanned_ratio(before, columns, domains=domains, read_footer=read),
                files_scanned_ratio(after, columns, domains=domains, read_footer=read))
    except (ClusterdError, OSError, ValueError, KeyError) as e:
        _failed("clustering", e)
        return None
