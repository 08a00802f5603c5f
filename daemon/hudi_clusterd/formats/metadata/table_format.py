"""What a table version decides about its metadata table's records and files: one ``MetadataTableFormat`` per
version.

Every rule that differs between Hudi 0.15 (table version 6), Hudi 1.0.x (version 8) and Hudi 1.1/1.2 (version 9,
and version 8 when these releases write it) is an attribute here, so that the record, key, statistics, commit and
rollback code asks the format instead of comparing version numbers:

- the default record schema: the ``HoodieMetadataRecord`` writer schema of the release line that writes the
  version (0.15's for 6, 1.0.x's for 8, 1.2's for 9). A file slice that already carries a schema (its base
  HFile's, else its latest log block's) keeps it: Hudi 1.2 writing version 8 carries 1.2's schema;
- which columns are indexed (0.15's rule, or 1.x's with index definitions), whether Spark's list paths are named
  ``.list.element``, whether values carry value types by default (index version V2: version 9), whether the
  column statistics carry ``isTightBound``/``valueType`` and records ``SecondaryIndexMetadata`` (1.x), and
  whether partition statistics exist (1.x);
- how a deltacommit lays out its files: 1.x writes a new log file per instant (named after the instant, version
  1), 0.15 the next log version of the slice's base instant, and records the written files in the inflight
  state's write stats; 0.15 names the metadata table's own rollback of ``R`` ``R006``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hudi_clusterd.formats.metadata.records import RecordSchema, release_schema


@dataclass(frozen=True, slots=True)
class MetadataTableFormat:
    """The metadata-table rules of one table version (see the module notes); get one with `for_table_version`."""

    table_version: int
    release: str
    """The Hudi release line that writes the version: ``0.15``, ``1.0`` or ``1.2``."""
    schema_release: str
    """The name of the default record schema (``records.SCHEMA_RELEASES``)."""
    index_definitions: bool
    """The index definitions (``.hoodie/.index_defs/index.json``) set the index version and indexed columns."""
    value_types_by_default: bool
    """Without an index definition saying otherwise, statistics are index version V2 (typed values)."""
    legacy_column_selection: bool
    """0.15's ``getColumnsToIndex``: every writer-schema field, the five meta fields first, no type filter."""
    list_element_paths: bool
    """Spark's ``.array`` list paths are matched and named ``.list.element``."""
    hudi_1_fields: bool
    """Records carry 1.x's fields: ``isTightBound``/``valueType`` in column statistics, ``SecondaryIndexMetadata``
    (a schema without them drops them when encoding)."""
    partition_stats: bool
    """The ``partition_stats`` partition exists for this version."""
    log_file_per_instant: bool
    """A deltacommit writes a new log file named after its own instant (1.x); else it appends the next log version
    to the slice's base instant (0.15)."""
    inflight_write_stats: bool
    """The deltacommit's inflight state lists the files it will write (0.15); 1.x leaves it empty."""
    rollback_suffix: str
    """What the metadata table's own rollback of data rollback ``R`` appends to ``R`` (0.15: ``006``)."""

    @property
    def schema(self) -> RecordSchema:
        """The default record schema: for a file slice carrying none yet."""
        return release_schema(self.schema_release)


HUDI_0_15 = MetadataTableFormat(
    table_version=6, release="0.15", schema_release="v6", index_definitions=False, value_types_by_default=False,
    legacy_column_selection=True, list_element_paths=False, hudi_1_fields=False, partition_stats=False,
    log_file_per_instant=False, inflight_write_stats=True, rollback_suffix="006")
HUDI_1_0 = MetadataTableFormat(
    table_version=8, release="1.0", schema_release="v8", index_definitions=True, value_types_by_default=False,
    legacy_column_selection=False, list_element_paths=True, hudi_1_fields=True, partition_stats=True,
    log_file_per_instant=True, inflight_write_stats=False, rollback_suffix="")
HUDI_1_2 = MetadataTableFormat(
    table_version=9, release="1.2", schema_release="v9", index_definitions=True, value_types_by_default=True,
    legacy_column_selection=False, list_element_paths=True, hudi_1_fields=True, partition_stats=True,
    log_file_per_instant=True, inflight_write_stats=False, rollback_suffix="")


def for_table_version(table_version: int) -> MetadataTableFormat:
    """The format of ``table_version``: 0.15's up to version 6 (and 7), 1.0.x's for 8, 1.2's from 9 on."""
    if table_version < 8:
        return HUDI_0_15
    return HUDI_1_0 if table_version == 8 else HUDI_1_2
