"""The Spark writer against hudi-rs: batch inserts, appends to a table written by Apache Hudi, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.engine.ingest.snapshot import snapshot
from hudi_clusterd.engine.ingest.writer import insert
from hudi_clusterd.errors import ExecutionError, TableError
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.harness.hudi_rs_checks import (
    assert_meta_consistent,
    assert_table_layout,
    completed_commits,
    data_bytes,
    hudi_rs_rows,
    hudi_table,
)

pytestmark = pytest.mark.spark

COLS = ["id", "region", "day", "amount", "ts"]


def _df(spark: Any, ids: range, day: str = "2024-01-01") -> Any:
    from pyspark.sql import functions as F

    return spark.range(ids.start, ids.stop).select(
        F.col("id"),
        F.element_at(F.array(F.lit("eu"), F.lit("us"), F.lit("ap west")), (F.col("id") % 3 + 1).cast("int"))
        .alias("region"),
        F.lit(day).alias("day"),
        (F.col("id") * 1.5).cast("decimal(12,2)").alias("amount"),
        F.col("id").cast("short").alias("small"),
        F.timestamp_seconds(F.col("id") + 1_700_000_000).alias("ts"),
    )


def _expected(ids: range, day: str = "2024-01-01") -> list[dict[str, Any]]:
    return [{"id": i, "region": ["eu", "us", "ap west"][i % 3], "day": day} for i in ids]


@pytest.mark.parametrize(("partition_fields", "hive_style"), [(["region"], False), (["region", "day"], True),
                                                                ([], False)], ids=["plain", "hive2", "flat"])
def test_insert_then_bulk_insert_read_by_hudi_rs(spark: Any, tmp_path: Path, partition_fields: list[str],
                                                 hive_style: bool) -> None:
    # Given a new table
    base = tmp_path / "t"
    table = HoodieTable.create(str(base), TableConfig.for_new_table(
        name="t", record_key_fields=["id"], partition_fields=partition_fields, hive_style=hive_style))
    # When two commits are written: an insert and a bulk insert
    c1 = insert(spark, table, _df(spark, range(40)))
    c2 = insert(spark, table, _df(spark, range(40, 70), day="2024-01-02"), operation="bulk_insert")
    # Then hudi-rs reads exactly the rows written, now and as of each commit
    cols = ["id", "region", "day"]
    first = _expected(range(40))
    both = first + _expected(range(40, 70), "2024-01-02")
    assert completed_commits(base) == [c1, c2]
    assert hudi_rs_rows(base, cols, "id") == both
    assert hudi_rs_rows(base, cols, "id", as_of=c1) == first
    assert hudi_rs_rows(base, cols, "id", as_of=c2) == both
    assert assert_meta_consistent(base) == 70
    assert_table_layout(base)
    # And the partition layout is the table's
    partitions = {fs.partition_path for fs in hudi_table(base).get_file_slices()}
    if not partition_fields:
        assert partitions == {""}
    elif hive_style:
        assert "region=ap west/day=2024-01-02" in partitions
    else:
        assert partitions == {"eu", "us", "ap west"}
    # And the commit names its operation and the Avro schema of the data (short column as int)
    commit = json.loads((base / ".hoodie" / f"{c2}.commit").read_text())
    assert commit["operationType"] == "BULK_INSERT"
    fields = {f["name"]: f["type"] for f in json.loads(commit["extraMetadata"]["schema"])["fields"]}
    assert fields["small"] == "int"  # Spark's short; a non-null column stays a plain type, as in Hudi
    assert fields["ts"] == {"type": "long", "logicalType": "timestamp-micros"}
    # And our own snapshot reader agrees with hudi-rs
    ours = sorted(snapshot(spark, table).select(*cols).toPandas().to_dict("records"), key=lambda r: r["id"])
    assert ours == both
    theirs_c1 = snapshot(spark, table, as_of=c1).count()
    assert theirs_c1 == 40


def test_append_to_golden_table_keeps_schema_and_rows(spark: Any, golden_copy: Any) -> None:
    # Given a copy of a table written by Apache Hudi (nested columns, decimals, dates, an overwrite)
    base = golden_copy("v6_simplekeygen_nonhivestyle_overwritetable")
    table = HoodieTable.open(str(base))
    source = next(f for f in base.rglob("*.parquet") if "20240707001301554" in f.name and f.parent.name == "10")
    from pyspark.sql import functions as F

    rows = spark.read.parquet(str(source))
    new = (rows.drop(*[c for c in rows.columns if c.startswith("_hoodie")])
           .withColumn("id", F.col("id") + 100).withColumn("name", F.concat(F.lit("new "), F.col("name"))))
    # When our writer appends to it
    instant = insert(spark, table, new)
    # Then hudi-rs reads the old row and the new ones, one batch per slice, all with one schema
    batches = hudi_table(base).read()
    assert len({b.schema for b in batches}) == 1
    rows = sorted(pa.Table.from_batches(batches).select(["id", "name"]).to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 4, "name": "Diana"}, {"id": 101, "name": "new Alice"}, {"id": 103, "name": "new Carol"}]
    assert_meta_consistent(base)
    # And the new files have the physical schema of the table's own files; only the list encoding differs:
    # standard 3-level lists with nullable elements (what the Avro items ["null", record] say) where Hudi's
    # parquet-avro writes legacy 2-level lists
    ours = next(base.rglob(f"*_{instant}.parquet"))
    differing = [a.name for a, b in zip(pq.read_schema(ours), pq.read_schema(source), strict=True) if a != b]
    assert differing == ["arrayField"]
    assert pq.read_schema(ours).field("arrayField").type.value_type == \
        pq.read_schema(source).field("arrayField").type.value_type
    commit = json.loads((base / ".hoodie" / f"{instant}.commit").read_text())
    prior = json.loads((base / ".hoodie" / "20240707001303088.replacecommit").read_text())
    assert commit["extraMetadata"]["schema"] == prior["extraMetadata"]["schema"]


def test_insert_deduplicates_by_precombine_bulk_insert_keeps_all(spark: Any, tmp_path: Path) -> None:
    table = HoodieTable.create(str(tmp_path / "t"), TableConfig.for_new_table(
        name="t", record_key_fields=["id"], precombine_field="v"))
    rows = [(1, 5, "a"), (1, 9, "b"), (2, 1, "c"), (1, 7, "d")]
    df = spark.createDataFrame(rows, "id long, v long, s string")
    insert(spark, table, df)
    assert hudi_rs_rows(tmp_path / "t", ["id", "s"], "id") == [{"id": 1, "s": "b"}, {"id": 2, "s": "c"}]
    insert(spark, table, df.withColumn("id", df["id"] + 10), operation="bulk_insert")
    assert len(hudi_rs_rows(tmp_path / "t", ["id"], "id")) == 2 + 4


def test_insert_rolls_over_files_at_max_file_bytes(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    base = tmp_path / "t"
    table = HoodieTable.create(str(base), TableConfig.for_new_table(name="t", record_key_fields=["id"]))
    df = spark.range(0, 30_000).select("id", F.sha2(F.col("id").cast("string"), 256).alias("payload"))
    insert(spark, table, df, max_file_bytes=400_000, parallelism=1)
    slices = hudi_table(base).get_file_slices()
    assert len(slices) >= 3
    # the target counts the data; Hudi's bloom filter footer (a fixed ~431 KB) comes on top, as with Hudi's writer
    assert all(data_bytes(base / s.base_file_relative_path()) < 400_000 * 1.25 for s in slices)
    assert assert_meta_consistent(base) == 30_000
    assert_table_layout(base)


def test_insert_null_record_key_fails_naming_field_and_rolls_back(spark: Any, tmp_path: Path) -> None:
    base = tmp_path / "t"
    table = HoodieTable.create(str(base), TableConfig.for_new_table(name="t", record_key_fields=["id"]))
    df = spark.createDataFrame([(1, "a"), (None, "b")], "id long, s string")
    with pytest.raises(ExecutionError, match="record key field 'id'"):
        insert(spark, table, df)
    assert completed_commits(base) == []
    assert [i for i in table.timeline() if i.action.value == "commit"] == []
    assert not list(base.rglob("*.parquet"))


def test_insert_incompatible_data_refused_naming_column(spark: Any, tmp_path: Path) -> None:
    base = tmp_path / "t"
    table = HoodieTable.create(str(base), TableConfig.for_new_table(name="t", record_key_fields=["id"]))
    insert(spark, table, spark.createDataFrame([(1, "a")], "id long, s string"))
    with pytest.raises(TableError, match="'s'"):
        insert(spark, table, spark.createDataFrame([(2,)], "id long"))
    with pytest.raises(TableError, match="'s' is int"):
        insert(spark, table, spark.createDataFrame([(2, 3)], "id long, s int"))
    assert len(completed_commits(base)) == 1 and len(list(table.timeline())) == 1


def test_snapshot_of_empty_table_has_table_schema(spark: Any, tmp_path: Path) -> None:
    table = HoodieTable.create(str(tmp_path / "t"), TableConfig.for_new_table(
        name="t", record_key_fields=["id"], create_schema='{"type":"record","name":"t_record","namespace":"hoodie.t",'
        '"fields":[{"name":"id","type":["null","long"],"default":null}]}'))
    df = snapshot(spark, table)
    assert df.count() == 0
    assert df.columns == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                          "_hoodie_partition_path", "_hoodie_file_name", "id"]


def test_record_keys_and_partition_paths_like_hudi_key_generators(spark: Any, tmp_path: Path) -> None:
    from hudi_clusterd.engine.ingest.writer import prepare_insert

    rows = [(1, None, "2024/01/01", None), (2, "", "a=b", "x"), (3, "n", None, "y")]
    df = spark.createDataFrame(rows, "id long, name string, path string, kind string")
    complex_table = HoodieTable.create(str(tmp_path / "c"), TableConfig.for_new_table(
        name="c", record_key_fields=["id", "name"], partition_fields=["path", "kind"], hive_style=True,
        url_encode=True))
    out, _ = prepare_insert(df, complex_table, None)
    got = {r["id"]: (r["_hoodie_record_key"], r["_hoodie_partition_path"]) for r in out.collect()}
    assert got == {
        1: ("id:1,name:__null__", "path=2024%2F01%2F01/kind=__HIVE_DEFAULT_PARTITION__"),
        2: ("id:2,name:__empty__", "path=a%3Db/kind=x"),
        3: ("id:3,name:n", "path=__HIVE_DEFAULT_PARTITION__/kind=y"),
    }
    simple_table = HoodieTable.create(str(tmp_path / "s"), TableConfig.for_new_table(
        name="s", record_key_fields=["ts"], partition_fields=["path"]))
    ts_df = spark.sql("select timestamp'2024-01-01 00:00:01Z' as ts, '2024/01/01' as path")
    out, _ = prepare_insert(ts_df, simple_table, None)
    row = out.collect()[0]
    assert (row["_hoodie_record_key"], row["_hoodie_partition_path"]) == ("1704067201000000", "2024/01/01")
