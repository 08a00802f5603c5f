"""Builders for test data (not fixtures): instants, timelines, base files, clustering policies and plans, a
hypothesis strategy of JSON-like values, small real Hudi v6 copy-on-write tables written without Spark
(`TableGen`), rows of the golden tables' schema (`golden_rows`), and tables our Spark writer wrote and our
clustering clustered (`write_and_cluster`).

`TableGen` writes one new file group per partition given per commit, with the meta columns, footers and commit
JSON a Hudi writer produces. Data columns: ``id`` (record key), ``x`` (float), ``part`` (partition field).
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as hs

from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.file_group import BaseFile, base_file_name, join_partition
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    RequestedReplaceMetadata,
    SliceInfo,
)
from hudi_clusterd.domain.policy import ClusteringPolicy, parse_policy
from hudi_clusterd.domain.policy_keys import ClusteringKey
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.domain.timeline import Timeline
from hudi_clusterd.formats.avro_schema import arrow_to_avro_json, strip_meta_fields
from hudi_clusterd.lock import LockProvider
from hudi_clusterd.ops.commit import Committed, complete
from hudi_clusterd.storage import Storage
from hudi_clusterd.table.clock import SYSTEM_CLOCK, Clock
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.markers import create_marker

SCHEMA = ('{"type":"record","name":"t_record","namespace":"hoodie.t","fields":['
          '{"name":"id","type":["null","long"],"default":null},'
          '{"name":"x","type":["null","double"],"default":null},'
          '{"name":"part","type":["null","string"],"default":null}]}')

# any JSON-like value: what a hostile or broken writer may put where a document or a record is expected
JSON_LEAF = (hs.none() | hs.booleans() | hs.integers() | hs.floats(allow_nan=True, allow_infinity=True)
             | hs.text(max_size=8))
JSON = hs.recursive(JSON_LEAF, lambda inner: hs.lists(inner, max_size=3)
                    | hs.dictionaries(hs.text(max_size=6), inner, max_size=3), max_leaves=8)

# (partition, number of rows) -> extra data columns for one file, appended after ``part``
ExtraColumns = Callable[[str, int], Mapping[str, pa.Array]]


class FakeClock:
    """A table's clock that never sleeps: it reads this host's time and records the sleeps asked of it
    (``HoodieTable.create(..., clock=FakeClock())``)."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def now(self, tz: tzinfo | None) -> datetime:
        return datetime.now(tz)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


