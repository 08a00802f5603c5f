"""Bad input on merge-on-read tables, through the daemon's real path (``ops.schedule.schedule`` then
``ops.execute.execute_pending`` on Spark), on copies of a golden table Apache Hudi 1.2 wrote (version 9, no
metadata table) given live log files of their own (`tests/harness/mor_tables.py`) and then damaged.

- Damaged frames are read as Hudi's log reader reads them: a torn last block and a block overwritten in the middle
  are CORRUPT blocks, skipped; the blocks after a corrupt one still apply. The clustering completes and its rows
  equal our merge of the same table whose logs hold only the intact blocks (what Hudi's reader applies).
- What cannot be merged is refused at execution, in the Spark task that reads the log, in one line naming the log
  file: an unknown block type, a data block whose column cannot be read as the table's type, and (through the
  ``hudi-clusterd cluster`` command, in this process, joining the tests' Spark session) an HFILE data block in a
  data table's log. The clustering is rolled back (no data file of it left, the plan kept for a retry)
  and the table reads as before.
- Tables whose merge is not served are refused before anything is written, naming the key (and listing the
  supported values): a custom payload class on version 6, a CUSTOM merge mode on version 9, CDC, partial
  updates (``tests/integration/test_mor_bad_input_config.py`` has those, without a JVM).
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.formats.log import encode_block, hfile_data_block
from hudi_clusterd.ops.events import Outcome
from hudi_clusterd.ops.execute import ExecutionResult, execute_pending
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import make_policy
from tests.harness.crash_harness import hoodie_names
from tests.harness.mor_logs import avro_block
from tests.harness.mor_tables import (
    GOLDEN,
    LogWrite,
    add_log_commit,
    golden_block_schema,
    log_blocks,
    merged_view,
    pending,
    stray_data_files,
    updates,
)

pytestmark = pytest.mark.spark

POLICY = make_policy(**{"hoodie.clustering.max.parallelism": "1"})
EU = ("region=eu", "b151ed41-bdc8-4b95-a733-69266ed89edd-0")
US = ("region=us", "4625f1ea-a436-4846-a24a-1328e1c036a6-0")
UNKNOWN_TYPE = 7
FIRST, DAMAGED = "20261001000000000", "20261002000000000"  # the deltacommits' instants


@pytest.fixture
def live(golden_mor_tables: Path, tmp_path: Path) -> Any:
    """Factory: a copy of the golden table with a first deltacommit of intact logs on EU and US (so that both
    slices have logs and are planned); returns its base path."""
    n = 0

    def _copy() -> Path:
        nonlocal n
        n += 1
        base = tmp_path / f"t{n}"
        shutil.copytree(golden_mor_tables / GOLDEN, base)
        add_log_commit(base, build={EU: {"n": 1}, US: {"n": 1}}, instant=FIRST)
        return base

    return _copy


def cluster(spark: Any, base: Path) -> ExecutionResult:
    """What one daemon tick does on the table: schedule a plan, then execute it on Spark."""
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner

    table = HoodieTable.open(str(base))
    scheduled = schedule(table, POLICY, force=True)
    assert scheduled.pending is not None, scheduled
    planned = {s.group_id: s.delta_file_paths for g in scheduled.pending.plan.input_groups for s in g.slices}
    assert planned.get(EU) and planned.get(US), planned  # both slices planned with their log files
    return execute_pending(table, SparkGroupRunner(spark, owns_session=False), parallelism=1)


def test_torn_and_corrupt_blocks_are_skipped_and_the_rest_merged_as_hudi_reads_it(
        spark: Any, live: Any) -> None:
    # Given two logs of one deltacommit: on EU two data blocks, the last one torn; on US two data blocks, the
    # first one overwritten in its reverse pointer (a corrupt block in the middle)
    damaged, twin = live(), live()

    def writes(base: Path, instant: str, *, intact_only: bool) -> list[LogWrite]:
        eu = log_blocks(base, *EU, instant, n=2)
        eu_last = avro_block(instant, golden_block_schema(base), updates(base, *EU, instant, 1, bump=5000))
        us_first = avro_block(instant, golden_block_schema(base), updates(base, *US, instant, 1, bump=9000))
        us_second = avro_block(instant, golden_block_schema(base), updates(base, *US, instant, 2, bump=7000))
        if intact_only:  # what Hudi's reader applies: the intact blocks
            return [LogWrite(*EU, eu), LogWrite(*US, [us_second])]
        torn = encode_block(eu_last)
        first = bytearray(encode_block(us_first))
        first[-1] ^= 0x01  # its reverse pointer disagrees with its length
        return [LogWrite(*EU, eu, tail=torn[:len(torn) // 2]),
                LogWrite(*US, [], tail=bytes(first) + encode_block(us_second))]

    instant = DAMAGED
    add_log_commit(damaged, writes(damaged, instant, intact_only=False), instant=instant)
    add_log_commit(twin, writes(twin, instant, intact_only=True), instant=instant)
    expected = merged_view(damaged)
    assert expected == merged_view(twin)  # the damaged blocks are skipped, the block after the corrupt one read
    assert sum(r["merchant_name"] == f"updated at {instant}" for r in expected) == 4
    # When the daemon clusters the damaged table
    result = cluster(spark, damaged)
    # Then it completes, its rows exactly the merge of the intact blocks, nothing left behind
    assert result.outcome is Outcome.COMPLETED, result
    assert merged_view(damaged) == expected
    assert not stray_data_files(damaged) and not pending(damaged)


def data_files(base: Path) -> list[str]:
    """The table's files outside ``.hoodie``."""
    return sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file()
                  and ".hoodie" not in p.relative_to(base).parts)


