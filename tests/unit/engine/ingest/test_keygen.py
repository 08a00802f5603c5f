from __future__ import annotations

import pytest

from hudi_clusterd.domain.table_config import TIMESTAMP_KEYGEN, TableConfig
from hudi_clusterd.engine.ingest.keygen import KeySpec, escape_path_name
from hudi_clusterd.errors import UnsupportedTableError


@pytest.mark.parametrize(("value", "escaped"), [
    ("2024/01/01", "2024%2F01%2F01"),
    ("a=b:c", "a%3Db%3Ac"),
    ("100%", "100%25"),
    ("plain value-1_x.y", "plain value-1_x.y"),
    ("tab\there", "tab%09here"),
    ("{[^]}", "%7B%5B%5E%5D}"),
])
def test_escape_path_name_like_hive(value: str, escaped: str) -> None:
    assert escape_path_name(value) == escaped


def test_key_spec_from_config_simple_complex_nonpartitioned() -> None:
    simple = KeySpec.from_config(TableConfig.for_new_table(name="t", record_key_fields=["id"],
                                                           partition_fields=["p"], hive_style=True))
    assert simple == KeySpec(("id",), ("p",), complex_keys=False, hive_style=True)
    many = KeySpec.from_config(TableConfig.for_new_table(name="t", record_key_fields=["id", "n"],
                                                         partition_fields=["a", "b"], url_encode=True))
    assert many.complex_keys and many.url_encode and many.columns == ("id", "n", "a", "b")
    # a complex key generator keeps the field:value form even for one key field
    one = KeySpec.from_config(TableConfig.for_new_table(name="t", record_key_fields=["id"],
                                                        partition_fields=["a", "b"]))
    assert one.complex_keys
    flat = KeySpec.from_config(TableConfig.for_new_table(name="t", record_key_fields=["id"]))
    assert flat.partition_fields == () and not flat.complex_keys


def test_key_spec_refuses_timestamp_keygen() -> None:
    config = TableConfig.for_new_table(name="t", record_key_fields=["id"], partition_fields=["ts"],
                                       key_generator=TIMESTAMP_KEYGEN)
    with pytest.raises(UnsupportedTableError, match="TimestampBasedKeyGenerator"):
        KeySpec.from_config(config)
