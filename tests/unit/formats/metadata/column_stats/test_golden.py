"""Column and partition statistics of the metadata table: the records we compute from parquet footers equal,
field for field, the ones Apache Hudi 1.x wrote in the golden version-9 tables (every commit, the clustering
``20260307162454799`` of G-simple included), and decode back to the footer ranges."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.formats.hfile import read_hfile
from hudi_clusterd.formats.log import HeaderKey, decode_log_file, hfile_block_records
from hudi_clusterd.formats.metadata import column_stats as cs

MDT_TABLES = ["v9_txns_simple_meta", "v9_txns_nonpart_meta", "v9_txns_complex_meta", "v9_txns_simple_overwrite"]
CLUSTERING = "20260307162454799"


# ------------------------------------------------------------------------------------------------ golden helpers


@cache
def _parsed(schema_text: str) -> Any:
    return fastavro.parse_schema(json.loads(schema_text))


def _decode(schema_text: str, value: bytes) -> dict[str, Any]:
    """A stored record with its union branches named (``(record name, value)``), meta fields dropped."""
    record = fastavro.schemaless_reader(io.BytesIO(value), _parsed(schema_text), None, return_record_name=True,
                                        return_record_name_override=True)
    assert isinstance(record, dict)
    return {k: v for k, v in record.items() if not k.startswith("_hoodie_")}


def _mdt_records(table: Path, partition: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(instant, key, record) of every record in an MDT partition: base HFiles (instant = the compaction's),
    then every HFILE_DATA log block (instant = its INSTANT_TIME header)."""
    folder = table / ".hoodie" / "metadata" / partition
    out: list[tuple[str, str, dict[str, Any]]] = []
    for base in sorted(folder.glob("*.hfile")):
        contents = read_hfile(base.read_bytes(), source=str(base))
        schema = contents.file_info["schema"].decode()
        instant = base.stem.rsplit("_", 1)[1]
        out += [(instant, row.decode(), {**_decode(schema, value), "key": row.decode()})
                for row, value in contents.cells]
    for log in sorted(folder.glob(".*.log.*")):
        for block in decode_log_file(log.read_bytes(), source=str(log)):
            if block.block_type.name != "HFILE_DATA":
                continue
            schema = block.header[HeaderKey.SCHEMA]
            instant = block.header[HeaderKey.INSTANT_TIME]
            out += [(instant, key, {**_decode(schema, value), "key": key})
                    for key, value in hfile_block_records(block, source=str(log))]
    return out


def _properties(table: Path) -> dict[str, str]:
    out = {}
    for line in (table / ".hoodie" / "hoodie.properties").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k] = v.replace("\\:", ":")
    return out


def _relative_partition(base: Path, file: Path) -> str:
    rel = file.parent.relative_to(base).as_posix()
    return "" if rel == "." else rel


def _file_group_and_instant(file_name: str) -> tuple[str, str]:
    """``<fileId>_<writeToken>_<instant>.parquet`` -> (file id, instant)."""
    return file_name.rsplit("_", 2)[0], file_name.rsplit("_", 1)[1].split(".")[0]


