"""The record schema a metadata log block written into a file slice carries: the one the slice already carries.

Readers merge a slice's base HFile and log blocks into one set of records, and some insist that they share one
schema (hudi-rs 0.5 fails the whole read of a slice whose base HFile's ``ColumnStatsMetadata`` has 10 fields and
whose log block's has 11). So a block of ours takes the schema of the slice's base HFile (file info ``schema``),
else of its latest log block (header ``SCHEMA``), else the table version's default (`MetadataTableFormat.schema`:
the schema of the release line that writes that version). A base HFile never changes, so its schema is read once
per file.
"""

from __future__ import annotations

import threading

from hudi_clusterd.errors import MetadataDecodeError, MetadataTableError, StorageError
from hudi_clusterd.formats.hfile import SCHEMA_KEY, read_hfile
from hudi_clusterd.formats.log import BlockType, HeaderKey, decode_log_file
from hudi_clusterd.formats.metadata import records as rec
from hudi_clusterd.storage import Storage
from hudi_clusterd.table.metadata.reader import FileGroupFiles

_CACHE_SIZE = 1024


class SliceSchemas:
    """The record schemas of one metadata table's file slices. A base HFile never changes, so its schema is read
    once per file (by path and size) and kept by this object, which its `MetadataTable` owns."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        """The metadata table's storage."""
        self._base_schemas: dict[tuple[str, int], str] = {}
        self._lock = threading.Lock()

    def of(self, files: FileGroupFiles, default: rec.RecordSchema) -> rec.RecordSchema:
        """The record schema of the latest slice of one metadata file group: its latest base HFile's, else its
        newest log block's, else ``default``."""
        text: str | None = None
        if files.bases:
            _instant, path = max(files.bases)
            text = self._base_schema(path)
        else:
            text = _latest_log_schema(self.storage, files)
        if text is None:
            return default
        try:
            return rec.schema_from_block(text)
        except MetadataDecodeError as e:
            raise MetadataTableError(f"{self.storage.full_path()}: a metadata file slice carries a record schema "
                                     f"the daemon cannot write ({e})") from e

    def _base_schema(self, path: str) -> str:
        storage = self.storage
        full = storage.full_path(path)
        info = storage.info(path)
        key = (full, info.size if info is not None else -1)
        with self._lock:
            hit = self._base_schemas.get(key)
        if hit is not None:
            return hit
        contents = read_hfile(storage.read_bytes(path), source=full)
        raw = contents.file_info.get(SCHEMA_KEY)
        if raw is None:
            raise MetadataTableError(f"{full}: metadata base file names no record schema (file info {SCHEMA_KEY!r})")
        text = raw.decode("utf-8")
        with self._lock:
            if len(self._base_schemas) >= _CACHE_SIZE:
                self._base_schemas.clear()
            self._base_schemas[key] = text
        return text


def _latest_log_schema(storage: Storage, files: FileGroupFiles) -> str | None:
    """The ``SCHEMA`` header of the newest data block among the group's log files (newest file first)."""
    ordered = sorted(files.logs, key=lambda x: (x[0].base_instant, x[0].version, x[0].write_token), reverse=True)
    for _lf, path in ordered:
        try:
            blocks = decode_log_file(storage.read_bytes(path), source=storage.full_path(path))
        except StorageError:
            if storage.info(path) is not None:
                raise  # there, but unread (the store did not answer): not taken for gone
            continue  # deleted since the listing (a rollback)
        for block in reversed(blocks):
            schema: str | None = block.header.get(HeaderKey.SCHEMA)
            if block.block_type is not BlockType.COMMAND and schema:
                return schema
    return None

