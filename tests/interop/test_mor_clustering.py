"""The daemon clusters merge-on-read tables Apache Hudi writes, their log files merged (issue #34, must-show 1 and
2; hudi-mor-reference §8.3 item 6).

Each release writes one MOR table per session at its defaults (metadata table on, inline compaction off):
inserts into several file groups in two partitions, upserts into many of them (log files), a SQL DELETE (DELETE
blocks) and ``_hoodie_is_deleted`` upserts. The daemon plans every slice of a copy (``hot_commits=0``: the last
deltacommits' groups too) and executes the plan on the session's Spark (``tests/harness/mor_clustered.py``). Then:

- the plan holds slices with log files, and it completes;
- Hudi's snapshot read after our replacecommit equals its read before, row for row on every column but
  ``_hoodie_file_name``; its read-optimized read (base files only) now returns the merged rows; hudi-rs agrees;
- Hudi's compaction, cleaner and archiver run over the clustered table, Hudi upserts again, and every read stays
  exact; the metadata table lists exactly the files storage holds;
- two oracles, on copies: Hudi's own clustering executing *our* plan writes the rows we write, and Hudi's
  compaction of the same slices (before any plan) writes the rows we write (every column but
  ``_hoodie_file_name``).

Hudi 1.2.0 (table version 9) runs in every run; Hudi 0.15.0 (version 6, merged with 0.15's semantics) and 1.0.2
(version 8) in the long run (``-m slow``). Hudi 1.0.2 cannot compact this workload (a ClassCastException in its
compaction), so its compaction oracle is skipped naming the error.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.harness.apache_hudi import HudiWorkers
from tests.harness.daemon_harness import replacecommits
from tests.harness.hudi_rs_checks import hudi_rs_rows
from tests.harness.hudi_versions import HUDI_0_15, HUDI_1_0_2, HUDI_1_2_V9, HudiSetup
from tests.harness.metadata_checks import validate_files
from tests.harness.mor_clustered import (
    ROW_COLUMNS,
    ClusteredMor,
    WrittenMor,
    by_key,
    cluster_mor_table,
    copy_table,
    instant_files,
    latest_base_files,
    outcome_completed,
    read_rows,
)
from tests.harness.mor_oracle import SCHEMA, completed_instants, writer_options

pytestmark = [pytest.mark.hudi]

RUNS = (HUDI_1_2_V9, pytest.param(HUDI_0_15, marks=pytest.mark.slow),
        pytest.param(HUDI_1_0_2, marks=pytest.mark.slow))
IDS = ("hudi-1.2-v9", "hudi-0.15", "hudi-1.0.2")
DATA = ("id", "part", "ts", "value")
# Hudi's table services at small retention, soon acting: a compaction after every deltacommit, the cleaner keeping
# one commit, the archiver keeping two to three (and the metadata table compacted often, or it blocks archiving)
SERVICES = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "1",
            "hoodie.cleaner.commits.retained": "1", "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
            "hoodie.metadata.compact.max.delta.commits": "3", "hoodie.clean.automatic": "true",
            "hoodie.archive.automatic": "true"}


@pytest.fixture(scope="module")
def mor(request: pytest.FixtureRequest, hudi_workers: HudiWorkers, spark: Any,
        mor_written: Callable[[HudiSetup], WrittenMor], tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[ClusteredMor]:
    """The release's table (written once per session), clustered by us and (our plan) by Hudi."""
    hudi = hudi_workers.for_setup(request.param)
    yield cluster_mor_table(hudi, spark, mor_written(hudi.setup),
                            tmp_path_factory.mktemp(f"mor_clustering_{hudi.setup.name}"))


def _name(what: str) -> str:
    return f"{what}_{uuid.uuid4().hex[:8]}"  # the worker's catalog outlives the test


def _merged_keys(mor: ClusteredMor) -> set[str]:
    """The record keys of the planned slices with log files, as Hudi's snapshot read them before our plan."""
    with_logs = {s.file_id for g in mor.plan.input_groups for s in g.slices if s.delta_file_paths}
    return {r["_hoodie_record_key"] for r in mor.before.select(["_hoodie_record_key", "_hoodie_file_name"])
            .to_pylist() if r["_hoodie_file_name"].split("_", 1)[0] in with_logs}


@pytest.mark.parametrize("mor", RUNS, indirect=True, scope="module", ids=IDS)
def test_our_clustering_of_slices_with_log_files_keeps_hudis_snapshot(mor: ClusteredMor,
                                                                      hudi_workers: HudiWorkers) -> None:
    hudi = hudi_workers.for_setup(mor.setup)
    # Given our plan of every slice, several with log files
    slices = [s for g in mor.plan.input_groups for s in g.slices]
    with_logs = [s for s in slices if s.delta_file_paths]
    assert len(with_logs) >= 3 and len(slices) >= 5, mor.plan
    assert all(s.data_file_path for s in slices)  # no log-only groups in this workload
    # When the daemon executes it: it completes, as one replacecommit
    assert outcome_completed(mor.outcome), mor.outcome
    assert mor.instant in completed_instants(mor.ours)
    assert instant_files(mor.ours, mor.instant)
    # Then Hudi's snapshot is what it was, row for row, commit times and sequence numbers kept
    assert by_key(mor.after) == by_key(mor.before)
    # the groups with logs are gone: the read-optimized read (base files only) returns the merged rows, which it
    # did not before our clustering
    merged = _merged_keys(mor)
    assert len(merged) >= 4
    ro = by_key(mor.read_optimized)
    assert {k: ro.get(k) for k in merged} == {k: v for k, v in by_key(mor.before).items() if k in merged}
    ro_before = by_key(hudi.read(mor.written, options={"hoodie.datasource.query.type": "read_optimized"}))
    assert {k: ro_before.get(k) for k in merged} != {k: ro.get(k) for k in merged}
    assert by_key(mor.read_optimized) == by_key(mor.after)  # every group was clustered: no log files left
    # hudi-rs reads the clustered table (base files only, replaced groups dropped) as Hudi does
    rs = hudi_rs_rows(mor.ours, list(ROW_COLUMNS))
    assert rs == sorted(mor.after.select(list(ROW_COLUMNS)).to_pylist(), key=lambda r: r["_hoodie_record_key"])
    # and the metadata table lists exactly the files storage holds
    validate_files(hudi, mor.ours, _name("mor_ours")).assert_clean()