class Golden:
    """One golden version-9 table: its schema, index definitions, commits and MDT records."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.schema = json.loads(_properties(base)["hoodie.table.create.schema"])
        self.index_json = json.loads((base / ".hoodie" / ".index_defs" / "index.json").read_text())
        self.version = cs.index_version(9, self.index_json)
        self.columns = cs.indexed_columns(9, self.schema, index_json=self.index_json)
        self.commits: list[tuple[str, dict[str, Any]]] = []
        for f in sorted((base / ".hoodie" / "timeline").glob("*_*.*commit")):
            with f.open("rb") as fh:
                self.commits.append((f.name.split("_")[0], next(iter(fastavro.reader(fh)))))
        self.column_stats = _mdt_records(base, "column_stats")
        partition_stats = base / ".hoodie" / "metadata" / "partition_stats"
        self.partition_stats = _mdt_records(base, "partition_stats") if partition_stats.is_dir() else []
        self.partition_of = {p.name: _relative_partition(base, p) for p in base.rglob("*.parquet")}

    def new_files(self, meta: dict[str, Any]) -> Iterator[tuple[str, str]]:
        """(partition, file name) of every file a commit wrote."""
        for partition, stats in meta["partitionToWriteStats"].items():
            for stat in stats:
                yield partition, stat["path"].rsplit("/", 1)[-1]

    def ranges(self, partition: str, file_name: str) -> list[cs.ColumnRange]:
        md = pq.ParquetFile(self.base / partition / file_name).metadata
        return cs.file_column_ranges(md, file_name, self.columns, table_version=9, version=self.version)


@pytest.fixture(scope="module")
def golden(golden_tables: Path) -> dict[str, Golden]:
    return {name: Golden(golden_tables / name) for name in MDT_TABLES}


def _by_instant(records: list[tuple[str, str, dict[str, Any]]], instant: str) -> dict[str, dict[str, Any]]:
    found = {key: rec for inst, key, rec in records if inst == instant}
    assert len(found) == sum(1 for inst, _, _ in records if inst == instant), "a key twice in one instant"
    return found


# ------------------------------------------------------------------------------------------------ golden tests


def test_golden_clustering_column_stats_equal_hudis_field_for_field(golden: dict[str, Golden]) -> None:
    g = golden["v9_txns_simple_meta"]
    meta = dict(g.commits)[CLUSTERING]
    assert meta["operationType"] == "CLUSTER"
    ours: dict[str, dict[str, Any]] = {}
    for partition, name in g.new_files(meta):
        ours.update(cs.column_stats_records(9, partition, name, g.ranges(partition, name)))
    theirs = _by_instant(g.column_stats, CLUSTERING)
    assert len(ours) == 48 == len(theirs)  # 3 new files x 16 indexed columns
    assert ours == theirs


@pytest.mark.parametrize("name", MDT_TABLES)
def test_golden_every_commits_column_stats_equal_hudis(golden: dict[str, Golden], name: str) -> None:
    g = golden[name]
    compared = 0
    for instant, meta in g.commits:
        ours: dict[str, dict[str, Any]] = {}
        for partition, file_name in g.new_files(meta):
            ours.update(cs.column_stats_records(9, partition, file_name, g.ranges(partition, file_name)))
        theirs = _by_instant(g.column_stats, instant)
        assert ours == theirs, instant
        compared += len(ours)
    assert compared == {"v9_txns_simple_meta": 272, "v9_txns_nonpart_meta": 165, "v9_txns_complex_meta": 272,
                        "v9_txns_simple_overwrite": 128}[name]


def _other_latest_files(g: Golden, instant: str, partition: str, meta: dict[str, Any],
                        replaced_before: set[tuple[str, str]]) -> set[str]:
    """Hudi 1.2's other files of a touched partition: per file group not written by the commit and not replaced
    by an earlier completed replacecommit, its latest base file before the commit. The groups the commit itself
    replaces stay in (``getFilesToFetchColumnStats`` compares file names against file-group ids)."""
    written = {s["fileId"] for s in meta["partitionToWriteStats"][partition]}
    latest: dict[str, tuple[str, str]] = {}
    for path in (g.base / partition).glob("*.parquet"):
        group, file_instant = _file_group_and_instant(path.name)
        if file_instant >= instant or group in written or (partition, group) in replaced_before:
            continue
        if group not in latest or latest[group][0] < file_instant:
            latest[group] = (file_instant, path.name)
    return {name for _, name in latest.values()}


@pytest.mark.parametrize("name", [n for n in MDT_TABLES if n != "v9_txns_nonpart_meta"])
def test_golden_every_commits_partition_stats_equal_hudis(golden: dict[str, Golden], name: str) -> None:
    """Recomputed from the new files' footers plus the column statistics of the partition's other latest files
    as decoded from the MDT before the commit; equal to the records of the commit's partition_stats block."""
    g = golden[name]
    infos = cs.column_value_infos(g.schema, g.columns, g.version)
    replaced: set[tuple[str, str]] = set()
    compared = 0
    for instant, meta in g.commits:
        stored = {key: rec for inst, key, rec in g.column_stats if inst < instant}
        ours: dict[str, dict[str, Any]] = {}
        for partition in meta["partitionToWriteStats"]:
            ranges = [r for p, f in g.new_files(meta) if p == partition for r in g.ranges(p, f)]
            others = _other_latest_files(g, instant, partition, meta, replaced)
            ranges += [cs.range_from_record(rec) for rec in stored.values()
                       if rec["ColumnStatsMetadata"]["fileName"] in others]
            ours.update(cs.partition_stats_records(9, partition, ranges, value_infos=infos))
        theirs = _by_instant(g.partition_stats, instant)
        assert ours == theirs, instant
        compared += len(ours)
        for partition, groups in (meta.get("partitionToReplaceFileIds") or {}).items():
            replaced |= {(partition, group) for group in groups}
    assert compared == {"v9_txns_simple_meta": 272, "v9_txns_complex_meta": 272,
                        "v9_txns_simple_overwrite": 128}[name]


