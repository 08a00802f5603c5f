from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.errors import TableError
from hudi_clusterd.formats.avro_schema import (
    META_FIELDS,
    arrow_to_avro,
    arrow_to_avro_json,
    avro_to_arrow,
    decimal_fixed_size,
    normalize_arrow_schema,
    record_name_and_namespace,
    sanitize_name,
)
from hudi_clusterd.formats.schema_fit import check_writable_as

GOLDEN = ["v6_complexkeygen_hivestyle", "v6_nonpartitioned", "v6_simplekeygen_hivestyle_no_metafields",
          "v6_simplekeygen_nonhivestyle", "v6_simplekeygen_nonhivestyle_overwritetable",
          "v6_timebasedkeygen_nonhivestyle"]


def _commit_schemas(base: Path) -> list[str]:
    out = []
    for f in sorted((base / ".hoodie").glob("*.commit")) + sorted((base / ".hoodie").glob("*.replacecommit")):
        schema = json.loads(f.read_text())["extraMetadata"].get("schema")
        if schema:
            out.append(schema)
    return out


def _spark_like_overwritetable_schema() -> pa.Schema:
    """The Arrow schema Spark hands to Python for the golden table's DataFrame (byte/short, local tz)."""
    arr_struct = pa.struct([("arr_struct_f1", pa.string()), ("arr_struct_f2", pa.int32())])
    map_struct = pa.struct([("map_field_value_struct_f1", pa.float64()), ("map_field_value_struct_f2", pa.bool_())])
    child = pa.struct([("child_field1", pa.float64()), ("child_field2", pa.bool_())])
    return pa.schema([
        ("id", pa.int32()), ("name", pa.string()), ("isActive", pa.bool_()), ("shortField", pa.int16()),
        ("intField", pa.int32()), ("longField", pa.int64()), ("floatField", pa.float32()),
        ("doubleField", pa.float64()), ("decimalField", pa.decimal128(10, 5)), ("dateField", pa.date32()),
        ("timestampField", pa.timestamp("us", tz="America/Chicago")), ("binaryField", pa.binary()),
        ("arrayField", pa.list_(arr_struct)), ("mapField", pa.map_(pa.string(), map_struct)),
        ("structField", pa.struct([("field1", pa.string()), ("field2", pa.int32()), ("child_struct", child)])),
        ("byteField", pa.int8()),
    ])


@pytest.mark.parametrize("name", GOLDEN)
def test_avro_round_trip_golden_commit_schemas_exact(golden_tables: Path, name: str) -> None:
    # Given every extraMetadata.schema Apache Hudi wrote; Then Avro -> Arrow -> Avro gives the same string
    schemas = _commit_schemas(golden_tables / name)
    assert schemas
    for schema in schemas:
        assert arrow_to_avro_json(avro_to_arrow(schema), name) == schema


@pytest.mark.parametrize("name", GOLDEN)
def test_avro_with_meta_fields_equals_golden_parquet_footer(golden_tables: Path, name: str) -> None:
    schema = _commit_schemas(golden_tables / name)[-1]
    for f in (golden_tables / name).rglob("*.parquet"):
        footer = pq.read_metadata(f).metadata[b"parquet.avro.schema"].decode()
        assert arrow_to_avro_json(avro_to_arrow(schema), name, with_meta_fields=True) == footer


def test_arrow_to_avro_spark_schema_matches_hudi(golden_tables: Path) -> None:
    name = "v6_simplekeygen_nonhivestyle_overwritetable"
    expected = _commit_schemas(golden_tables / name)[0]
    assert arrow_to_avro_json(_spark_like_overwritetable_schema(), name) == expected


def test_normalize_arrow_schema_maps_spark_types_to_file_types() -> None:
    got = normalize_arrow_schema(pa.schema([
        ("b", pa.int8()), ("s", pa.int16()), ("u", pa.uint32()), ("ts", pa.timestamp("ns", tz="Europe/Paris")),
        ("ntz", pa.timestamp("us")), ("ls", pa.large_string()), ("d", pa.dictionary(pa.int32(), pa.string())),
        ("l", pa.large_list(pa.field("item", pa.int16(), nullable=False))),
    ]))
    assert got == pa.schema([
        ("b", pa.int32()), ("s", pa.int32()), ("u", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us", tz="UTC")), ("ls", pa.string()), ("d", pa.string()),
        ("l", pa.list_(pa.field("element", pa.int32(), nullable=False))),
    ])


def test_arrow_to_avro_required_field_has_no_union_or_default() -> None:
    avro = arrow_to_avro(pa.schema([pa.field("id", pa.int64(), nullable=False), ("ntz", pa.timestamp("us"))]), "t")
    assert avro["fields"] == [
        {"name": "id", "type": "long"},
        {"name": "ntz", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}],
         "default": None},
    ]


