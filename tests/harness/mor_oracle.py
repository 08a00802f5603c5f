"""Merge-on-read tables Apache Hudi writes for the merge oracle (hudi-mor-reference §8.3 item 6): the workload, the
latest file slices read from the table's own files (base file and ``.log.`` files per file group, independent of
the daemon's listing), our merge of each slice, and Hudi's compacted base files."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hudi_clusterd.formats.log import DecodedBlock, LogFileName, MergeRule, merge_file_slice, read_data_log
from tests.harness.apache_hudi import HudiWorker
from tests.harness.hudi_versions import HudiSetup

TABLE = "mor_oracle"
KEY, PARTITION, ORDERING = "id", "part", "ts"
SCHEMA = pa.schema([("id", pa.string()), ("part", pa.string()), ("ts", pa.int64()), ("value", pa.string()),
                    ("_hoodie_is_deleted", pa.bool_())])
BASE_FILE = re.compile(r"([^._][^_]*)_(\d+-\d+-\d+)_(\d+)\.parquet")
# a completed data instant on timeline layout 1 (``<i>.<action>``) or 2 (``<i>_<done>.<action>``)
COMPLETED = re.compile(r"(\d+)(?:_\d+)?\.(commit|deltacommit|replacecommit)")
MOR_OPTIONS: Mapping[str, str] = {
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.compact.inline": "false",
    "hoodie.compact.schedule.inline": "false",
    "hoodie.parquet.small.file.limit": "0",  # every insert makes new file groups: several groups per partition
}


def writer_options(setup: HudiSetup, operation: str = "upsert") -> dict[str, str]:
    """Hudi's defaults (metadata table on, the release's payload or merge mode) for a MOR table keyed by ``id``,
    partitioned by ``part``, ordered by ``ts``."""
    return {**setup.table_version_options, **MOR_OPTIONS, "hoodie.table.name": TABLE,
            "hoodie.datasource.write.recordkey.field": KEY, "hoodie.datasource.write.partitionpath.field": PARTITION,
            "hoodie.datasource.write.precombine.field": ORDERING, "hoodie.datasource.write.operation": operation}


def _rows(items: Sequence[tuple[int, int, str, bool]]) -> pa.Table:
    """Rows of ``(key number, ts, value, deleted)``; key ``kNN`` lives in partition ``pN % 2``."""
    return pa.table({"id": [f"k{n:02d}" for n, _, _, _ in items], "part": [f"p{n % 2}" for n, _, _, _ in items],
                     "ts": [t for _, t, _, _ in items], "value": [v for _, _, v, _ in items],
                     "_hoodie_is_deleted": [d for _, _, _, d in items]}, schema=SCHEMA)


@dataclass(frozen=True)
class Workload:
    """What :func:`write_workload` did: the instants of each step."""

    instants: dict[str, list[str]]


def write_workload(hudi: HudiWorker, setup: HudiSetup, path: Path, sql_name: str) -> Workload:
    """Two inserts (16 keys, ts 10, four file groups over two partitions), an upsert at ts 30 and one at ts 20 of
    the same keys (out of order within the slice) with a key at ts 5 (under its base row) and a new key, a SQL
    DELETE of two keys (DELETE blocks) and an upsert of ``_hoodie_is_deleted`` rows (at ts 40, and one at ts 1
    under its base row)."""
    steps: dict[str, list[str]] = {}
    steps["insert"] = hudi.write(_rows([(n, 10, f"v{n}", False) for n in range(8)]), path,
                                 writer_options(setup, "insert"))
    steps["insert"] += hudi.write(_rows([(n, 10, f"v{n}", False) for n in range(8, 16)]), path,
                                  writer_options(setup, "insert"))
    touched = (0, 1, 8, 9, 6, 15)
    steps["upsert_30"] = hudi.write(_rows([(n, 30, f"u30-{n}", False) for n in touched]), path,
                                    writer_options(setup))
    steps["upsert_20"] = hudi.write(_rows([(n, 20, f"u20-{n}", False) for n in touched]
                                          + [(2, 5, "u5-2", False), (16, 20, "new-16", False)]), path,
                                    writer_options(setup))
    hudi.register_table(sql_name, path)
    before = set(completed_instants(path))
    # Spark SQL writes with the session's settings, not the datasource options above: without this its DELETE
    # compacts inline once five deltacommits are there
    hudi.sql("SET hoodie.compact.inline=false")
    try:
        hudi.sql(f"DELETE FROM {sql_name} WHERE id IN ('k03', 'k10', 'k06')")
    finally:
        hudi.sql("RESET hoodie.compact.inline")
    steps["sql_delete"] = sorted(set(completed_instants(path)) - before)
    steps["is_deleted"] = hudi.write(_rows([(4, 40, "gone", True), (11, 40, "gone", True), (5, 1, "gone", True),
                                            (9, 50, "gone", True)]), path, writer_options(setup))
    return Workload(steps)


def completed_instants(table: Path) -> list[str]:
    """The completed commits, deltacommits and replacecommits of the data table's active timeline."""
    hoodie = table / ".hoodie"
    folder = hoodie / "timeline" if (hoodie / "timeline").is_dir() else hoodie
    return sorted({m.group(1) for p in folder.iterdir() if (m := COMPLETED.fullmatch(p.name))})


