"""The Apache Hudi harness against real Hudi: what Hudi 0.15 and 1.2 write with the project's writer settings.

Each ``hudi``-marked test runs once per setup (ids ``hudi-0.15``, ``hudi-1.2-v6``, ``hudi-1.2-v9``) on the
session's shared worker. One small partitioned table (an insert, then an upsert) serves the layout, snapshot,
incremental, time-travel and ``show_commits`` checks. The tests at the end check the harness's availability logic
and need no JVM.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.harness import hudi_setup as setup_mod
from tests.harness.apache_hudi import (
    REQUIRE_ENV,
    HudiUnavailableError,
    HudiWorker,
    hudi_write_options,
    locate,
    read_hoodie_properties,
    require_installation,
)
from tests.harness.daemon_harness import (
    assert_default_metadata_table,
    assert_layout,
    completed,
    incremental_start,
    instant_files,
    instant_names,
)
from tests.harness.hudi_s3 import require_s3_profile
from tests.harness.hudi_versions import (
    HUDI_0_15,
    HUDI_1_2_V9,
    HUDI_AWS_0_15_RUNTIME,
    SETUPS,
    HudiSetup,
    shared_table_writer_options,
    table_service_options,
)
from tests.harness.servers import S3Server

hudi = pytest.mark.hudi
# The harness's own tests against Hudi are in the long run only (-m slow): the interop scenarios drive the same
# writes, snapshot, incremental and time-travel reads, procedures and run_clustering in every run, and the events
# table every setup writes once per session (tests/interop/conftest.py) is checked for the setup's table version,
# timeline layout and metadata table (assert_layout, assert_default_metadata_table) in every run.
SLOW_SETUPS = tuple(s.name for s in SETUPS)

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("part", pa.string()),
        ("name", pa.string()),
        ("amount", pa.float64()),
        ("ts", pa.int64()),
    ]
)

INSERTED = [
    {"id": 1, "part": "2024-01-01", "name": "a1", "amount": 10.0, "ts": 1},
    {"id": 2, "part": "2024-01-01", "name": "a2", "amount": 20.0, "ts": 1},
    {"id": 3, "part": "2024-01-02", "name": "a3", "amount": 30.0, "ts": 1},
    {"id": 4, "part": "2024-01-02", "name": "a4", "amount": 40.0, "ts": 1},
    {"id": 5, "part": "2024-01-03", "name": "a5", "amount": 50.0, "ts": 1},
    {"id": 6, "part": "2024-01-03", "name": "a6", "amount": 60.0, "ts": 1},
]
UPSERTED = [
    {"id": 2, "part": "2024-01-01", "name": "b2", "amount": 21.5, "ts": 2},
    {"id": 5, "part": "2024-01-03", "name": "b5", "amount": 55.5, "ts": 2},
    {"id": 7, "part": "2024-01-03", "name": "b7", "amount": 70.0, "ts": 2},
    {"id": 8, "part": "2024-01-04", "name": "b8", "amount": 80.0, "ts": 2},
]

Row = tuple[str, str, float, int]


def by_key(rows: Iterable[Mapping[str, Any]]) -> dict[int, Row]:
    """Rows keyed by id; fails on a duplicate key (a snapshot must hold each key once)."""
    out: dict[int, Row] = {}
    for row in rows:
        key = int(row["id"])
        assert key not in out, f"key {key} appears twice"
        out[key] = (row["part"], row["name"], row["amount"], row["ts"])
    return out


def instant_time(completed: str) -> str:
    """``"20240101000000000.commit"`` → ``"20240101000000000"``."""
    return completed.split(".", 1)[0]


@dataclass(frozen=True, slots=True)
class WrittenTable:
    """A table Apache Hudi wrote: an insert, then an upsert."""

    setup: HudiSetup
    base: Path
    first: str
    second: str


@pytest.fixture(scope="module")
def hudi_table(apache_hudi: HudiWorker, tmp_path_factory: pytest.TempPathFactory) -> WrittenTable:
    # Given the project's writer settings, Hudi inserts six rows into three partitions, then upserts four rows.
    setup = apache_hudi.setup
    base = tmp_path_factory.mktemp(f"{setup.name}-table") / "orders"
    upsert = hudi_write_options(setup, "orders", record_key="id", partition_path="part", precombine="ts")
    first = apache_hudi.write(INSERTED, base, {**upsert, "hoodie.datasource.write.operation": "insert"}, schema=SCHEMA)
    second = apache_hudi.write(UPSERTED, base, upsert, schema=SCHEMA)
    assert len(first) == 1 and first[0].endswith(".commit"), first
    assert len(second) == 1 and second[0].endswith(".commit"), second
    return WrittenTable(setup, base, instant_time(first[0]), instant_time(second[0]))


@hudi
def test_hudi_write_table_has_the_setups_version_layout_and_metadata_table(hudi_table: WrittenTable) -> None:
    # When we look at what Hudi left on disk
    props = read_hoodie_properties(hudi_table.base)
    files = instant_files(hudi_table.base)

    # Then it is a copy-on-write table of the setup's version, with that version's timeline layout (instants in
    # .hoodie/ for version 6, in .hoodie/timeline/ for versions 8 and 9) and Hudi's metadata table
    assert_layout(hudi_table.base, hudi_table.setup)
    assert props["hoodie.table.type"] == "COPY_ON_WRITE"
    assert_default_metadata_table(hudi_table.base, hudi_table.setup)
    for instant in (hudi_table.first, hudi_table.second):
        states = {(f.action, f.state) for f in files if f.time == instant}
        assert states == {("commit", "requested"), ("commit", "inflight"), ("commit", "completed")}, files
        [done] = [f for f in files if f.time == instant and f.state == "completed"]
        # layout 2 names a completed instant by its requested and its completion time
        assert (done.completion is not None) == (hudi_table.setup.timeline_layout_version == 2), done
    partitions = sorted(p.parent.name for p in hudi_table.base.glob("*/.hoodie_partition_metadata"))
    assert partitions == ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]


@hudi
def test_hudi_snapshot_read_returns_latest_value_per_key(apache_hudi: HudiWorker, hudi_table: WrittenTable) -> None:
    # When Hudi reads the latest snapshot
    table = apache_hudi.read(hudi_table.base)

    # Then every key appears once with its latest values, typed as written
    expected = by_key(INSERTED) | by_key(UPSERTED)
    assert by_key(table.to_pylist()) == expected
    assert table.schema.field("amount").type == pa.float64()
    assert table.schema.field("id").type == pa.int64()


@hudi
def test_hudi_incremental_and_time_travel_reads_see_each_commit(
    apache_hudi: HudiWorker, hudi_table: WrittenTable
) -> None:
    # When Hudi reads the changes after the first commit (its completion time on versions 8 and 9), and the table
    # as of the first commit
    changes = apache_hudi.read(hudi_table.base, "incremental", begin=incremental_start(hudi_table.base,
                                                                                       hudi_table.first))
    as_of_first = apache_hudi.read(hudi_table.base, "time_travel", as_of=hudi_table.first)

    # Then the incremental read holds exactly the upserted rows, stamped with the second commit
    assert by_key(changes.to_pylist()) == by_key(UPSERTED)
    assert set(changes.column("_hoodie_commit_time").to_pylist()) == {hudi_table.second}
    # And the time-travel read holds exactly the inserted rows
    assert by_key(as_of_first.to_pylist()) == by_key(INSERTED)


@hudi
def test_hudi_show_commits_lists_both_commits(apache_hudi: HudiWorker, hudi_table: WrittenTable) -> None:
    # Given the table registered by name (show_commits takes a table, not a path, in 0.15 and 1.2)
    name = f"interop_{uuid.uuid4().hex[:8]}"
    apache_hudi.register_table(name, hudi_table.base)

    # When Hudi lists the commits
    rows = apache_hudi.sql(f"CALL show_commits(table => '{name}')")

    # Then both commits are there, newest first
    assert [r["commit_time"] for r in rows] == [hudi_table.second, hudi_table.first]
    assert {r["action"] for r in rows} == {"commit"}
    assert rows[1]["total_records_written"] == len(INSERTED)
    assert rows[0]["total_update_records_written"] == 2  # ids 2 and 5


@pytest.fixture
def stream_dirs(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "source").mkdir()
    return {
        "source": tmp_path / "source",
        "checkpoint": tmp_path / "checkpoint",
        "base": tmp_path / "events",
        "sample": tmp_path / "sample.parquet",
    }


@hudi
@pytest.mark.slow  # the streaming scenario and the crash points drive the sink through this harness in every run
def test_hudi_streaming_sink_commits_three_micro_batches(apache_hudi: HudiWorker, stream_dirs: dict[str, Path]) -> None:
    # Given three parquet files waiting in the source folder, the last one updating a key of the first
    batches = [
        [
            {"id": 10 * b + i, "part": f"2024-02-0{i + 1}", "name": f"s{b}", "amount": float(b), "ts": b}
            for i in range(2)
        ]
        for b in range(2)
    ]
    batches.append([{"id": 0, "part": "2024-02-01", "name": "s2", "amount": 2.0, "ts": 2}])
    pq.write_table(pa.Table.from_pylist([], schema=SCHEMA), stream_dirs["sample"])
    for b, rows in enumerate(batches):
        path = stream_dirs["source"] / f"batch-{b}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
        # Spark's file source takes files in modification-time order: make that the batch order (files written
        # within one millisecond would go in any order, and Hudi 0.15's default payload keeps the last one written)
        os.utime(path, (time.time() - 60 + b, time.time() - 60 + b))
    # Under OCC Hudi's streaming sink requires a checkpoint identifier per writer
    options = hudi_write_options(
        apache_hudi.setup,
        "events",
        record_key="id",
        partition_path="part",
        precombine="ts",
        extra={"hoodie.datasource.write.streaming.checkpoint.identifier": "interop-stream"},
    )

    # When a Structured Streaming query feeds them to Hudi, one file per micro-batch
    apache_hudi.stream_start(
        "events",
        source_dir=stream_dirs["source"],
        schema_from=stream_dirs["sample"],
        base_path=stream_dirs["base"],
        checkpoint_dir=stream_dirs["checkpoint"],
        options=options,
    )
    try:
        status = apache_hudi.stream_status("events", wait_for_batches=3, timeout=180)
    finally:
        final = apache_hudi.stream_stop("events")

    # Then three micro-batches completed without error, each a commit on a table of the setup's version
    assert status["exception"] is None, status["exception"]
    assert status["batches"] == 3 and status["rows"] == 5, status
    assert final["exception"] is None, final["exception"]
    commits = completed(stream_dirs["base"], "commit")
    assert len(commits) == 3, instant_names(stream_dirs["base"])
    assert_layout(stream_dirs["base"], apache_hudi.setup)
    assert_default_metadata_table(stream_dirs["base"], apache_hudi.setup)
    # And the table holds the latest value per key
    expected = by_key(batches[0]) | by_key(batches[1]) | by_key(batches[2])
    assert by_key(apache_hudi.read(stream_dirs["base"]).to_pylist()) == expected


@hudi
def test_hudi_run_clustering_with_writer_settings_keeps_the_version_and_metadata_table(
    apache_hudi: HudiWorker, tmp_path: Path
) -> None:
    # Given a small table Hudi wrote in one commit
    setup = apache_hudi.setup
    base = tmp_path / "clustered"
    options = hudi_write_options(
        setup, "clustered", record_key="id", partition_path="part", precombine="ts", operation="insert"
    )
    apache_hudi.write(INSERTED, base, options, schema=SCHEMA)

    # When Hudi's own clustering runs through the run_clustering procedure with the same settings
    rows = apache_hudi.run_clustering(base, "scheduleAndExecute",
                                      options=table_service_options(shared_table_writer_options(setup)))

    # Then one plan completed as a replacecommit (pending as a replacecommit in layout 1, as a clustering in
    # layout 2), the table keeps its version and its metadata table
    assert [r["state"] for r in rows] == ["COMPLETED"], rows
    instant = rows[0]["timestamp"]
    pending_as = "replacecommit" if setup.timeline_layout_version == 1 else "clustering"
    states = {(f.action, f.state) for f in instant_files(base) if f.time == instant}
    assert states == {(pending_as, "requested"), (pending_as, "inflight"), ("replacecommit", "completed")}, \
        instant_names(base)
    assert_layout(base, setup)
    assert_default_metadata_table(base, setup)
    # And the data reads the same
    assert by_key(apache_hudi.read(base).to_pylist()) == by_key(INSERTED)


# -- availability logic (no JVM) ---------------------------------------------------------------------------------


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hudi-cache"
    monkeypatch.setenv(setup_mod.CACHE_ENV, str(cache))
    return cache


def test_locate_missing_cache_names_jar_coordinates_and_setup_command(empty_cache: Path) -> None:
    with pytest.raises(HudiUnavailableError) as err:
        locate(HUDI_1_2_V9)
    message = str(err.value)
    assert HUDI_1_2_V9.bundle.coordinates in message
    assert f"pyspark=={HUDI_1_2_V9.pyspark_version}" in message
    assert setup_mod.SETUP_COMMAND in message
    assert str(empty_cache) in message


def test_require_installation_missing_cache_skips(empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=HUDI_0_15.bundle.coordinates):
        require_installation(HUDI_0_15)


def test_require_installation_missing_cache_fails_when_required(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=HUDI_0_15.bundle.coordinates):
        require_installation(HUDI_0_15)


def test_setup_check_reports_missing_without_fetching(empty_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert setup_mod.main(["--check"]) == 1
    out = capsys.readouterr().out
    for setup in SETUPS:
        assert f"{setup.name}: MISSING jar {setup.bundle.coordinates}" in out
    assert not empty_cache.exists()


def test_setup_copy_jar_without_mvn_names_mvn(empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(empty_cache))
    with pytest.raises(setup_mod.SetupError, match=r"mvn not found on PATH.*hudi-spark3\.5-bundle_2\.12:0\.15\.0"):
        setup_mod.copy_jar(HUDI_0_15.bundle, empty_cache)


def test_require_s3_profile_missing_runtimes_skips_naming_them(empty_cache: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_s3_profile(HUDI_0_15, S3Server(endpoint="http://127.0.0.1:9"))
    message = str(skipped.value)
    for coordinates in ("org.apache.hadoop:hadoop-aws:3.3.4", "com.amazonaws:aws-java-sdk-bundle:1.12.262",
                        "org.apache.hudi:hudi-aws:0.15.0", "com.amazonaws:dynamodb-lock-client:1.2.0",
                        "software.amazon.awssdk:dynamodb:2.18.40"):
        assert coordinates in message
    assert setup_mod.SETUP_COMMAND in message
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_s3_profile(HUDI_1_2_V9, S3Server(endpoint="http://127.0.0.1:9"))
    assert "hadoop-aws:3.3.4" in str(skipped.value) and "hudi-aws" not in str(skipped.value)


def test_require_s3_profile_missing_runtimes_fails_when_required(empty_cache: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=r"hudi-aws:0\.15\.0"):
        require_s3_profile(HUDI_0_15, S3Server(endpoint="http://127.0.0.1:9"))


def test_setup_check_reports_missing_s3_runtimes(empty_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert setup_mod.main(["--check", "--setup", HUDI_0_15.name]) == 1
    out = capsys.readouterr().out
    assert "MISSING Hadoop's S3A file system" in out and "org.apache.hadoop:hadoop-aws:3.3.4" in out
    assert "MISSING Hudi 0.15.0's DynamoDBBasedLockProvider" in out and "org.apache.hudi:hudi-aws:0.15.0" in out
    assert not empty_cache.exists()


def test_setup_resolve_runtime_without_mvn_names_mvn(empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(empty_cache))
    with pytest.raises(setup_mod.SetupError, match=r"mvn not found on PATH.*hudi-aws:0\.15\.0"):
        setup_mod.resolve_runtime(HUDI_AWS_0_15_RUNTIME, empty_cache)
