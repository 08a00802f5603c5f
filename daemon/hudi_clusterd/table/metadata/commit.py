"""A clustering's metadata deltacommit (`MetadataTable.commit`): one new log file per touched file group of each
maintained partition, each holding one HFile data block, between the deltacommit's states.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.errors import MetadataDecodeError, MetadataTableError, StorageError, TimelineError
from hudi_clusterd.formats.log import LOG_BASE_VERSION, LogFileName, encode_block, hfile_data_block
from hudi_clusterd.formats.metadata import records as rec
from hudi_clusterd.table.metadata.base import METADATA_FOLDER
from hudi_clusterd.table.metadata.reader import list_file_groups
from hudi_clusterd.table.metadata.rollback import MetadataRollbacks

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class MetadataCommit:
    """What one metadata deltacommit wrote: records per partition and the log files (relative to the data
    table's base path)."""

    instant: str
    records: Mapping[str, int]
    log_files: tuple[str, ...]


class MetadataCommits(MetadataRollbacks):
    """The metadata deltacommits of clusterings (a crashed attempt of one is rolled back first)."""

    def commit(self, instant: str, meta: CommitMetadata, latest_files: Mapping[str, Sequence[str]],
               data_completed: Iterable[str]) -> MetadataCommit:
        """Complete metadata deltacommit ``instant`` for data commit ``meta`` (call under the data table's lock,
        right before completing the data instant). ``latest_files``: per partition the data commit writes, the
        relative paths of its latest base files (for ``partition_stats``); ``data_completed``: the completed
        instants of the data timeline. Call after `check_supported` under the same lock
        (`HoodieTable.check_clusterable` runs it)."""
        started = time.monotonic()
        store = self.timeline_store()
        timeline = store.load()
        existing = timeline.find(instant, Action.DELTA_COMMIT)
        if existing is not None:
            if existing.is_completed:
                raise TimelineError(f"{self.source}: metadata deltacommit {instant} is completed already")
            self._roll_back_own(store, timeline, existing)  # a crashed attempt of this very commit
        by_partition: dict[str, list[dict[str, Any]]] = {rec.FILES: rec.files_records(_new_files(meta))}
        wanted = [p for p in (rec.COLUMN_STATS, rec.PARTITION_STATS) if p in self.partitions]
        if wanted:
            for p, records in self.indexes.records(instant, meta, latest_files, data_completed).items():
                if p in wanted and records:
                    by_partition[p] = records
        planned, schema = self._plan_log_files(instant, by_partition)
        stats = [ws for ws, _ in planned]
        requested = store.create(Instant(instant, Action.DELTA_COMMIT, State.REQUESTED))
        inflight = CommitMetadata({p: tuple(ws for ws in stats if ws.partition_path == p) for p in by_partition}
                                  if self.table_format.inflight_write_stats else {}, {}, Operation.UPSERT_PREPPED)
        store.create(requested.with_state(State.INFLIGHT), store.serde.encode_commit(inflight))
        written: list[WriteStat] = []
        for ws, data in planned:
            assert ws.path is not None
            self.before_write()
            if not self.storage.write_bytes(ws.path, data, overwrite=False):
                raise StorageError(f"{self.storage.full_path(ws.path)}: already exists")
            written.append(ws)
        done = CommitMetadata({p: tuple(ws for ws in written if ws.partition_path == p) for p in by_partition},
                              {"schema": schema.text}, Operation.UPSERT_PREPPED)
        store.create(requested.with_state(State.COMPLETED), store.serde.encode_commit(done))
        counts = {p: len(r) for p, r in by_partition.items()}
        log.info("metadata table updated", instant=instant, records=counts, log_files=len(written),
                 ms=int((time.monotonic() - started) * 1000))
        return MetadataCommit(instant, counts, tuple(f"{METADATA_FOLDER}/{ws.path}" for ws in written))

    def _plan_log_files(self, instant: str, by_partition: Mapping[str, list[dict[str, Any]]]
                        ) -> tuple[list[tuple[WriteStat, bytes]], rec.RecordSchema]:
        """One log file (one HFile data block) per touched file group, with its write stat; and the record schema
        of the ``files`` partition's block (the deltacommit's ``extraMetadata.schema``). Each block carries the
        record schema its file slice already carries (`SliceSchemas`), else the version's default."""
        default = self.table_format.schema
        commit_schema = default
        out: list[tuple[WriteStat, bytes]] = []
        for partition, records in by_partition.items():
            groups = list_file_groups(self.storage, partition)
            slices = self._file_slices(partition, groups)
            ids = sorted(slices)
            if not ids:
                raise MetadataTableError(f"{self.storage.full_path(partition)}: metadata partition {partition} "
                                         "has no file group")
            grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for r in records:
                grouped[ids[rec.file_group_index(str(r["key"]), len(ids))]].append(r)
            for fid, group in sorted(grouped.items()):
                fs = slices[fid]
                keys = [str(r["key"]) for r in group]
                if len(set(keys)) != len(keys):
                    raise MetadataDecodeError(f"metadata partition {partition}: duplicate record keys in one "
                                              f"commit ({instant})")
                schema = self.slice_schemas.of(groups[fid], default)
                if partition == rec.FILES:
                    commit_schema = schema
                block = hfile_data_block(instant, schema.block_text,
                                         [(str(r["key"]), rec.encode(schema, r)) for r in group])
                data = encode_block(block)
                if self.table_format.log_file_per_instant:
                    name = LogFileName(fid, instant, LOG_BASE_VERSION, _write_token())
                    prev, base_file = instant, ""
                else:
                    name = LogFileName(fid, fs.base_instant, fs.latest_log_version + 1, _write_token())
                    prev, base_file = fs.base_instant, fs.base_file or ""
                path = f"{partition}/{name}"
                out.append((WriteStat(file_id=fid, path=path, partition_path=partition, prev_commit=prev,
                                      num_writes=len(group), num_update_writes=len(group),
                                      total_write_bytes=len(data), file_size_in_bytes=len(data),
                                      log_version=name.version, log_offset=0, base_file=base_file,
                                      log_files=(str(name),)), data))
        return out, commit_schema


def _new_files(meta: CommitMetadata) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for partition, stats in meta.partition_to_write_stats.items():
        for ws in stats:
            if ws.path:
                name = ws.path.rsplit("/", 1)[-1]
                out[partition][name] = max(out[partition].get(name, 0), ws.file_size_in_bytes)
    return dict(out)


def _write_token() -> str:
    """A write token of Hudi's ``<partition>-<stage>-<attempt>`` shape, unique to this write (``0-0-0`` is the
    token of Hudi's initialisation files)."""
    return f"0-{1 + uuid.uuid4().int % 99999}-0"