@dataclass(frozen=True)
class FileSlice:
    """The latest slice of one file group: its base file and its log files in Hudi's log order."""

    file_id: str
    base: Path
    logs: tuple[Path, ...]


def latest_slices(table: Path, table_version: int) -> list[FileSlice]:
    """The latest slice of every file group, read from the partition folders: the group's newest base file and
    the log files of that slice (version 6: named after the base file's instant; 8 and later: written by a
    deltacommit at or after it; no compaction is pending on these tables)."""
    out = []
    for partition in sorted(p for p in table.iterdir() if p.is_dir() and not p.name.startswith(".")):
        bases: dict[str, tuple[str, Path]] = {}
        for path in partition.glob("*.parquet"):
            if (m := BASE_FILE.fullmatch(path.name)) and (m.group(1) not in bases
                                                           or m.group(3) > bases[m.group(1)][0]):
                bases[m.group(1)] = (m.group(3), path)
        logs: dict[str, list[tuple[LogFileName, Path]]] = {}
        for path in partition.glob(".*.log.*"):
            name = LogFileName.parse(path.name)
            if name is not None:
                logs.setdefault(name.file_id, []).append((name, path))
        assert set(logs) <= set(bases), f"log-only file groups in {partition}"
        for file_id, (instant, base) in sorted(bases.items()):
            mine = [(n, p) for n, p in logs.get(file_id, [])
                    if (n.base_instant == instant if table_version < 8 else n.base_instant >= instant)]
            mine.sort(key=lambda item: (item[0].base_instant, item[0].version, item[0].write_token))
            out.append(FileSlice(file_id, base, tuple(p for _, p in mine)))
    return out


def merge_slice(piece: FileSlice, rule: MergeRule, completed: set[str]) -> pa.Table:
    """Our merge of one slice: every log file read with ``read_data_log``, then ``merge_file_slice``."""
    blocks: list[DecodedBlock] = []
    for log in piece.logs:
        blocks += read_data_log(log.read_bytes(), source=str(log))
    return merge_file_slice(pq.read_table(piece.base), blocks, completed=completed, rule=rule)


def without_file_name(table: pa.Table) -> pa.Table:
    return table.select([n for n in table.column_names if n != "_hoodie_file_name"]).sort_by("_hoodie_record_key")


def rows_by_key(table: pa.Table, columns: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``columns`` of each row, by record key (asserting keys are unique)."""
    out = {r["_hoodie_record_key"]: {c: r[c] for c in columns} for r in table.to_pylist()}
    assert len(out) == table.num_rows, "duplicate record keys"
    return out
