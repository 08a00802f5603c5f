"""A Hudi table on storage: its properties, timeline, partitions, file-system view and lock."""

from __future__ import annotations

import threading
import time as _time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, tzinfo

import structlog

from hudi_clusterd.domain.file_group import BaseFile, join_partition
from hudi_clusterd.domain.fs_view import FileSystemView, PendingClustering, ReplacedGroups
from hudi_clusterd.domain.instant import (
    MAX_AHEAD_S,
    Action,
    Instant,
    State,
    next_instant_time,
    parse_instant_time,
    zone_skew_s,
)
from hudi_clusterd.domain.plan import ClusteringPlan, PendingPlan
from hudi_clusterd.domain.table_config import TIMELINE_HISTORY_PATH, TableConfig
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.domain.timeline_layout import DEFAULT_HISTORY_PATH
from hudi_clusterd.errors import MetadataDecodeError, StorageError, TableError, TimelineError
from hudi_clusterd.formats.java_properties import format_properties, parse_properties
from hudi_clusterd.lock import LockOptions, TableLock
from hudi_clusterd.storage import FileInfo, Storage, open_storage
from hudi_clusterd.table.footers import FooterRanges
from hudi_clusterd.table.metadata.writer import MetadataTable
from hudi_clusterd.table.timeline_store import META_FOLDER, TEMP_FOLDER, TimelineStore

log = structlog.get_logger(__name__)

PROPERTIES_FILE = ".hoodie/hoodie.properties"
PARTITION_METAFILE = ".hoodie_partition_metadata"
_SKIP_DIRS = frozenset({META_FOLDER, "_delta_log"})
CLOCK_SKEW_WAIT_S = 0.2
"""Hudi 1.x writers wait out ``hoodie.time.generator.max_expected_clock_skew_ms`` (200 ms by default) after taking
a time under the lock, so that a time taken after theirs, on another host, is greater; so does the daemon on
tables of timeline layout 2, whose readers order instants by completion time."""


