"""The metadata-table checks of ``tests/harness/metadata_checks.py`` on tables Apache Hudi wrote itself with its MDT
defaults (Hudi 0.15: ``files``; Hudi 1.2 at version 9: ``files,column_stats,partition_stats``), no daemon: they
pass on a sound table, and the file check fails when storage and the MDT disagree.

One table per setup (three inserts of ten rows into two partitions, ``hoodie.metadata.compact.max.delta.commits=2``
so that Hudi compacts its MDT), written once for the module; the test that breaks it works on a copy.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.harness.apache_hudi import HudiWorker, HudiWorkers, hudi_write_options
from tests.harness.hudi_versions import HUDI_0_15, HUDI_1_2_V9, HudiSetup
from tests.harness.metadata_checks import (
    MetadataCheckUnavailable,
    column_stats,
    data_skipping_check,
    mdt_compactions,
    metadata_partitions,
    parquet_column_stats,
    storage_files,
    validate_files,
)

pytestmark = pytest.mark.hudi

SETUPS: tuple[HudiSetup, ...] = (HUDI_0_15, HUDI_1_2_V9)
SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("ts", pa.int64()), ("v", pa.int64()),
                    ("s", pa.string())])
COLUMNS = ["id", "part", "ts", "v", "s"]
BATCHES = 3

# Hudi's defaults for a partitioned table with the metadata table on
DEFAULT_PARTITIONS = {HUDI_0_15: ["files"], HUDI_1_2_V9: ["column_stats", "files", "partition_stats"]}
# A selective predicate per setup and the files it must scan of the six: 0.15 has no column_stats to skip with,
# so only partition pruning (through the MDT's listing) narrows its scan; 1.2 skips on a data column.
SELECTIVE = {HUDI_0_15: ("part = 'p0' AND v >= 200", 3), HUDI_1_2_V9: ("v >= 200", 2)}


def batch(b: int) -> list[dict[str, Any]]:
    """Ten rows; batch ``b`` has ``v`` in [100 b, 100 b + 9], so each insert's two files have disjoint ranges."""
    return [{"id": b * 10 + i, "part": f"p{i % 2}", "ts": b, "v": b * 100 + i, "s": f"s{b}{i:02d}"}
            for i in range(10)]


def fresh_name(setup: HudiSetup) -> str:
    """A table name no other table of the shared Spark session has."""
    return f"mdt_checks_{setup.name.replace('.', '_').replace('-', '_')}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class MdtTable:
    setup: HudiSetup
    worker: HudiWorker
    base: Path
    name: str


# Hudi 1.2 at version 9 (three metadata partitions) in every run; 0.15's files-only table in the long run.
# Of the tests below, the one that breaks the table runs in every run (nothing else shows that the file check
# fails when it should); the checks that pass on a sound table are in the long run only: the scenarios use them
# in every run on Hudi 1.2's version-9 tables and expect them clean (validate_files in
# tests/interop/test_metadata_table.py, test_streaming_beside_daemon.py, test_plans_and_table_services.py and
# the Hudi-streaming crash points; column statistics against the files' own and a data-skipping read in
# test_metadata_table.py).
@pytest.fixture(scope="module", params=[pytest.param(HUDI_0_15, marks=pytest.mark.slow), HUDI_1_2_V9],
                ids=[s.name for s in SETUPS])
def mdt_table(request: pytest.FixtureRequest, hudi_workers: HudiWorkers,
              tmp_path_factory: pytest.TempPathFactory) -> MdtTable:
    """A partitioned table Hudi wrote in three inserts with its metadata table on (two new files per insert)."""
    setup: HudiSetup = request.param
    worker = hudi_workers.for_setup(setup)
    base = tmp_path_factory.mktemp(f"mdt-checks-{setup.name}") / "mdt"
    options = hudi_write_options(setup, "mdt", record_key="id", partition_path="part", precombine="ts", extra={
        "hoodie.metadata.enable": "true",  # Hudi's default, stated: the checks are about it
        "hoodie.metadata.compact.max.delta.commits": "2",
        "hoodie.datasource.write.operation": "insert",
        "hoodie.parquet.small.file.limit": "0",
    })
    for b in range(BATCHES):
        worker.write(batch(b), base, options, schema=SCHEMA)
    return MdtTable(setup, worker, base, fresh_name(setup))