class TableGen:
    """A table plus a clock that hands out increasing instant times."""

    def __init__(self, base: Path, partitioned: bool = True, name: str = "t", compression: str = "snappy",
                 table_version: int = 6, clock: Clock = SYSTEM_CLOCK, storage: Storage | None = None,
                 lock_provider: LockProvider | None = None) -> None:
        """``storage``: where the table is (default: the local folder ``base``); every file is written through it.
        ``lock_provider``: the table's lock (default: the file lock; an object store needs another)."""
        cfg = TableConfig.for_new_table(name=name, record_key_fields=["id"],
                                        partition_fields=["part"] if partitioned else [], table_version=table_version)
        self.table = HoodieTable.create(str(base) if storage is None else storage.base_uri, cfg, storage,
                                        clock=clock)
        if lock_provider is not None:
            self.table.lock_provider = lock_provider
        self.base = base
        self.partitioned = partitioned
        self.name = name
        self.compression = compression
        self._next_id = 0

    def next_time(self) -> str:
        """Like a real writer: under the table lock, strictly after every instant on the timeline."""
        with self.table.lock():
            return self.table.new_instant_time()

    def commit(self, rows_per_partition: Mapping[str, Sequence[float]], complete: bool = True,
               file_ids: Mapping[str, str] | None = None, *, files_per_partition: int = 1,
               extra_columns: ExtraColumns | None = None) -> str:
        """One commit adding one file group per partition with the given ``x`` values; returns its time.

        ``file_ids`` writes a new slice of an existing file group instead (what a copy-on-write update does).
        ``files_per_partition`` writes that many new file groups per partition, each with the given ``x`` values.
        ``extra_columns`` adds data columns to every file (and to the schema in the commit metadata), e.g. a
        nullable column that earlier commits lack (schema evolution) or hundreds of columns (wide rows)."""
        t = self.next_time()
        store = self.table.timeline_store
        store.create(Instant(t, Action.COMMIT, State.REQUESTED))
        store.create(Instant(t, Action.COMMIT, State.INFLIGHT),
                     store.serde.encode_commit(CommitMetadata(operation_type=Operation.INSERT)))
        stats: dict[str, list[WriteStat]] = {}
        schema = SCHEMA
        files = [(p, xs) for p, xs in rows_per_partition.items() for _ in range(files_per_partition)]
        for partition, xs in files:
            partition = partition if self.partitioned else ""
            file_id = (file_ids or {}).get(partition) if files_per_partition == 1 else None
            file_id = file_id or f"{uuid.uuid4()}-0"
            name = base_file_name(file_id, "0-1-2", t)
            ids = list(range(self._next_id, self._next_id + len(xs)))
            self._next_id += len(xs)
            table = pa.table({
                "_hoodie_commit_time": [t] * len(xs),
                "_hoodie_commit_seqno": [f"{t}_0_{i}" for i in range(len(xs))],
                "_hoodie_record_key": [str(i) for i in ids],
                "_hoodie_partition_path": [partition] * len(xs),
                "_hoodie_file_name": [name] * len(xs),
                "id": pa.array(ids, pa.int64()),
                "x": pa.array(list(xs), pa.float64()),
                "part": [partition] * len(xs),
            })
            if extra_columns is not None:
                for col, values in extra_columns(partition, len(xs)).items():
                    table = table.append_column(col, values)
                schema = arrow_to_avro_json(strip_meta_fields(table.schema), self.name)
            storage = self.table.storage
            meta_file = join_partition(partition, ".hoodie_partition_metadata")
            if not storage.exists(meta_file):
                depth = partition.count("/") + 1 if partition else 0
                storage.put(meta_file, f"#partition metadata\ncommitTime={t}\npartitionDepth={depth}\n".encode())
            rel = join_partition(partition, name)
            with storage.open_output(rel) as out:
                pq.write_table(table, out, compression=self.compression)
            written = storage.info(rel)
            assert written is not None
            size = written.size
            stats.setdefault(partition, []).append(WriteStat(
                file_id, join_partition(partition, name), partition, num_writes=len(xs), num_inserts=len(xs),
                total_write_bytes=size, file_size_in_bytes=size))
        if complete:
            meta = CommitMetadata({p: tuple(s) for p, s in stats.items()}, {"schema": schema}, Operation.INSERT)
            with self.table.lock():
                store.create(Instant(t, Action.COMMIT, State.COMPLETED), store.serde.encode_commit(meta))
        return t


def clustering_output_file(storage: Storage, instant: str, partition: str, prefix: str) -> WriteStat:
    """A one-row file of clustering ``instant`` in ``partition`` of the table on ``storage`` (its file id starts
    with ``prefix``), with its marker; its write stat."""
    name = f"{prefix}-0000-0000-0000-000000000000-0_0-1-1_{instant}.parquet"
    create_marker(storage, instant, partition, name)
    pq.write_table(pa.table({"x": [1.0]}), storage.full_path(f"{partition}/{name}"))
    return WriteStat(name.split("_", 1)[0], f"{partition}/{name}", partition, num_writes=1)


