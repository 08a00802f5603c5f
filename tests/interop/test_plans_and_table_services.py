"""Plans cross both ways, and Apache Hudi's table services accept the daemon's instants (issue #14, 4 and 5).

Each test runs once per Hudi setup on the session's shared worker; the plans crossing both ways (Hudi executes a
plan of ours, we execute one of Hudi's) also on a version-8 table. Tables are written by Apache Hudi with the
project's writer settings (plus ``hoodie.parquet.small.file.limit=0``, so that every insert makes new file groups
for clustering to merge): each test starts from a copy of the setup's ``events_table`` (see ``conftest.py``). The
daemon's side runs as its CLI, as users run it. The plan crossings are steps of ``tests/harness/plan_steps.py``, which
``test_table_services_s3.py`` runs on a table on S3.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.domain.file_group import base_file_name
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.errors import StorageError
from hudi_clusterd.formats.avro import decode_ocf
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.markers import create_marker
from hudi_clusterd.table.rollback import rollback_pending
from tests.builders import EVENTS_SCHEMA, event_rows, events_by_key, expected_events
from tests.harness.apache_hudi import HudiWorker, events_writer_options
from tests.harness.daemon_harness import (
    clusterd,
    clusterings,
    completed,
    instant_files,
    instant_names,
    replacecommits,
    table_version,
)
from tests.harness.hudi_versions import table_service_options
from tests.harness.metadata_checks import validate_files
from tests.harness.plan_steps import (
    daemon_executes_hudis_plan,
    hudi_executes_our_plan,
    local_table,
    requested_plan,
    scheduled_instant,
)

pytestmark = [pytest.mark.hudi,
              pytest.mark.usefixtures("spark")]  # clusterd(...) runs in this process, on the session's Spark
# Hudi 1.2 on a version-6 table repeats what 0.15 and 1.2 on version 9 show here: long run only
SLOW_SETUPS = ("hudi-1.2-v6",)


def writer(apache_hudi: HudiWorker, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return events_writer_options(apache_hudi.setup, extra)


@pytest.fixture
def table(events_table: tuple[Path, list[list[dict[str, Any]]]]) -> tuple[Path, list[list[dict[str, Any]]]]:
    """A table Hudi wrote in three inserts (two new file groups each): a copy of the setup's events table."""
    return events_table


@pytest.mark.hudi_v8
def test_apache_hudi_executes_a_plan_the_daemon_scheduled(apache_hudi: HudiWorker,
                                                          table: tuple[Path, list[list[dict[str, Any]]]]) -> None:
    base, batches = table
    hudi_executes_our_plan(apache_hudi, local_table(base, writer(apache_hudi)), batches)


@pytest.mark.hudi_v8
def test_the_daemon_executes_a_plan_apache_hudi_scheduled(apache_hudi: HudiWorker,
                                                          table: tuple[Path, list[list[dict[str, Any]]]]) -> None:
    base, batches = table
    daemon_executes_hudis_plan(apache_hudi, local_table(base, writer(apache_hudi)), batches)


def props(base: Path, sort_columns: str) -> Path:
    return local_table(base, {}, sort_columns).props


