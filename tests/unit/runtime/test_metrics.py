"""Metrics over real HTTP on 127.0.0.1 (ephemeral port), /healthz, and the observer that feeds them events."""

from __future__ import annotations

import http.client
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from hudi_clusterd.ops.events import (
    CleanupFailed,
    GroupFinished,
    GroupStarted,
    LayoutMeasured,
    Outcome,
    PlanFinished,
    PlanScheduled,
    TableBusy,
    TableObserved,
)
from hudi_clusterd.runtime.metrics import Metrics, MetricsObserver
from hudi_clusterd.runtime.metrics_server import MetricsServer

NOW = 1_700_000_000.0


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def get(server: MetricsServer, path: str, accept: str | None = None) -> tuple[int, str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", path, headers={"Accept": accept} if accept else {})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type") or "", resp.read().decode()
    finally:
        conn.close()


def scrape(server: MetricsServer) -> list[Sample]:
    status, _, body = get(server, "/metrics")
    assert status == 200
    return [s for family in text_string_to_metric_families(body) for s in family.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    found = [s.value for s in samples if s.name == name and s.labels == labels]
    assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
    return found[0]


def has_series(samples: list[Sample], name: str, **labels: str) -> bool:
    return any(s.name == name and all(s.labels.get(k) == v for k, v in labels.items()) for s in samples)


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(clock=lambda: NOW)


@pytest.fixture
def server(metrics: Metrics) -> Iterator[MetricsServer]:
    with MetricsServer("127.0.0.1", 0, metrics, health=lambda: True) as srv:
        yield srv


def test_metrics_scrape_over_http_exposes_every_table_and_process_series(
    metrics: Metrics, server: MetricsServer
) -> None:
    # Given a daemon's worth of events for table t1
    metrics.set_commits_since_clustering("t1", 7)
    metrics.set_pending_plans("t1", 2, 30.5)
    metrics.plan_scheduled("t1")
    metrics.plan_finished("t1", "completed", 42.0, bytes_rewritten=1024, files_rewritten=3)
    metrics.set_snapshot("t1", files=12, small_files=5)
    metrics.set_files_scanned_ratio("t1", 0.25)
    metrics.set_table_busy("t1", 12.5)
    metrics.config_reload("success")
    metrics.group_started()
    metrics.group_started()
    metrics.group_finished()
    metrics.set_plans_queued(4)

    # When Prometheus scrapes /metrics
    samples = scrape(server)

    # Then every series carries the value the daemon set
    assert value(samples, "hudi_clusterd_commits_since_last_clustering", table="t1") == 7
    assert value(samples, "hudi_clusterd_pending_plans", table="t1") == 2
    assert value(samples, "hudi_clusterd_oldest_pending_plan_age_seconds", table="t1") == 30.5
    assert value(samples, "hudi_clusterd_plans_scheduled_total", table="t1") == 1
    assert value(samples, "hudi_clusterd_plans_finished_total", table="t1", outcome="completed") == 1
    assert value(samples, "hudi_clusterd_plans_finished_total", table="t1", outcome="failed") == 0
    assert value(samples, "hudi_clusterd_clustering_duration_seconds_count", table="t1", outcome="completed") == 1
    assert value(samples, "hudi_clusterd_clustering_duration_seconds_sum", table="t1", outcome="completed") == 42
    assert value(samples, "hudi_clusterd_rewritten_bytes_total", table="t1") == 1024
    assert value(samples, "hudi_clusterd_rewritten_files_total", table="t1") == 3
    assert value(samples, "hudi_clusterd_snapshot_files", table="t1") == 12
    assert value(samples, "hudi_clusterd_snapshot_small_files", table="t1") == 5
    assert value(samples, "hudi_clusterd_layout_files_scanned_ratio", table="t1") == 0.25
    assert value(samples, "hudi_clusterd_table_busy_seconds", table="t1") == 12.5
    assert value(samples, "hudi_clusterd_last_successful_clustering_timestamp_seconds", table="t1") == NOW
    assert value(samples, "hudi_clusterd_config_reloads_total", outcome="success") == 1
    assert value(samples, "hudi_clusterd_config_reloads_total", outcome="failure") == 0
    assert value(samples, "hudi_clusterd_groups_running") == 1
    assert value(samples, "hudi_clusterd_plans_queued") == 4


def test_metrics_names_and_labels_are_bounded(metrics: Metrics, server: MetricsServer) -> None:
    # Given every kind of event, for two tables
    for table in ("t1", "t2"):
        metrics.plan_scheduled(table)
        metrics.plan_finished(table, "conflict", 1.0)
        metrics.set_pending_plans(table, 0, None)

    # When scraped
    samples = scrape(server)

    # Then names are prefixed and the only labels are table, outcome (and the histogram's le)
    assert samples
    for sample in samples:
        assert sample.name.startswith("hudi_clusterd_"), sample.name
        assert set(sample.labels) <= {"table", "outcome", "step", "le"}, sample
        if "outcome" in sample.labels:
            assert sample.labels["outcome"] in {"completed", "failed", "rolled_back", "conflict", "success", "failure"}
        if "step" in sample.labels:
            assert sample.labels["step"] in {"markers", "heartbeat", "lock_release"}


def test_metrics_plan_finished_failed_counts_outcome_but_no_bytes_or_success_time(
    metrics: Metrics, server: MetricsServer
) -> None:
    # When a plan fails after 3 s
    metrics.plan_finished("t1", "failed", 3.0, bytes_rewritten=999, files_rewritten=9)

    # Then the failure is counted and timed, but nothing counts as rewritten or successful
    samples = scrape(server)
    assert value(samples, "hudi_clusterd_plans_finished_total", table="t1", outcome="failed") == 1
    assert value(samples, "hudi_clusterd_plans_finished_total", table="t1", outcome="completed") == 0
    assert value(samples, "hudi_clusterd_clustering_duration_seconds_count", table="t1", outcome="failed") == 1
    assert value(samples, "hudi_clusterd_rewritten_bytes_total", table="t1") == 0
    assert not has_series(samples, "hudi_clusterd_last_successful_clustering_timestamp_seconds", table="t1")


def test_metrics_pending_plans_zero_reports_zero_age(metrics: Metrics, server: MetricsServer) -> None:
    # Given an old pending plan that then completes
    metrics.set_pending_plans("t1", 1, 600.0)
    metrics.set_pending_plans("t1", 0, 600.0)

    # Then the oldest age drops to 0 with the count
    samples = scrape(server)
    assert value(samples, "hudi_clusterd_oldest_pending_plan_age_seconds", table="t1") == 0


def test_metrics_forget_table_removes_only_its_series(metrics: Metrics, server: MetricsServer) -> None:
    # Given two tables with series of every kind
    for table in ("gone", "kept"):
        metrics.set_commits_since_clustering(table, 1)
        metrics.set_pending_plans(table, 1, 5.0)
        metrics.plan_finished(table, "completed", 1.0, 10, 1)
        metrics.set_snapshot(table, 3, 1)
        metrics.set_files_scanned_ratio(table, 0.5)

    # When one table leaves the configuration
    metrics.forget_table("gone")

    # Then none of its series remain and the other table's are untouched
    samples = scrape(server)
    assert not [s for s in samples if s.labels.get("table") == "gone"]
    assert value(samples, "hudi_clusterd_commits_since_last_clustering", table="kept") == 1
    assert value(samples, "hudi_clusterd_plans_finished_total", table="kept", outcome="completed") == 1
    assert metrics.tables == frozenset({"kept"})


def test_metrics_rejects_unknown_outcomes_and_ratio_out_of_range(metrics: Metrics) -> None:
    with pytest.raises(ValueError, match="plan outcome"):
        metrics.plan_finished("t1", "exploded", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reload outcome"):
        metrics.config_reload("maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"within \[0, 1\], got 1.5"):
        metrics.set_files_scanned_ratio("t1", 1.5)
    with pytest.raises(ValueError, match="clean-up step"):
        metrics.cleanup_failed("t1", "everything")


def test_metrics_instances_have_separate_registries() -> None:
    # Given two Metrics in one process (creating the second would fail on a shared registry)
    first, second = Metrics(), Metrics()

    # When only the first counts a reload
    first.config_reload("failure")

    # Then the second is unaffected
    assert first.registry.get_sample_value("hudi_clusterd_config_reloads_total", {"outcome": "failure"}) == 1
    assert second.registry.get_sample_value("hudi_clusterd_config_reloads_total", {"outcome": "failure"}) == 0


def test_metrics_server_openmetrics_accept_header_negotiates_format(server: MetricsServer) -> None:
    status, content_type, body = get(server, "/metrics", accept="application/openmetrics-text; version=1.0.0")
    assert status == 200
    assert content_type.startswith("application/openmetrics-text")
    assert body.rstrip().endswith("# EOF")


def test_metrics_server_unknown_path_is_404(server: MetricsServer) -> None:
    status, _, _ = get(server, "/nope")
    assert status == 404


def test_metrics_server_healthz_follows_the_health_check_200_then_503_then_200() -> None:
    healthy = [True]
    with MetricsServer("127.0.0.1", 0, Metrics(), lambda: healthy[0]) as server:
        status, _, body = get(server, "/healthz")
        assert (status, body) == (200, "ok\n")
        healthy[0] = False  # e.g. a table worker stopped beating
        assert get(server, "/healthz")[0] == 503
        healthy[0] = True
        assert get(server, "/healthz")[0] == 200


def test_metrics_server_healthz_is_503_when_health_check_raises() -> None:
    def broken() -> bool:
        raise RuntimeError("boom")

    with MetricsServer("127.0.0.1", 0, Metrics(), broken) as server:
        assert get(server, "/healthz")[0] == 503


def test_metrics_server_stop_releases_port_and_is_idempotent() -> None:
    # Given a running server
    server = MetricsServer("127.0.0.1", 0, Metrics(), lambda: True)
    server.start()
    port = server.port

    # When stopped (twice)
    server.stop()
    server.stop()

    # Then nothing listens on its port any more
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    with pytest.raises(ConnectionRefusedError):
        conn.request("GET", "/healthz")
    conn.close()


def test_metrics_server_port_before_start_raises() -> None:
    with pytest.raises(RuntimeError, match="before start"):
        _ = MetricsServer("127.0.0.1", 0, Metrics(), lambda: True).port


def test_metrics_observer_turns_events_into_series(server: MetricsServer) -> None:
    metrics = Metrics()
    observer = MetricsObserver(metrics)
    observer.notify(TableObserved("a", 5, 2, 30.0, 40, 12))
    observer.notify(TableObserved("b", 1, 1, 5.0, 3, 1, compaction_blocked_s=5.0))
    observer.notify(PlanScheduled("a", "20240101000000001", 2, 6, 1000, "due"))
    observer.notify(GroupStarted("a", "20240101000000001", 0, 2, "p", 3))
    observer.notify(GroupStarted("a", "20240101000000001", 1, 2, "p", 3))
    observer.notify(GroupFinished("a", "20240101000000001", 0, 2, 1, 500, 1.5))
    observer.notify(PlanFinished("a", "20240101000000001", Outcome.COMPLETED, 4.0, 6, 1000, 2, 900))
    observer.notify(PlanFinished("a", "20240101000000002", Outcome.SKIPPED, 0.0))
    observer.notify(LayoutMeasured("a", ("x",), 0.25))
    observer.notify(TableBusy("b", 90.0))
    observer.notify(CleanupFailed("a", "20240101000000001", "markers", "delete folder: access denied"))
    reg = metrics.registry
    assert reg.get_sample_value("hudi_clusterd_cleanup_failures_total", {"table": "a", "step": "markers"}) == 1
    assert reg.get_sample_value("hudi_clusterd_cleanup_failures_total", {"table": "a", "step": "heartbeat"}) == 0
    assert reg.get_sample_value("hudi_clusterd_commits_since_last_clustering", {"table": "a"}) == 5
    assert reg.get_sample_value("hudi_clusterd_snapshot_small_files", {"table": "a"}) == 12
    assert reg.get_sample_value("hudi_clusterd_pending_clustering_blocks_compaction_seconds", {"table": "a"}) == 0
    assert reg.get_sample_value("hudi_clusterd_pending_clustering_blocks_compaction_seconds", {"table": "b"}) == 5
    assert reg.get_sample_value("hudi_clusterd_plans_queued") == 3
    assert reg.get_sample_value("hudi_clusterd_plans_scheduled_total", {"table": "a"}) == 1
    assert reg.get_sample_value("hudi_clusterd_groups_running") == 1
    assert reg.get_sample_value("hudi_clusterd_plans_finished_total", {"table": "a", "outcome": "completed"}) == 1
    assert reg.get_sample_value("hudi_clusterd_rewritten_files_total", {"table": "a"}) == 6
    assert reg.get_sample_value("hudi_clusterd_rewritten_bytes_total", {"table": "a"}) == 1000
    assert reg.get_sample_value("hudi_clusterd_layout_files_scanned_ratio", {"table": "a"}) == 0.25
    assert reg.get_sample_value("hudi_clusterd_table_busy_seconds", {"table": "b"}) == 90
    observer.notify(TableBusy("b", 0.0))
    assert reg.get_sample_value("hudi_clusterd_table_busy_seconds", {"table": "b"}) == 0
    observer.forget_table("a")
    assert reg.get_sample_value("hudi_clusterd_plans_queued") == 1
    assert reg.get_sample_value("hudi_clusterd_snapshot_files", {"table": "a"}) is None
    assert reg.get_sample_value("hudi_clusterd_cleanup_failures_total", {"table": "a", "step": "markers"}) is None