@pytest.mark.slow  # the scenarios run this check in every run (see mdt_table)
def test_the_file_check_is_clean_on_a_table_hudi_wrote(mdt_table: MdtTable) -> None:
    t = mdt_table
    assert metadata_partitions(t.base) == DEFAULT_PARTITIONS[t.setup]
    assert mdt_compactions(t.base), "Hudi compacted its metadata table (max.delta.commits=2)"
    result = validate_files(t.worker, t.base, t.name)
    result.assert_clean()
    assert result.storage_partitions == result.metadata_partitions == ["p0", "p1"]
    assert len(result.rows) == 2 * BATCHES
    assert all(r["is_present_in_fs"] and r["is_present_in_metadata"] and r["fs_size"] > 0 for r in result.rows)
    assert len(result.procedure_rows) == 2 * BATCHES


def test_the_file_check_fails_when_storage_and_the_metadata_table_disagree(mdt_table: MdtTable,
                                                                           tmp_path: Path) -> None:
    # Given a copy of the table, whose storage then loses a listed file, gains an unlisted one, and has one changed
    t = mdt_table
    base = tmp_path / "mdt"
    shutil.copytree(t.base, base)
    files = storage_files(base)
    deleted, resized = sorted(files["p0"])[0], sorted(files["p1"])[0]
    stray = f"{uuid.uuid4()}-0_0-1-1_{deleted.rsplit('_', 1)[1]}"
    shutil.copy(base / "p0" / deleted, base / "p1" / stray)
    (base / "p0" / deleted).unlink()
    with open(base / "p1" / resized, "ab") as grown:
        grown.write(b"0" * 16)
    # When the files are checked
    result = validate_files(t.worker, base, fresh_name(t.setup))
    # Then each of the three is a difference, and the check fails naming them
    found = {(r["partition"], r["file_name"]): (r["is_present_in_fs"], r["is_present_in_metadata"])
             for r in result.differences}
    assert found == {("p0", deleted): (False, True), ("p1", stray): (True, False), ("p1", resized): (True, True)}
    sizes = next(r for r in result.differences if r["file_name"] == resized)
    assert sizes["fs_size"] == sizes["metadata_size"] + 16
    with pytest.raises(AssertionError) as failed:
        result.assert_clean()
    assert all(name in str(failed.value) for name in (deleted, stray, resized))
    # Hudi's own procedure sees none of it: both its sides read the metadata table (see metadata_checks)
    assert not [r for r in result.procedure_rows
                if r["is_present_in_fs"] != r["is_present_in_metadata"] or r["fs_size"] != r["metadata_size"]]


@pytest.mark.slow  # the scenarios run this check in every run (see mdt_table)
def test_column_stats_are_each_files_true_min_and_max(mdt_table: MdtTable) -> None:
    t = mdt_table
    if "column_stats" not in DEFAULT_PARTITIONS[t.setup]:
        with pytest.raises(MetadataCheckUnavailable):
            column_stats(t.worker, t.base, t.name)
        return
    files = [name for names in storage_files(t.base).values() for name in names]
    stats = column_stats(t.worker, t.base, t.name, columns=COLUMNS)
    assert {s.file_name for s in stats} == set(files)
    assert stats == parquet_column_stats(t.base, files, COLUMNS)
    # the default columns are the table's data columns, and a file filter keeps only those files
    assert column_stats(t.worker, t.base, t.name, files=files[:1]) == [s for s in stats if s.file_name == files[0]]


@pytest.mark.slow  # the scenarios run this check in every run (see mdt_table)
def test_a_data_skipping_read_is_exact_and_scans_fewer_files(mdt_table: MdtTable) -> None:
    t = mdt_table
    predicate, scanned = SELECTIVE[t.setup]
    result = data_skipping_check(t.worker, t.base, predicate)
    result.assert_exact()
    expected_ids = sorted(r["id"] for b in range(BATCHES) for r in batch(b)
                          if r["v"] >= 200 and (t.setup is not HUDI_0_15 or r["part"] == "p0"))
    assert sorted(r["id"] for r in result.rows) == expected_ids
    assert (result.files_scanned, result.files_total) == (scanned, 2 * BATCHES)
    assert len(result.snapshot_files_metadata) == 2 * BATCHES
