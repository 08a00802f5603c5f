"""Apache Hudi reads the tables we write and cluster, and writes into the file groups our clustering wrote
(issue #14, 2 and 3).

Each table shape is written once per session and table version (three commits, two partitions, tens of rows) and
clustered once by our clustering (the ops API on the session's SparkSession), then shared: the read tests use it
as it is, the write tests on a copy. Every table is written by our Spark writer at the setup's table version (6,
8 or 9; the version-6 tables are shared by the Hudi 0.15 and 1.2 setups that keep version 6). Every test runs once
per Hudi setup on the session's shared worker, version 8 included.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.formats.avro_schema import META_FIELDS
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import ClusteredTable, golden_rows, write_and_cluster
from tests.harness.apache_hudi import HudiWorker, hudi_write_options
from tests.harness.daemon_harness import commit_metadata, incremental_start, table_version
from tests.harness.hudi_rs_checks import hudi_rs_rows
from tests.harness.hudi_versions import HudiSetup

pytestmark = [pytest.mark.hudi, pytest.mark.hudi_v8]
# Hudi 1.2 on a version-6 table repeats what 0.15 and 1.2 on version 9 show here, and version 8 what version 9
# shows (the same timeline layout; the plans test runs version 8 in every run): long run only
SLOW_SETUPS = ("hudi-1.2-v6", "hudi-1.2-v8")


UTC = dt.UTC
T0 = dt.datetime(2024, 3, 1, tzinfo=UTC)
BATCHES, ROWS = 3, 12  # rows per batch; each batch is one commit


def _hive_complex(ids: Sequence[int], v: int) -> pa.Table:
    # no null elements inside arrays: Hudi's merge cannot write them (see docs/writers.md)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": [f"user {i % 5}" for i in ids],  # (id, name) is the key; name alone repeats
        "region": [("eu", "us")[i % 2] for i in ids],
        "day": [("2024-01-01", "2024-01-02")[i % 2] for i in ids],
        "score": pa.array([None if i % 3 == 0 else ((i * 37) % 50) / 7 + v for i in ids], pa.float64()),
        "ts": pa.array([T0 + dt.timedelta(minutes=(i * 13) % 40 + v) for i in ids], pa.timestamp("us", "UTC")),
        "tags": pa.array([None if i % 4 == 0 else [f"t{i % 3}", f"v{v}", "x"][: i % 3] for i in ids],
                         pa.list_(pa.string())),
        "attrs": pa.array([None if i % 5 == 0 else [("a", i + v), ("b", None)] for i in ids],
                          pa.map_(pa.string(), pa.int64())),
        "info": pa.array([{"city": f"c{i % 4}", "geo": None if i % 6 == 0 else {"lat": i / 3 + v, "lon": -i / 7}}
                          for i in ids],
                         pa.struct([("city", pa.string()),
                                    ("geo", pa.struct([("lat", pa.float64()), ("lon", pa.float64())]))])),
    })


def _nonpartitioned(ids: Sequence[int], v: int) -> pa.Table:
    # event_time, not ts: Hudi 0.15's writer orders upserts by a column named "ts" when neither the table nor the
    # writer names a precombine field, and fails on a null one ("Ordering value is null")
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "seq": pa.array([i + 100 * v for i in ids], pa.int64()),
        "d": pa.array([None if i % 5 == 0 else dt.date(2023, 12, 25) + dt.timedelta(days=(i * 7 + v) % 20)
                       for i in ids], pa.date32()),
        "event_time": pa.array([None if i % 4 == 1 else T0 - dt.timedelta(hours=(i * 5) % 30, seconds=v)
                                for i in ids], pa.timestamp("us", "UTC")),
        "price": pa.array([Decimal(f"{i * 1234567 + v}.{i:010d}") for i in ids], pa.decimal128(38, 10)),
        "label": [f"l{i % 7}v{v}" for i in ids],
    })


def _golden(ids: Sequence[int], v: int) -> pa.Table:
    return golden_rows(ids, version=v)


@dataclass(frozen=True, slots=True)
class Shape:
    """A table shape: its keys and partitioning, its rows (by id and version), and how it is clustered."""

    record_key: tuple[str, ...]
    partition_by: tuple[str, ...]
    rows: Callable[[Sequence[int], int], pa.Table]  # (ids, version) -> rows; the partition depends on the id only
    clustering: Mapping[str, str]
    hive_style: bool = False
    precombine: str | None = None

    def batch(self, b: int) -> pa.Table:
        return self.rows(range(b * ROWS, (b + 1) * ROWS), 0)

    def hudi_options(self, setup: HudiSetup, name: str, index: str) -> dict[str, str]:
        """Apache Hudi's writer options for this table, with the index type ``index``."""
        extra = {"hoodie.index.type": index}
        if len(self.record_key) > 1:
            extra["hoodie.datasource.write.keygenerator.class"] = "org.apache.hudi.keygen.ComplexKeyGenerator"
        if self.hive_style:
            extra["hoodie.datasource.write.hive_style_partitioning"] = "true"
        return hudi_write_options(setup, name, record_key=",".join(self.record_key),
                                  partition_path=",".join(self.partition_by) or None, precombine=self.precombine,
                                  extra=extra)


