"""Damaged log files of golden merge-on-read tables (Apache Hudi 1.2, version 9) merge as Hudi's reader reads them:
every slice of every golden compaction plan, its logs given a torn block at the end of the last one and a corrupt
block (a whole block whose reverse pointer disagrees with its length) in front of the first one's blocks, still
merges to exactly the base file Hudi's compaction wrote: the damaged blocks are skipped, each holding updates that
would have won had they been read, and every intact block after them applies."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from hudi_clusterd.formats.log import (
    CorruptBlock,
    DecodedBlock,
    MergeMode,
    MergeRule,
    encode_block,
    merge_file_slice,
    read_data_log,
)
from tests.harness.mor_logs import avro_block, golden_compactions

RULE = MergeRule.of_mode(MergeMode.EVENT_TIME, "txn_ts")


def _winning_block(base: pa.Table, instant: str) -> bytes:
    """An AVRO_DATA block of ``instant`` updating every base row with a far later ordering value (it would win)."""
    schema = {"type": "record", "name": "r", "namespace": "hoodie.t", "fields": [
        {"name": n, "type": ["null", "string"], "default": None} for n in
        ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path")] + [
        {"name": "txn_ts", "type": ["null", "long"], "default": None}]}
    rows = [{"_hoodie_commit_time": instant, "_hoodie_commit_seqno": f"{instant}_0_{i}", "_hoodie_record_key": k,
             "_hoodie_partition_path": p, "txn_ts": 10**15}
            for i, (k, p) in enumerate(zip(base.column("_hoodie_record_key").to_pylist(),
                                           base.column("_hoodie_partition_path").to_pylist(), strict=True))]
    return encode_block(avro_block(instant, schema, rows))


def _sorted(t: pa.Table) -> pa.Table:
    return t.select([n for n in t.column_names if n != "_hoodie_file_name"]).sort_by("_hoodie_record_key")


def test_torn_and_corrupt_blocks_in_golden_logs_are_skipped_and_the_merge_equals_hudis_compaction(
        golden_mor_tables: Path) -> None:
    checked = corrupt = 0
    for table in sorted(golden_mor_tables.glob("v9_*")):
        for instant, op, completed in golden_compactions(table):
            partition = table / op["partitionPath"]
            base = pq.read_table(partition / op["dataFilePath"])
            logs = [(partition / name).read_bytes() for name in op["deltaFilePaths"]]
            winning = _winning_block(base, max(completed))
            bad = bytearray(winning)
            bad[-1] ^= 0x01  # the reverse pointer
            logs[0] = bytes(bad) + logs[0]
            logs[-1] = logs[-1] + winning[:len(winning) - 9]  # torn before its reverse pointer
            blocks: list[DecodedBlock] = []
            for name, data in zip(op["deltaFilePaths"], logs, strict=True):
                blocks += read_data_log(data, source=name)
            corrupt += sum(isinstance(b, CorruptBlock) for b in blocks)
            merged = merge_file_slice(base, blocks, completed=completed, rule=RULE, as_of=instant)
            [output] = partition.glob(f"{op['fileId']}_*_{instant}.parquet")
            assert _sorted(merged).equals(_sorted(pq.read_table(output))), f"{table.name} {op['fileId']}"
            # the damaged block would have won: read whole, it changes the merge
            whole = read_data_log(winning, source="whole")
            assert not _sorted(merge_file_slice(base, blocks + whole, completed=completed, rule=RULE,
                                                as_of=instant)).equals(_sorted(pq.read_table(output)))
            checked += 1
    assert (checked, corrupt) == (10, 20)
