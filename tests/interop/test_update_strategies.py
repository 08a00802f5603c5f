"""F14: what Apache Hudi's update strategies do to an upsert into a file group under a pending plan of ours.

Each test runs once per Hudi setup. Hudi writes a table in three inserts (two new file groups each, in p1 and p2:
a copy of the setup's ``events_table``, see ``conftest.py``); ``hudi-clusterd schedule --force`` plans them (one
group per partition); then Hudi upserts keys of p1 while the plan is pending, and ``hudi-clusterd execute`` runs
the plan.

- Hudi's default ``SparkRejectUpdateStrategy`` fails the upsert (``HoodieClusteringUpdateException``).
- ``SparkAllowUpdateStrategy`` with ``hoodie.clustering.rollback.pending.replacecommit.on.conflict=false`` lets the
  upsert through the update check, and what happens at the writer's own commit depends on its conflict resolution
  strategy (the versions differ, see the tests); with ``PreferWriterConflictResolutionStrategy`` the upsert commits
  on both versions, and our clustering, at its commit, leaves out the group the upsert moved: no update is lost or
  duplicated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.builders import EVENTS_SCHEMA, events_by_key, expected_events
from tests.harness.apache_hudi import HudiRequestError, HudiWorker, events_writer_options
from tests.harness.daemon_harness import clusterd, clustering_plan_path, instant_names, replacecommits
from tests.harness.hudi_rs_checks import hudi_rs_rows
from tests.harness.hudi_versions import ALLOW_UPDATES_OPTIONS

pytestmark = [pytest.mark.hudi,
              pytest.mark.usefixtures("spark")]  # clusterd(...) runs in this process, on the session's Spark
# Version 6 (Hudi 0.15, and Hudi 1.2 keeping it) in the long run only: every run shows it on Hudi 1.2's default
# version 9, where Hudi finds our plan as `T.clustering.requested` of timeline layout 2
SLOW_SETUPS = ("hudi-0.15", "hudi-1.2-v6")


REJECT = "org.apache.hudi.client.clustering.update.strategy.SparkRejectUpdateStrategy"
SIMPLE_RESOLUTION = "org.apache.hudi.client.transaction.SimpleConcurrentFileWritesConflictResolutionStrategy"
UPDATES_STRATEGY = "hoodie.clustering.updates.strategy"
RESOLUTION_STRATEGY = "hoodie.write.lock.conflict.resolution.strategy"


def writer(apache_hudi: HudiWorker, **extra: str) -> dict[str, str]:
    """The writer settings, one new file group per insert per partition, and ``extra`` (dots as ``__``)."""
    return events_writer_options(apache_hudi.setup, {k.replace("__", "."): v for k, v in extra.items()})


def causes(err: HudiRequestError) -> str:
    return "\n".join([str(err.java_class), *err.causes, str(err.error.get("detail", ""))])


def p1_updates(batches: list[list[dict[str, Any]]], tag: int) -> list[dict[str, Any]]:
    """New values for every key of p1 from the first insert (its file group is in the plan)."""
    return [{**r, "val": r["val"] + 1000 * tag, "ts": 100 + tag} for r in batches[0] if r["part"] == "p1"]


@pytest.fixture
def planned(events_table: tuple[Path, list[list[dict[str, Any]]]]) -> tuple[Path, list[list[dict[str, Any]]], str]:
    """Three inserts by Hudi (a copy of the setup's events table), then a pending plan of ours over all six file
    groups."""
    base, batches = events_table
    out = clusterd("schedule", "--base-path", str(base), "--force")
    instant = out.split("scheduled clustering ", 1)[1].split(":", 1)[0]
    assert clustering_plan_path(base, instant).exists(), instant_names(base)
    return base, batches, instant


def test_allow_strategy_with_simple_resolution(
        apache_hudi: HudiWorker, planned: tuple[Path, list[list[dict[str, Any]]], str]) -> None:
    base, batches, instant = planned
    # When Hudi upserts keys of a planned file group with SparkAllowUpdateStrategy, no rollback of pending
    # clustering, and its default conflict resolution strategy (SimpleConcurrentFileWritesConflictResolutionStrategy)
    options = writer(apache_hudi, **ALLOW_UPDATES_OPTIONS)
    options[RESOLUTION_STRATEGY] = SIMPLE_RESOLUTION
    update = p1_updates(batches, 1)
    if apache_hudi.setup.hudi_version.startswith("0."):
        # Then Hudi 0.15 commits it: its OCC check only considers clustering plans requested after the write began
        apache_hudi.write(update, base, options, schema=EVENTS_SCHEMA)
        batches.append(update)
    else:
        # Then Hudi 1.2 fails it at its own commit: on a version-6 table, as on versions 8 and 9, it counts every
        # pending clustering plan as a concurrent writer of the plan's file groups, whatever its instant time
        with pytest.raises(HudiRequestError) as err:
            apache_hudi.write(update, base, options, schema=EVENTS_SCHEMA)
        assert "HoodieWriteConflictException" in causes(err.value), causes(err.value)
        # (its data files stay behind, uncommitted, with their markers: our commit sees them being written)
    assert_plan_commits_without_the_moved_group(apache_hudi, base, batches, instant)


def test_reject_strategy_fails_the_upsert_and_allow_with_prefer_writer_lets_it_win(
        apache_hudi: HudiWorker, planned: tuple[Path, list[list[dict[str, Any]]], str]) -> None:
    base, batches, instant = planned
    update = p1_updates(batches, 1)
    # When Hudi, with its default update strategy (set explicitly here), upserts keys of a planned file group
    with pytest.raises(HudiRequestError) as err:
        apache_hudi.write(update, base, writer(apache_hudi, **{UPDATES_STRATEGY: REJECT}), schema=EVENTS_SCHEMA)
    # Then the write fails on both versions, with Hudi's exception for updates to file groups under clustering
    assert "HoodieClusteringUpdateException" in causes(err.value), causes(err.value)
    assert "Not allowed to update the clustering file group" in causes(err.value)
    assert events_by_key(apache_hudi.read(base)) == expected_events(batches)
    # When Hudi upserts the same keys with the settings docs/writers.md gives (SparkAllowUpdateStrategy, no rollback
    # of pending clustering, PreferWriterConflictResolutionStrategy)
    apache_hudi.write(update, base, writer(apache_hudi, **ALLOW_UPDATES_OPTIONS), schema=EVENTS_SCHEMA)
    batches.append(update)
    # Then the upsert commits on both versions, and our clustering, at its commit, leaves out the moved group.
    # (The failed upsert's instant stays requested, its heartbeat fresh until Hudi's expiry: a commit cannot tell
    # it from a live writer looking its records up, and would wait clusterd.commit.wait.seconds for it.)
    assert_plan_commits_without_the_moved_group(apache_hudi, base, batches, instant, commit_wait_s=2)


def assert_plan_commits_without_the_moved_group(apache_hudi: HudiWorker, base: Path,
                                                batches: list[list[dict[str, Any]]], instant: str, *,
                                                commit_wait_s: float | None = None) -> None:
    wait = () if commit_wait_s is None else ("--commit-wait", str(commit_wait_s))
    out = clusterd("execute", "--base-path", str(base), "--instant", instant, *wait)
    assert f"completed {instant}: 3 files" in out, out  # p2's group only
    meta = replacecommits(base)[instant]
    assert meta["operationType"] == "CLUSTER"
    assert set(meta["partitionToReplaceFileIds"]) == {"p2"}, json.dumps(meta)[:2000]
    assert meta["extraMetadata"].get("hudi-clusterd.groups.dropped") is not None
    # And every key reads once with its latest value, through Hudi and through hudi-rs
    want = expected_events(batches)
    assert events_by_key(apache_hudi.read(base)) == want
    got = {r["id"]: (r["part"], r["val"], r["ts"]) for r in hudi_rs_rows(base, ["id", "part", "val", "ts"], "id")}
    assert got == want
    # And a later Hudi upsert of the same keys (after our clustering) still lands once
    again = [{**r, "val": r["val"] + 1, "ts": 300} for r in batches[0]]
    apache_hudi.write(again, base, writer(apache_hudi, **ALLOW_UPDATES_OPTIONS), schema=EVENTS_SCHEMA)
    batches.append(again)
    assert events_by_key(apache_hudi.read(base)) == expected_events(batches)