def _unknown_type(base: Path, instant: str) -> bytes:
    data = bytearray(encode_block(log_blocks(base, *US, instant, n=1)[0]))
    struct.pack_into(">i", data, 18, UNKNOWN_TYPE)  # the block type after the magic, length and version
    return bytes(data)


def _hfile(base: Path, instant: str) -> bytes:
    return encode_block(hfile_data_block(instant, '{"type":"record","name":"r","fields":[]}', [("k", b"v")],
                                         create_time_ms=1))


def _bad_schema(base: Path, instant: str) -> bytes:
    schema = golden_block_schema(base)
    fields = [dict(f, type=["null", "string"]) if f["name"] == "txn_ts" else f for f in schema["fields"]]
    rows = updates(base, *US, instant, 1)
    rows[0]["txn_ts"] = "not a number"
    return encode_block(avro_block(instant, dict(schema, fields=fields), rows))


REFUSED = {
    "unknown block type": (_unknown_type, rf"unknown block type {UNKNOWN_TYPE}"),
    "hfile block": (_hfile, r"HFILE data blocks are not read on a data table"),
    "schema": (_bad_schema, r"column 'txn_ts' of type string cannot be read as int64"),
}


def _refused_at_execution(spark: Any, live: Any, case: str) -> str:
    make, message = REFUSED[case]
    base = live()
    instant = DAMAGED
    good = log_blocks(base, *US, instant, n=1)
    _, [log] = add_log_commit(base, [LogWrite(*US, good, tail=make(base, instant))], instant=instant)
    files = data_files(base)
    # When the daemon clusters it
    with pytest.raises(ExecutionError) as refused:
        cluster(spark, base)
    # Then the clustering is refused in one line naming the log file, rolled back (its plan kept for a retry),
    # no data file of it left, the table's files as they were
    text = str(refused.value)
    assert log.name in text and "\n" not in text, text
    assert pytest.importorskip("re").search(message, text), text
    names = hoodie_names(base)
    assert any(n.endswith(".rollback") for n in names), names
    [plan] = pending(base)
    assert plan.endswith(".clustering.requested"), names
    assert not stray_data_files(base) and data_files(base) == files
    return text


@pytest.mark.parametrize("case", [pytest.param("hfile block", marks=pytest.mark.slow),  # the command test has it
                                  "unknown block type", "schema"])
def test_unreadable_logs_are_refused_naming_the_file(spark: Any, live: Any, case: str) -> None:
    print(_refused_at_execution(spark, live, case))


def test_the_cluster_command_prints_the_refusal_naming_the_log_file(spark: Any, live: Any,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from hudi_clusterd.cli import main

    # Given a table whose log holds an HFILE block, when `hudi-clusterd cluster` runs (joining this session)
    base = live()
    _, [log] = add_log_commit(base, [LogWrite(*US, log_blocks(base, *US, DAMAGED, n=1), tail=_hfile(base, DAMAGED))],
                              instant=DAMAGED)
    files = data_files(base)
    code = main(["cluster", "--base-path", str(base), "--force", "--spark-master", "local[2]"])
    # Then it fails with one error line naming the log file, the clustering rolled back
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    print("\n".join(err))
    assert code != 0 and len(err) == 1 and str(log) in err[0], err
    assert "HFILE data blocks are not read on a data table" in err[0], err
    assert not stray_data_files(base) and data_files(base) == files
    [plan] = pending(base)
    assert plan.endswith(".clustering.requested"), plan