class HoodieTable:
    """One copy-on-write table (version 6, 8 or 9)."""

    def __init__(self, storage: Storage, config: TableConfig, *, lock_options: LockOptions | None = None) -> None:
        self.storage = storage
        self.config = config
        self.lock_options = lock_options or LockOptions()
        self._locks = threading.local()  # the TableLock this thread holds, if any
        self.timeline_store = TimelineStore(storage, before_write=self.verify_lock, layout=config.timeline_layout,
                                            completion_time=self._completion_time)
        self.footer_ranges = FooterRanges(storage)

    # --- opening and creating -------------------------------------------------------------------------------

    @classmethod
    def exists(cls, base_path: str) -> bool:
        return open_storage(base_path).exists(PROPERTIES_FILE)

    @classmethod
    def open(cls, base_path: str, storage: Storage | None = None, *,
             lock_options: LockOptions | None = None) -> HoodieTable:
        """Open an existing table; refuses versions, layouts and types this daemon does not support."""
        storage = storage or open_storage(base_path)
        source = storage.full_path(PROPERTIES_FILE)
        if not storage.exists(PROPERTIES_FILE):
            if storage.exists(META_FOLDER):
                raise TableError(f"{source}: missing; {storage.base_uri} has a .hoodie folder but no table "
                                 "properties (a half-created or damaged table)")
            raise TableError(f"{source}: missing; {storage.base_uri} is not a Hudi table")
        config = _read_config(storage)
        config.check_readable(source)
        return cls(storage, config, lock_options=lock_options)

    def check_clusterable(self) -> None:
        """Re-read ``hoodie.properties`` (a writer may have changed it since the table was opened), follow a
        layout change, and refuse a table clustering must not write: another version or layout, or a metadata
        table the daemon cannot keep true (`MetadataTable.check_supported`)."""
        source = self.storage.full_path(PROPERTIES_FILE)
        config = _read_config(self.storage)
        config.check_writable(source, keeps_metadata_table=True)
        if config.timeline_layout != self.timeline_store.layout:
            log.warning("the table's timeline layout changed (a writer upgraded it)", base_path=self.base_path,
                        table_version=config.version, layout=config.timeline_layout.version)
            self.timeline_store.layout = config.timeline_layout
        self.config = config
        mdt = self.metadata_table()
        if mdt is not None:
            mdt.check_supported()

    def metadata_table(self) -> MetadataTable | None:
        """The table's metadata table, when ``hoodie.properties`` says it has one."""
        if not MetadataTable.declared(self.config):
            return None
        # the metadata table's instants complete right before a data instant of the same lock hold, which waits
        # out the clock skew after taking its own, later, time
        return MetadataTable(self.storage, self.config, before_write=self.verify_lock,
                             new_time=lambda: self.new_instant_time(skew_wait=False))

    @classmethod
    def create(cls, base_path: str, config: TableConfig, storage: Storage | None = None) -> HoodieTable:
        """Lay out a new, empty table: ``.hoodie/`` with its sub-folders and ``hoodie.properties``."""
        storage = storage or open_storage(base_path)
        config.check_writable(storage.full_path(PROPERTIES_FILE))  # a new table: no metadata table
        layout = config.timeline_layout
        archive = f"{layout.folder}/{config.get(TIMELINE_HISTORY_PATH) or DEFAULT_HISTORY_PATH}" \
            if layout.records_completion_time else f"{META_FOLDER}/archived"
        for folder in (".hoodie/.aux/.bootstrap/.partitions", ".hoodie/.aux/.bootstrap/.fileids",
                       ".hoodie/.schema", ".hoodie/.temp", layout.folder, archive):
            storage.makedirs(folder)
        now = datetime.now(UTC)
        header = [f"Properties saved on {now.strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z"]
        data = format_properties(config.raw.items(), header).encode("iso-8859-1")
        if not storage.write_bytes(PROPERTIES_FILE, data, overwrite=False):
            raise TableError(f"{storage.full_path(PROPERTIES_FILE)}: already exists; the table was created "
                             "concurrently by another writer")
        log.info("created table", base_path=storage.base_uri, name=config.name)
        return cls(storage, config)

    @property
    def base_path(self) -> str:
        return self.storage.base_uri

    @property
    def name(self) -> str:
        return self.config.name

    # --- timeline ---------------------------------------------------------------------------------------------

    def timeline(self) -> Timeline:
        return self.timeline_store.load()

    @property
    def timeline_tz(self) -> tzinfo:
        """The zone instant times are read in: UTC when ``hoodie.table.timeline.timezone=UTC``, else this host's
        local zone (Hudi's LOCAL is the writer JVM's default zone, which must therefore match the daemon's)."""
        return UTC if self.config.timeline_timezone_utc else (datetime.now().astimezone().tzinfo or UTC)

    def new_instant_time(self, timeline: Timeline | None = None, now: datetime | None = None, *,
                         skew_wait: bool = True) -> str:
        """A fresh instant time, strictly greater than every instant on the timeline. Call under ``lock()``.
        On layout 2 the clock skew is waited out after taking it; ``skew_wait=False`` skips that for a time that
        a later one, taken in the same hold of the lock, follows.

        Refuses (``TimelineError``) when the newest instant is more than ``MAX_AHEAD_S`` ahead of this host's
        clock read in the table's zone: the new instant would have to be ahead of wall-clock time too, and a
        writer whose clock reads true would then take smaller times for later commits, which the file-system
        view orders before ours (their updates would be hidden)."""
        timeline = timeline if timeline is not None else self.timeline()
        if now is None:
            now = datetime.now(self.timeline_tz)
            if skew_wait and self.timeline_store.layout.records_completion_time:
                _time.sleep(CLOCK_SKEW_WAIT_S)
        last = timeline.last_time()
        if last is not None:
            ahead = (parse_instant_time(last, now.tzinfo or UTC) - now).total_seconds()
            if ahead > MAX_AHEAD_S:
                raise TimelineError(
                    f"{self.base_path}: the newest instant {last} is {ahead:.0f}s ahead of this host's clock read in "
                    f"the table's time zone ({self._zone_name()}); a new instant would be ahead of wall-clock time. "
                    "Check the clocks, and that every writer and the daemon read time in one zone (set "
                    "hoodie.table.timeline.timezone=UTC on the writers that create the table, or the same TZ)")
        return next_instant_time(now, last)

    def _completion_time(self) -> str:
        """A completion time for an instant completing now (call under the lock): the timeline is listed again,
        so that it exceeds every requested and completion time on it, the completing instant's own included."""
        return self.new_instant_time()

    def instant_time_taken(self, time: str) -> str | None:
        """A file showing that another writer uses instant time ``time`` for another action (ingestion commits,
        cleans and rollbacks take their times without the table lock), or None. Stats a few names; no listing."""
        store = self.timeline_store
        names = [store.path(Instant(time, action, state)) for action, state in (
            (Action.COMMIT, State.REQUESTED), (Action.COMMIT, State.INFLIGHT), (Action.DELTA_COMMIT, State.REQUESTED),
            (Action.CLEAN, State.REQUESTED), (Action.ROLLBACK, State.REQUESTED))]
        if not store.layout.records_completion_time:
            names.append(store.path(Instant(time, Action.COMMIT, State.COMPLETED)))
        names += [f"{TEMP_FOLDER}/{time}"]
        return next((self.storage.full_path(n) for n in names if self.storage.exists(n)), None)

    def _zone_name(self) -> str:
        return "UTC" if self.config.timeline_timezone_utc else f"LOCAL = {datetime.now().astimezone().tzname()}"

    def check_writer_zones(self, listed: Iterable[FileInfo], newest: int = 10) -> None:
        """Refuse (``TimelineError``) when the newest requested instants were named in another time zone than
        this host reads the timeline in: their times then sit a whole number of quarter hours away from when their
        files were written, and instants of the daemon would interleave wrongly with the writers'."""
        requested = []
        layout = self.timeline_store.layout
        for fi in listed:
            inst = layout.parse(fi.name, fi.mtime_ms) if fi.name.endswith(".requested") else None
            if inst is not None:
                requested.append(inst)
        for inst in sorted(requested, key=lambda i: i.time)[-newest:]:
            skew = zone_skew_s(inst.time, inst.transition_ms, self.timeline_tz)
            if skew is not None:
                raise TimelineError(
                    f"{self.storage.full_path(layout.path(inst))}: instant {inst.time} was named in "
                    f"a time zone {abs(skew) / 3600:.2f}h {'behind' if skew > 0 else 'ahead of'} the one this host "
                    f"reads the timeline in ({self._zone_name()}); the daemon's instants would be ordered wrongly "
                    "against the writers'. Run the daemon in the writers' time zone (TZ), or use "
                    "hoodie.table.timeline.timezone=UTC for the table")

    def instant_age_seconds(self, time: str, now: datetime | None = None) -> float:
        """How long ago an instant time was, read in the table's timeline time zone (LOCAL or UTC)."""
        tz = self.timeline_tz
        now = now or datetime.now(tz)
        return max(0.0, (now - parse_instant_time(time, tz)).total_seconds())

    def table_lock(self) -> TableLock:
        return TableLock(self.storage, self.lock_options)

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the table lock; every timeline write this thread makes meanwhile first checks it is still held."""
        if getattr(self._locks, "held", None) is not None:
            raise TableError(f"{self.storage.base_uri}: the table lock is already held by this thread")
        with self.table_lock().held() as held:
            self._locks.held = held
            try:
                yield
            finally:
                self._locks.held = None

    def verify_lock(self) -> None:
        """Before a timeline write: when this thread holds the table lock, check no other writer took it."""
        held: TableLock | None = getattr(self._locks, "held", None)
        if held is not None:
            held.verify()

    def pending_clustering_plans(self, timeline: Timeline | None = None) -> list[PendingPlan]:
        """Pending (requested or inflight) replacecommits whose requested file is a clustering plan.

        Every slice's base file must lie inside the table, in the slice's partition; a plan naming any other
        path is refused (``MetadataDecodeError`` naming its file): ``hudi-clusterd rollback --purge`` removes it."""
        timeline = timeline if timeline is not None else self.timeline()
        out: list[PendingPlan] = []
        for inst in timeline.replaces().pending():
            meta = self.timeline_store.requested_replace(inst.time)
            if meta is not None and meta.is_clustering and meta.clustering_plan is not None:
                self._check_plan_paths(inst, meta.clustering_plan)
                out.append(PendingPlan(inst, meta.clustering_plan))
        return out

    def _check_plan_paths(self, inst: Instant, plan: ClusteringPlan) -> None:
        for s in (s for g in plan.input_groups for s in g.slices):
            try:
                rel = self.storage.rel_from_uri(s.data_file_path)
            except StorageError as e:
                rel = f"(outside: {e})"
            if rel != join_partition(s.partition_path, s.file_name):
                source = self.storage.full_path(self.timeline_store.path(inst.with_state(State.REQUESTED)))
                raise MetadataDecodeError(
                    f"{source}: slice {s.file_id} names base file {s.data_file_path!r}, which is not in the table's "
                    f"partition {s.partition_path!r}; the plan is refused (remove it with hudi-clusterd rollback "
                    f"--instant {inst.time} --purge)")

    def is_clustering_instant(self, inst: Instant) -> bool:
        """Whether a replace instant is clustering: its completed metadata or its requested plan says CLUSTER."""
        if inst.action is Action.CLUSTERING:
            return True
        if inst.action is not Action.REPLACE_COMMIT:
            return False
        if inst.is_completed:
            return self.timeline_store.commit_metadata(inst).operation_type == "CLUSTER"
        meta = self.timeline_store.requested_replace(inst.time)
        return meta is not None and meta.is_clustering

    def last_clustering_time(self, timeline: Timeline | None = None) -> str | None:
        """The newest completed or pending clustering instant (Hudi 0.15 semantics)."""
        timeline = timeline if timeline is not None else self.timeline()
        for inst in reversed(timeline.replaces().instants):
            if self.is_clustering_instant(inst):
                return inst.time
        return None

    def latest_schema(self, timeline: Timeline | None = None) -> str | None:
        """The writer's Avro schema (``extraMetadata.schema``) of the newest completed write that may change it.

        Clustering and compaction commits are skipped, as Hudi does (they cannot change the schema)."""
        timeline = timeline if timeline is not None else self.timeline()
        for inst in reversed(timeline.commits().completed().instants):
            meta = self.timeline_store.commit_metadata(inst)
            if meta.operation_type in ("CLUSTER", "COMPACT", "LOG_COMPACT", "INDEX"):
                continue
            if meta.schema:
                return meta.schema
        return self.config.create_schema

    def commits_since_last_clustering(self, timeline: Timeline | None = None) -> int:
        timeline = timeline if timeline is not None else self.timeline()
        return timeline.commits_since(self.last_clustering_time(timeline))

    # --- listing and the file-system view ---------------------------------------------------------------------

    def scan_files(self) -> tuple[list[str], list[BaseFile]]:
        """One walk of the table: its partition paths (folders holding a partition metafile or base files;
        ``""`` = non-partitioned) and their base files. Each folder is listed once."""
        partitions: list[str] = []
        files: list[BaseFile] = []
        stack = [""]
        while stack:
            rel = stack.pop()
            found: list[BaseFile] = []
            is_partition = False
            for e in self.storage.list_dir(rel):
                if e.is_dir:
                    if rel == "" and e.name in _SKIP_DIRS:
                        continue
                    if not e.name.startswith("."):
                        stack.append(e.path)
                    continue
                if e.name.startswith(PARTITION_METAFILE):
                    is_partition = True
                bf = BaseFile.parse(rel, e.name, e.size)
                if bf is not None:
                    found.append(bf)
                elif e.name.endswith(".parquet"):
                    is_partition = True
            if is_partition or found:
                partitions.append(rel)
                files.extend(found)
        return sorted(partitions), files

    def list_partitions(self) -> list[str]:
        """Partition paths: folders holding a partition metafile or base files (``""`` = non-partitioned)."""
        return self.scan_files()[0]

    def list_base_files(self, partitions: list[str] | None = None) -> list[BaseFile]:
        """Base files of the given partitions (each listed once), or of the whole table."""
        if partitions is None:
            return self.scan_files()[1]
        out: list[BaseFile] = []
        for partition in partitions:
            for e in self.storage.list_dir(partition):
                if not e.is_dir:
                    bf = BaseFile.parse(partition, e.name, e.size)
                    if bf is not None:
                        out.append(bf)
        return out

    def replaced_groups(self, timeline: Timeline) -> ReplacedGroups:
        pairs = []
        for inst in timeline.replaces().completed():
            meta = self.timeline_store.commit_metadata(inst)
            pairs.append((inst.time, meta.partition_to_replace_file_ids or {}))
        return ReplacedGroups.from_instants(pairs)

    def file_system_view(self, timeline: Timeline | None = None, base_files: list[BaseFile] | None = None,
                         partitions: list[str] | None = None) -> FileSystemView:
        """The view of ``timeline`` (listed when None) over ``base_files`` of ``partitions`` (the whole table,
        listed in one walk, when both are None)."""
        timeline = timeline if timeline is not None else self.timeline()
        if base_files is None:
            if partitions is None:
                partitions, base_files = self.scan_files()
            else:
                base_files = self.list_base_files(partitions)
        pending = PendingClustering.from_plans(
            (p.instant.time, p.plan.group_ids()) for p in self.pending_clustering_plans(timeline)
        )
        return FileSystemView(timeline, base_files, self.replaced_groups(timeline), pending, frozenset(),
                              partitions or ())

    def base_file_uri(self, bf: BaseFile) -> str:
        return self.storage.uri(bf.relative_path)

    def read_properties_text(self) -> str:
        try:
            return self.storage.read_bytes(PROPERTIES_FILE).decode("iso-8859-1")
        except StorageError as e:
            raise TableError(f"{self.storage.full_path(PROPERTIES_FILE)}: {e}") from e


def timeline_folder(base_path: str) -> str:
    """The timeline folder of the table at ``base_path``, relative to it (``.hoodie`` when it cannot be read)."""
    storage = open_storage(base_path)
    try:
        return _read_config(storage).timeline_layout.folder
    except (StorageError, TableError, TimelineError):
        return META_FOLDER


def _read_config(storage: Storage) -> TableConfig:
    # Java's Properties.store writes ISO-8859-1 (other characters as \uXXXX escapes)
    source = storage.full_path(PROPERTIES_FILE)
    return TableConfig(parse_properties(storage.read_bytes(PROPERTIES_FILE).decode("iso-8859-1"), source))
