"""Reading a metadata partition as Hudi's readers merge it: the latest base HFile of each file group, then the
data blocks of its log files in order, keeping only blocks of valid instants and dropping blocks a ROLLBACK
command block names.

Valid instants are the data table's completed instants plus the metadata table's own (its initialisation, its
compactions and rollbacks); a block of a data instant still pending is not merged, so a clustering's records
count only once its ``replacecommit`` completes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hudi_clusterd.formats.hfile import SCHEMA_KEY, read_hfile
from hudi_clusterd.formats.log import (
    ROLLBACK_COMMAND,
    BlockType,
    HeaderKey,
    LogFileName,
    decode_log_file,
    hfile_block_records,
)
from hudi_clusterd.formats.metadata import records as rec
from hudi_clusterd.storage import Storage


@dataclass(frozen=True, slots=True)
class FileGroupFiles:
    """The files of one metadata file group: base HFiles as (instant, path) and log files as (name, path), paths
    relative to the metadata table."""

    bases: list[tuple[str, str]] = field(default_factory=list)
    logs: list[tuple[LogFileName, str]] = field(default_factory=list)


def list_file_groups(storage: Storage, partition: str) -> dict[str, FileGroupFiles]:
    """Every file group of metadata ``partition`` by file id, from one listing of its folder."""
    out: dict[str, FileGroupFiles] = {}
    for fi in storage.list_dir(partition):
        if fi.is_dir:
            continue
        lf = LogFileName.parse(fi.name)
        if lf is not None:
            out.setdefault(lf.file_id, FileGroupFiles()).logs.append((lf, fi.path))
        elif fi.name.endswith(".hfile"):
            parts = fi.name[: -len(".hfile")].split("_")
            if len(parts) >= 3:
                out.setdefault(parts[0], FileGroupFiles()).bases.append((parts[-1], fi.path))
    return out


Merge = Callable[[Mapping[str, Any] | None, Mapping[str, Any]], dict[str, Any]]


def _latest_wins(older: Mapping[str, Any] | None, newer: Mapping[str, Any]) -> dict[str, Any]:
    return dict(newer)


MERGE_OF: dict[str, Merge] = {rec.FILES: rec.merge_files}


def read_partition(storage: Storage, partition: str, valid: set[str], *,
                   completion: Mapping[str, str] | None = None,
                   wanted: Callable[[str], bool] = lambda _key: True,
                   return_record_name: bool = False) -> dict[str, dict[str, Any]]:
    """Every live record (by key) of metadata ``partition`` (``storage`` is rooted at the metadata table),
    merged over its file groups' latest slices. ``wanted``: a key filter applied before decoding.

    ``completion`` (layout 2): the metadata instants' completion times. There a log file is named after its
    own deltacommit, and belongs to the slice of the newest base file requested before that deltacommit
    completed (a deltacommit that completed after a compaction was planned lands in the compacted slice);
    without it (version 6) a log file names its slice's base instant."""
    merge = MERGE_OF.get(partition, _latest_wins)
    out: dict[str, dict[str, Any]] = {}
    for _fid, files in sorted(list_file_groups(storage, partition).items()):
        base_files = sorted(b for b in files.bases if b[0] in valid or is_internal(b[0]))
        base_instant = base_files[-1][0] if base_files else ""
        group: dict[str, dict[str, Any]] = {}
        if base_files:
            path = base_files[-1][1]
            contents = read_hfile(storage.read_bytes(path), source=storage.full_path(path))
            schema = contents.file_info[SCHEMA_KEY].decode("utf-8")
            for row, value in contents.cells:
                key = row.decode("utf-8")
                if wanted(key):
                    group[key] = rec.decode(schema, key, value, storage.full_path(path),
                                            return_record_name=return_record_name)
        def slice_time(lf: LogFileName) -> str:
            return completion.get(lf.base_instant, "99999999999999999") if completion is not None \
                else lf.base_instant

        slice_logs = sorted((lf for lf in files.logs if slice_time(lf[0]) >= base_instant),
                            key=lambda x: (x[0].base_instant, x[0].version, x[0].write_token))
        blocks: list[tuple[str, list[tuple[str, bytes]], str, str]] = []
        for _lf, path in slice_logs:
            source = storage.full_path(path)
            for block in decode_log_file(storage.read_bytes(path), source=source):
                instant = block.header.get(HeaderKey.INSTANT_TIME, "")
                if block.block_type is BlockType.COMMAND:
                    if block.header.get(HeaderKey.COMMAND_BLOCK_TYPE) == ROLLBACK_COMMAND:
                        target = block.header.get(HeaderKey.TARGET_INSTANT_TIME)
                        blocks = [b for b in blocks if b[0] != target]
                    continue
                if block.block_type is not BlockType.HFILE_DATA or instant not in valid:
                    continue
                blocks.append((instant, hfile_block_records(block, source=source),
                               block.header.get(HeaderKey.SCHEMA, ""), source))
        for _instant, cells, schema, source in blocks:
            for key, value in cells:
                if wanted(key):
                    group[key] = merge(group.get(key), rec.decode(schema, key, value, source,
                                                                  return_record_name=return_record_name))
        out.update(group)
    return out


def is_internal(instant: str) -> bool:
    """An instant time of the metadata table's own: its initialisation (17 zeros and a counter) or a version-6
    suffixed time (a data instant and three more digits)."""
    return instant.startswith("00000000000000") or len(instant) > 17


def valid_instants(data_completed: Iterable[str], metadata_completed: Iterable[tuple[str, str]]) -> set[str]:
    """Instant times whose blocks readers merge: the data table's completed instants, and the metadata table's
    own completed instants (``(time, action)``): initialisation, compactions (completed as commits), rollbacks
    and suffixed times."""
    out = set(data_completed)
    for time, action in metadata_completed:
        if is_internal(time) or action in ("commit", "compaction", "rollback"):
            out.add(time)
    return out


def files_of(merged: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """The ``files`` partition's merged records as a listing: data partition path (``""`` for a non-partitioned
    table) → file name → size, tombstones dropped; only partitions ``__all_partitions__`` lists."""
    listed = rec.live_files(merged.get(rec.ALL_PARTITIONS_KEY))
    return {("" if p == rec.NON_PARTITIONED_NAME else p): rec.live_files(merged.get(p)) for p in listed}
