"""Record keys (xxhash64 ids), the columns Hudi indexes per table version, and the merge of file ranges into
partition statistics."""

from __future__ import annotations

import pytest

from hudi_clusterd.errors import UnsupportedTableError
from hudi_clusterd.formats.metadata import column_stats as cs
from hudi_clusterd.formats.metadata.hash_id import HASH_SEED, file_id, name_id, xxhash64

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
