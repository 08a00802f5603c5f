"""One metadata-record format per table version, and the three releases' ``HoodieMetadataRecord`` schemas."""

from __future__ import annotations

import io
import json

import pytest
from fastavro import schemaless_reader

from hudi_clusterd.errors import MetadataDecodeError
from hudi_clusterd.formats.metadata import column_stats as cs
from hudi_clusterd.formats.metadata import records as rec
from hudi_clusterd.formats.metadata.table_format import HUDI_0_15, HUDI_1_0, HUDI_1_2, for_table_version
from tests.support import column_stats_fields

NS = "org.apache.hudi.avro.model."
V1_FIELDS = ("fileName", "columnName", "minValue", "maxValue", "valueCount", "nullCount", "totalSize",
             "totalUncompressedSize", "isDeleted")


def _union_names(schema: rec.RecordSchema) -> list[str]:
    node = json.loads(schema.text)
    body = next(b for b in next(f for f in node["fields"] if f["name"] == "ColumnStatsMetadata")["type"]
                if isinstance(b, dict))
    union = next(f for f in body["fields"] if f["name"] == "minValue")["type"]
    return [b["name"] if isinstance(b, dict) else b for b in union]


def _decode(schema: rec.RecordSchema, data: bytes) -> dict[str, object]:
    out = schemaless_reader(io.BytesIO(data), schema.parsed, None, return_record_name=True)
    assert isinstance(out, dict)
    return out


def test_each_table_version_has_its_release_lines_format() -> None:
    assert for_table_version(6) is HUDI_0_15 and for_table_version(7) is HUDI_0_15
    assert for_table_version(8) is HUDI_1_0
    assert for_table_version(9) is HUDI_1_2
    assert (HUDI_0_15.release, HUDI_1_0.release, HUDI_1_2.release) == ("0.15", "1.0", "1.2")
    assert not HUDI_0_15.partition_stats and HUDI_1_0.partition_stats and HUDI_1_2.partition_stats
    assert [f.value_types_by_default for f in (HUDI_0_15, HUDI_1_0, HUDI_1_2)] == [False, False, True]
    assert [f.legacy_column_selection for f in (HUDI_0_15, HUDI_1_0, HUDI_1_2)] == [True, False, False]


def test_the_default_schemas_are_those_of_the_release_lines() -> None:
    # 0.15: no isTightBound; 1.0.x: isTightBound, no valueType, no ArrayWrapper; 1.2: both
    assert column_stats_fields(HUDI_0_15.schema) == V1_FIELDS
    assert column_stats_fields(HUDI_1_0.schema) == (*V1_FIELDS, "isTightBound")
    assert column_stats_fields(HUDI_1_2.schema) == (*V1_FIELDS, "isTightBound", "valueType")
    assert "ArrayWrapper" not in _union_names(HUDI_1_0.schema)
    assert "ArrayWrapper" in _union_names(HUDI_1_2.schema)
    for fmt in (HUDI_0_15, HUDI_1_0, HUDI_1_2):
        block = json.loads(fmt.schema.block_text)
        assert [f["name"] for f in block["fields"][:6]] == [*cs.META_FIELDS, "key"]
        assert json.loads(fmt.schema.text)["fields"] == block["fields"][5:]
    # 1.0.x's differs from 1.2's only in the column statistics
    v8, v9 = json.loads(HUDI_1_0.schema.text), json.loads(HUDI_1_2.schema.text)
    assert [f["name"] for f in v8["fields"]] == [f["name"] for f in v9["fields"]]
    assert [f for f in v8["fields"] if f["name"] != "ColumnStatsMetadata"] == \
        [f for f in v9["fields"] if f["name"] != "ColumnStatsMetadata"]


def _stats_record(version: int, typed: bool = True) -> dict[str, object]:
    info, wrapper = (cs.ValueInfo(cs.ValueType.LONG, None, None), None) if typed else (cs.V1_INFO, "LongWrapper")
    cr = cs.ColumnRange("f.parquet", "c", 1, 9, 0, 3, 10, 20, info, wrapper)
    [(_key, record)] = cs.column_stats_records(version, "p", "f.parquet", [cr])
    return record


def test_a_record_encoded_in_1_0s_schema_drops_the_value_type() -> None:
    record = _stats_record(8)
    assert record["ColumnStatsMetadata"]["valueType"] == {"typeOrdinal": 4, "additionalInfo": None}  # type: ignore[index]
    ten = _decode(HUDI_1_0.schema, rec.encode(HUDI_1_0.schema, record))
    eleven = _decode(HUDI_1_2.schema, rec.encode(HUDI_1_2.schema, record))
    body10, body11 = ten["ColumnStatsMetadata"], eleven["ColumnStatsMetadata"]
    assert isinstance(body10, tuple) and isinstance(body11, tuple)
    assert "valueType" not in body10[1] and body11[1]["valueType"][1] == {"typeOrdinal": 4, "additionalInfo": None}
    assert {k: v for k, v in body11[1].items() if k != "valueType"} == body10[1]
    assert body10[1]["minValue"] == (NS + "LongWrapper", {"value": 1})


def test_records_without_1x_fields_take_the_schemas_defaults() -> None:
    record = _stats_record(6, typed=False)
    assert "isTightBound" not in record["ColumnStatsMetadata"]  # type: ignore[operator]
    body = _decode(HUDI_1_2.schema, rec.encode(HUDI_1_2.schema, record))["ColumnStatsMetadata"]
    assert isinstance(body, tuple)
    assert body[1]["isTightBound"] is False and body[1]["valueType"] is None


def test_an_array_bound_cannot_be_written_in_1_0s_schema() -> None:
    record = _stats_record(8)
    body = dict(record["ColumnStatsMetadata"])  # type: ignore[call-overload]
    body["minValue"] = (NS + "ArrayWrapper", {"wrappedValues": []})
    with pytest.raises(MetadataDecodeError, match="does not fit the record schema"):
        rec.encode(HUDI_1_0.schema, {**record, "ColumnStatsMetadata": body})


def test_a_block_schema_is_known_by_content_or_kept_as_it_is() -> None:
    for release in rec.SCHEMA_RELEASES:
        known = rec.release_schema(release)
        assert rec.schema_from_block(json.dumps(json.loads(known.block_text), indent=1)) is known
    node = json.loads(HUDI_1_0.schema.block_text)
    node["doc"] = "another build"
    text = json.dumps(node)
    other = rec.schema_from_block(text)
    assert other.block_text == text
    assert [f["name"] for f in json.loads(other.text)["fields"]] == \
        [f["name"] for f in json.loads(HUDI_1_0.schema.text)["fields"]]
    assert column_stats_fields(other) == column_stats_fields(HUDI_1_0.schema)
    with pytest.raises(MetadataDecodeError):
        rec.schema_from_block('{"type": "record", "name": "Other", "fields": []}')
    with pytest.raises(MetadataDecodeError):
        rec.schema_from_block("not json")
