"""The ``column_stats`` and ``partition_stats`` records of one data commit, for `MetadataTable.commit`.

Column statistics come from the new files' parquet footers (no data page is read). `ColumnIndexes.prepare` reads
them while the clustering executes, as Hudi's write tasks collect theirs, so that the commit under the lock only
looks them up in the same `ColumnIndexes` (one per metadata table handle).
Partition statistics are recomputed, as Hudi 1.x recomputes them, for every partition the commit writes: the new
files' ranges merged with the stored column statistics of the partition's other latest files, read from the
metadata table.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import pyarrow.parquet as pq
import structlog

from hudi_clusterd.domain.commit import CommitMetadata, WriteStat
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.errors import MetadataTableError, StorageError
from hudi_clusterd.formats.metadata import column_stats as cs
from hudi_clusterd.formats.metadata import records as rec
from hudi_clusterd.formats.metadata.table_format import for_table_version
from hudi_clusterd.storage import Storage

log = structlog.get_logger(__name__)

INDEX_DEFS_PATH = "hoodie.table.index.defs.path"
FOOTER_THREADS = 4  # pyarrow reads and parses footers without the GIL
_CACHE_SIZE = 4096

_RangeKey = tuple[str, int, tuple[str, ...], int, int]


class IndexedTable(Protocol):
    """What the indexes need of the metadata table."""

    data_storage: Storage
    data_config: TableConfig

    @property
    def partitions(self) -> tuple[str, ...]: ...

    @property
    def table_version(self) -> int: ...

    def read(self, partition: str, data_completed: Iterable[str], *, wanted: Callable[[str], bool] | None = None,
             return_record_name: bool = False) -> dict[str, dict[str, Any]]: ...


class ColumnIndexes:
    """The index records of one metadata table's commits, with the column statistics of new files read so far
    (a file never changes; at most `_CACHE_SIZE` are kept)."""

    def __init__(self, mdt: IndexedTable) -> None:
        self._mdt = mdt
        self._ranges: dict[_RangeKey, list[cs.ColumnRange]] = {}
        self._lock = threading.Lock()

    def prepare(self, schema: str | None, stats: Sequence[WriteStat]) -> None:
        """Read the column statistics of new files ahead of their commit (outside the table lock), when the
        metadata table indexes columns; the commit then finds them here."""
        mdt = self._mdt
        if not schema or rec.COLUMN_STATS not in mdt.partitions:
            return
        columns, iversion = _columns(mdt, schema)
        with ThreadPoolExecutor(FOOTER_THREADS, thread_name_prefix="footers") as pool:
            list(pool.map(lambda ws: self._file_ranges(ws, columns, iversion), [ws for ws in stats if ws.path]))

    def records(self, instant: str, meta: CommitMetadata, latest_files: Mapping[str, Sequence[str]],
                data_completed: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
        """``column_stats`` records of every new file of ``meta`` and recomputed ``partition_stats`` of every
        partition it writes (``latest_files``: each such partition's latest base files, the commit's included)."""
        mdt = self._mdt
        version = mdt.table_version
        schema = meta.schema or mdt.data_config.create_schema
        if not schema:
            raise MetadataTableError(f"commit {instant}: no writer schema (extraMetadata.schema); column "
                                     "statistics cannot be computed")
        columns, iversion = _columns(mdt, schema)
        new_ranges: dict[str, list[cs.ColumnRange]] = {}
        column_records: list[dict[str, Any]] = []
        for partition, stats in meta.partition_to_write_stats.items():
            for ws in stats:
                if not ws.path:
                    continue
                name = ws.path.rsplit("/", 1)[-1]
                ranges = self._file_ranges(ws, columns, iversion)
                new_ranges.setdefault(partition, []).extend(ranges)
                column_records.extend(r for _k, r in cs.column_stats_records(version, partition, name, ranges))
        out: dict[str, list[dict[str, Any]]] = {}
        if rec.COLUMN_STATS in mdt.partitions:
            out[rec.COLUMN_STATS] = column_records
        if rec.PARTITION_STATS in mdt.partitions and for_table_version(version).partition_stats and new_ranges:
            out[rec.PARTITION_STATS] = _partition_stats(mdt, meta, latest_files, new_ranges, columns, iversion,
                                                        schema, set(data_completed))
        return out

    def _file_ranges(self, ws: WriteStat, columns: Sequence[str], iversion: cs.IndexVersion
                     ) -> list[cs.ColumnRange]:
        """The indexed columns' ranges of one new file, from its footer (kept: a file never changes)."""
        assert ws.path is not None
        mdt = self._mdt
        storage = mdt.data_storage
        full = storage.full_path(ws.path)
        key = (full, ws.file_size_in_bytes, tuple(columns), mdt.table_version, int(iversion))
        with self._lock:
            hit = self._ranges.get(key)
        if hit is not None:
            return hit
        with storage.open_input_file(ws.path) as f:
            footer = pq.ParquetFile(f).metadata
        name = ws.path.rsplit("/", 1)[-1]
        ranges = cs.file_column_ranges(footer, name, columns, table_version=mdt.table_version, version=iversion,
                                       on_dropped=lambda reason: log.warning(
                                           "hudi writes no column statistics for this file", file=name, reason=reason))
        with self._lock:
            if len(self._ranges) >= _CACHE_SIZE:
                self._ranges.clear()
            self._ranges[key] = ranges
        return ranges