@pytest.mark.parametrize("mor", RUNS, indirect=True, scope="module", ids=IDS)
def test_hudis_clustering_of_our_plan_writes_the_rows_we_write(mor: ClusteredMor) -> None:
    # Given our plan, executed by Hudi's own clustering on the table as it was right after we scheduled it: one
    # clustering replacing every planned file group
    for table in (mor.hudis, mor.ours):
        meta = replacecommits(table)[mor.instant]
        assert meta["operationType"] == "CLUSTER"
        assert {(p, f) for p, ids in meta["partitionToReplaceFileIds"].items() for f in ids} == set(
            mor.plan.group_ids())
    theirs = read_rows(instant_files(mor.hudis, mor.instant))
    # Then its rows are ours, on every column but the file name
    ours = read_rows(instant_files(mor.ours, mor.instant))
    assert len(ours) == mor.before.num_rows
    assert ours == theirs


@pytest.mark.parametrize("mor", RUNS, indirect=True, scope="module", ids=IDS)
def test_hudis_compaction_of_the_planned_slices_writes_the_rows_we_merge(mor: ClusteredMor) -> None:
    if mor.source.compaction_error is not None:
        pytest.skip(f"Hudi {mor.setup.hudi_version} cannot compact this table: {mor.source.compaction_error}")
    assert mor.source.compaction is not None
    # Given Hudi's compaction of a copy before any plan of ours: every slice with logs became a new base file
    with_logs = {s.group_id for g in mor.plan.input_groups for s in g.slices if s.delta_file_paths}
    compacted = latest_base_files(mor.source.compacted, mor.plan.group_ids())
    assert {(f.parent.name, f.name.split("_", 1)[0]) for f in compacted
            if f.name.endswith(f"_{mor.source.compaction}.parquet")} == with_logs
    # Then the planned groups' rows after Hudi's compaction are the rows our clustering wrote
    assert read_rows(instant_files(mor.ours, mor.instant)) == read_rows(compacted)


@pytest.mark.parametrize("mor", RUNS, indirect=True, scope="module", ids=IDS)
def test_hudis_compaction_cleaner_and_archiver_then_upserts_after_our_clustering(
        mor: ClusteredMor, hudi_workers: HudiWorkers, tmp_path: Path) -> None:
    hudi = hudi_workers.for_setup(mor.setup)
    base = copy_table(mor.ours, tmp_path / "services")
    expected = {k: {c: r[c] for c in DATA} for k, r in by_key(mor.after).items()}
    keys = sorted(expected)
    options = {**writer_options(mor.setup), **SERVICES}

    def upsert(batch: int, settings: dict[str, str]) -> None:
        chosen = keys[batch::3][:4]
        rows = [{"id": k, "part": expected[k]["part"], "ts": 100 + batch, "value": f"after-{batch}-{k}",
                 "_hoodie_is_deleted": False} for k in chosen]
        hudi.write(pa.Table.from_pylist(rows, schema=SCHEMA), base, settings)
        for r in rows:
            expected[r["id"]] = {c: r[c] for c in DATA}

    # When Hudi upserts into the clustered groups, compacting, cleaning and archiving after each write
    for batch in range(3):
        upsert(batch, options)
    # Then it compacted and cleaned after our clustering, and archived our replacecommit
    active = completed_instants(base)
    hoodie = base / ".hoodie"
    timeline = hoodie / "timeline" if (hoodie / "timeline").is_dir() else hoodie
    names = sorted(p.name for p in timeline.iterdir())
    assert any(n.endswith(".commit") and n.split("_")[0].split(".")[0] > mor.instant for n in names), names
    assert any(n.endswith(".clean") for n in names), names
    assert mor.instant not in active, names
    live = {(p.parent.name, p.name.lstrip(".").split("_", 1)[0]) for p in base.glob("p*/*")}
    assert not live & set(mor.plan.group_ids()), "the cleaner left file groups our clustering replaced"
    # and when Hudi upserts once more (logs left uncompacted), every read stays exact
    upsert(3, {**writer_options(mor.setup), "hoodie.compact.inline": "false"})
    read = hudi.read(base)
    assert {r["_hoodie_record_key"]: {c: r[c] for c in DATA} for r in read.to_pylist()} == expected
    assert read.num_rows == len(expected)
    validate_files(hudi, base, _name("mor_services")).assert_clean()
    if mor.setup.table_version >= 8:  # hudi-rs merges these logs as Hudi does (reference §7): no v6 divergence
        rs = hudi_rs_rows(base, ["_hoodie_record_key", *DATA])
        assert {r["_hoodie_record_key"]: {c: r[c] for c in DATA} for r in rs} == expected
