"""Golden merge-on-read tables written by Apache Hudi (../shared/reference/hudi-tables/mor): every log file decodes,
and our merge of each compaction plan's base and log files equals, value for value on every column but
``_hoodie_file_name``, the base file Hudi's compaction wrote (hudi-mor-reference §3.5)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.formats.log import (
    DataBlock,
    DecodedBlock,
    DeleteBlock,
    HeaderKey,
    LogFileName,
    MergeMode,
    MergeRule,
    Payload,
    Release,
    merge_file_slice,
    read_data_log,
    scan_log_file,
)
from hudi_clusterd.formats.log.block import BlockType
from tests.harness.mor_logs import golden_compactions

G6 = "v6_simplekeygen_nonhivestyle_overwritetable"
G6_FIRST, G6_SECOND = "20250121000647668", "20250121000656060"


@pytest.fixture
def mor_tables(golden_mor_tables: Path) -> Path:
    """The golden MOR tables (read only)."""
    return golden_mor_tables


def _data_logs(table: Path) -> list[Path]:
    return sorted(p for p in table.rglob(".*.log.*") if ".hoodie" not in p.relative_to(table).parts)


def _blocks(paths: list[Path]) -> list[DecodedBlock]:
    out: list[DecodedBlock] = []
    for path in paths:
        out += read_data_log(path.read_bytes(), source=str(path))
    return out


def test_every_golden_data_log_file_decodes(mor_tables: Path) -> None:
    logs = [p for t in sorted(mor_tables.iterdir()) for p in _data_logs(t)]
    assert len(logs) == 31
    counts: dict[str, int] = {}
    for path in logs:
        assert not any(s.corrupt for s in scan_log_file(path.read_bytes(), source=str(path)))
        for block in read_data_log(path.read_bytes(), source=str(path)):
            counts[type(block).__name__] = counts.get(type(block).__name__, 0) + 1
            assert isinstance(block, DataBlock | DeleteBlock)
            name = LogFileName.parse(path.name)
            assert name is not None
            # version 9 names a log file after its deltacommit, version 6 after its slice's base instant
            assert name.base_instant == block.instant if "v9_" in str(path) else name.base_instant < block.instant
            if isinstance(block, DeleteBlock):
                assert [r.ordering.is_default for r in block.records] == [True] * len(block.records) != []
            else:
                assert block.records.num_rows >= 1
    assert counts == {"DataBlock": 19, "DeleteBlock": 12}


def test_the_v6_parquet_block_table_decodes_and_merges_as_of_each_deltacommit(mor_tables: Path) -> None:
    table = mor_tables / G6
    [log] = _data_logs(table)
    [scanned] = scan_log_file(log.read_bytes(), source=str(log))
    assert scanned.block.block_type is BlockType.PARQUET_DATA
    assert scanned.block.header[HeaderKey.INSTANT_TIME] == G6_SECOND
    [block] = read_data_log(log.read_bytes(), source=str(log),
                            reader_schema=scanned.block.header[HeaderKey.SCHEMA])
    assert isinstance(block, DataBlock)
    [row] = block.records.to_pylist()
    assert (row["_hoodie_commit_time"], row["_hoodie_record_key"], row["id"], row["name"], row["isActive"]) == (
        G6_SECOND, "1", 1, "Alice", False)
    [base_path] = log.parent.glob("*.parquet")
    base = pq.read_table(base_path)
    for release in Release:
        rule = MergeRule.of_payload(Payload.OVERWRITE_WITH_LATEST, "longField", release)
        first = merge_file_slice(base, [block], completed={G6_FIRST}, rule=rule)
        assert first.equals(base)  # the second deltacommit's block is not applied as of the first
        second = merge_file_slice(base, [block], completed={G6_FIRST, G6_SECOND}, rule=rule)
        rows = {r["id"]: r for r in second.to_pylist()}
        assert sorted(rows) == [1, 3] and rows[3] == base.to_pylist()[1]
        assert {k: v for k, v in rows[1].items() if k != "_hoodie_file_name"} == {
            k: v for k, v in row.items() if k != "_hoodie_file_name"}


def _sorted(t: pa.Table) -> pa.Table:
    return t.select([n for n in t.column_names if n != "_hoodie_file_name"]).sort_by("_hoodie_record_key")


def test_our_merge_of_every_golden_compaction_plan_equals_hudis_compacted_base_file(mor_tables: Path) -> None:
    checked = rows = changed = 0
    for table in sorted(mor_tables.glob("v9_*")):
        for instant, op, completed in golden_compactions(table):
            partition = table / op["partitionPath"]
            base = pq.read_table(partition / op["dataFilePath"])
            blocks = _blocks([partition / name for name in op["deltaFilePaths"]])
            assert blocks and op["deltaFilePaths"]
            rule = MergeRule.of_mode(MergeMode.EVENT_TIME, "txn_ts")
            merged = merge_file_slice(base, blocks, completed=completed, rule=rule, as_of=instant)
            [output] = partition.glob(f"{op['fileId']}_*_{instant}.parquet")
            expected = pq.read_table(output)
            where = f"{table.name} {op['fileId']}"
            assert merged.schema == expected.schema, where
            assert _sorted(merged).equals(_sorted(expected)), where
            changed += not _sorted(base).equals(_sorted(expected))
            checked += 1
            rows += expected.num_rows
    assert (checked, rows) == (10, 28)
    assert changed == checked  # every compaction changed its group: the logs were applied, not ignored
