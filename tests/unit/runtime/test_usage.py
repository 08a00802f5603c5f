"""What each tick of a table cost reaches Prometheus: object-store requests by kind, lock holdings, and what the
lock provider counted, as deltas since the previous tick."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import generate_latest

from hudi_clusterd.lock import LockStats, LockUsage
from hudi_clusterd.ops.events import TableUsage
from hudi_clusterd.runtime.metrics import Metrics, MetricsObserver
from hudi_clusterd.runtime.usage import UsageReport
from hudi_clusterd.storage.requests import RequestCounts


@dataclass
class _Storage:
    requests: RequestCounts | None = field(default_factory=RequestCounts)


@dataclass
class _Provider:
    stats: LockStats = field(default_factory=LockStats)


@dataclass
class _Table:
    """The parts of a table handle the report reads."""

    storage: _Storage = field(default_factory=_Storage)
    lock_provider: _Provider = field(default_factory=_Provider)
    lock_usage: LockUsage = field(default_factory=LockUsage)


def test_a_report_holds_what_changed_since_the_previous_one() -> None:
    table, report = _Table(), UsageReport("events")
    assert report.since_last(None) is None
    assert report.since_last(table) is None  # nothing happened yet
    assert table.storage.requests is not None
    table.storage.requests.add("LIST", 2)
    table.storage.requests.add("PUT")
    table.lock_usage.record(0.25)
    table.lock_provider.stats.add_connection_retry()
    assert report.since_last(table) == TableUsage("events", {"LIST": 2, "PUT": 1}, (0.25,), 1, 0, 0)
    table.storage.requests.add("LIST")
    table.lock_provider.stats.add_lease_lost()
    assert report.since_last(table) == TableUsage("events", {"LIST": 1}, (), 0, 0, 1)
    assert report.since_last(table) is None
    # a table opened again starts its counters afresh
    again = _Table(storage=_Storage(requests=None))
    again.lock_usage.record(0.5)
    assert report.since_last(again) == TableUsage("events", {}, (0.5,), 0, 0, 0)


def test_usage_becomes_per_table_series_and_leaves_with_the_table() -> None:
    metrics = Metrics()
    observer = MetricsObserver(metrics)
    observer.notify(TableUsage("events", {"LIST": 3, "precondition_failed": 1}, (0.2, 0.4), 2, 1, 1))
    observer.notify(TableUsage("events", {"LIST": 1}, (), 0, 0, 0))
    text = generate_latest(metrics.registry).decode()
    assert 'hudi_clusterd_storage_requests_total{kind="LIST",table="events"} 4.0' in text
    assert 'hudi_clusterd_storage_requests_total{kind="precondition_failed",table="events"} 1.0' in text
    assert 'hudi_clusterd_lock_hold_seconds_count{table="events"} 2.0' in text
    assert 'hudi_clusterd_lock_hold_seconds_bucket{le="0.25",table="events"} 1.0' in text
    assert 'hudi_clusterd_lock_connection_retries_total{table="events"} 2.0' in text
    assert 'hudi_clusterd_lock_takeovers_total{table="events"} 1.0' in text
    assert 'hudi_clusterd_lock_leases_lost_total{table="events"} 1.0' in text
    observer.forget_table("events")
    assert 'table="events"' not in generate_latest(metrics.registry).decode()