def test_hudi_cleaner_archiver_and_views_accept_the_daemons_instants(
        apache_hudi: HudiWorker, table: tuple[Path, list[list[dict[str, Any]]]]) -> None:
    base, batches = table
    # (Hudi archives no instant newer than the last compaction of its metadata table: compact it often too)
    services = writer(apache_hudi, {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                    "hoodie.cleaner.commits.retained": "1",
                                    "hoodie.metadata.compact.max.delta.commits": "3"})
    # Given two clusterings by the daemon and rollbacks of ours (plans dropped by hand)
    done: list[str] = []
    for b in range(3, 5):
        batches.append(event_rows(b))
        apache_hudi.write(batches[-1], base, {**services, "hoodie.datasource.write.operation": "insert"},
                          schema=EVENTS_SCHEMA)
        clusterd("cluster", "--base-path", str(base), "--force", "--props", str(props(base, "val")))
        done = clusterings(base)
    assert len(done) == 2
    first_replaced = {(p, f) for p, ids in replacecommits(base)[done[0]]["partitionToReplaceFileIds"].items()
                      for f in ids}
    batches.append(event_rows(5))
    apache_hudi.write(batches[-1], base, {**services, "hoodie.datasource.write.operation": "insert"},
                      schema=EVENTS_SCHEMA)
    for attempt in range(4):  # more rollbacks than hoodie.keep.max.commits: Hudi archives rollbacks by count
        out = clusterd("schedule", "--base-path", str(base), "--force")
        dropped = scheduled_instant(out)
        if attempt == 0:
            shown = apache_hudi.sql(f"CALL show_clustering(path => '{base}', limit => 50)")
            assert dropped in {str(r.get("timestamp")) for r in shown}, shown
        clusterd("rollback", "--base-path", str(base), "--instant", dropped, "--purge")
    ours_rollback = completed(base, "rollback")
    assert ours_rollback
    # Hudi's views list our instants
    views = f"events_views_{uuid.uuid4().hex[:8]}"  # the worker's catalog outlives the test (and the setup)
    apache_hudi.register_table(views, base)
    commits = {str(r.get("commit_time")): r for r in apache_hudi.sql(f"CALL show_commits(table => '{views}', "
                                                                       "limit => 50)")}
    assert done[-1] in commits, commits.keys()
    groups = apache_hudi.sql(f"CALL show_fsview_all(table => '{views}', path_regex => '*')")
    assert groups, "show_fsview_all listed nothing"
    # When Apache Hudi keeps writing with small retention: its cleaner and archiver run after each commit
    for b in range(6, 12):  # upserts of earlier keys: new slices for the cleaner, clean instants for the archiver
        batches.append([{**r, "val": r["val"] + b, "ts": b} for r in event_rows(b % 3)])
        apache_hudi.write(batches[-1], base, services, schema=EVENTS_SCHEMA)
    # Then the files our first clustering replaced are cleaned, our instants are archived, and no row is lost
    live = {(p.parent.name, p.name.split("_", 1)[0]) for p in base.glob("p*/*.parquet")}
    assert not live & first_replaced, "the cleaner left file groups our clustering replaced"
    active = {f.time for f in instant_files(base)}
    assert done[0] not in active and ours_rollback[0] not in active, "our instants were not archived"
    archived = apache_hudi.sql(f"CALL show_archived_commits_metadata(table => '{views}', limit => 1000, "
                               "start_ts => '20000101000000000', end_ts => '29991231000000000')")
    assert (done[0], "replacecommit") in {(str(r.get("commit_time")), r.get("action")) for r in archived}, archived
    assert completed(base, "clean"), instant_names(base)
    assert events_by_key(apache_hudi.read(base)) == expected_events(batches)
    validate_files(apache_hudi, base, views).assert_clean()  # the metadata table, after all of it
    # and Hudi's views and an incremental read across the archived range still work
    assert done[-1] in {str(r.get("commit_time")) for r in apache_hudi.sql(
        f"CALL show_commits(table => '{views}', limit => 100)")} | {str(r.get("commit_time")) for r in archived}
    # (on version 6 Hudi reads only the commits still on the active timeline; on 8 and 9 it reads the archived
    # timeline's completion times too, and so every key)
    across = events_by_key(apache_hudi.read(base, "incremental", begin="20000101000000000"))
    expected = expected_events(batches)
    assert across and all(expected[key] == value for key, value in across.items())
    if table_version(base) >= 8:
        assert across == expected


def test_apache_hudi_completes_a_rollback_the_daemon_left_pending(
        apache_hudi: HudiWorker, table: tuple[Path, list[list[dict[str, Any]]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    base, batches = table
    # Given a plan of ours whose execution wrote a file, then failed, and whose rollback stopped part-way (its
    # plan written, the file not yet deleted), as when the daemon dies while rolling back
    out = clusterd("schedule", "--base-path", str(base), "--force", "--props", str(props(base, "val")))
    instant = scheduled_instant(out)
    plan = requested_plan(base, instant).clustering_plan
    assert plan is not None
    slice_ = plan.input_groups[0].slices[0]
    hudi_table = HoodieTable.open(str(base))
    # (Action.CLUSTERING: the daemon's name for a pending clustering, its files T.replacecommit.* in layout 1 and
    # T.clustering.* in layout 2)
    hudi_table.timeline_store.create(Instant(instant, Action.CLUSTERING, State.INFLIGHT), b"")
    written = base_file_name("00000000-0000-4000-8000-000000000001-0", "0-1-2", instant)
    create_marker(hudi_table.storage, instant, slice_.partition_path, written)
    attempt = base / slice_.partition_path / written
    attempt.write_bytes((base / slice_.partition_path / Path(slice_.data_file_path).name).read_bytes())

    real_delete = hudi_table.storage.delete

    def fail_on_the_attempt(rel: str, *, missing_ok: bool = True) -> bool:
        if rel.endswith(written):
            raise StorageError(f"cannot delete {rel}")
        return real_delete(rel, missing_ok=missing_ok)

    monkeypatch.setattr(hudi_table.storage, "delete", fail_on_the_attempt)
    with pytest.raises(StorageError, match="stays pending"):
        rollback_pending(hudi_table, instant, Action.CLUSTERING)
    assert not (base / ".hoodie" / "lock").exists()
    pending = [f for f in instant_files(base) if f.action == "rollback"]
    # R.rollback.requested (our plan) and R.rollback.inflight
    assert [f.state for f in pending] == ["requested", "inflight"], instant_names(base)
    ours = pending[0].time
    path = pending[0].path
    assert all(r["logBlocksToBeDeleted"] == {} for r in decode_ocf(path.read_bytes(), str(path))["RollbackRequests"])
    # When Apache Hudi executes the plan: it first finishes the inflight attempt's rollback, with our rollback plan
    apache_hudi.run_clustering(base, "execute", options=table_service_options(writer(apache_hudi)),
                               instants=[instant])
    # Then our rollback instant completed (Hudi did not start another), it deleted the attempt's file, the plan
    # completed, and every row reads once
    rollbacks = [(f.time, f.state) for f in instant_files(base) if f.action == "rollback"]
    assert rollbacks == [(ours, "requested"), (ours, "inflight"), (ours, "completed")], instant_names(base)
    assert not attempt.exists()
    assert clusterings(base) == [instant]
    assert events_by_key(apache_hudi.read(base)) == expected_events(batches)
