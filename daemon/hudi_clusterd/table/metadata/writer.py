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

import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.instant import next_instant_time, parse_instant_time
from hudi_clusterd.domain.table_config import (
    METADATA_PARTITIONS,
    METADATA_PARTITIONS_INFLIGHT,
    TableConfig,
)
from hudi_clusterd.errors import (
    MetadataDecodeError,
    MetadataTableError,
    StorageError,
    TableBusyError,
    TimelineError,
)
from hudi_clusterd.formats.avro import decode_commit_metadata_v2, decode_ocf, encode_commit_metadata_v2, encode_record
from hudi_clusterd.formats.java_properties import parse_properties
from hudi_clusterd.formats.log_blocks import (
    LOG_BASE_VERSION,
    HeaderKey,
    LogFileName,
    decode_log_file,
    encode_block,
    hfile_data_block,
)
from hudi_clusterd.formats.metadata import records as rec
from hudi_clusterd.storage import Storage
from hudi_clusterd.table.metadata.indexes import index_records
from hudi_clusterd.table.metadata.reader import files_of, list_file_groups, read_partition, valid_instants
from hudi_clusterd.table.metadata.timeline import (
    COMMIT,
    DELTA_COMMIT,
    ROLLBACK,
    MdtInstant,
    MdtState,
    MdtTimeline,
    MdtTimelineStore,
)

log = structlog.get_logger(__name__)

METADATA_FOLDER = ".hoodie/metadata"
PROPERTIES = ".hoodie/hoodie.properties"
MAINTAINED = (rec.FILES, rec.COLUMN_STATS, rec.PARTITION_STATS)
"""The metadata partitions a clustering changes, which the daemon keeps true."""
UNCHANGED_PREFIXES = (rec.SECONDARY_INDEX_PREFIX,)
"""Partitions a clustering does not change (Hudi skips secondary indexes on CLUSTER): accepted, left alone."""
ROLLBACK_SUFFIX_V6 = "006"
"""Version 6 names the metadata table's own rollback of instant ``R`` ``R006``."""


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


@dataclass(frozen=True, slots=True)
class MetadataCommit:
    """What one metadata deltacommit wrote: records per partition and the log files (relative to the data
    table's base path)."""

    instant: str
    records: Mapping[str, int]
    log_files: tuple[str, ...]


