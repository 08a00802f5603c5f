from __future__ import annotations

import pytest

from hudi_clusterd.domain.table_config import TIMESTAMP_KEYGEN, TableConfig
from hudi_clusterd.engine.ingest.keygen import KeySpec
from hudi_clusterd.errors import UnsupportedTableError


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


def test_a_version_6_table_written_by_hudi_1x_names_its_key_generator_type_and_ordering_field() -> None:
    # Given hoodie.properties as Hudi 1.2 writes it for a version-6 table: the type and ordering fields, no class
    props = {"hoodie.table.name": "t", "hoodie.table.type": "COPY_ON_WRITE", "hoodie.table.version": "6",
             "hoodie.table.recordkey.fields": "id", "hoodie.table.partition.fields": "part",
             "hoodie.table.keygenerator.type": "SIMPLE", "hoodie.table.ordering.fields": "ts"}
    config = TableConfig(props)
    # Then the daemon reads the class and the precombine field those stand for, and ingests with them
    assert config.key_generator == "org.apache.hudi.keygen.SimpleKeyGenerator"
    assert config.precombine_field == "ts"
    assert KeySpec.from_config(config).partition_fields == ("part",)
    flat = TableConfig({**props, "hoodie.table.keygenerator.type": "NON_PARTITION"})
    assert flat.partition_fields == () and KeySpec.from_config(flat).partition_fields == ()
    # And a class, when present, wins over a type
    both = TableConfig({**props, "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator"})
    assert both.key_generator == "org.apache.hudi.keygen.ComplexKeyGenerator"