def scheduled_plan(tmp_path: Path, table_version: int = 6, clock: Clock = SYSTEM_CLOCK
                   ) -> tuple[TableGen, str, ClusteringPlan, list[list[WriteStat]]]:
    """Four commits in p1 and p2, a claimed plan of ours (a group per partition) and its written output."""
    from hudi_clusterd.ops.ownership import Ownership
    from hudi_clusterd.ops.schedule import schedule

    gen = TableGen(tmp_path / "t", table_version=table_version, clock=clock)
    for i in range(4):
        gen.commit({"p1": [float(i)], "p2": [float(i)]})
    scheduled = schedule(gen.table, make_policy(), force=True, claim_with=Ownership())
    assert scheduled.pending is not None and scheduled.claim is not None
    scheduled.claim.heartbeat.stop(delete=False)  # (its beats would outlive the test; the file stays)
    t, plan = scheduled.pending.time, scheduled.pending.plan
    assert [g.group_ids()[0][0] for g in plan.input_groups] == ["p1", "p2"]
    stats = [[clustering_output_file(gen.table.storage, t, group.group_ids()[0][0], f"{n:04d}aaaa")]
             for n, group in enumerate(plan.input_groups)]
    return gen, t, plan, stats


def commit_while(after_s: float, action: Callable[[], None], gen: TableGen, instant: str, plan: ClusteringPlan,
                 stats: Sequence[Sequence[WriteStat]]) -> Committed:
    """Complete clustering ``instant`` (waiting up to 30 s for writers) while ``action`` runs in another thread
    ``after_s`` seconds after the call."""
    timer = threading.Timer(after_s, action)
    timer.start()
    try:
        return complete(gen.table, instant, plan, stats, {}, undecided_wait_s=30)
    finally:
        timer.join()


def small_table(tmp_path: Path, commits: int = 4) -> TableGen:
    """A table at ``tmp_path / "t"`` with ``commits`` commits of one row in ``p1`` and one in ``p2`` each."""
    gen = TableGen(tmp_path / "t")
    for i in range(commits):
        gen.commit({"p1": [float(i)], "p2": [float(i) + 0.5]})
    return gen


def commit_some(gen: TableGen, n: int, rows: int = 200) -> None:
    """``n`` commits of ``rows`` random ``x`` values each into partition ``p1`` (seeded by the number of commits
    already on the timeline)."""
    rng = random.Random(len(list(gen.base.glob(".hoodie/*.commit"))))
    for _ in range(n):
        gen.commit({"p1": [rng.uniform(0, 100) for _ in range(rows)]})


def make_instant(time: str, action: str = "commit", state: str = "completed") -> Instant:
    st = State.COMPLETED if state == "completed" else State(state)
    return Instant(time, Action(action), st)


def make_timeline(*specs: tuple[str, str, str] | str) -> Timeline:
    """``make_timeline("20240101000000000", ("20240101000000001", "replacecommit", "requested"))``."""
    out = []
    for spec in specs:
        if isinstance(spec, str):
            out.append(make_instant(spec))
        else:
            out.append(make_instant(*spec))
    return Timeline.from_states(out)


def make_base_file(partition: str, file_id: str, instant: str, size: int = 1000, token: str = "0-1-2") -> BaseFile:
    bf = BaseFile.parse(partition, base_file_name(file_id, token, instant), size)
    assert bf is not None
    return bf


def make_policy(**props: str) -> ClusteringPolicy:
    """A clustering policy from keyword properties: full ``hoodie.*`` keys as they are, ``ClusteringKey`` member
    names (``make_policy(PARTITION_FILTER_MODE="RECENT_DAYS")``), and short names under
    ``hoodie.clustering.plan.strategy.`` (``make_policy(**{"sort.columns": "x", "hoodie.layout.optimize.strategy":
    "hilbert"})``)."""
    return parse_policy({_policy_key(k): v for k, v in props.items()}, source="test")[0]


def _policy_key(name: str) -> str:
    if name.startswith("hoodie."):
        return name
    if name in ClusteringKey.__members__:
        return ClusteringKey[name].value
    return "hoodie.clustering.plan.strategy." + name


