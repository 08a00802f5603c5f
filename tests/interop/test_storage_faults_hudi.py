"""Apache Hudi 1.2's snapshot read of a table whose clustering met the faults object stores produce.

A table Hudi 1.2 writes at its defaults (table version 9, its metadata table with ``files``, ``column_stats`` and
``partition_stats``), clustered by the daemon's own ticks (`tests/harness/faulty_daemon.py`: groups on pyarrow)
while its storage fails, one table per fault with every user's faults at once: written with the reply lost,
throttled, a timeout before writing, each at every write of the plan, the claim (inflight and heartbeat), the
markers, the metadata table's deltacommit (requested, inflight, its first log file, completed) and the completed
replacecommit; refused, at the metadata table's log file and at the replacecommit (two failed attempts, rolled
back, then a third that commits). Then the clustering is committed and reported so, never failed once committed,
nothing a completed instant names is gone, nothing is pending or orphaned, Hudi's metadata table lists exactly the
files on storage, and Hudi's snapshot read returns exactly the rows written.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.ops.events import Outcome
from tests.builders import EVENTS_SCHEMA, event_rows, events_by_key, expected_events
from tests.harness.apache_hudi import HudiWorker, HudiWorkers, events_writer_options
from tests.harness.daemon_harness import clusterings
from tests.harness.fault_injection import Fault, Rule
from tests.harness.faulty_daemon import USERS, assert_nothing_named_is_gone, faulty_daemon, rules_for
from tests.harness.hudi_rs_checks import assert_no_orphan_files
from tests.harness.hudi_versions import HUDI_1_2_V9
from tests.harness.metadata_checks import metadata_partitions, validate_files

pytestmark = [pytest.mark.hudi]

PROPS = {"clusterd.metrics.address": "off", "clusterd.commit.wait.seconds": "0",
         "hoodie.clustering.async.max.commits": "3", "hoodie.clustering.plan.strategy.sort.columns": "val",
         "hoodie.clustering.max.parallelism": "1"}
BATCHES = [event_rows(b) for b in range(3)]


def rules(fault: Fault) -> list[Rule]:
    if fault is Fault.REFUSED:
        [log_file] = [Rule(fault, path, op) for op, path in USERS["metadata commit"] if ".log" in path]
        return [log_file, *rules_for(fault, "completed")]
    return [rule for user in USERS for rule in rules_for(fault, user)]


@pytest.fixture(scope="module")
def hudi_1_2(hudi_workers: HudiWorkers) -> HudiWorker:
    return hudi_workers.for_setup(HUDI_1_2_V9)


@pytest.fixture(scope="module")
def original(hudi_1_2: HudiWorker, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three inserts by Hudi 1.2 at its defaults, metadata table on (copied for each fault)."""
    base = tmp_path_factory.mktemp("faults-hudi") / "events"
    options = {**events_writer_options(HUDI_1_2_V9, {"hoodie.metadata.enable": "true"}),
               "hoodie.datasource.write.operation": "insert"}
    for batch in BATCHES:
        hudi_1_2.write(batch, base, options, schema=EVENTS_SCHEMA)
    assert {"files", "column_stats"} <= set(metadata_partitions(base))
    return base


@pytest.mark.parametrize("fault", list(Fault), ids=[f.name.lower() for f in Fault])
def test_hudi_reads_exactly_after_a_clustering_through_every_fault(hudi_1_2: HudiWorker, original: Path,
                                                                   tmp_path: Path, fault: Fault) -> None:
    base = tmp_path / "events"
    shutil.copytree(original, base)
    # Given a daemon whose storage fails at every user of it at once
    d = faulty_daemon(base, PROPS, *rules(fault))
    # When it ticks until a clustering completed, then once more
    ticks = d.tick_until_completed(6)
    assert d.tick()
    # Then every fault fired, and the clustering is committed, and reported so
    assert not d.unfired(), (d.unfired(), [log.fired for log in d.faults])
    [instant] = clusterings(base)
    outcomes: list[Any] = [(e.instant, e.outcome) for e in d.recorded.finished()]
    assert not d.recorded.committed_but_reported, d.recorded.committed_but_reported
    if fault is Fault.REFUSED:
        assert outcomes == [(instant, Outcome.FAILED)] * 2 + [(instant, Outcome.COMPLETED)], outcomes
    else:
        assert (ticks, outcomes) == ([True], [(instant, Outcome.COMPLETED)])
    assert not d.recorded.cleanup_failed()
    assert_nothing_named_is_gone(base)
    assert_no_orphan_files(base, at_rest=True)
    # and Hudi's metadata table lists what storage holds, and its snapshot read is exact
    validate_files(hudi_1_2, base, f"faults_{fault.name.lower()}").assert_clean()
    assert events_by_key(hudi_1_2.read(base)) == expected_events(BATCHES)
