"""Apache Hudi is the oracle of our merge-on-read merge (hudi-mor-reference §8.3 item 6, §3.4).

Hudi 0.15.0 (table version 6, OverwriteWithLatestAvroPayload) and Hudi 1.2.0 (version 9, its default merge mode)
each write one MOR table per session at their defaults (metadata table on, inline compaction off): two inserts
into four file groups, two upserts of the same keys with ordering values out of order within the slice, a SQL
DELETE (DELETE blocks) and an upsert of ``_hoodie_is_deleted`` rows (``tests/harness/mor_oracle.py``; the session's
``mor_written`` table, which ``test_mor_clustering.py`` clusters copies of). Our merge
(``read_data_log`` + ``merge_file_slice``) of every latest file slice, read from the table's own files, must equal
Hudi's snapshot read row for row, and, on a copy Hudi compacts, Hudi's compacted base files on every column but
``_hoodie_file_name``.

Hudi 1.0.2 (version 8) writes and reads the same way in the long run (``-m slow``).

§3.4: Hudi 1.2.0 (and 1.0.2) also reads (a copy of) Hudi 0.15.0's version-6 table, and each release's answer must
be what our ``MergeRule`` of that release gives.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.formats.log import MergeRule, Payload, Release
from tests.harness.apache_hudi import HudiWorker, HudiWorkers, read_hoodie_properties
from tests.harness.hudi_versions import HUDI_0_15, HUDI_1_0_2, HUDI_1_2_V9, HudiSetup
from tests.harness.mor_clustered import WrittenMor
from tests.harness.mor_oracle import (
    ORDERING,
    FileSlice,
    Workload,
    completed_instants,
    latest_slices,
    merge_slice,
    rows_by_key,
    without_file_name,
)

pytestmark = [pytest.mark.hudi]

# Hudi 1.0.2 (table version 8) repeats the 1.x side in the long run only
RUNS = (HUDI_0_15, HUDI_1_2_V9, pytest.param(HUDI_1_0_2, marks=pytest.mark.slow))
IDS = ("hudi-0.15", "hudi-1.2-v9", "hudi-1.0.2")
DATA_COLUMNS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
                "id", "part", "ts", "value")
OUT_OF_ORDER = ("k00", "k01", "k08", "k15")  # upserted at ts 30, then at ts 20, never deleted


@dataclass(frozen=True)
class OracleTable:
    setup: HudiSetup
    path: Path
    workload: Workload
    snapshot: pa.Table  # Hudi's snapshot read, by the writing release
    compacted: Path  # a copy Hudi compacted
    compaction_error: str | None  # (Hudi 1.0.2 only) why its compaction of the copy failed
    v6_read_by_1_x: pa.Table | None  # (Hudi 1.x only) its snapshot read of a copy of Hudi 0.15's table


_WRITTEN: dict[str, OracleTable] = {}


def _rule(table: Path, release: Release | None = None) -> MergeRule:
    props = read_hoodie_properties(table)
    if props["hoodie.table.version"] == "6":
        payload = props.get("hoodie.compaction.payload.class", Payload.OVERWRITE_WITH_LATEST)
        return MergeRule.of_payload(payload, ORDERING, release or Release.HUDI_0_15)
    return MergeRule.of_mode(props["hoodie.record.merge.mode"], ORDERING)


def _our_merge(table: Path, rule: MergeRule) -> tuple[list[FileSlice], pa.Table]:
    version = int(read_hoodie_properties(table)["hoodie.table.version"])
    slices = latest_slices(table, version)
    completed = set(completed_instants(table))
    return slices, pa.concat_tables([merge_slice(s, rule, completed) for s in slices])


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


@pytest.fixture(scope="module")
def oracle(request: pytest.FixtureRequest, hudi_workers: HudiWorkers, mor_written: Callable[[HudiSetup], WrittenMor],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[OracleTable]:
    """The release's MOR table (written once per session), its snapshot read and a compacted copy."""
    setup: HudiSetup = request.param
    hudi: HudiWorker = hudi_workers.for_setup(setup)
    written = mor_written(setup)
    v6_read = None
    if setup.hudi_version != HUDI_0_15.hudi_version and HUDI_0_15.name in _WRITTEN:
        root = tmp_path_factory.mktemp(f"mor_oracle_{setup.name}")
        v6_read = hudi.read(_copy(_WRITTEN[HUDI_0_15.name].path, root / "v6_by_1_x"))
    table = OracleTable(setup, written.path, written.workload, written.snapshot, written.compacted,
                        written.compaction_error, v6_read)
    _WRITTEN[setup.name] = table
    yield table


