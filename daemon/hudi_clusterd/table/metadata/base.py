"""The metadata table of one data table as files: its properties, timeline, file slices and records.

`MetadataTable` (``writer.py``) builds on this its checks, its commits (``commit.py``) and its rollbacks
(``rollback.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hudi_clusterd.domain.instant import next_instant_time, parse_instant_time
from hudi_clusterd.domain.table_config import METADATA_PARTITIONS, TableConfig
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.errors import MetadataTableError, StorageError
from hudi_clusterd.formats.java_properties import parse_properties
from hudi_clusterd.formats.log import LogFileName
from hudi_clusterd.formats.metadata import records as rec
from hudi_clusterd.formats.metadata.table_format import MetadataTableFormat, for_table_version
from hudi_clusterd.storage import Storage
from hudi_clusterd.table.metadata.indexes import ColumnIndexes
from hudi_clusterd.table.metadata.reader import (
    FileGroupFiles,
    files_of,
    list_file_groups,
    read_partition,
    valid_instants,
)
from hudi_clusterd.table.metadata.slice_schema import SliceSchemas
from hudi_clusterd.table.timeline_store import TimelineStore

METADATA_FOLDER = ".hoodie/metadata"
PROPERTIES = ".hoodie/hoodie.properties"
MAINTAINED = (rec.FILES, rec.COLUMN_STATS, rec.PARTITION_STATS)
"""The metadata partitions a clustering changes, which the daemon keeps true."""


@dataclass(frozen=True, slots=True)
class FileSlice:
    """The latest file slice of one metadata file group: its base instant, base file and log files."""

    file_id: str
    base_instant: str
    base_file: str | None
    log_files: tuple[LogFileName, ...]

    @property
    def latest_log_version(self) -> int:
        return max((lf.version for lf in self.log_files if lf.base_instant == self.base_instant), default=0)


class MetadataTableBase:
    """The metadata table of one data table (``.hoodie/metadata``), seen from the data table's storage."""

    def __init__(self, data_storage: Storage, data_config: TableConfig, *, before_write: Callable[[], None],
                 new_time: Callable[[], str]) -> None:
        self.data_storage = data_storage
        self.data_config = data_config
        self.storage = data_storage.child(METADATA_FOLDER)
        self.before_write = before_write
        """Called before every write (the data table's lock check)."""
        self.new_time = new_time
        """A fresh time greater than every time on the data timeline (under the data table's lock)."""
        self.source = data_storage.full_path(METADATA_FOLDER)
        self._config: TableConfig | None = None
        self.indexes = ColumnIndexes(self)
        self.slice_schemas = SliceSchemas(self.storage)
        """The column statistics of new files, read ahead of their commit (`prepare`)."""

    @staticmethod
    def declared(config: TableConfig) -> bool:
        """Whether the data table's properties say it has a metadata table (built or being built)."""
        return bool(config.metadata_partitions)

    @property
    def partitions(self) -> tuple[str, ...]:
        return tuple(p for p in (self.data_config.raw.get(METADATA_PARTITIONS) or "").split(",") if p.strip())

    @property
    def config(self) -> TableConfig:
        """The metadata table's own properties (read once; `reload` reads them again)."""
        if self._config is None:
            path = PROPERTIES
            full = self.storage.full_path(path)
            try:
                text = self.storage.read_bytes(path).decode("iso-8859-1")
            except StorageError as e:
                raise MetadataTableError(
                    f"{full}: missing or unreadable ({e}); the data table lists metadata partitions "
                    f"({METADATA_PARTITIONS}={','.join(self.partitions)}) but its metadata table cannot be "
                    "read. Let a Hudi writer rebuild it, or turn it off (hoodie.metadata.enable=false)") from e
            self._config = TableConfig(parse_properties(text, full))
        return self._config

    def reload(self) -> None:
        """Read the metadata table's properties again on next use (a writer may have upgraded it)."""
        self._config = None

    @property
    def table_version(self) -> int:
        return self.data_config.version or 6

    @property
    def table_format(self) -> MetadataTableFormat:
        """The metadata-table rules of the table's version (its default record schema among them)."""
        return for_table_version(self.table_version)

    def timeline_store(self) -> TimelineStore:
        """The metadata table's instant files (its ``.hoodie/``, or its ``hoodie.timeline.path`` folder on
        layout 2); a completed instant gets a completion time after every time on both timelines."""
        store = TimelineStore(self.storage, before_write=self.before_write,
                              layout=self.config.timeline_layout.for_metadata(),
                              completion_time=lambda: self._completion_time(store.load()))
        return store

    def written_folders(self) -> list[str]:
        """The folders (relative to the data table's base path) the metadata table's writes go to: its timeline
        folder and its partitions' folders."""
        folders = [self.config.timeline_layout.folder, *self.partitions]
        return [f"{METADATA_FOLDER}/{folder}" for folder in folders]

    def _file_slices(self, partition: str, groups: Mapping[str, FileGroupFiles] | None = None
                     ) -> dict[str, FileSlice]:
        """The latest slice of every file group of a metadata partition, by listing it (or from ``groups``, that
        listing's file groups)."""
        out: dict[str, FileSlice] = {}
        listed = list_file_groups(self.storage, partition) if groups is None else groups
        for fid, files in sorted(listed.items()):
            base_instant = max([t for t, _ in files.bases] + [lf.base_instant for lf, _ in files.logs])
            base_file = next((p.rsplit("/", 1)[-1] for t, p in files.bases if t == base_instant), None)
            out[fid] = FileSlice(fid, base_instant, base_file,
                                 tuple(sorted((lf for lf, _ in files.logs if lf.base_instant == base_instant),
                                              key=lambda lf: lf.version)))
        return out

    def _completion_time(self, timeline: Timeline) -> str:
        fresh = self.new_time()
        last = timeline.last_time()
        if last is not None and len(last) == 17 and last >= fresh:
            return next_instant_time(parse_instant_time(fresh), last)
        return fresh

    def read(self, partition: str, data_completed: Iterable[str], *, wanted: Callable[[str], bool] | None = None,
             return_record_name: bool = False) -> dict[str, dict[str, Any]]:
        """The live records of metadata ``partition`` as readers merge them (see `reader.read_partition`), given
        the data timeline's completed instants."""
        store = self.timeline_store()
        done = store.load().completed().instants
        valid = valid_instants(data_completed, ((i.time, i.action) for i in done))
        completion = store.layout.completion_times(done)
        return read_partition(self.storage, partition, valid, completion=completion,
                              wanted=wanted or (lambda _key: True), return_record_name=return_record_name)

    def live_files(self, data_completed: Iterable[str]) -> dict[str, dict[str, int]]:
        """What the ``files`` partition lists: data partition (``""``: non-partitioned) → file name → size."""
        return files_of(self.read(rec.FILES, data_completed))
