"""``hoodie.properties``: a typed, read-mostly view of what the table says about itself.

The raw key/value map is kept so that keys we do not model survive a rewrite unchanged.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from hudi_clusterd.domain.merging import CDC_ENABLED, TableMerging
from hudi_clusterd.domain.timeline_layout import (
    DEFAULT_HISTORY_PATH,
    DEFAULT_TIMELINE_PATH,
    LAYOUT_1,
    TimelineLayout,
    layout_2,
)
from hudi_clusterd.errors import TableError, TimelineError, UnsupportedTableError

NEW_TABLE_VERSION = 6
"""The version of the tables the daemon's own ingestion creates."""
LAYOUT_OF_VERSION = {6: 1, 8: 2, 9: 2}
"""The table versions the daemon reads and writes, and the timeline layout each one uses."""
NATIVE_FORMAT = "native"

NAME = "hoodie.table.name"
DATABASE = "hoodie.database.name"
TYPE = "hoodie.table.type"
VERSION = "hoodie.table.version"
LAYOUT_VERSION = "hoodie.timeline.layout.version"
TIMELINE_PATH = "hoodie.timeline.path"
TIMELINE_HISTORY_PATH = "hoodie.timeline.history.path"
TABLE_FORMAT = "hoodie.table.format"
INITIAL_VERSION = "hoodie.table.initial.version"
RECORD_MERGE_MODE = "hoodie.record.merge.mode"
ARCHIVE_FOLDER = "hoodie.archivelog.folder"
RECORD_KEY_FIELDS = "hoodie.table.recordkey.fields"
PARTITION_FIELDS = "hoodie.table.partition.fields"
PRECOMBINE_FIELD = "hoodie.table.precombine.field"
ORDERING_FIELDS = "hoodie.table.ordering.fields"  # Hudi 1.x's name for the precombine field, also at version 6
KEYGEN_CLASS = "hoodie.table.keygenerator.class"
KEYGEN_TYPE = "hoodie.table.keygenerator.type"  # Hudi 1.x writes the type instead of the class
BASE_FILE_FORMAT = "hoodie.table.base.file.format"
POPULATE_META_FIELDS = "hoodie.populate.meta.fields"
CREATE_SCHEMA = "hoodie.table.create.schema"
METADATA_PARTITIONS = "hoodie.table.metadata.partitions"
METADATA_PARTITIONS_INFLIGHT = "hoodie.table.metadata.partitions.inflight"
TIMELINE_TIMEZONE = "hoodie.table.timeline.timezone"
HIVE_STYLE = "hoodie.datasource.write.hive_style_partitioning"
URL_ENCODE = "hoodie.datasource.write.partitionpath.urlencode"
DROP_PARTITION_COLUMNS = "hoodie.datasource.write.drop.partition.columns"
CHECKSUM = "hoodie.table.checksum"

SIMPLE_KEYGEN = "org.apache.hudi.keygen.SimpleKeyGenerator"
COMPLEX_KEYGEN = "org.apache.hudi.keygen.ComplexKeyGenerator"
NONPARTITIONED_KEYGEN = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
TIMESTAMP_KEYGEN = "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
CUSTOM_KEYGEN = "org.apache.hudi.keygen.CustomKeyGenerator"

# Hudi 1.x's KeyGeneratorType -> the key generator class it stands for (the types a copy-on-write table can name).
KEYGEN_CLASS_OF_TYPE = {
    "SIMPLE": SIMPLE_KEYGEN,
    "SIMPLE_AVRO": "org.apache.hudi.keygen.SimpleAvroKeyGenerator",
    "COMPLEX": COMPLEX_KEYGEN,
    "COMPLEX_AVRO": "org.apache.hudi.keygen.ComplexAvroKeyGenerator",
    "TIMESTAMP": TIMESTAMP_KEYGEN,
    "TIMESTAMP_AVRO": "org.apache.hudi.keygen.TimestampBasedAvroKeyGenerator",
    "CUSTOM": CUSTOM_KEYGEN,
    "CUSTOM_AVRO": "org.apache.hudi.keygen.CustomAvroKeyGenerator",
    "NON_PARTITION": NONPARTITIONED_KEYGEN,
    "NON_PARTITION_AVRO": "org.apache.hudi.keygen.NonpartitionedAvroKeyGenerator",
    "GLOBAL_DELETE": "org.apache.hudi.keygen.GlobalDeleteKeyGenerator",
    "GLOBAL_DELETE_AVRO": "org.apache.hudi.keygen.GlobalAvroDeleteKeyGenerator",
    "SPARK_SQL": "org.apache.spark.sql.hudi.command.SqlKeyGenerator",
    "SPARK_SQL_UUID": "org.apache.spark.sql.hudi.command.UuidKeyGenerator",
    "SPARK_SQL_MERGE_INTO": "org.apache.spark.sql.hudi.command.MergeIntoKeyGenerator",
}


