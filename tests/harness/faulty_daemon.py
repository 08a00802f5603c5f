"""A daemon of one table whose storage fails as ``tests/harness/fault_injection.py`` makes it: the storage calls
of each user of the storage (the timeline's clustering files, the metadata table's deltacommit, the heartbeat, the
markers), and a daemon (`hudi_clusterd.runtime.service.TableWorker`, ticked in this thread) whose table storage,
metadata table storage and group runner (`ArrowGroupRunner`, no JVM) all go through the faults.

`Recorded` keeps the daemon's events and notes, at the moment a plan is reported other than completed, whether its
completed replacecommit was on the timeline then: a committed clustering reported failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hudi_clusterd.ops.events import CleanupFailed, Event, Outcome, PlanFinished
from hudi_clusterd.runtime.reload import SettingsHolder
from hudi_clusterd.runtime.service import Daemon, TableWorker
from hudi_clusterd.settings import settings_from_properties
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.harness.crash_harness import completed_replace_file
from tests.harness.fault_injection import Fault, FaultLog, Rule, inject
from tests.harness.fault_storage import ArrowGroupRunner

_T = r"^\.hoodie/(timeline/)?\d+"
_MDT = r"^\.hoodie/(timeline/)?\d+"  # relative to the metadata table's folder, as its storage names its files
USERS: dict[str, list[tuple[str, str]]] = {
    # (operation, path) of the storage calls each user makes
    "requested": [("put", _T + r"\.(replacecommit|clustering)\.requested$")],
    "inflight": [("put", _T + r"\.(replacecommit|clustering)\.inflight$")],
    "completed": [("put", _T + r"(_\d+)?\.replacecommit$")],
    "metadata commit": [("put", _MDT + r"\.deltacommit\.requested$"), ("put", _MDT + r"\.deltacommit\.inflight$"),
                        ("put", r"^[a-z_]+/\.[a-z_-]+-\d+-\d+_.*\.log\."),
                        ("put", _MDT + r"(_\d+)?\.deltacommit$")],
    "heartbeat": [("put", r"^\.hoodie/\.heartbeat/\d+$"), ("delete", r"^\.hoodie/\.heartbeat/\d+$")],
    "markers": [("put", r"^\.hoodie/\.temp/\d+/.*\.marker\.CREATE$")],
}
"""Each user of the storage in a clustering, as the (operation, path) of its storage calls."""


def rules_for(fault: Fault, user: str) -> list[Rule]:
    """``fault`` once at each storage call of ``user``."""
    return [Rule(fault, path, op) for op, path in USERS[user]]


@dataclass
class Recorded:
    """The daemon's events (see the module's text)."""

    base: Path
    events: list[Event] = field(default_factory=list)
    committed_but_reported: list[PlanFinished] = field(default_factory=list)

    def notify(self, event: Event) -> None:
        self.events.append(event)
        if (isinstance(event, PlanFinished) and event.outcome is not Outcome.COMPLETED
                and completed_replace_file(self.base, event.instant) is not None):
            self.committed_but_reported.append(event)

    def finished(self) -> list[PlanFinished]:
        return [e for e in self.events if isinstance(e, PlanFinished)]

    def cleanup_failed(self) -> list[CleanupFailed]:
        return [e for e in self.events if isinstance(e, CleanupFailed)]


@dataclass
class FaultyDaemon:
    """A daemon of one table whose storage fails as ``faults`` say."""

    worker: TableWorker
    faults: list[FaultLog]
    recorded: Recorded

    @property
    def table(self) -> HoodieTable:
        assert self.worker.table is not None
        return self.worker.table

    def tick(self) -> bool:
        return self.worker.guarded_tick()

    def tick_until_completed(self, max_ticks: int) -> list[bool]:
        """Tick until a plan completed (at most ``max_ticks`` times); how each tick went."""
        ticks: list[bool] = []
        while not any(e.outcome is Outcome.COMPLETED for e in self.recorded.finished()) and len(ticks) < max_ticks:
            ticks.append(self.tick())
        return ticks

    def unfired(self) -> list[Rule]:
        return [rule for rule in self.faults[0].rules if rule.times > 0]


def assert_nothing_named_is_gone(base: Path) -> None:
    """Every file a completed commit or replacecommit names is on storage (no cleaner runs in these tests)."""
    table = HoodieTable.open(str(base))
    for inst in table.timeline().commits().completed():
        for ws in table.timeline_store.commit_metadata(inst).write_stats():
            assert ws.path and (base / ws.path).is_file(), f"{inst}: {ws.path} named by a completed instant is gone"


def faulty_daemon(base: Path, props: Mapping[str, str], *rules: Rule) -> FaultyDaemon:
    """A daemon of the table at ``base`` (named ``t``; the daemon's and policy's ``props``) failing as ``rules``
    say on its table's storage and its metadata table's."""
    recorded = Recorded(base)
    settings = settings_from_properties({**props, "clusterd.tables": "t", "clusterd.table.t.base.path": str(base)},
                                        source="test")[0]
    daemon = Daemon(SettingsHolder(settings), ArrowGroupRunner(), recorded)
    worker = TableWorker("t", daemon)
    table = worker.open_table(daemon.settings.current, worker.spec)
    logs = [inject(table.storage, *rules)]
    mdt = table.metadata_table()
    if mdt is not None:
        logs.append(inject(mdt.storage, *rules))  # the same rules, on the metadata table's own storage
    daemon.runner = ArrowGroupRunner(table.storage)
    return FaultyDaemon(worker, logs, recorded)
