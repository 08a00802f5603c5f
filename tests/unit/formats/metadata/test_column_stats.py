"""Column and partition statistics of the metadata table: the records we compute from parquet footers equal,
field for field, the ones Apache Hudi 1.x wrote in the golden version-9 tables (every commit, the clustering
``20260307162454799`` of G-simple included); the rules Hudi applies to types its golden tables do not cover,
on files written here; and the shape of the version-6 (Hudi 0.15) records against the 0.15 schema."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from decimal import Decimal
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.errors import MetadataTableError, UnsupportedTableError
from hudi_clusterd.formats.hfile import read_hfile
from hudi_clusterd.formats.log import HeaderKey, decode_log_file, hfile_block_records
from hudi_clusterd.formats.metadata import column_stats as cs
from hudi_clusterd.formats.metadata.hash_id import HASH_SEED, file_id, name_id, xxhash64

MDT_TABLES = ["v9_txns_simple_meta", "v9_txns_nonpart_meta", "v9_txns_complex_meta", "v9_txns_simple_overwrite"]
CLUSTERING = "20260307162454799"
NS = cs.NAMESPACE


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


# ------------------------------------------------------------------------------------------------ hashing


def test_xxhash64_reference_vectors() -> None:
    assert xxhash64(b"", 0) == 0xEF46DB3751D8E999
    assert xxhash64(b"a", 0) == 0xD24EC4F1A98C6E5B
    assert xxhash64(b"abc", 0) == 0x44BC2CF5AD770999
    assert xxhash64(b"Nobody inspects the spammish repetition", 0) == 0xFBCEA83C8A378BF1  # the 32-byte lanes
    assert xxhash64(b"xxhash", 20141025) == 0xB559B98D844E0635
    assert HASH_SEED == -625288518  # the Java int 0xdabadaba, sign-extended into the 64-bit seed


def test_keys_of_a_golden_clustering_file() -> None:
    name = "6d0f5b25-276e-4c1b-8ed0-c74a7d393fc9-0_2-235-588_20260307162454799.parquet"
    assert (name_id("currency"), name_id("region=us"), file_id(name)) == (
        "/m6lxu4Dh5w=", "431THTTwO5Q=", "TmesX7jZ1i3m9S/IhkXiRQ==")
    assert cs.column_stats_key("currency", "region=us", name) == "/m6lxu4Dh5w=431THTTwO5Q=TmesX7jZ1i3m9S/IhkXiRQ=="
    assert cs.partition_stats_key("currency", "region=us") == "/m6lxu4Dh5w=431THTTwO5Q="
    # a non-partitioned table's partition "" is named "." in keys
    assert cs.partition_stats_key("c", "") == cs.partition_stats_key("c", ".") == name_id("c") + name_id(".")


# ------------------------------------------------------------------------------------------------ footer rules


def _footer(tmp_path: Path, table: pa.Table, row_group_size: int | None = None, **kwargs: Any) -> Any:
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, row_group_size=row_group_size, **kwargs)
    return pq.ParquetFile(path).metadata


def _by_column(ranges: list[cs.ColumnRange]) -> dict[str, cs.ColumnRange]:
    return {r.column: r for r in ranges}


def test_all_null_chunks_keep_parquet_mrs_primitive_defaults(tmp_path: Path) -> None:
    t = pa.table({"i": pa.array([None, None], pa.int64()), "f": pa.array([None, None], pa.float32()),
                  "b": pa.array([None, None], pa.bool_()), "s": pa.array([None, None], pa.string())})
    got = _by_column(cs.file_column_ranges(_footer(tmp_path, t), "f.parquet", ["i", "f", "b", "s"],
                                           table_version=9, version=cs.IndexVersion.V2))
    assert [(got[c].min_value, got[c].max_value, got[c].null_count, got[c].value_count) for c in "ifbs"] == [
        (0, 0, 2, 2), (0.0, 0.0, 2, 2), (False, False, 2, 2), (None, None, 2, 2)]
    records = dict(cs.column_stats_records(9, "p", "f.parquet", got.values()))
    assert records[cs.column_stats_key("i", "p", "f.parquet")]["ColumnStatsMetadata"]["minValue"] == (
        NS + "LongWrapper", {"value": 0})
    assert records[cs.column_stats_key("s", "p", "f.parquet")]["ColumnStatsMetadata"]["minValue"] is None


def test_float_zero_bounds_are_signed_as_parquet_mr_reads_them(tmp_path: Path) -> None:
    t = pa.table({"lo": pa.array([0.0, 1.5]), "hi": pa.array([-2.0, -0.0])})
    got = _by_column(cs.file_column_ranges(_footer(tmp_path, t), "f", ["lo", "hi"], table_version=9,
                                           version=cs.IndexVersion.V2))
    assert math.copysign(1, got["lo"].min_value) == -1 and got["lo"].max_value == 1.5
    assert got["hi"].min_value == -2.0 and math.copysign(1, got["hi"].max_value) == 1


def test_row_groups_merge_with_javas_string_and_byte_order(tmp_path: Path) -> None:
    # Java orders strings by UTF-16 units (U+10000 < U+FFFF) and ByteBuffers by signed bytes (0x80 < 0x7f)
    t = pa.table({"s": ["\uffff", "\U00010000"], "b": pa.array([b"\x7f", b"\x80"], pa.binary())})
    md = _footer(tmp_path, t, row_group_size=1)
    assert md.num_row_groups == 2
    got = _by_column(cs.file_column_ranges(md, "f", ["s", "b"], table_version=9, version=cs.IndexVersion.V2))
    assert (got["s"].min_value, got["s"].max_value) == ("\U00010000", "\uffff")
    assert (got["b"].min_value, got["b"].max_value) == (b"\x80", b"\x7f")
    sizes = [md.row_group(i).column(0).total_compressed_size for i in range(2)]
    assert got["s"].value_count == 2 and got["s"].total_size == sum(sizes)


def test_v2_types_and_wrappers(tmp_path: Path) -> None:
    t = pa.table({
        "d": pa.array([Decimal("-1.50"), Decimal("25.00")], pa.decimal128(9, 2)),
        "day": pa.array([19000, 19001], pa.date32()),
        "ts": pa.array([5, 7], pa.timestamp("us", tz="UTC")),
        "lts": pa.array([5, 7], pa.timestamp("us")),
        "bin": pa.array([b"a", b"b"], pa.binary()),
        "l": pa.array([[1, 2], [3]], pa.list_(pa.int64())),
    })
    md = _footer(tmp_path, t, store_decimal_as_integer=True)
    got = _by_column(cs.file_column_ranges(md, "f", ["d", "day", "ts", "lts", "bin", "l.list.element"],
                                           table_version=9, version=cs.IndexVersion.V2))
    assert {c: r.value_info for c, r in got.items()} == {
        "d": cs.ValueInfo(cs.ValueType.DECIMAL, 9, 2), "day": cs.ValueInfo(cs.ValueType.DATE),
        "ts": cs.ValueInfo(cs.ValueType.TIMESTAMP_MICROS), "lts": cs.ValueInfo(cs.ValueType.LOCAL_TIMESTAMP_MICROS),
        "bin": cs.ValueInfo(cs.ValueType.BYTES), "l.list.element": cs.ValueInfo(cs.ValueType.LONG)}
    assert got["l.list.element"].value_count == 3
    bodies = {r["ColumnStatsMetadata"]["columnName"]: r["ColumnStatsMetadata"]
              for _, r in cs.column_stats_records(9, "p", "f", got.values())}
    assert bodies["d"]["minValue"] == (NS + "BytesWrapper", {"value": (-150).to_bytes(2, "big", signed=True)})
    assert bodies["d"]["valueType"] == {"typeOrdinal": 10, "additionalInfo": "9,2"}
    assert bodies["day"]["maxValue"] == (NS + "IntWrapper", {"value": 19001})
    assert bodies["ts"]["minValue"] == (NS + "LongWrapper", {"value": 5})
    assert bodies["lts"]["valueType"] == {"typeOrdinal": 19, "additionalInfo": None}


def test_v2_drops_a_file_with_an_annotation_hudi_has_no_value_type_for(tmp_path: Path) -> None:
    t = pa.table({"small": pa.array([1, 2], pa.int8()), "s": ["a", "b"]})
    md = _footer(tmp_path, t)
    assert cs.file_column_ranges(md, "f", ["small", "s"], table_version=9, version=cs.IndexVersion.V2) == []
    assert len(cs.file_column_ranges(md, "f", ["s"], table_version=9, version=cs.IndexVersion.V2)) == 1
    v1 = _by_column(cs.file_column_ranges(md, "f", ["small"], table_version=8, version=cs.IndexVersion.V1))
    assert (v1["small"].min_value, v1["small"].wrapper) == (1, "IntWrapper")


def test_v1_fixed_values_are_refused_as_hudis_commit_fails(tmp_path: Path) -> None:
    md = _footer(tmp_path, pa.table({"fx": pa.array([b"ab"], pa.binary(2))}))
    with pytest.raises(UnsupportedTableError, match="FIXED_LEN_BYTE_ARRAY"):
        cs.file_column_ranges(md, "f", ["fx"], table_version=6, version=cs.IndexVersion.V1)


# ------------------------------------------------------------------------------------------------ columns


def test_indexed_columns_per_version() -> None:
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "id", "type": "int"},
        {"name": "st", "type": {"type": "record", "name": "st", "fields": [{"name": "x", "type": "int"}]}},
        {"name": "arr", "type": {"type": "array", "items": "long"}},
        {"name": "big", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 2}},
        {"name": "e", "type": {"type": "enum", "name": "e", "symbols": ["A"]}},
        {"name": "s", "type": ["null", "string"]},
    ]}
    # 0.15: every top-level field after the five meta fields, unfiltered
    assert cs.indexed_columns(6, schema) == [*cs.META_FIELDS, "id", "st", "arr", "big", "e", "s"]
    assert cs.indexed_columns(6, schema, column_list=["s"]) == ["s"]
    # 1.2 default: 3 meta columns + the first N supported fields; V1 also drops decimals past DecimalWrapper's
    assert cs.indexed_columns(9, schema) == [*cs.ALWAYS_INDEXED_META_FIELDS, "id", "big", "s"]
    assert cs.indexed_columns(8, schema) == [*cs.ALWAYS_INDEXED_META_FIELDS, "id", "s"]
    assert cs.indexed_columns(9, schema, max_columns=1, populate_meta_fields=False) == ["id"]
    # an explicit list (or the index definition's sourceFields): resolved, nested paths allowed
    index_json = {"indexDefinitions": {"column_stats": {"sourceFields": ["s", "st.x", "arr.list.element", "zz",
                                                                          "_hoodie_record_key"], "version": "V2"}}}
    assert cs.indexed_columns(9, schema, index_json=index_json) == [
        *cs.ALWAYS_INDEXED_META_FIELDS, "s", "st.x", "arr.list.element"]
    assert cs.index_version(9, index_json) is cs.IndexVersion.V2
    assert cs.index_version(9) is cs.IndexVersion.V2 and cs.index_version(8) is cs.IndexVersion.V1
    assert cs.index_version(6, index_json) is cs.IndexVersion.V1


# ------------------------------------------------------------------------------------------------ partition merge


def test_partition_merge_promotes_to_the_table_type_and_ignores_nulls() -> None:
    int_info, long_info = cs.ValueInfo(cs.ValueType.INT), cs.ValueInfo(cs.ValueType.LONG)
    a = cs.ColumnRange("a.parquet", "c", 3, 9, 1, 5, 10, 20, int_info)
    b = cs.ColumnRange("b.parquet", "c", None, None, 4, 4, 7, 8, long_info)
    c = cs.ColumnRange("c.parquet", "c", -2, 4, 0, 2, 1, 1, long_info)
    [merged] = cs.partition_ranges("p=1", [a, b, c], value_infos={"c": long_info})
    assert merged == cs.ColumnRange("p=1", "c", -2, 9, 5, 11, 18, 29, long_info)
    [(key, rec)] = cs.partition_stats_records(9, "p=1", [a, b, c], value_infos={"c": long_info})
    assert key == cs.partition_stats_key("c", "p=1")
    assert rec["type"] == 6 and rec["ColumnStatsMetadata"]["isTightBound"] is True
    assert rec["ColumnStatsMetadata"]["fileName"] == "p=1"
    with pytest.raises(UnsupportedTableError):
        cs.partition_stats_records(6, "p=1", [a])


# ------------------------------------------------------------------------------------------------ version 6


def _v6_writer_schema() -> Any:
    text = resources.files("hudi_clusterd.formats").joinpath(
        "schemas", "metadata", "HoodieMetadataRecord.v6.writer-schema.json").read_text(encoding="utf-8")
    return fastavro.parse_schema(json.loads(text))


def test_v6_records_have_hudi_0_15_shape_and_round_trip(tmp_path: Path) -> None:
    """0.15 (``HoodieMetadataPayload.createColumnStatsRecords`` + ``HoodieAvroUtils.wrapValueIntoAvro`` over
    ``ParquetUtils.convertToNativeJavaType``): no ``isTightBound``/``valueType`` fields; strings in
    ``StringWrapper``, dates ``DateWrapper`` (``java.sql.Date``), decimals ``DecimalWrapper`` rescaled to 15,
    other binaries ``BytesWrapper``, timestamps their raw ``LongWrapper`` (the footer's long)."""
    t = pa.table({
        "s": ["x", "y"], "day": pa.array([19000, 19002], pa.date32()),
        "d": pa.array([Decimal("1.25"), Decimal("-3.00")], pa.decimal128(10, 2)),
        "ts": pa.array([1, 2], pa.timestamp("us", tz="UTC")), "bin": pa.array([b"\x00", b"\x01"]),
        "n": pa.array([1.5, None], pa.float64()), "flag": [True, False],
    })
    columns = cs.indexed_columns(6, {"type": "record", "name": "r", "fields": [
        {"name": c, "type": ["null", "string"]} for c in t.column_names]})
    ranges = cs.file_column_ranges(_footer(tmp_path, t), "f1.parquet", columns, table_version=6,
                                   version=cs.IndexVersion.V1)
    records = cs.column_stats_records(6, "", "f1.parquet", ranges)
    schema = _v6_writer_schema()
    field_names = [f["name"] for f in schema["fields"]]
    wrappers = {}
    for key, rec in records:
        assert list(rec) == field_names and key == rec["key"]
        assert key.startswith(name_id(rec["ColumnStatsMetadata"]["columnName"]) + name_id("."))
        assert set(rec["ColumnStatsMetadata"]) == {"fileName", "columnName", "minValue", "maxValue", "valueCount",
                                                   "nullCount", "totalSize", "totalUncompressedSize", "isDeleted"}
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, rec)
        back = fastavro.schemaless_reader(io.BytesIO(buf.getvalue()), schema, None, return_record_name=True,
                                          return_record_name_override=True)
        body = rec["ColumnStatsMetadata"]
        wrappers[body["columnName"]] = (body["minValue"][0].rsplit(".", 1)[1], back["ColumnStatsMetadata"]["minValue"])
        if body["columnName"] != "d":
            assert back == rec
    assert {c: w for c, (w, _) in wrappers.items()} == {
        "s": "StringWrapper", "day": "DateWrapper", "d": "DecimalWrapper", "ts": "LongWrapper",
        "bin": "BytesWrapper", "n": "DoubleWrapper", "flag": "BooleanWrapper"}
    # DecimalWrapper holds decimal(30, 15): the minimum -3.00 reads back at scale 15
    assert wrappers["d"][1] == (NS + "DecimalWrapper", {"value": Decimal("-3.000000000000000")})
    # and decodes back to the range it came from
    for (_, rec), r in zip(records, ranges, strict=True):
        assert cs.range_from_record(rec) == r


def test_malformed_stored_records_are_refused() -> None:
    good = cs.column_stats_records(9, "p", "f", [cs.ColumnRange("f", "c", 1, 2, 0, 2, 1, 1,
                                                                cs.ValueInfo(cs.ValueType.INT))])[0][1]
    with pytest.raises(MetadataTableError, match="no column statistics"):
        cs.range_from_record({**good, "ColumnStatsMetadata": None})
    body = good["ColumnStatsMetadata"]
    with pytest.raises(MetadataTableError, match="malformed"):
        cs.range_from_record({**good, "ColumnStatsMetadata": {**body, "valueType": {"typeOrdinal": 99}}})
    with pytest.raises(MetadataTableError, match="stored in"):
        cs.range_from_record({**good, "ColumnStatsMetadata": {**body, "minValue": (NS + "LongWrapper", {"value": 1})}})
    v1 = {**body, "valueType": None, "minValue": {"value": 1}}
    with pytest.raises(MetadataTableError, match="wrapper name"):
        cs.range_from_record({**good, "ColumnStatsMetadata": v1})
