"""A Hudi table on storage: its properties, timeline, partitions, file-system view, metadata table and lock.

`HoodieTable` is the handle the rest of the daemon holds; its work is done by the modules it delegates to:
``properties`` (opening, creating, checking), ``instant_times`` (new instant times from an injected `Clock`),
``clustering_queries`` (pending plans, last clustering, latest schema) and ``listing`` (partitions, base and log
files, pending compactions, the file-system view).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, tzinfo

import structlog

from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.fs_view import FileSystemView, ReplacedGroups
from hudi_clusterd.domain.instant import Instant
from hudi_clusterd.domain.log_file import LogFile
from hudi_clusterd.domain.merging import DEFAULT_RELEASE, Release
from hudi_clusterd.domain.plan import PendingPlan
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.errors import TableError, UnsupportedTableError
from hudi_clusterd.formats.log import MergeRule, SliceMerge
from hudi_clusterd.lock import FileSystemLockProvider, Lease, LockProvider
from hudi_clusterd.lock.usage import LockUsage
from hudi_clusterd.storage import FileInfo, Storage, open_storage
from hudi_clusterd.table import clustering_queries as queries
from hudi_clusterd.table import instant_times, listing, properties
from hudi_clusterd.table.clock import SYSTEM_CLOCK, Clock
from hudi_clusterd.table.footers import FooterRanges
from hudi_clusterd.table.metadata.writer import MetadataTable
from hudi_clusterd.table.properties import PROPERTIES_FILE, timeline_folder
from hudi_clusterd.table.table_ref import TableRef
from hudi_clusterd.table.timeline_store import TimelineStore

log = structlog.get_logger(__name__)

__all__ = ["PROPERTIES_FILE", "HoodieTable", "timeline_folder"]


class HoodieTable:
    """One table (version 6, 8 or 9)."""

    def __init__(self, storage: Storage, config: TableConfig, *, lock_provider: LockProvider | None = None,
                 clock: Clock = SYSTEM_CLOCK, merge_release: Release = DEFAULT_RELEASE) -> None:
        self.storage = storage
        self.config = config
        self.merge_release = merge_release
        """Whose semantics a merge-on-read table of version 6 is merged with (`MergeRule.of_table`)."""
        self.lock_provider = lock_provider or FileSystemLockProvider(storage)
        self.clock = clock
        """Where instant times come from, and how the clock skew is waited out."""
        self._locks = threading.local()  # the Lease this thread holds, if any
        self.lock_usage = LockUsage()
        """How long each holding of the lock through this handle lasted."""
        self.timeline_store = TimelineStore(storage, before_write=self.verify_lock, layout=config.timeline_layout,
                                            completion_time=self._completion_time)
        self.footer_ranges = FooterRanges(storage)
        self._mdt: MetadataTable | None = None
        self._mdt_lock = threading.Lock()

    # --- opening and creating -------------------------------------------------------------------------------

    @classmethod
    def exists(cls, base_path: str) -> bool:
        return open_storage(base_path).exists(PROPERTIES_FILE)

    @classmethod
    def open(cls, base_path: str, storage: Storage | None = None, *, lock_provider: LockProvider | None = None,
             clock: Clock = SYSTEM_CLOCK, merge_release: Release = DEFAULT_RELEASE) -> HoodieTable:
        """Open an existing table; refuses versions, layouts and types this daemon does not support.

        ``lock_provider`` takes the table's lock (default: the file lock in the table's ``.hoodie``);
        ``merge_release``: whose semantics a version-6 merge-on-read table is merged with."""
        storage = storage or open_storage(base_path)
        return cls(storage, properties.read_existing_config(storage), lock_provider=lock_provider, clock=clock,
                   merge_release=merge_release)

    @classmethod
    def create(cls, base_path: str, config: TableConfig, storage: Storage | None = None, *,
               clock: Clock = SYSTEM_CLOCK) -> HoodieTable:
        """Lay out a new, empty table: ``.hoodie/`` with its sub-folders and ``hoodie.properties``."""
        storage = storage or open_storage(base_path)
        properties.lay_out(storage, config, clock)
        log.info("created table", base_path=storage.base_uri, name=config.name)
        return cls(storage, config, clock=clock)

    def check_clusterable(self) -> None:
        """Re-read ``hoodie.properties`` (a writer may have changed it since the table was opened), follow a
        layout change, and refuse a table clustering must not write: another version or layout, or a metadata
        table the daemon cannot keep true (`MetadataTable.check_supported`)."""
        config = properties.read_writable_config(self.storage)
        if self.config.merge_on_read and config.version != self.config.version:
            # Hudi's upgrade of a merge-on-read table compacts it: a clustering must not straddle it
            raise UnsupportedTableError(
                f"{self.base_path}: the table version changed from {self.config.version} to {config.version} (a "
                "writer upgraded it); a merge-on-read clustering does not straddle an upgrade: open the table again")
        if config.timeline_layout != self.timeline_store.layout:
            log.warning("the table's timeline layout changed (a writer upgraded it)", base_path=self.base_path,
                        table_version=config.version, timeline_folder=config.timeline_layout.folder)
            self.timeline_store.layout = config.timeline_layout
        self.config = config
        mdt = self.metadata_table()
        if mdt is not None:
            mdt.check_supported()

    def slice_merge(self, timeline: Timeline, instant: str) -> SliceMerge | None:
        """How clustering ``instant`` merges file slices with log files, as of ``timeline`` (read right before the
        groups run): the table's merge rule and the write instants completed up to ``instant``; an instant older
        than every completed write and every pending instant has been archived and counts as completed. None for
        a copy-on-write table."""
        if not self.config.merge_on_read:
            return None
        rule = MergeRule.of_table(self.config.merging, self.config.precombine_field, self.merge_release)
        commits = timeline.commits()
        firsts = [i.time for i in (commits.completed().first, timeline.pending().first) if i is not None]
        return SliceMerge.as_of_instant(rule, {i.time for i in timeline.completed()}, instant,
                                        min(firsts) if firsts else None, self.latest_schema(timeline))

    def metadata_table(self) -> MetadataTable | None:
        """The table's metadata table, when ``hoodie.properties`` says it has one: one per table handle (built on
        first use, and again when `check_clusterable` finds the properties changed)."""
        config = self.config
        if not MetadataTable.declared(config):
            return None
        with self._mdt_lock:
            if self._mdt is None or self._mdt.data_config != config:
                # the metadata table's instants complete right before a data instant of the same lock hold, which
                # waits out the clock skew after taking its own, later, time
                self._mdt = MetadataTable(self.storage, config, before_write=self.verify_lock,
                                          new_time=lambda: self.new_instant_time(skew_wait=False))
            return self._mdt

    @property
    def base_path(self) -> str:
        return self.storage.base_uri

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def ref(self) -> TableRef:
        """What a data engine needs of this table (`ops.ports.GroupRunner`)."""
        return TableRef(self.name, self.storage.spec, self.config)

    def read_properties_text(self) -> str:
        return properties.read_properties_text(self.storage)

    # --- timeline and instant times ---------------------------------------------------------------------------

    def timeline(self) -> Timeline:
        return self.timeline_store.load()

    @property
    def max_pending_s(self) -> float | None:
        """How long after its requested time a clustering may still start (`TimelineLayout.max_pending_s`);
        None: no limit."""
        return self.timeline_store.layout.max_pending_s

    @property
    def timeline_tz(self) -> tzinfo:
        """The zone instant times are read in (`instant_times.timeline_tz`)."""
        return instant_times.timeline_tz(self.config)

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
        return instant_times.new_instant_time(self.clock, self.config, self.timeline_store.layout, timeline,
                                              self.base_path, now, skew_wait=skew_wait)

    def _completion_time(self) -> str:
        """A completion time for an instant completing now (call under the lock): the timeline is listed again,
        so that it exceeds every requested and completion time on it, the completing instant's own included."""
        return self.new_instant_time()

    def instant_time_taken(self, time: str) -> str | None:
        """A file showing that another writer uses instant time ``time`` (`instant_times.instant_time_taken`)."""
        return instant_times.instant_time_taken(self.storage, self.timeline_store.layout, time)

    def check_writer_zones(self, listed: Iterable[FileInfo], newest: int = 10) -> None:
        """Refuse instants named in another time zone (`instant_times.check_writer_zones`)."""
        instant_times.check_writer_zones(self.config, self.timeline_store.layout, self.storage, listed, newest)

    def instant_age_seconds(self, time: str, now: datetime | None = None) -> float:
        """How long ago an instant time was, read in the table's timeline time zone (LOCAL or UTC)."""
        return instant_times.instant_age_seconds(self.clock, self.config, time, now)

    # --- the lock ---------------------------------------------------------------------------------------------

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the table lock; every timeline write this thread makes meanwhile first checks it is still held."""
        if getattr(self._locks, "held", None) is not None:
            raise TableError(f"{self.storage.base_uri}: the table lock is already held by this thread")
        with self.lock_provider.acquire() as lease:
            self._locks.held = lease
            taken = time.monotonic()
            try:
                yield
            finally:
                self._locks.held = None
                self.lock_usage.record(time.monotonic() - taken)

    def verify_lock(self) -> None:
        """Before a timeline write: when this thread holds the table lock, check no other writer took it."""
        lease: Lease | None = getattr(self._locks, "held", None)
        if lease is not None:
            lease.verify()

    # --- clustering on the timeline ---------------------------------------------------------------------------

    def pending_clustering_plans(self, timeline: Timeline | None = None) -> list[PendingPlan]:
        """Pending clustering plans (`clustering_queries.pending_clustering_plans`)."""
        return queries.pending_clustering_plans(self.timeline_store, self._or_load(timeline))

    def is_clustering_instant(self, inst: Instant) -> bool:
        return queries.is_clustering_instant(self.timeline_store, inst)

    def last_clustering_time(self, timeline: Timeline | None = None) -> str | None:
        """The newest completed or pending clustering instant (Hudi 0.15 semantics)."""
        return queries.last_clustering_time(self.timeline_store, self._or_load(timeline))

    def latest_schema(self, timeline: Timeline | None = None) -> str | None:
        """The writers' latest Avro schema (`clustering_queries.latest_schema`)."""
        return queries.latest_schema(self.timeline_store, self._or_load(timeline), self.config.create_schema)

    def commits_since_last_clustering(self, timeline: Timeline | None = None) -> int:
        return queries.commits_since_last_clustering(self.timeline_store, self._or_load(timeline))

    def _or_load(self, timeline: Timeline | None) -> Timeline:
        return timeline if timeline is not None else self.timeline()

    # --- listing and the file-system view ---------------------------------------------------------------------

    def scan_files(self) -> listing.Listing:
        """One walk of the table: its partition paths and their base and log files (`listing.scan_files`)."""
        return listing.scan_files(self.storage)

    def list_base_files(self, partitions: list[str] | None = None) -> list[BaseFile]:
        """Base files of the given partitions (each listed once), or of the whole table."""
        if partitions is None:
            return self.scan_files().base_files
        return listing.list_data_files(self.storage, partitions).base_files

    def replaced_groups(self, timeline: Timeline) -> ReplacedGroups:
        return listing.replaced_groups(self.timeline_store, timeline)

    def file_system_view(self, timeline: Timeline | None = None, files: listing.DataFiles | None = None,
                         partitions: list[str] | None = None) -> FileSystemView:
        """The view of ``timeline`` (listed when None) over ``files`` of ``partitions`` (listed when None; the
        whole table, in one walk, when both are None)."""
        timeline = self._or_load(timeline)
        if files is None:
            if partitions is None:
                scanned = self.scan_files()
                partitions, files = scanned.partitions, listing.DataFiles(scanned.base_files, scanned.log_files)
            else:
                files = listing.list_data_files(self.storage, partitions)
        return listing.file_system_view(self.timeline_store, timeline, files, partitions,
                                        self.pending_clustering_plans(timeline))

    def base_file_uri(self, file: BaseFile | LogFile) -> str:
        """A base or log file's full path with scheme, as plans record it."""
        return self.storage.uri(file.relative_path)
