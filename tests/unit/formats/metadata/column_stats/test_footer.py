"""Column statistics from parquet footers under the rules Hudi applies to types its golden tables do not
cover, on files written here; and the shape of the version-6 (Hudi 0.15) records against the 0.15 schema."""

from __future__ import annotations

import io
import json
import math
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.errors import MetadataTableError, UnsupportedTableError
from hudi_clusterd.formats.metadata import column_stats as cs
from hudi_clusterd.formats.metadata.hash_id import name_id

NS = cs.NAMESPACE


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