def valid_plan_meta() -> RequestedReplaceMetadata:
    """A valid requested-replace metadata: one group of two slices in ``p1``."""
    slices = tuple(SliceInfo(f"f{i}-0", "p1", f"file:/t/p1/f{i}-0_0-1-2_20240101000000000.parquet")
                   for i in range(2))
    group = ClusteringGroup(slices, 1, {"TOTAL_IO_READ_MB": 1.0})
    return RequestedReplaceMetadata.for_plan(ClusteringPlan((group,), ClusteringStrategy("S", {"k": "v"})))


# --- rows of the golden tables' schema ------------------------------------------------------------------------

# The data columns of the golden v6 tables (``../shared/reference/hudi-tables``): scalars of every kind, a
# decimal, a date, a timestamp, binary, an array of structs, a map of structs and a struct holding a struct.
GOLDEN_ARRAY_ITEM = pa.struct([("arr_struct_f1", pa.string()), ("arr_struct_f2", pa.int32())])
GOLDEN_MAP_VALUE = pa.struct([("map_field_value_struct_f1", pa.float64()), ("map_field_value_struct_f2", pa.bool_())])
GOLDEN_SCHEMA = pa.schema([
    ("id", pa.int32()), ("name", pa.string()), ("isActive", pa.bool_()), ("shortField", pa.int32()),
    ("intField", pa.int32()), ("longField", pa.int64()), ("floatField", pa.float32()), ("doubleField", pa.float64()),
    ("decimalField", pa.decimal128(10, 5)), ("dateField", pa.date32()), ("timestampField", pa.timestamp("us", "UTC")),
    ("binaryField", pa.binary()), ("arrayField", pa.list_(GOLDEN_ARRAY_ITEM)),
    ("mapField", pa.map_(pa.string(), GOLDEN_MAP_VALUE)),
    ("structField", pa.struct([("field1", pa.string()), ("field2", pa.int32()), ("child_struct", pa.struct(
        [("child_field1", pa.float64()), ("child_field2", pa.bool_())]))])),
    ("byteField", pa.int32()),
])


def golden_rows(ids: Sequence[int], *, version: int = 0, partitions: Sequence[int] = (10, 20)) -> pa.Table:
    """Rows of :data:`GOLDEN_SCHEMA` keyed by ``id``, partitioned (``byteField``) by ``id`` over ``partitions``,
    ordered (``longField``, the golden tables' precombine field) by ``version``. Values depend on ``id`` and
    ``version`` only; every fifth row has nulls in ``doubleField``, ``decimalField`` and a nested field, every
    seventh an empty array and a null map."""
    import datetime as dt
    from decimal import Decimal

    out = []
    for i in ids:
        v = version
        out.append({
            "id": i, "name": f"n{i}v{v}", "isActive": (i + v) % 2 == 0, "shortField": 300 + i, "intField": 15_000 + i,
            "longField": 1_000_000 * v + i, "floatField": float(i) / 4 + v, "doubleField": None if i % 5 == 0 else
            (i * 7919 % 101) / 3 + v, "decimalField": None if i % 5 == 0 else Decimal(f"{i * 37 + v}.{i:05d}"),
            "dateField": dt.date(2024, 1, 1) + dt.timedelta(days=(i * 13 + v) % 60),
            "timestampField": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i * 97 + v),
            "binaryField": f"b{i}.{v}".encode(),
            "arrayField": [] if i % 7 == 0 else [{"arr_struct_f1": f"a{i}", "arr_struct_f2": i + v},
                                                 {"arr_struct_f1": None, "arr_struct_f2": -i}],
            "mapField": None if i % 7 == 0 else [("k1", {"map_field_value_struct_f1": i / 8 + v,
                                                         "map_field_value_struct_f2": i % 3 == 0}),
                                                 ("k2", {"map_field_value_struct_f1": None,
                                                         "map_field_value_struct_f2": None})],
            "structField": {"field1": f"s{i}", "field2": i * v, "child_struct": None if i % 5 == 0 else
                            {"child_field1": i + v / 10, "child_field2": i % 2 == 1}},
            "byteField": partitions[i % len(partitions)],
        })
    return pa.Table.from_pylist(out, schema=GOLDEN_SCHEMA)


