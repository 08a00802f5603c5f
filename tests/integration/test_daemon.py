"""The daemon as users run it: a real process, a real table, metrics over HTTP, reload, shutdown."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.formats.avro import decode_requested_replace
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import TableGen, commit_some
from tests.harness.daemon_harness import (
    DaemonProcess,
    health,
    metric,
    scrape,
    wait_for,
    write_props,
)
from tests.harness.hudi_rs_checks import assert_no_orphan_files, completed_clusterings, hudi_rs_rows, without_file_name
from tests.support import free_port

pytestmark = pytest.mark.spark

MAX_COMMITS = "hoodie.clustering.async.max.commits"
SORT = "hoodie.clustering.plan.strategy.sort.columns"


def test_daemon_clusters_at_commit_count_and_serves_metrics_and_json_logs(tmp_path: Path) -> None:
    gen = TableGen(tmp_path / "events")
    commit_some(gen, 2)
    port = free_port()
    props = tmp_path / "clusterd.properties"
    write_props(props, gen.base, port, **{MAX_COMMITS: "3", SORT: "x"})
    daemon = DaemonProcess(props, tmp_path / "daemon.log")
    try:
        wait_for(lambda: health(port) == 200, 90, "/healthz", daemon.proc)
        wait_for(lambda: metric(scrape(port), "hudi_clusterd_commits_since_last_clustering", table="events") == 2,
                 60, "commits gauge = 2", daemon.proc)
        assert completed_clusterings(gen.base) == []  # 2 commits < 3: nothing yet
        commit_some(gen, 1)
        before = without_file_name(hudi_rs_rows(gen.base))  # clustering may already run: rows are equal anyway
        wait_for(lambda: len(completed_clusterings(gen.base)) == 1, 120, "a completed clustering", daemon.proc)
        wait_for(lambda: metric(scrape(port), "hudi_clusterd_plans_finished_total", table="events",
                                outcome="completed") == 1, 30, "completed counter", daemon.proc)
        samples = scrape(port)
        assert metric(samples, "hudi_clusterd_plans_scheduled_total", table="events") == 1
        assert metric(samples, "hudi_clusterd_commits_since_last_clustering", table="events") == 0
        assert metric(samples, "hudi_clusterd_rewritten_files_total", table="events") == 3
        assert metric(samples, "hudi_clusterd_last_successful_clustering_timestamp_seconds", table="events") > 0
        assert without_file_name(hudi_rs_rows(gen.base)) == before
        instant = completed_clusterings(gen.base)[0]
        lines = daemon.logs()
        assert lines, "no JSON log lines"
        with_instant = [r for r in lines if r.get("instant") == instant]
        assert with_instant and all(r.get("table") == "events" for r in with_instant)
    finally:
        daemon.stop()


def test_daemon_reload_changes_next_plan_and_invalid_edit_keeps_old_config(tmp_path: Path) -> None:
    gen = TableGen(tmp_path / "events")
    port = free_port()
    props = tmp_path / "clusterd.properties"
    write_props(props, gen.base, port, **{MAX_COMMITS: "100", SORT: "x"})
    daemon = DaemonProcess(props, tmp_path / "daemon.log")
    try:
        wait_for(lambda: health(port) == 200, 90, "/healthz", daemon.proc)
        commit_some(gen, 2)
        write_props(props, gen.base, port, **{MAX_COMMITS: "2", SORT: "id"})  # valid edit: applies to next plan
        wait_for(lambda: metric(scrape(port), "hudi_clusterd_config_reloads_total", outcome="success") >= 1, 30,
                 "a successful reload", daemon.proc)
        wait_for(lambda: len(completed_clusterings(gen.base)) == 1, 120, "clustering after reload", daemon.proc)
        instant = completed_clusterings(gen.base)[0]
        requested = gen.base / ".hoodie" / f"{instant}.replacecommit.requested"
        meta = decode_requested_replace(requested.read_bytes(), str(requested))
        assert meta is not None and meta.clustering_plan is not None
        assert meta.clustering_plan.strategy.sort_columns == ("id",)

        props.write_text(props.read_text().replace(f"{MAX_COMMITS}=2", f"{MAX_COMMITS}=-5"))  # invalid
        wait_for(lambda: metric(scrape(port), "hudi_clusterd_config_reloads_total", outcome="failure") >= 1, 30,
                 "a failed reload", daemon.proc)
        assert health(port) == 200
        commit_some(gen, 2)  # the old config (max.commits=2) still applies
        wait_for(lambda: len(completed_clusterings(gen.base)) == 2, 120, "clustering under the old config",
                 daemon.proc)
        failures = [r for r in daemon.logs() if "reload" in str(r.get("event", "")) and r.get("level") == "error"]
        assert any("max.commits" in json.dumps(r) for r in failures)
    finally:
        daemon.stop()


def test_daemon_sigterm_during_group_exits_with_documented_code_and_restart_recovers(tmp_path: Path) -> None:
    from hudi_clusterd.exit_codes import EXIT_GRACE_EXPIRED, EXIT_OK

    gen = TableGen(tmp_path / "events")
    commit_some(gen, 4, rows=40_000)
    before = without_file_name(hudi_rs_rows(gen.base))
    port = free_port()
    props = tmp_path / "clusterd.properties"
    write_props(props, gen.base, port, **{MAX_COMMITS: "4", SORT: "x,id",
                                          "hoodie.layout.optimize.strategy": "hilbert",
                                          "hoodie.layout.optimize.curve.build.method": "sample",
                                          "hoodie.clustering.plan.strategy.target.file.max.bytes": "65536"})
    daemon = DaemonProcess(props, tmp_path / "daemon.log")
    try:
        wait_for(lambda: any((gen.base / ".hoodie").glob("*.replacecommit.inflight")), 120, "an inflight clustering",
                 daemon.proc, interval=0.05)
        daemon.signal(signal.SIGTERM)
        code = daemon.wait(timeout=2 + 60)  # grace (2 s) plus cancel time
        assert code in (EXIT_OK, EXIT_GRACE_EXPIRED)
    finally:
        daemon.stop()
    if code == EXIT_GRACE_EXPIRED:
        messages = [r.get("event") for r in daemon.logs()]
        assert any("cancel" in str(m) for m in messages)
    # the next start rolls back or completes whatever was left, with nothing lost or duplicated
    restart = DaemonProcess(props, tmp_path / "daemon2.log")
    try:
        wait_for(lambda: len(completed_clusterings(gen.base)) == 1
                 and not HoodieTable.open(str(gen.base)).pending_clustering_plans(), 180,
                 "one completed clustering and no pending plan after the restart", restart.proc)
        # a clustering removes its markers just after its commit: stop the daemon the way operators do, once it
        # is serving (the clustering may have completed before the first daemon exited, with this one still booting)
        wait_for(lambda: health(port) == 200, 90, "/healthz of the restarted daemon", restart.proc)
        restart.signal(signal.SIGTERM)
        assert restart.wait(timeout=60) == EXIT_OK
    finally:
        restart.stop()
    assert without_file_name(hudi_rs_rows(gen.base)) == before
    assert_no_orphan_files(gen.base, at_rest=True)


def test_daemon_beside_a_real_streaming_query(spark: Any, tmp_path: Path) -> None:
    """A Structured Streaming query commits micro-batches through our sink while the daemon process clusters."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hudi_clusterd.engine.ingest.sink import HudiStreamingSink

    source = tmp_path / "source"
    source.mkdir()
    rng = np.random.default_rng(5)
    files, rows_per_file = 8, 500
    for i in range(files):
        ids = np.arange(i * rows_per_file, (i + 1) * rows_per_file, dtype=np.int64)
        pq.write_table(pa.table({"id": ids, "x": rng.uniform(0, 100, rows_per_file)}), source / f"part-{i:03d}.parquet")
    base = tmp_path / "events"
    port = free_port()
    props = tmp_path / "clusterd.properties"
    write_props(props, base, port, **{MAX_COMMITS: "3", SORT: "x"})
    sink = HudiStreamingSink(str(base), record_key="id", table_name="events", parallelism=1)
    query = (spark.readStream.schema("id long, x double").option("maxFilesPerTrigger", 1).parquet(str(source))
             .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(processingTime="1 second").start())
    daemon: DaemonProcess | None = None
    try:
        wait_for(lambda: (base / ".hoodie" / "hoodie.properties").exists(), 120, "the first micro-batch")
        daemon = DaemonProcess(props, tmp_path / "daemon.log")
        wait_for(lambda: len(completed_clusterings(base)) >= 1, 240, "a clustering beside the stream", daemon.proc)
        wait_for(lambda: len(list(base.glob(".hoodie/*.commit"))) == files, 240, "every file committed")
        query.processAllAvailable()
        samples = scrape(port)
        assert metric(samples, "hudi_clusterd_plans_finished_total", table="events", outcome="completed") >= 1
        assert metric(samples, "hudi_clusterd_plans_scheduled_total", table="events") >= 1
        instants = set(completed_clusterings(base))
        logged = [r for r in daemon.logs() if r.get("instant") in instants]
        assert logged and all(r.get("table") == "events" for r in logged)
    finally:
        query.stop()
        if daemon is not None:
            daemon.stop()
    rows = hudi_rs_rows(base)
    assert sorted(r["id"] for r in rows) == list(range(files * rows_per_file))  # every row exactly once
    assert_no_orphan_files(base, at_rest=True)
