"""What table operations need from a data engine; ``hudi_clusterd.engine`` provides it for Spark."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.plan import ClusteringPlan
from hudi_clusterd.formats.log import SliceMerge
from hudi_clusterd.table.table_ref import TableRef


class GroupRunner(Protocol):
    """Rewrites clustering groups into new file groups; safe to call from several threads at once."""

    def run_group(self, table: TableRef, instant: str, plan: ClusteringPlan, index: int,
                  files: Sequence[BaseFile], merge: SliceMerge | None = None) -> list[WriteStat]:
        """Write group ``index`` of ``plan`` (whose base files, with their sizes, are ``files``) as new file
        groups of ``instant``, following the plan's work order; its slices with log files are read merged under
        ``merge``. Returns one write stat per file written."""
        ...

    def cancel(self, table: TableRef, instant: str) -> None:
        """Cancel every running job of this instant (best effort)."""
        ...

    def close(self) -> None:
        """Release the engine (stop a session it owns)."""
        ...