# --- tables our Spark writer wrote and our clustering clustered -----------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusteredTable:
    """A table written by our ingestion writer (one commit per batch), then clustered once by our clustering."""

    base: Path
    commits: tuple[str, ...]
    clustering: str
    rows: pa.Table  # every row written, in batch order (the batches have distinct keys)
    replaced: frozenset[tuple[str, str]]  # (partition, file id) of the file groups the clustering replaced
    written: frozenset[tuple[str, str]]  # (partition, file id) of the file groups the clustering wrote


def write_and_cluster(spark: Any, base: Path, config: TableConfig, batches: Sequence[pa.Table],
                      clustering: Mapping[str, str]) -> ClusteredTable:
    """Create the table, ``insert`` each batch as one commit with our Spark writer, then schedule and execute one
    clustering of every file group with the policy ``clustering`` (``make_policy`` keywords) on ``spark``."""
    from hudi_clusterd.engine.ingest.writer import insert

    table = HoodieTable.create(str(base), config)
    commits = tuple(insert(spark, table, spark.createDataFrame(batch), parallelism=2) for batch in batches)
    return cluster_every_group(spark, base, commits, pa.concat_tables(batches), clustering)


def cluster_every_group(spark: Any, base: Path, commits: Sequence[str], rows: pa.Table,
                        clustering: Mapping[str, str]) -> ClusteredTable:
    """Schedule and execute one clustering of every file group of the table at ``base`` (whose ``commits`` wrote
    ``rows``) with the policy ``clustering`` (``make_policy`` keywords) on ``spark``."""
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner
    from hudi_clusterd.ops.execute import execute_pending
    from hudi_clusterd.ops.schedule import schedule

    table = HoodieTable.open(str(base))
    policy = make_policy(**clustering)
    scheduled = schedule(table, policy, force=True)
    assert scheduled.instant is not None and scheduled.plan is not None, scheduled.reason
    result = execute_pending(table, SparkGroupRunner(spark, owns_session=False), scheduled.instant,
                             parallelism=policy.max_parallelism)
    assert result.outcome == "completed", result.message
    return ClusteredTable(
        base, tuple(commits), result.instant, rows, frozenset(scheduled.plan.group_ids()),
        frozenset((ws.partition_path or "", ws.file_id) for ws in result.write_stats))


# --- the small events table the interop tests write through Apache Hudi ------------------------------------------

EVENTS_SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("val", pa.float64()), ("ts", pa.int64())])
EVENTS_PARTS = ("p1", "p2")
EventValue = tuple[str, float, int]


def event_rows(batch: int, n: int = 40, start: int = 0) -> list[dict[str, Any]]:
    """Batch ``batch`` of the events table: ``n`` keys from ``start + batch * n``, over two partitions, ``ts`` =
    the batch (the precombine field)."""
    return [{"id": start + batch * n + i, "part": EVENTS_PARTS[i % 2], "val": float((batch * 37 + i * 11) % 97),
             "ts": batch} for i in range(n)]


def events_by_key(table: pa.Table) -> dict[int, EventValue]:
    """A read of the events table as key -> (part, val, ts); fails on a key read twice."""
    out: dict[int, EventValue] = {}
    for r in table.to_pylist():
        assert r["id"] not in out, f"key {r['id']} appears twice"
        out[int(r["id"])] = (r["part"], r["val"], r["ts"])
    return out


def expected_events(batches: Sequence[Sequence[Mapping[str, Any]]]) -> dict[int, EventValue]:
    """What upserting ``batches`` in order leaves: each key's last value."""
    return {r["id"]: (r["part"], r["val"], r["ts"]) for batch in batches for r in batch}