class MetadataTable:
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

    # --- what exists, and what is refused -------------------------------------------------------------------

    @staticmethod
    def declared(config: TableConfig) -> bool:
        """Whether the data table's properties say it has a metadata table (built or being built)."""
        return bool(config.metadata_partitions)

    @property
    def partitions(self) -> tuple[str, ...]:
        return tuple(p for p in (self.data_config.raw.get(METADATA_PARTITIONS) or "").split(",") if p.strip())

    @property
    def config(self) -> TableConfig:
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

    @property
    def table_version(self) -> int:
        return self.data_config.version or 6

    def timeline_store(self) -> MdtTimelineStore:
        layout = self.config.timeline_layout
        return MdtTimelineStore(self.storage, layout.folder, layout.version, self.before_write)

    def written_folders(self) -> list[str]:
        """The folders (relative to the data table's base path) the metadata table's writes go to: its timeline
        folder and its partitions' folders."""
        folders = [self.config.timeline_layout.folder, *self.partitions]
        return [f"{METADATA_FOLDER}/{folder}" for folder in folders]

    def check_supported(self) -> None:
        """Refuse (``MetadataTableError``, one line naming the key and what to change) a metadata table the
        daemon would not keep exactly as Hudi does, and (``TableBusyError``) one whose partitions, upgrade or
        compaction a writer is half way through. Writes nothing."""
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
        pending = timeline.pending_compactions()
        if pending:
            p0 = pending[0]
            raise TableBusyError(
                f"{self.source}: metadata table {p0.action} {p0.time} is pending; hudi-clusterd waits until it "
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

    # --- file slices -----------------------------------------------------------------------------------------

    def _file_slices(self, partition: str) -> dict[str, FileSlice]:
        """The latest slice of every file group of a metadata partition, by listing it."""
        out: dict[str, FileSlice] = {}
        for fid, files in sorted(list_file_groups(self.storage, partition).items()):
            base_instant = max([t for t, _ in files.bases] + [lf.base_instant for lf, _ in files.logs])
            base_file = next((p.rsplit("/", 1)[-1] for t, p in files.bases if t == base_instant), None)
            out[fid] = FileSlice(fid, base_instant, base_file,
                                 tuple(sorted((lf for lf, _ in files.logs if lf.base_instant == base_instant),
                                              key=lambda lf: lf.version)))
        return out

    # --- commit -------------------------------------------------------------------------------------------------

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
        existing = timeline.find(instant, DELTA_COMMIT)
        if existing is not None:
            if existing.is_completed:
                raise TimelineError(f"{self.source}: metadata deltacommit {instant} is completed already")
            self._roll_back_own(store, timeline, existing)  # a crashed attempt of this very commit
        by_partition: dict[str, list[dict[str, Any]]] = {rec.FILES: rec.files_records(_new_files(meta))}
        wanted = [p for p in (rec.COLUMN_STATS, rec.PARTITION_STATS) if p in self.partitions]
        if wanted:
            for p, records in index_records(instant, meta, latest_files, self, data_completed).items():
                if p in wanted and records:
                    by_partition[p] = records
        planned = self._plan_log_files(instant, by_partition)
        stats = [ws for ws, _ in planned]
        store.create(instant, DELTA_COMMIT, MdtState.REQUESTED)
        inflight = CommitMetadata({p: tuple(ws for ws in stats if ws.partition_path == p) for p in by_partition}
                                  if self.table_version < 8 else {}, {}, Operation.UPSERT_PREPPED)
        store.create(instant, DELTA_COMMIT, MdtState.INFLIGHT, self._encode_commit(inflight))
        written: list[WriteStat] = []
        for ws, data in planned:
            assert ws.path is not None
            self.before_write()
            if not self.storage.write_bytes(ws.path, data, overwrite=False):
                raise StorageError(f"{self.storage.full_path(ws.path)}: already exists")
            written.append(ws)
        done = CommitMetadata({p: tuple(ws for ws in written if ws.partition_path == p) for p in by_partition},
                              {"schema": rec.record_schema(self.table_version).text}, Operation.UPSERT_PREPPED)
        completion = self._completion_time(timeline) if store.layout >= 2 else None
        store.create(instant, DELTA_COMMIT, MdtState.COMPLETED, self._encode_commit(done), completion)
        counts = {p: len(r) for p, r in by_partition.items()}
        log.info("metadata table updated", instant=instant, records=counts, log_files=len(written),
                 ms=int((time.monotonic() - started) * 1000))
        return MetadataCommit(instant, counts, tuple(f"{METADATA_FOLDER}/{ws.path}" for ws in written))

    def _completion_time(self, timeline: MdtTimeline) -> str:
        fresh = self.new_time()
        last = timeline.last_time()
        if last is not None and len(last) == 17 and last >= fresh:
            return next_instant_time(parse_instant_time(fresh), last)
        return fresh

    def _encode_commit(self, meta: CommitMetadata) -> bytes:
        return encode_commit_metadata_v2(meta) if self.table_version >= 8 else meta.to_json_bytes()

    def _plan_log_files(self, instant: str, by_partition: Mapping[str, list[dict[str, Any]]]
                        ) -> list[tuple[WriteStat, bytes]]:
        """One log file (one HFile data block) per touched file group, with its write stat."""
        version = self.table_version
        schema = rec.record_schema(version)
        out: list[tuple[WriteStat, bytes]] = []
        for partition, records in by_partition.items():
            slices = self._file_slices(partition)
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
                block = hfile_data_block(instant, schema.block_text,
                                         [(str(r["key"]), rec.encode(version, r)) for r in group])
                data = encode_block(block)
                if version >= 8:
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
        return out

    # --- rollback -----------------------------------------------------------------------------------------------

    def rollback(self, target: str, rollback_time: str) -> list[str]:
        """Roll back the metadata deltacommit of data instant ``target`` (pending or completed) as part of the data
        table's rollback ``rollback_time``; call under the data table's lock, before that rollback completes.
        Resumes an interrupted one. Returns the log files deleted (relative to the metadata table)."""
        store = self.timeline_store()
        timeline = store.load()
        mdt_rollback = rollback_time if self.table_version >= 8 else rollback_time + ROLLBACK_SUFFIX_V6
        pending = self._pending_rollback(store, timeline, target)
        inst = timeline.find(target, DELTA_COMMIT)
        if inst is None and pending is None:
            return []
        if pending is not None:
            mdt_rollback = pending
        if inst is not None and inst.is_completed:
            self._check_not_compacted(timeline, inst)
        files = self._log_files_of(store, inst, target) if inst is not None else []
        if pending is None:
            store.create(mdt_rollback, ROLLBACK, MdtState.REQUESTED,
                         encode_record("HoodieRollbackPlan", self._rollback_plan(target, files)))
        if not store.exists(mdt_rollback, ROLLBACK, MdtState.INFLIGHT):
            store.create(mdt_rollback, ROLLBACK, MdtState.INFLIGHT)
        if pending is not None:
            files = sorted(set(files) | set(self._planned_files(store, mdt_rollback)))
        if inst is not None and inst.is_completed:  # first, so that no reader merges its blocks any more
            store.delete_state(inst, MdtState.COMPLETED)
        deleted = []
        for rel in files:
            self.before_write()
            if self.storage.delete(rel, missing_ok=True):
                deleted.append(rel)
        by_partition: dict[str, list[str]] = defaultdict(list)
        for rel in files:
            by_partition[rel.split("/", 1)[0]].append(self.storage.uri(rel))
        metadata = {
            "startRollbackTime": mdt_rollback,
            "timeTakenInMillis": 0,
            "totalFilesDeleted": len(files),
            "commitsRollback": [target],
            "partitionMetadata": {
                p: {"partitionPath": p, "successDeleteFiles": paths, "failedDeleteFiles": [],
                    "rollbackLogFiles": None, "logFilesFromFailedCommit": None}
                for p, paths in sorted(by_partition.items())},
            "version": 1,
            "instantsRollback": [{"commitTime": target, "action": DELTA_COMMIT}],
        }
        completion = self._completion_time(timeline) if store.layout >= 2 else None
        store.create(mdt_rollback, ROLLBACK, MdtState.COMPLETED, encode_record("HoodieRollbackMetadata", metadata),
                     completion)
        if inst is not None:
            store.delete_all(inst)
        log.info("metadata table rolled back", instant=target, rollback=mdt_rollback, log_files=len(files))
        return deleted

    def _roll_back_own(self, store: MdtTimelineStore, timeline: MdtTimeline, inst: MdtInstant) -> None:
        """Remove a pending metadata deltacommit of ours that never completed, with its log files (a crashed
        attempt of the same commit; nothing could read them)."""
        for rel in self._log_files_of(store, inst, inst.time):
            self.before_write()
            self.storage.delete(rel, missing_ok=True)
        store.delete_all(inst)

    def _check_not_compacted(self, timeline: MdtTimeline, inst: MdtInstant) -> None:
        """Refuse to roll back a deltacommit a completed compaction of the metadata table has merged."""
        point = inst.completion_time if self.table_version >= 8 and inst.completion_time else inst.time
        for c in timeline.of(COMMIT):
            if c.is_completed and c.time >= point:
                raise MetadataTableError(
                    f"{self.source}: metadata deltacommit {inst.time} was compacted by {c.time}; it can no longer be "
                    "rolled back (Hudi refuses this too). Restore the table to an instant before it with Hudi "
                    f"(call rollback_to_instant / restore) or complete data instant {inst.time} by hand")

    def _log_files_of(self, store: MdtTimelineStore, inst: MdtInstant | None, target: str) -> list[str]:
        """The log files deltacommit ``target`` wrote. Layout 2 names them after ``target``; version 6 names them
        in the deltacommit's write stats (its inflight state carries them before any is written)."""
        out: set[str] = set()
        if self.table_version >= 8:
            for p in MAINTAINED:
                if p in self.partitions:
                    out.update(fi.path for fi in self.storage.list_dir(p)
                               if (lf := LogFileName.parse(fi.name)) is not None and lf.base_instant == target)
        elif inst is not None and inst.state is not MdtState.REQUESTED:
            path = store.path(inst.time, inst.action, inst.state, inst.completion_time)
            meta = self._decode_commit(store.read(inst), self.storage.full_path(path))
            out.update(ws.path for ws in meta.write_stats() if ws.path and self.storage.exists(ws.path))
        for rel in sorted(out):
            if not self._only_blocks_of(rel, target):
                raise MetadataTableError(f"{self.storage.full_path(rel)}: holds blocks of other instants than "
                                         f"{target}; hudi-clusterd never appends, so it will not delete it")
        return sorted(out)

    def _only_blocks_of(self, rel: str, target: str) -> bool:
        try:
            blocks = decode_log_file(self.storage.read_bytes(rel), source=self.storage.full_path(rel))
        except StorageError:
            return True  # gone already
        except (MetadataDecodeError, MetadataTableError):
            return False
        return bool(blocks) and all(b.header.get(HeaderKey.INSTANT_TIME) == target for b in blocks)

    def _decode_commit(self, data: bytes, source: str) -> CommitMetadata:
        if self.table_version >= 8:
            return decode_commit_metadata_v2(data, source)
        return CommitMetadata.from_json_bytes(data, source)

    def _rollback_plan(self, target: str, files: Iterable[str]) -> dict[str, Any]:
        requests: dict[tuple[str, str], list[str]] = defaultdict(list)
        for rel in files:
            partition, name = rel.split("/", 1)
            lf = LogFileName.parse(name)
            requests[(partition, lf.file_id if lf else name)].append(self.storage.uri(rel))
        return {
            "instantToRollback": {"commitTime": target, "action": DELTA_COMMIT},
            "RollbackRequests": [
                {"partitionPath": p, "fileId": f, "latestBaseInstant": target, "filesToBeDeleted": paths,
                 "logBlocksToBeDeleted": {}} for (p, f), paths in sorted(requests.items())],
            "version": 1,
        }

    def _pending_rollback(self, store: MdtTimelineStore, timeline: MdtTimeline, target: str) -> str | None:
        for inst in timeline.of(ROLLBACK):
            if inst.is_completed:
                continue
            try:
                path = store.path(inst.time, ROLLBACK, MdtState.REQUESTED)
                plan = decode_ocf(self.storage.read_bytes(path), self.storage.full_path(path))
            except (StorageError, MetadataDecodeError):
                continue
            if (plan.get("instantToRollback") or {}).get("commitTime") == target:
                return inst.time
        return None

    def _planned_files(self, store: MdtTimelineStore, rollback_time: str) -> list[str]:
        path = store.path(rollback_time, ROLLBACK, MdtState.REQUESTED)
        plan = decode_ocf(self.storage.read_bytes(path), self.storage.full_path(path))
        out = []
        for req in plan.get("RollbackRequests") or []:
            for uri in req.get("filesToBeDeleted") or []:
                try:
                    out.append(self.storage.rel_from_uri(str(uri)))
                except StorageError:
                    continue
        return out

    # --- reading ------------------------------------------------------------------------------------------------

    def read(self, partition: str, data_completed: Iterable[str], *, wanted: Callable[[str], bool] | None = None,
             return_record_name: bool = False) -> dict[str, dict[str, Any]]:
        """The live records of metadata ``partition`` as readers merge them (see `reader.read_partition`), given
        the data timeline's completed instants."""
        timeline = self.timeline_store().load()
        done = [i for i in timeline.instants if i.is_completed]
        valid = valid_instants(data_completed, ((i.time, i.action) for i in done))
        completion = {i.time: i.completion_time for i in done if i.completion_time} \
            if self.config.timeline_layout.records_completion_time else None
        return read_partition(self.storage, partition, valid, completion=completion,
                              wanted=wanted or (lambda _key: True), return_record_name=return_record_name)

    def live_files(self, data_completed: Iterable[str]) -> dict[str, dict[str, int]]:
        """What the ``files`` partition lists: data partition (``""``: non-partitioned) → file name → size."""
        return files_of(self.read(rec.FILES, data_completed))


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


def _enable_key(partition: str) -> str:
    return {rec.RECORD_INDEX: "record.index.enable", rec.BLOOM_FILTERS: "index.bloom.filter.enable"}.get(
        partition, "index.expression.enable")