SHAPES: dict[str, Shape] = {
    # ComplexKeyGenerator (two key fields, two partition fields, hive-style folders); nested struct, array and map
    # columns; a Hilbert curve over a double with nulls and a timestamp. No precombine field: Hudi 1.2 orders
    # upserts by commit time, Hudi 0.15 by its default precombine field "ts" (without a ts column it refuses to
    # upsert: "ts(Part -ts) field not found in record")
    "hive_complex": Shape(("id", "name"), ("region", "day"), _hive_complex,
                          {"sort.columns": "score,ts", "hoodie.layout.optimize.strategy": "hilbert"},
                          hive_style=True),
    # NonpartitionedKeyGenerator; a wide decimal; a Z-order curve over a date and a timestamp, both with nulls
    "nonpartitioned": Shape(("id",), (), _nonpartitioned,
                            {"sort.columns": "d,event_time", "hoodie.layout.optimize.strategy": "z-order"},
                            precombine="seq"),
    # SimpleKeyGenerator, plain partition folders (an int field); the golden tables' schema (every scalar type,
    # a decimal, a date, a timestamp, binary, arrays of structs, maps of structs, nested structs), keyed and
    # partitioned as v6_simplekeygen_nonhivestyle; a linear sort on a double with nulls
    "golden": Shape(("id",), ("byteField",), _golden, {"sort.columns": "doubleField"}, precombine="longField"),
}


@dataclass(frozen=True, slots=True)
class OurTable:
    """A shape's table after our writer and our clustering, with what our own snapshot reader returns."""

    name: str
    shape: Shape
    clustered: ClusteredTable
    snapshot: pa.Table  # our snapshot (every column, meta columns included) after the clustering
    before: pa.Table  # our snapshot as of the last commit before it

    @property
    def base(self) -> Path:
        return self.clustered.base


@pytest.fixture(scope="session")
def our_table(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, HudiWorker], OurTable]:
    """Factory: the session's table of one shape at the table version of the worker's setup, written and clustered
    on first use (read-only: copy to write). A table that could not be built fails every test asking for it, without
    being built again."""
    from hudi_clusterd.engine.ingest.snapshot import snapshot

    root = tmp_path_factory.mktemp("ours")
    built: dict[tuple[str, int], OurTable] = {}
    failed: dict[tuple[str, int], BaseException] = {}

    def build(name: str, hudi: HudiWorker) -> OurTable:
        shape, version = SHAPES[name], hudi.setup.table_version
        base = root / f"v{version}" / name
        batches = [shape.batch(b) for b in range(BATCHES)]
        config = TableConfig.for_new_table(name=name, record_key_fields=shape.record_key,
                                           partition_fields=shape.partition_by, hive_style=shape.hive_style,
                                           precombine_field=shape.precombine, table_version=version)
        clustered = write_and_cluster(spark, base, config, batches, shape.clustering)
        assert table_version(base) == version
        table = HoodieTable.open(str(clustered.base))
        return OurTable(name, shape, clustered, snapshot(spark, table).toArrow(),
                        snapshot(spark, table, as_of=clustered.commits[-1]).toArrow())

    def get(name: str, hudi: HudiWorker) -> OurTable:
        key = (name, hudi.setup.table_version)
        if key in failed:
            raise AssertionError(f"the {name} table of version {key[1]} could not be built (first error above)") \
                from failed[key]
        if key not in built:
            try:
                built[key] = build(name, hudi)
            except BaseException as exc:
                failed[key] = exc
                raise
        return built[key]

    return get


# --- comparing rows -------------------------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """A value as Python compares it across readers: timestamps as naive UTC, containers recursively."""
    if isinstance(value, dt.datetime):
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(plain(v) for v in value)
    return value


def keyed(rows: pa.Table | Iterable[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], Any],
          columns: Iterable[str] | None = None) -> dict[Any, dict[str, Any]]:
    """Rows by key, every value :func:`plain`; fails on a duplicate key (a snapshot holds each key once)."""
    cols = list(columns) if columns is not None else None
    out: dict[Any, dict[str, Any]] = {}
    for row in rows.to_pylist() if isinstance(rows, pa.Table) else rows:
        k = key(row)
        assert k not in out, f"key {k!r} appears twice"
        out[k] = {c: plain(row[c]) for c in (cols if cols is not None else row)}
    return out


def record_key(row: Mapping[str, Any]) -> str:
    return str(row["_hoodie_record_key"])