@pytest.mark.parametrize("oracle", RUNS, indirect=True, scope="module", ids=IDS)
def test_our_merge_of_every_latest_slice_equals_hudis_snapshot_read(oracle: OracleTable) -> None:
    rule = _rule(oracle.path)
    slices, ours = _our_merge(oracle.path, rule)
    assert len(slices) >= 5  # two inserts into two partitions, then an upsert's new key
    assert sum(bool(s.logs) for s in slices) >= 3  # logs in several file groups
    expected = rows_by_key(oracle.snapshot, DATA_COLUMNS)
    assert rows_by_key(ours, DATA_COLUMNS) == expected
    # the workload reached Hudi: deletes of both kinds applied, out-of-order upserts merged
    assert {"k03", "k10", "k06", "k04", "k11", "k09"}.isdisjoint(expected)
    assert {"k00", "k16"} <= set(expected)
    # a log record under its base row's ordering value (an update at 5, a _hoodie_is_deleted row at 1; base 10):
    # event-time ordering keeps the base row, the others take the log record
    assert (expected["k02"]["ts"], "k05" in expected) == ((10, True) if rule.base_by_ordering else (5, False))


@pytest.mark.parametrize("oracle", RUNS, indirect=True, scope="module", ids=IDS)
def test_our_merge_equals_hudis_compaction_on_every_column_but_the_file_name(oracle: OracleTable) -> None:
    if oracle.compaction_error is not None:
        pytest.skip(f"Hudi 1.0.2 cannot compact this table: {oracle.compaction_error}")
    before = set(completed_instants(oracle.path))
    [compaction] = sorted(set(completed_instants(oracle.compacted)) - before)
    version = int(read_hoodie_properties(oracle.path)["hoodie.table.version"])
    slices, ours = _our_merge(oracle.path, _rule(oracle.path))
    after = {s.file_id: s for s in latest_slices(oracle.compacted, version)}
    assert {f for f, s in after.items() if s.base.name.endswith(f"_{compaction}.parquet")} == {
        s.file_id for s in slices if s.logs}  # Hudi compacted every group with logs
    assert not any(s.logs for s in after.values())
    expected = pa.concat_tables([pq.read_table(after[s.file_id].base) for s in slices])
    assert ours.schema == expected.schema
    assert without_file_name(ours).equals(without_file_name(expected))


@pytest.mark.parametrize("oracle", RUNS, indirect=True, scope="module", ids=IDS)
def test_the_0_15_and_1_2_readers_of_a_version_6_overwrite_table_match_our_release_switch(
        oracle: OracleTable) -> None:
    """hudi-mor-reference §3.4 on Hudi 0.15.0's version-6 OverwriteWithLatestAvroPayload table."""
    if HUDI_0_15.name not in _WRITTEN:
        pytest.skip("Hudi 0.15.0's table was not written in this session")
    v6 = _WRITTEN[HUDI_0_15.name]
    assert read_hoodie_properties(v6.path).get("hoodie.compaction.payload.class",
                                               Payload.OVERWRITE_WITH_LATEST) == Payload.OVERWRITE_WITH_LATEST
    hudi_read = v6.snapshot if oracle.setup is HUDI_0_15 else oracle.v6_read_by_1_x
    assert hudi_read is not None
    release = Release.HUDI_0_15 if oracle.setup is HUDI_0_15 else Release.HUDI_1_X
    other = Release.HUDI_1_X if release is Release.HUDI_0_15 else Release.HUDI_0_15
    expected = rows_by_key(hudi_read, DATA_COLUMNS)
    assert rows_by_key(_our_merge(v6.path, _rule(v6.path, release))[1], DATA_COLUMNS) == expected
    assert rows_by_key(_our_merge(v6.path, _rule(v6.path, other))[1], DATA_COLUMNS) != expected
    # 0.15 pre-combines the logs by ordering (ts 30 wins); 1.x infers COMMIT_TIME_ORDERING (the later ts 20 wins)
    wanted = 30 if release is Release.HUDI_0_15 else 20
    assert {expected[k]["ts"] for k in OUT_OF_ORDER} == {wanted}
    # both take a log record over the base row whatever its ordering: an update and a _hoodie_is_deleted row
    assert expected["k02"]["ts"] == 5 and "k05" not in expected