class TableType(str, Enum):
    COPY_ON_WRITE = "COPY_ON_WRITE"
    MERGE_ON_READ = "MERGE_ON_READ"


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (value or "").split(",") if p.strip())


def _bool(value: str | None, default: bool) -> bool:
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() == "true"


def table_checksum(database: str, table_name: str) -> int:
    """Hudi's ``hoodie.table.checksum``: CRC32 of ``<database>.<table>`` (database "" when unset)."""
    return zlib.crc32(f"{database}.{table_name}".encode())


@dataclass(frozen=True, slots=True)
class TableConfig:
    """What ``hoodie.properties`` says; ``raw`` holds every key as read."""

    raw: Mapping[str, str] = field(default_factory=dict)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.raw.get(key, default)

    @property
    def name(self) -> str:
        return self.raw.get(NAME, "")

    @property
    def database(self) -> str:
        return self.raw.get(DATABASE, "")

    @property
    def table_type(self) -> str:
        return self.raw.get(TYPE, TableType.COPY_ON_WRITE.value).upper()

    @property
    def version(self) -> int | None:
        v = self.raw.get(VERSION)
        return int(v) if v and v.strip().isdigit() else None

    @property
    def layout_version(self) -> int | None:
        v = self.raw.get(LAYOUT_VERSION)
        return int(v) if v and v.strip().isdigit() else None

    @property
    def timeline_layout(self) -> TimelineLayout:
        """Where and how this table's instant files are stored (layout 2 for versions 8 and 9)."""
        if self.layout_version is not None and self.layout_version >= 2:
            return layout_2(self.raw.get(TIMELINE_PATH))
        return LAYOUT_1

    @property
    def record_key_fields(self) -> tuple[str, ...]:
        return _split(self.raw.get(RECORD_KEY_FIELDS))

    @property
    def partition_fields(self) -> tuple[str, ...]:
        """Partition fields; empty for a non-partitioned table (also when the key generator says so)."""
        if self.key_generator == NONPARTITIONED_KEYGEN:
            return ()
        # CustomKeyGenerator writes "field:type"; the field name is what matters here.
        return tuple(f.split(":", 1)[0] for f in _split(self.raw.get(PARTITION_FIELDS)))

    @property
    def precombine_field(self) -> str | None:
        """``hoodie.table.precombine.field``, or the first of Hudi 1.x's ``hoodie.table.ordering.fields``."""
        v = (self.raw.get(PRECOMBINE_FIELD) or "").strip()
        return v or next(iter(_split(self.raw.get(ORDERING_FIELDS))), None)

    @property
    def key_generator(self) -> str:
        """The key generator class: ``hoodie.table.keygenerator.class``, else the class of Hudi 1.x's
        ``hoodie.table.keygenerator.type``; empty when neither is set."""
        named = self.raw.get(KEYGEN_CLASS, "").strip()
        return named or KEYGEN_CLASS_OF_TYPE.get(self.raw.get(KEYGEN_TYPE, "").strip().upper(), "")

    @property
    def hive_style_partitioning(self) -> bool:
        return _bool(self.raw.get(HIVE_STYLE), False)

    @property
    def url_encode_partitioning(self) -> bool:
        return _bool(self.raw.get(URL_ENCODE), False)

    @property
    def populate_meta_fields(self) -> bool:
        return _bool(self.raw.get(POPULATE_META_FIELDS), True)

    @property
    def base_file_format(self) -> str:
        return self.raw.get(BASE_FILE_FORMAT, "PARQUET").upper()

    @property
    def metadata_partitions(self) -> tuple[str, ...]:
        return _split(self.raw.get(METADATA_PARTITIONS)) + _split(self.raw.get(METADATA_PARTITIONS_INFLIGHT))

    @property
    def timeline_timezone_utc(self) -> bool:
        return self.raw.get(TIMELINE_TIMEZONE, "LOCAL").strip().upper() == "UTC"

    @property
    def create_schema(self) -> str | None:
        return self.raw.get(CREATE_SCHEMA)

    def check_readable(self, source: str) -> None:
        """Refuse tables this daemon does not understand, naming the file and the offending key."""
        version = self.raw.get(VERSION)
        if version is None:
            raise TableError(f"{source}: missing {VERSION}")
        if self.version not in LAYOUT_OF_VERSION:
            raise UnsupportedTableError(
                f"{source}: {VERSION}={version} is not supported; hudi-clusterd reads and writes table versions "
                "6 (Hudi 0.14/0.15), 8 (Hudi 1.0) and 9 (Hudi 1.1 and later)"
            )
        layout = LAYOUT_OF_VERSION[self.version]
        if self.layout_version != layout:
            raise UnsupportedTableError(
                f"{source}: {LAYOUT_VERSION}={self.raw.get(LAYOUT_VERSION)!r} is not supported; table version "
                f"{self.version} uses timeline layout {layout}"
            )
        table_format = self.raw.get(TABLE_FORMAT, NATIVE_FORMAT).strip().lower()
        if table_format != NATIVE_FORMAT:
            raise UnsupportedTableError(
                f"{source}: {TABLE_FORMAT}={self.raw.get(TABLE_FORMAT)} is not supported; hudi-clusterd serves "
                f"tables of Hudi's own format ({TABLE_FORMAT}={NATIVE_FORMAT})")
        try:
            self.timeline_layout  # noqa: B018  (validates hoodie.timeline.path)
        except TimelineError as e:
            raise UnsupportedTableError(f"{source}: {e}") from e
        if self.table_type not in (TableType.COPY_ON_WRITE.value, TableType.MERGE_ON_READ.value):
            raise UnsupportedTableError(
                f"{source}: {TYPE}={self.table_type} is not supported; COPY_ON_WRITE and MERGE_ON_READ tables are")
        if self.base_file_format != "PARQUET":
            raise UnsupportedTableError(f"{source}: {BASE_FILE_FORMAT}={self.base_file_format}: only PARQUET")
        if self.merge_on_read:
            self._check_mergeable(source)

    @property
    def merge_on_read(self) -> bool:
        return self.table_type == TableType.MERGE_ON_READ.value

    @property
    def merging(self) -> TableMerging:
        """How the table merges records of one key: version 6 by its payload class, 8 by its merge strategy id
        (or mode), 9 by its merge mode; `UnsupportedTableError` when the daemon cannot merge as it does."""
        if self.version == 6:
            return TableMerging.of_payload_class(self.raw)
        return TableMerging.of_merge_mode(self.raw, strategy_first=self.version == 8)

    @property
    def clustering_blocks_compaction(self) -> bool:
        """Whether a pending clustering can keep Apache Hudi from scheduling compaction: on a merge-on-read table
        of version 6, for a single writer with EAGER failed-writes cleaning (hudi-mor-reference §4.2)."""
        return self.merge_on_read and self.version == 6

    def _check_mergeable(self, source: str) -> None:
        """Refuse a merge-on-read table whose file slices the daemon cannot merge as Hudi does."""
        if _bool(self.raw.get(CDC_ENABLED), False):
            raise UnsupportedTableError(f"{source}: {CDC_ENABLED}=true: merge-on-read tables with change data "
                                        "capture are not served (their log files carry CDC blocks)")
        if not self.populate_meta_fields:
            raise UnsupportedTableError(f"{source}: {POPULATE_META_FIELDS}=false: a merge-on-read table's log records "
                                        "are merged by _hoodie_record_key, which this table does not write")
        try:
            self.merging  # noqa: B018  (refuses a merge setting the daemon cannot follow)
        except UnsupportedTableError as e:
            raise UnsupportedTableError(f"{source}: {e}") from e

    def check_writable(self, source: str, *, clustering: bool = False) -> None:
        """Refuse writes our commits would leave inconsistent. Our own ingestion (``clustering=False``) refuses a
        merge-on-read table and a table with a metadata table (it keeps neither true); clustering serves both
        (``hudi_clusterd.table.metadata`` decides what it can keep)."""
        self.check_readable(source)
        if self.merge_on_read and not clustering:
            raise UnsupportedTableError(
                f"{source}: {TYPE}={self.table_type}: hudi-clusterd's own writer writes copy-on-write tables only "
                "(its clustering serves merge-on-read tables); write to this table with Apache Hudi's writer")
        if self.metadata_partitions and not clustering:
            raise UnsupportedTableError(
                f"{source}: the table has a metadata table ({METADATA_PARTITIONS}="
                f"{','.join(self.metadata_partitions)}); hudi-clusterd's own writer does not update it (its "
                "clustering does). Write to this table with Apache Hudi's writer, or create the table with "
                "hudi-clusterd ingest (which leaves the metadata table off)"
            )
        if self.raw.get(DROP_PARTITION_COLUMNS, "false").strip().lower() == "true":
            raise UnsupportedTableError(f"{source}: {DROP_PARTITION_COLUMNS}=true is not supported")

    @classmethod
    def for_new_table(
        cls,
        *,
        name: str,
        record_key_fields: Sequence[str],
        partition_fields: Sequence[str] = (),
        precombine_field: str | None = None,
        hive_style: bool = False,
        url_encode: bool = False,
        database: str = "default",
        create_schema: str | None = None,
        key_generator: str | None = None,
        timeline_timezone: str | None = None,
        table_version: int = NEW_TABLE_VERSION,
    ) -> TableConfig:
        """The keys Hudi writes for a new copy-on-write table of ``table_version`` (6, 8 or 9), with the checksum
        computed as Hudi does. Versions 8 and 9 name the key generator by its type and record the merge mode and
        the table's initial version; version 9 names the ordering field ``hoodie.table.ordering.fields``."""
        if table_version not in LAYOUT_OF_VERSION:
            raise TableError(f"cannot create a table of version {table_version}; versions: "
                             f"{', '.join(map(str, sorted(LAYOUT_OF_VERSION)))}")
        if not name:
            raise TableError("a table name is required to create a table")
        if not record_key_fields:
            raise TableError("at least one record key field is required to create a table")
        if key_generator is None:
            if not partition_fields:
                key_generator = NONPARTITIONED_KEYGEN
            elif len(record_key_fields) == 1 and len(partition_fields) == 1:
                key_generator = SIMPLE_KEYGEN
            else:
                key_generator = COMPLEX_KEYGEN
        raw: dict[str, str] = {}
        if precombine_field:
            raw[ORDERING_FIELDS if table_version >= 9 else PRECOMBINE_FIELD] = precombine_field
        raw[DROP_PARTITION_COLUMNS] = "false"
        if partition_fields:
            raw[PARTITION_FIELDS] = ",".join(partition_fields)
        raw[TYPE] = TableType.COPY_ON_WRITE.value
        raw[ARCHIVE_FOLDER] = "archived"
        raw[LAYOUT_VERSION] = str(LAYOUT_OF_VERSION[table_version])
        raw[VERSION] = str(table_version)
        raw[RECORD_KEY_FIELDS] = ",".join(record_key_fields)
        raw[DATABASE] = database
        raw[URL_ENCODE] = str(url_encode).lower()
        raw[NAME] = name
        keygen_type = next((t for t, c in KEYGEN_CLASS_OF_TYPE.items() if c == key_generator), None)
        if table_version >= 8 and keygen_type is not None:
            raw[KEYGEN_TYPE] = keygen_type
        else:
            raw[KEYGEN_CLASS] = key_generator
        raw[HIVE_STYLE] = str(hive_style).lower()
        if table_version >= 8:
            raw[INITIAL_VERSION] = str(table_version)
            raw[TIMELINE_PATH] = DEFAULT_TIMELINE_PATH
            raw[TIMELINE_HISTORY_PATH] = DEFAULT_HISTORY_PATH
            raw[RECORD_MERGE_MODE] = "EVENT_TIME_ORDERING" if precombine_field else "COMMIT_TIME_ORDERING"
        if table_version >= 9:
            raw[TABLE_FORMAT] = NATIVE_FORMAT
        if timeline_timezone:
            raw[TIMELINE_TIMEZONE] = timeline_timezone
        if create_schema:
            raw[CREATE_SCHEMA] = create_schema
        raw[CHECKSUM] = str(table_checksum(database, name))
        return cls(raw)