def test_arrow_to_avro_with_meta_fields_puts_them_first() -> None:
    avro = arrow_to_avro(pa.schema([("_hoodie_commit_time", pa.string()), ("x", pa.int32())]), "t",
                         with_meta_fields=True)
    assert [f["name"] for f in avro["fields"]] == [*META_FIELDS, "x"]
    assert avro["fields"][0] == {"name": "_hoodie_commit_time", "type": ["null", "string"], "doc": "",
                                 "default": None}


@pytest.mark.parametrize(("precision", "size"), [(1, 1), (2, 1), (3, 2), (9, 4), (10, 5), (18, 8), (38, 16)])
def test_decimal_fixed_size_smallest_holding_precision(precision: int, size: int) -> None:
    assert decimal_fixed_size(precision) == size


def test_record_name_sanitizes_table_name() -> None:
    assert sanitize_name("my-table.v2") == "my__table__v2"
    assert sanitize_name("1abc") == "__1abc"
    assert record_name_and_namespace("my-table") == ("my__table_record", "hoodie.my__table")


def test_arrow_to_avro_invalid_column_name_names_it() -> None:
    with pytest.raises(TableError, match="'bad name'"):
        arrow_to_avro(pa.schema([("bad name", pa.int32())]), "t")


def test_normalize_null_type_names_column() -> None:
    with pytest.raises(TableError, match=r"'nested\.v'"):
        normalize_arrow_schema(pa.schema([("nested", pa.struct([("v", pa.null())]))]))


def test_avro_to_arrow_resolves_named_references_and_unions() -> None:
    schema = {"type": "record", "name": "r", "namespace": "ns", "fields": [
        {"name": "a", "type": {"type": "fixed", "name": "f4", "size": 4}},
        {"name": "b", "type": ["null", "ns.f4"]},
        {"name": "c", "type": ["string", "null"]},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
        {"name": "m", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ]}
    assert avro_to_arrow(schema) == pa.schema([
        pa.field("a", pa.binary(4), nullable=False), ("b", pa.binary(4)), ("c", pa.string()),
        pa.field("e", pa.string(), nullable=False), pa.field("m", pa.timestamp("ms", tz="UTC"), nullable=False),
    ])


def test_avro_to_arrow_rejects_real_unions() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "u", "type": ["null", "int", "string"]}]}
    with pytest.raises(TableError, match="'u'"):
        avro_to_arrow(schema)


def test_check_writable_as_accepts_widening_and_reordered_struct() -> None:
    target = pa.schema([("i", pa.int64()), ("f", pa.float64()), ("d", pa.decimal128(10, 5)),
                        ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])),
                        ("ts", pa.timestamp("us", tz="UTC"))])
    source = pa.schema([("s", pa.struct([("y", pa.string()), ("x", pa.int8())])), ("i", pa.int16()),
                        ("f", pa.float32()), ("d", pa.decimal128(7, 3)), ("ts", pa.timestamp("us", tz="Asia/Tokyo"))])
    check_writable_as(source, target)


_S32 = pa.struct([("x", pa.int32())])


@pytest.mark.parametrize(("source", "message"), [
    (pa.schema([("i", pa.int64())]), r"'s' .* missing"),
    (pa.schema([("i", pa.int64()), ("s", pa.struct([("x", pa.int64())]))]), r"'s\.x' is int64 in the data"),
    (pa.schema([("i", pa.int64()), ("s", pa.struct([("x", pa.int32()), ("z", pa.int32())]))]),
     r"'s\.z' is not in the table"),
    (pa.schema([("i", pa.string()), ("s", _S32)]), "'i' is string"),
    (pa.schema([("i", pa.int64()), ("s", _S32), ("extra", pa.int32())]), "'extra' is not in the table"),
])
def test_check_writable_as_refuses_naming_column(source: pa.Schema, message: str) -> None:
    target = pa.schema([("i", pa.int64()), ("s", pa.struct([("x", pa.int32())]))])
    with pytest.raises(TableError, match=message):
        check_writable_as(source, target)