def _index_definitions(mdt: IndexedTable) -> Mapping[str, Any] | None:
    """The data table's index definitions (``.hoodie/.index_defs/index.json`` on 1.x), if any."""
    path = (mdt.data_config.raw.get(INDEX_DEFS_PATH) or "").strip()
    if not path:
        return None
    storage = mdt.data_storage
    rel = storage.rel_from_uri(path) if "://" in path or path.startswith("/") else path
    try:
        node = json.loads(storage.read_bytes(rel).decode("utf-8"))
    except StorageError:
        if storage.info(rel) is not None:
            raise  # there, but unread (the store did not answer): not taken for "no definitions"
        return None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MetadataTableError(f"{storage.full_path(rel)}: not valid index definitions JSON ({e})") from e
    return node if isinstance(node, Mapping) else None


def _columns(mdt: IndexedTable, schema: str) -> tuple[list[str], cs.IndexVersion]:
    version = mdt.table_version
    index_json = _index_definitions(mdt)
    columns = cs.indexed_columns(version, schema, index_json=index_json,
                                 populate_meta_fields=mdt.data_config.populate_meta_fields)
    return columns, cs.index_version(version, index_json)


def _partition_stats(mdt: IndexedTable, meta: CommitMetadata, latest_files: Mapping[str, Sequence[str]],
                     new_ranges: Mapping[str, list[cs.ColumnRange]], columns: Sequence[str],
                     iversion: cs.IndexVersion, schema: str, data_completed: set[str]) -> list[dict[str, Any]]:
    version = mdt.table_version
    infos = cs.column_value_infos(schema, columns, iversion)
    new_names = {ws.path.rsplit("/", 1)[-1] for ws in meta.write_stats() if ws.path}
    others: dict[str, set[str]] = {
        p: {f.rsplit("/", 1)[-1] for f in latest_files.get(p, ())} - new_names for p in new_ranges}
    prefixes = {p: tuple(cs.column_stats_key_prefix(c, p) for c in _canonical(columns, version)) for p in new_ranges}
    every = tuple(x for pre in prefixes.values() for x in pre)
    stored: dict[str, dict[str, Any]] = {}
    if any(others.values()):
        stored = mdt.read(rec.COLUMN_STATS, data_completed, wanted=lambda k: k.startswith(every),
                          return_record_name=True)
    out: list[dict[str, Any]] = []
    for partition, ranges in new_ranges.items():
        wanted = others[partition]
        merged = list(ranges)
        for record in stored.values():
            body = record.get("ColumnStatsMetadata")
            if not isinstance(body, Mapping) or body.get("isDeleted") or body.get("fileName") not in wanted \
                    or not str(record["key"]).startswith(prefixes[partition]):
                continue
            merged.append(cs.range_from_record(record))
        out.extend(r for _k, r in cs.partition_stats_records(version, partition, merged, value_infos=infos))
    return out


def _canonical(columns: Sequence[str], version: int) -> list[str]:
    """Column names as stored (1.x names Spark's list element paths ``.list.element``)."""
    lists = for_table_version(version).list_element_paths
    return [c.replace(".array", ".list.element") if lists else c for c in columns]
