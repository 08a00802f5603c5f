"""Keeping a data table's metadata table true: the one entry point commit, rollback and recovery use.

A clustering ``T`` that commits on a table with a metadata table first completes a metadata deltacommit ``T``,
then (back to back, under the data table's lock) the data ``replacecommit``, as Apache Hudi's own clustering does:

1. ``T.deltacommit.requested`` (empty), then ``T.deltacommit.inflight`` (layout 2: an empty Avro commit record;
   version 6: JSON naming the log files about to be written, which Hudi's listing-based rollback reads);
2. one new log file per touched file group of each maintained partition (``files``, ``column_stats``,
   ``partition_stats``), each holding one HFile data block: never an append to a file another writer wrote;
3. the completed deltacommit, with a write stat per log file and the record schema in ``extraMetadata``.

Readers merge only blocks of completed data instants, so until the data ``replacecommit`` completes they see
nothing of ``T``. Rolling back ``T`` (a failed or withdrawn attempt) first rolls back its metadata deltacommit,
before the data table's rollback completes: a metadata rollback instant that deletes ``T``'s log files, then ``T``'s
metadata instant files. Both steps resume after a crash. When Hudi has compacted the metadata table past ``T``
the rollback is refused, as Hudi refuses it.

What the daemon does not maintain is refused before anything is written (`MetadataTable.check_supported`).
"""

from __future__ import annotations

from collections.abc import Sequence

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.instant import Action
from hudi_clusterd.domain.table_config import METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT
from hudi_clusterd.errors import MetadataTableError, TableBusyError
from hudi_clusterd.formats.metadata import records as rec
from hudi_clusterd.table.metadata.base import MAINTAINED, PROPERTIES
from hudi_clusterd.table.metadata.commit import MetadataCommits

UNCHANGED_PREFIXES = (rec.SECONDARY_INDEX_PREFIX,)
"""Partitions a clustering does not change (Hudi skips secondary indexes on CLUSTER): accepted, left alone."""


class MetadataTable(MetadataCommits):
    """The metadata table of one data table: what is refused, its commits and rollbacks, and its records. One
    per table handle (`HoodieTable.metadata_table`), holding the column statistics read ahead of a commit."""

    def check_supported(self) -> None:
        """Refuse (``MetadataTableError``, one line naming the key and what to change) a metadata table the
        daemon would not keep exactly as Hudi does, and (``TableBusyError``) one whose partitions, upgrade or
        compaction a writer is half way through. Writes nothing."""
        self.reload()  # a writer may have upgraded the metadata table since it was last read
        data_props = self.data_storage.full_path(PROPERTIES)
        inflight = [p for p in (self.data_config.raw.get(METADATA_PARTITIONS_INFLIGHT) or "").split(",") if p]
        if inflight:
            raise TableBusyError(
                f"{data_props}: {METADATA_PARTITIONS_INFLIGHT}={','.join(inflight)}: metadata partitions are still "
                "being built (by a writer, or Hudi's async indexer); hudi-clusterd waits until they are built")
        for p in self.partitions:
            if p in MAINTAINED or p.startswith(UNCHANGED_PREFIXES):
                continue
            what = {rec.RECORD_INDEX: "the record index", rec.BLOOM_FILTERS: "the bloom filter index"}.get(
                p, "expression indexes" if p.startswith(rec.EXPRESSION_INDEX_PREFIX) else "this partition")
            raise MetadataTableError(
                f"{data_props}: {METADATA_PARTITIONS}={','.join(self.partitions)}: hudi-clusterd does not maintain "
                f"{what} ({p}); it keeps files, column_stats and partition_stats (and leaves secondary indexes "
                f"alone). Drop {p} from the metadata table (Hudi: hoodie.metadata.{_enable_key(p)}=false on a "
                "write, or DROP INDEX) to let the daemon cluster")
        if rec.FILES not in self.partitions:
            raise MetadataTableError(f"{data_props}: {METADATA_PARTITIONS}={','.join(self.partitions)} does not "
                                     "include files; a metadata table without its files partition is not supported")
        mdt_props = self.storage.full_path(PROPERTIES)
        version = self.config.version
        if version != self.data_config.version:
            raise TableBusyError(
                f"{mdt_props}: hoodie.table.version={version} differs from the data table's "
                f"{self.data_config.version}; an upgrade is half done. hudi-clusterd waits for a Hudi writer to "
                "finish it (on its next write)")
        timeline = self.timeline_store().load()
        pending = timeline.pending().of_actions((Action.COMPACTION, Action.LOG_COMPACTION)).instants
        if pending:
            p0 = pending[0]
            raise TableBusyError(
                f"{self.source}: metadata table {p0.action.value} {p0.time} is pending; hudi-clusterd waits until it "
                "completes (a Hudi writer completes it within its write, or on its next write after a crash)")
        files_groups = self._file_slices(rec.FILES)
        if len(files_groups) != 1:
            raise MetadataTableError(
                f"{self.storage.full_path(rec.FILES)}: the files partition has {len(files_groups)} file groups; "
                "hudi-clusterd maintains a files partition of exactly one (Hudi's default)")
        for p in self.partitions:
            if p in MAINTAINED and not self._file_slices(p):
                raise MetadataTableError(f"{self.storage.full_path(p)}: metadata partition {p} has no file group; "
                                         "the metadata table is damaged or not initialised")

    def prepare(self, schema: str | None, stats: Sequence[WriteStat]) -> None:
        """Read the column statistics of new files ahead of their commit (outside the table lock), when the
        metadata table indexes columns; the commit then finds them here."""
        self.indexes.prepare(schema, stats)


def _enable_key(partition: str) -> str:
    return {rec.RECORD_INDEX: "record.index.enable", rec.BLOOM_FILTERS: "index.bloom.filter.enable"}.get(
        partition, "index.expression.enable")