# --- 2. Hudi reads what we write ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_hudi_reads_the_tables_we_write_and_cluster(apache_hudi: HudiWorker,
                                                    our_table: Callable[[str, HudiWorker], OurTable],
                                                    shape: str) -> None:
    ours = our_table(shape, apache_hudi)
    data_columns = [c for c in ours.snapshot.column_names if c not in META_FIELDS]
    # Our own snapshot holds every row we wrote, once
    assert keyed(ours.snapshot, lambda r: r["id"], data_columns) == \
        keyed(ours.clustered.rows, lambda r: r["id"], data_columns)

    # When Apache Hudi reads the table after our clustering
    theirs = apache_hudi.read(ours.base)

    # Then its snapshot equals ours, meta columns included, typed alike, and comes from the files our clustering
    # wrote
    assert keyed(theirs, record_key, ours.snapshot.column_names) == keyed(ours.snapshot, record_key)
    assert {f.name: f.type for f in theirs.schema} == {f.name: f.type for f in ours.snapshot.schema}
    written = {fid for _, fid in ours.clustered.written}
    assert {name.split("_", 1)[0] for name in theirs.column("_hoodie_file_name").to_pylist()} == written
    # And every row kept the commit time and sequence number it had before the clustering
    meta = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_partition_path"]
    assert keyed(theirs, record_key, meta) == keyed(ours.before, record_key, meta)
    assert set(theirs.column("_hoodie_commit_time").to_pylist()) == set(ours.clustered.commits)
    # And Hudi's incremental query from the last commit (only our replacecommit in range) returns no row, while
    # one from the commit before returns exactly the last commit's rows, now read from our clustering's files
    after_last = incremental_start(ours.base, ours.clustered.commits[-1])
    assert apache_hudi.read(ours.base, "incremental", begin=after_last).num_rows == 0
    last = apache_hudi.read(ours.base, "incremental", begin=incremental_start(ours.base, ours.clustered.commits[-2]))
    assert keyed(last, record_key, meta) == {k: v for k, v in keyed(ours.before, record_key, meta).items()
                                             if v["_hoodie_commit_time"] == ours.clustered.commits[-1]}


# --- 3. Hudi writes into what we wrote ------------------------------------------------------------------------

UPDATED = [1, 2, 5, 8, 13, 20, 27, 34]  # in both partitions and in every commit's rows (nulls at 5 and 20)
INSERTED = [100, 101, 102]
DELETED = [3, 6, 20, 35]  # one of them updated first
MOVED = 9  # GLOBAL_BLOOM only: updated into the other partition


@pytest.mark.parametrize(("shape", "index"), [
    # every index on the golden tables' schema (Hudi's merge reads our files with parquet-avro)
    ("golden", "SIMPLE"), ("golden", "BLOOM"), ("golden", "GLOBAL_BLOOM"),
    # Hudi's ComplexKeyGenerator (hive-style) and NonpartitionedKeyGenerator find the keys our writer made
    ("hive_complex", "BLOOM"), ("nonpartitioned", "SIMPLE"),
])
def test_hudi_upserts_and_deletes_into_file_groups_our_clustering_wrote(
        apache_hudi: HudiWorker, our_table: Callable[[str, HudiWorker], OurTable], tmp_path: Path, shape: str,
        index: str) -> None:
    # Given a copy of our clustered table, whose files carry our bloom filters
    ours = our_table(shape, apache_hudi)
    base = tmp_path / shape
    shutil.copytree(ours.base, base)
    for partition, file_id in ours.clustered.written:
        footer = pq.read_metadata(next((base / partition).glob(f"{file_id}_*.parquet"))).metadata
        assert footer[b"hoodie_bloom_filter_type_code"] == b"DYNAMIC_V0" and b"org.apache.hudi.bloomfilter" in footer
    rows, columns = ours.shape.rows, ours.clustered.rows.column_names
    options = ours.shape.hudi_options(apache_hudi.setup, shape, index)

    def by_id(table: pa.Table | Iterable[Mapping[str, Any]]) -> dict[Any, dict[str, Any]]:
        return keyed(table, lambda r: int(r["id"]), columns)

    expected = by_id(ours.clustered.rows)

    # When Apache Hudi upserts (updates in both partitions and inserts), then deletes, with this index
    upserts = rows(UPDATED + INSERTED, 1)
    if index == "GLOBAL_BLOOM":  # a global index finds the key in its old partition and moves the record
        upserts = pa.concat_tables([upserts, golden_rows([MOVED], version=1, partitions=(20, 10))])
    [upsert] = apache_hudi.write(upserts, base, options)
    expected |= by_id(upserts)
    [delete] = apache_hudi.write(rows(DELETED, 2), base, {**options, "hoodie.datasource.write.operation": "delete"})
    for key in DELETED:
        del expected[key]

    # Then the upsert rewrote file groups our clustering wrote (merging its rows into our files' rows)
    stats = [ws for wss in commit_metadata(base, upsert.split(".", 1)[0])["partitionToWriteStats"].values()
             for ws in wss]
    merged = {(ws["partitionPath"], ws["fileId"]) for ws in stats if ws["prevCommit"] == ours.clustered.clustering}
    assert merged == set(ours.clustered.written), stats
    # And Hudi's snapshot holds each key once, every update, no deleted key, exactly the expected rows
    theirs = apache_hudi.read(base)
    assert by_id(theirs) == expected
    # And hudi-rs reads the same
    assert by_id(hudi_rs_rows(base, columns, "id")) == expected
    assert delete.endswith(".commit")
    assert table_version(base) == apache_hudi.setup.table_version
