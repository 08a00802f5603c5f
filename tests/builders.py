"""Builders for test data (not fixtures): instants, timelines, base files, clustering policies and plans, a
hypothesis strategy of JSON-like values, and small real Hudi v6 copy-on-write tables written without Spark
(`TableGen`).

`TableGen` writes one new file group per partition given per commit, with the meta columns, footers and commit
JSON a Hudi writer produces. Data columns: ``id`` (record key), ``x`` (float), ``part`` (partition field).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

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
from hudi_clusterd.io.avro_schema import arrow_to_avro_json, strip_meta_fields
from hudi_clusterd.io.table import HoodieTable

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


class TableGen:
    """A table plus a clock that hands out increasing instant times."""

    def __init__(self, base: Path, partitioned: bool = True, name: str = "t", compression: str = "snappy") -> None:
        cfg = TableConfig.for_new_table(name=name, record_key_fields=["id"],
                                        partition_fields=["part"] if partitioned else [])
        self.table = HoodieTable.create(str(base), cfg)
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
        store.create(Instant(t, Action.COMMIT, State.INFLIGHT), b"{}")
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
            folder = self.base / partition if partition else self.base
            folder.mkdir(parents=True, exist_ok=True)
            meta_file = folder / ".hoodie_partition_metadata"
            if not meta_file.exists():
                depth = partition.count("/") + 1 if partition else 0
                meta_file.write_text(f"#partition metadata\ncommitTime={t}\npartitionDepth={depth}\n")
            path = folder / name
            pq.write_table(table, path, compression=self.compression)
            size = path.stat().st_size
            stats.setdefault(partition, []).append(WriteStat(
                file_id, join_partition(partition, name), partition, num_writes=len(xs), num_inserts=len(xs),
                total_write_bytes=size, file_size_in_bytes=size))
        if complete:
            meta = CommitMetadata({p: tuple(s) for p, s in stats.items()}, {"schema": schema}, Operation.INSERT)
            store.create(Instant(t, Action.COMMIT, State.COMPLETED), meta.to_json_bytes())
        return t


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
