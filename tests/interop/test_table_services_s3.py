"""On S3, Apache Hudi and the daemon share a table under one lock: plans cross both ways, and Hudi reads, upserts
into (BLOOM and SIMPLE index), cleans, archives and compacts the metadata table of what we clustered (issue #27,
must-show 3).

One table per Hudi setup on the SeaweedFS server, written through Hudi's S3A connector, locked through DynamoDB
(moto's server) by Hudi 0.15.0 and through ZooKeeper by Hudi 1.2.0; the daemon takes the same lock (the writers'
``hoodie.write.lock.*`` keys in its properties file) and reaches S3 from its environment. Each step is one of the
local tests' (``tests/harness/plan_steps.py``, shared with ``test_plans_and_table_services.py``), and each ends
with exact reads by Hudi and hudi-rs (from S3) and Hudi's metadata table checked against storage. The steps run in
order on one table: every Hudi write on S3 costs seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.builders import EVENTS_SCHEMA, event_rows
from tests.harness.apache_hudi import HudiWorker
from tests.harness.daemon_harness import (
    clusterd_environment,
    commit_metadata,
    completed,
    instant_files,
    instant_names,
    replacecommits,
)
from tests.harness.hudi_rs_checks import s3_storage_options
from tests.harness.hudi_s3 import dynamodb_lock_options, lock_props, s3_writer_options, s3a_uri, zookeeper_lock_options
from tests.harness.hudi_versions import HUDI_0_15, HudiSetup
from tests.harness.metadata_checks import mdt_compactions
from tests.harness.plan_steps import SharedTable, assert_reads, daemon_executes_hudis_plan, hudi_executes_our_plan
from tests.harness.s3_mirror import S3Mirror

pytestmark = [pytest.mark.hudi, pytest.mark.hudi_s3,
              pytest.mark.usefixtures("spark")]  # clusterd(...) runs in this process, on the session's Spark
# Hudi 1.2 on a version-6 table repeats what 0.15 (version 6) and 1.2 (version 9) show here: long run only
SLOW_SETUPS = ("hudi-1.2-v6",)

# Small retention, so that Hudi's own cleaner and archiver reach our instants within a few commits (Hudi archives
# no instant newer than the last compaction of its metadata table: compact it often too)
SERVICES = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", "hoodie.cleaner.commits.retained": "1",
            "hoodie.metadata.compact.max.delta.commits": "3"}


@pytest.fixture
def s3_table(hudi_setup: HudiSetup, s3_hudi: Callable[[HudiSetup], HudiWorker], s3_server: Any,
             request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[HudiWorker, SharedTable]]:
    """A new table location on S3 shared by the setup's worker on S3 and the daemon, under the lock Hudi users of
    that release run there (0.15.0: DynamoDB; 1.2.0: ZooKeeper)."""
    hudi = s3_hudi(hudi_setup)
    if hudi_setup.hudi_version == HUDI_0_15.hudi_version:
        lock = dynamodb_lock_options(request.getfixturevalue("dynamodb_server"))
    else:
        lock = zookeeper_lock_options(request.getfixturevalue("zookeeper_server"))
    uri = s3a_uri(s3_server.fresh_uri("services"))
    writer = s3_writer_options(hudi_setup, "events", lock, extra={"hoodie.parquet.small.file.limit": "0"})
    props = tmp_path / "clusterd.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in lock_props(writer, uri).items())
                     + "hoodie.clustering.plan.strategy.sort.columns=val\n")
    mirror = S3Mirror(s3_server, uri, tmp_path / "mirror")
    with clusterd_environment(s3_server.env()):
        yield hudi, SharedTable(uri, mirror.sync, writer, props, s3_storage_options(s3_server))


def _written(base: Path, instant: str) -> dict[str, set[str]]:
    """The file groups a replacecommit wrote, by partition."""
    out: dict[str, set[str]] = {}
    for partition, stats in replacecommits(base)[instant]["partitionToWriteStats"].items():
        out.setdefault(partition, set()).update(ws["fileId"] for ws in stats)
    return out


def test_plans_cross_and_hudis_table_services_run_on_what_we_clustered_on_s3(
        s3_table: tuple[HudiWorker, SharedTable]) -> None:
    hudi, table = s3_table
    steps: dict[str, float] = {}

    def step(name: str, started: float) -> float:
        now = time.monotonic()
        steps[name] = round(now - started, 1)
        return now

    clock = time.monotonic()
    # Given a table Hudi wrote on S3 in two inserts (two new file groups each, one per partition)
    batches = [event_rows(b) for b in range(2)]
    for batch in batches:
        hudi.write(batch, table.uri, {**table.writer, "hoodie.datasource.write.operation": "insert"},
                   schema=EVENTS_SCHEMA)
    clock = step("hudi inserts", clock)
    # When Hudi executes a plan the daemon scheduled, then (after one more insert) the daemon one Hudi scheduled
    hudi_executes_our_plan(hudi, table, batches)
    clock = step("hudi executes ours", clock)
    batches.append(event_rows(2))
    hudi.write(batches[-1], table.uri, {**table.writer, "hoodie.datasource.write.operation": "insert"},
               schema=EVENTS_SCHEMA)
    ours = daemon_executes_hudis_plan(hudi, table, batches)
    clock = step("we execute hudi's", clock)
    base = table.files()
    written = _written(base, ours)
    replaced = {(p, f) for p, ids in replacecommits(base)[ours]["partitionToReplaceFileIds"].items() for f in ids}
    assert set(written) == {"p1", "p2"} and replaced, instant_names(base)

    # When Hudi upserts into the file groups we wrote, with a BLOOM index in one partition and a SIMPLE index in
    # the other, cleaning, archiving and compacting its metadata table with small retention
    # (a third upsert, into both partitions, takes the active timeline past hoodie.keep.max.commits)
    for k, (index, partitions) in enumerate((("BLOOM", ("p1",)), ("SIMPLE", ("p2",)), ("BLOOM", ("p1", "p2")))):
        updates = [{**r, "val": r["val"] + 100 * (k + 1), "ts": 10 + k}
                   for batch in batches[:3] for r in batch[k % 3::3] if r["part"] in partitions]
        inserts = [r for r in event_rows(10 + k, n=6) if r["part"] in partitions]
        batches.append(updates + inserts)
        created = hudi.write(batches[-1], table.uri, {**table.writer, **SERVICES, "hoodie.index.type": index},
                             schema=EVENTS_SCHEMA)
        [upsert] = [i for i in created if i.endswith(".commit")]  # (beside the clean and archive it ran)
        # Then the upsert merged its updates into our files of that partition, and every row reads exactly
        base = table.files()
        stats = [ws for wss in commit_metadata(base, upsert.split(".", 1)[0])["partitionToWriteStats"].values()
                 for ws in wss]
        merged = {(ws["partitionPath"], ws["fileId"]) for ws in stats if ws["prevCommit"] == ours}
        if k < 2:
            assert merged == {(partitions[0], f) for f in written[partitions[0]]}, stats
        assert_reads(hudi, table, batches)
        table.validate(hudi, f"upsert_{index.lower()}")
        clock = step(f"{index} upsert {k + 1}", clock)

    # Then Hudi's cleaner deleted the file groups our clustering replaced, its archiver archived our replacecommit,
    # and its metadata table was compacted after our commit to it
    base = table.files()
    live = {(p.parent.name, p.name.split("_", 1)[0]) for p in base.glob("p*/*.parquet")}
    assert not live & replaced, "the cleaner left file groups our clustering replaced"
    assert completed(base, "clean"), instant_names(base)
    assert ours not in {f.time for f in instant_files(base)}, f"ours not archived: {instant_names(base)}"
    archived = hudi.sql(f"CALL show_archived_commits_metadata(table => '{table.names[-1]}', limit => 1000, "
                        "start_ts => '20000101000000000', end_ts => '29991231000000000')")
    assert (ours, "replacecommit") in {(str(r.get("commit_time")), r.get("action")) for r in archived}, archived
    assert any(c > ours for c in mdt_compactions(base)), mdt_compactions(base)
    # and the table reads the same in Hudi and hudi-rs, its metadata table listing exactly what S3 holds
    assert_reads(hudi, table, batches)
    table.validate(hudi, "after_services")
    step("checks", clock)
    print(f"steps (s): {steps}")
