"""Column statistics (record type 3) and partition statistics (type 6) of the metadata table, computed from
parquet footers exactly as Apache Hudi's writers compute them: 0.15 for table version 6, 1.2 for 8 and 9.

Rules (sources: ``HoodieTableMetadataUtil``, ``HoodieMetadataPayload``, ``ParquetUtils``, ``stats/ValueType``,
``HoodieAvroWrapperUtils``, ``FileFormatUtils``, ``HoodieMetadataWriteUtils`` of each release):

- Index version: 1.x reads the ``version`` of the ``column_stats`` (else ``partition_stats``) definition in
  ``.hoodie/.index_defs/index.json``; without one, V2 from table version 9, V1 below (0.15 is V1 in effect).
- Indexed columns: see ``indexed_columns`` (0.15: the column list or every writer-schema field, meta fields
  first; 1.x: ``_hoodie_commit_time``, ``_hoodie_partition_path``, ``_hoodie_record_key``, then the index
  definition's ``sourceFields`` or the first 32 supported fields).
- A file's range per column comes from the footer only: every row group's chunk whose dotted path is an indexed
  column (1.x also matches Spark's ``.array`` list paths and names them ``.list.element``), merged over row
  groups. ``valueCount`` = the chunk's value count, ``totalSize``/``totalUncompressedSize`` = its sizes,
  ``nullCount`` = the statistics' null count, or the value count when the chunk has no statistics at all.
  Without min/max parquet-mr still hands back its primitive defaults (0, 0.0, false) for numeric and boolean
  chunks, and Hudi stores them; binary chunks give nulls. A float min/max of NaN is dropped (defaults again),
  a zero min becomes -0.0 and a zero max +0.0 (parquet-mr's reader).
- V2 (1.x, table version 9): the value type comes from the parquet annotation (or the physical type); values are
  stored in the wrapper of the type's primitive (dates in ``IntWrapper``, timestamps in ``LongWrapper``,
  decimals as their unscaled two's-complement bytes in ``BytesWrapper`` with ``"precision,scale"`` as
  ``additionalInfo``). An annotation Hudi has no value type for (``INT(8|16|…)``, unsigned, ``ENUM``, ``JSON``,
  ``BSON``, ``UUID`` values, ``INT96``…) makes Hudi drop the whole file's statistics (it logs and writes none).
- V1 (0.15, and 1.x below V2): no value type; strings ``StringWrapper``, dates ``DateWrapper``, decimals
  ``DecimalWrapper`` rescaled to 15, other binary ``BytesWrapper``, numbers their own wrappers; a non-decimal
  fixed or ``INT96`` value fails Hudi's whole commit.
- Partition statistics (1.x only, ``HoodieMetadataWriteUtils.convertMetadataToPartitionStatRecords``) are
  recomputed for every partition the commit writes: per column, the ranges of the commit's new files (from
  their footers) merged with the stored column statistics of the partition's other latest files: per file
  group not written by the commit, its latest file slice as of the commit, the groups replaced by earlier
  completed replacecommits left out. The groups the commit itself replaces stay in: Hudi 1.2 compares file
  *names* with the replaced file-group *ids*, so a clustering counts its rows twice (the golden clustering's
  partition value counts are the new files' plus the replaced files'). Merge: min of mins, max of maxes (nulls
  ignored, Java ``compareTo``), counts and sizes summed, V2 values first brought to the table schema's type;
  ``fileName`` is the partition path, ``isTightBound`` true (the ``column_stats`` partition exists), and the
  record replaces the stored one when merged.

The package splits by concern: ``values`` (value types, index versions, ranges), ``columns`` (schema walking
and indexed columns), ``footer`` (a file's ranges from its footer), ``merge`` (merging and partition ranges) and
``record_codec`` (keys, records, and stored records back to ranges). The names importers use are re-exported
here.
"""

from hudi_clusterd.formats.metadata.column_stats.columns import (
    ALWAYS_INDEXED_META_FIELDS,
    DEFAULT_MAX_COLUMNS,
    META_FIELDS,
    OPERATION_FIELD,
    column_value_infos,
    index_version,
    indexed_columns,
)
from hudi_clusterd.formats.metadata.column_stats.footer import file_column_ranges
from hudi_clusterd.formats.metadata.column_stats.merge import merge_ranges, partition_ranges
from hudi_clusterd.formats.metadata.column_stats.record_codec import (
    column_stats_key,
    column_stats_key_prefix,
    column_stats_records,
    partition_stats_key,
    partition_stats_records,
    range_from_record,
)
from hudi_clusterd.formats.metadata.column_stats.values import (
    NAMESPACE,
    STRING_INFO,
    V1_INFO,
    ColumnRange,
    IndexVersion,
    ValueInfo,
    ValueType,
)

__all__ = [
    "ALWAYS_INDEXED_META_FIELDS",
    "DEFAULT_MAX_COLUMNS",
    "META_FIELDS",
    "NAMESPACE",
    "OPERATION_FIELD",
    "STRING_INFO",
    "V1_INFO",
    "ColumnRange",
    "IndexVersion",
    "ValueInfo",
    "ValueType",
    "column_stats_key",
    "column_stats_key_prefix",
    "column_stats_records",
    "column_value_infos",
    "file_column_ranges",
    "index_version",
    "indexed_columns",
    "merge_ranges",
    "partition_ranges",
    "partition_stats_key",
    "partition_stats_records",
    "range_from_record",
]