def test_golden_clustering_partition_stats_count_the_replaced_groups_too(golden: dict[str, Golden]) -> None:
    """Hudi 1.2 counts the clustered rows twice in partition_stats: the new files' plus the replaced groups'."""
    g = golden["v9_txns_simple_meta"]
    theirs = _by_instant(g.partition_stats, CLUSTERING)
    rec = theirs[cs.partition_stats_key("txn_id", "region=us")]["ColumnStatsMetadata"]
    new_file = g.ranges("region=us", "6d0f5b25-276e-4c1b-8ed0-c74a7d393fc9-0_2-235-588_20260307162454799.parquet")
    assert next(r.value_count for r in new_file if r.column == "txn_id") == 4
    assert (rec["fileName"], rec["valueCount"], rec["isTightBound"]) == ("region=us", 8, True)


@pytest.mark.parametrize("name", MDT_TABLES)
def test_golden_keys_are_hudis_for_every_record(golden: dict[str, Golden], name: str) -> None:
    g = golden[name]
    for _, key, rec in g.column_stats:
        body = rec["ColumnStatsMetadata"]
        assert key == cs.column_stats_key(body["columnName"], g.partition_of[body["fileName"]], body["fileName"])
    for _, key, rec in g.partition_stats:
        body = rec["ColumnStatsMetadata"]
        assert key == cs.partition_stats_key(body["columnName"], body["fileName"])
    assert len(g.column_stats) > 100


def test_golden_indexed_columns_are_the_index_definitions(golden: dict[str, Golden]) -> None:
    simple, nonpart = golden["v9_txns_simple_meta"], golden["v9_txns_nonpart_meta"]
    assert simple.version is cs.IndexVersion.V2
    assert simple.columns == ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key", "txn_id",
                              "account_id", "txn_ts", "txn_datetime", "txn_date", "amount", "currency", "txn_type",
                              "merchant_name", "is_international", "fee_amount", "txn_metadata", "region"]
    assert nonpart.columns == simple.columns[:-1]  # no region column
    # Hudi's default (no column list): the 3 meta columns, then the first 32 supported fields: the same here
    assert cs.indexed_columns(9, simple.schema) == simple.columns
    written = {rec["ColumnStatsMetadata"]["columnName"] for inst, _, rec in simple.column_stats if inst == CLUSTERING}
    assert written == set(simple.columns)


def test_stored_records_decode_back_to_the_footer_ranges(golden: dict[str, Golden]) -> None:
    g = golden["v9_txns_simple_meta"]
    for partition, name in g.new_files(dict(g.commits)[CLUSTERING]):
        ranges = g.ranges(partition, name)
        stored = _by_instant(g.column_stats, CLUSTERING)
        for r in ranges:
            assert cs.range_from_record(stored[cs.column_stats_key(r.column, partition, name)]) == r
