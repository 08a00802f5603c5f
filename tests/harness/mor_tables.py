"""Merge-on-read tables with live log files, made from a golden table Apache Hudi 1.2 wrote (version 9, no
metadata table), and what their readers see.

The golden tables end with every log file compacted or clustered away, so :func:`add_log_commit` appends a
deltacommit of its own: an Avro log file per file group given (``.{file id}_{instant}.log.1_0-1-1``, as Hudi 1.x
names a log after its deltacommit), each holding an AVRO_DATA block written with the SCHEMA of the table's own
golden log blocks (the updates of some of the slice's rows, their ordering value raised) and optionally a DELETE
block, then the deltacommit completed with their write stats (counted as inserts, so that the planner does not
take the groups for hot ones and leave them out). :func:`merged_view` is our reader: every latest file
slice merged (`merge_file_slice`) with the table's merge rule and every completed instant."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.file_group import join_partition
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.formats.log import HeaderKey, LogBlock, encode_block, merge_file_slice, read_data_log
from hudi_clusterd.formats.log.scan import scan_log_file
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.harness.mor_logs import avro_block, delete_block, ordering_bytes

GOLDEN = "v9_txns_simple_nometa"
"""Three partitions, no metadata table, ordering field ``txn_ts`` (EVENT_TIME_ORDERING)."""
ORDERING = "txn_ts"
AS_OF_ALL = "99999999999999999"


def golden_block_schema(base: Path) -> dict[str, Any]:
    """The SCHEMA header of the first AVRO_DATA block among the table's log files (the writer schema with the
    meta fields)."""
    for path in sorted(base.rglob(".*.log.*")):
        if ".hoodie" in path.relative_to(base).parts:
            continue
        for scanned in scan_log_file(path.read_bytes(), source=str(path)):
            schema = scanned.block.header.get(HeaderKey.SCHEMA)
            if schema:
                return dict(json.loads(schema))
    raise AssertionError(f"{base}: no log block with a SCHEMA header")


def latest_base(base: Path, partition: str, file_id: str) -> Path:
    """The latest base file of a file group (by instant time)."""
    return max((base / partition).glob(f"{file_id}_*.parquet"), key=lambda p: p.stem.rsplit("_", 1)[-1])


def updates(base: Path, partition: str, file_id: str, instant: str, n: int, *, bump: int = 1000
            ) -> list[dict[str, Any]]:
    """The first ``n`` rows of a file group's latest base file as records of ``instant``: ``txn_ts`` raised by
    ``bump`` (they win under EVENT_TIME) and ``merchant_name`` naming the instant."""
    rows: list[dict[str, Any]] = pq.read_table(latest_base(base, partition, file_id)).slice(0, n).to_pylist()
    for i, r in enumerate(rows):
        r.update({"_hoodie_commit_time": instant, "_hoodie_commit_seqno": f"{instant}_0_{i}",
                  ORDERING: int(r[ORDERING]) + bump, "merchant_name": f"updated at {instant}"})
    return rows


def file_groups(base: Path) -> list[tuple[str, str]]:
    """(partition, file id) of every latest file slice with a base file, sorted."""
    view = HoodieTable.open(str(base)).file_system_view()
    return sorted((s.partition_path, s.file_id) for s in view.latest_file_slices() if s.base_file is not None)


@dataclass(frozen=True)
class LogWrite:
    """One log file of a deltacommit: its file group, its blocks (each instant header set to the commit's by
    :func:`add_log_commit` when built with :func:`log_blocks`), and bytes appended after them (damage)."""

    partition: str
    file_id: str
    blocks: Sequence[LogBlock]
    tail: bytes = b""


def log_blocks(base: Path, partition: str, file_id: str, instant: str, *, n: int = 2,
               delete_key: str | None = None) -> list[LogBlock]:
    """An AVRO_DATA block updating ``n`` rows of the group, and a DELETE block of ``delete_key`` when given."""
    out = [avro_block(instant, golden_block_schema(base), updates(base, partition, file_id, instant, n))]
    if delete_key is not None:
        out.append(delete_block(instant, [(delete_key, partition, ordering_bytes("int", 0))]))
    return out


def add_log_commit(base: Path, writes: Sequence[LogWrite] | None = None, *, instant: str | None = None,
                   build: Mapping[tuple[str, str], Mapping[str, Any]] | None = None) -> tuple[str, list[Path]]:
    """A completed deltacommit writing one log file per write; ``build`` makes the writes here instead:
    ``{(partition, file id): log_blocks keyword arguments}``. Returns the instant and the log files."""
    table = HoodieTable.open(str(base))
    if instant is None:
        with table.lock():
            instant = table.new_instant_time()
    store = table.timeline_store
    store.create(Instant(instant, Action.DELTA_COMMIT, State.REQUESTED))
    store.create(Instant(instant, Action.DELTA_COMMIT, State.INFLIGHT),
                 store.serde.encode_commit(CommitMetadata(operation_type=Operation.UPSERT)))
    if build is not None:
        writes = [LogWrite(p, f, log_blocks(base, p, f, instant, **kw)) for (p, f), kw in build.items()]
    stats: dict[str, list[WriteStat]] = {}
    paths: list[Path] = []
    for w in writes or ():
        rel = join_partition(w.partition, f".{w.file_id}_{instant}.log.1_0-1-1")
        data = b"".join(encode_block(b) for b in w.blocks) + w.tail
        table.storage.put(rel, data)
        paths.append(base / rel)
        stats.setdefault(w.partition, []).append(WriteStat(
            w.file_id, rel, w.partition, num_writes=1, num_inserts=1, total_write_bytes=len(data),
            file_size_in_bytes=len(data), log_version=1, log_offset=0))
    schema = table.latest_schema() or ""
    meta = CommitMetadata({p: tuple(s) for p, s in stats.items()}, {"schema": schema}, Operation.UPSERT)
    with table.lock():
        store.create(Instant(instant, Action.DELTA_COMMIT, State.COMPLETED), store.serde.encode_commit(meta))
    return instant, paths


def _row(r: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in r.items() if k != "_hoodie_file_name"}


def merged_view(base: Path) -> list[dict[str, Any]]:
    """Our snapshot of the table: every latest file slice's base file merged with its log files under the
    table's merge rule, as of every completed instant; rows without ``_hoodie_file_name``, by record key. Fails
    on a key in two slices."""
    table = HoodieTable.open(str(base))
    timeline = table.timeline()
    merge = table.slice_merge(timeline, AS_OF_ALL)
    assert merge is not None
    rows: list[dict[str, Any]] = []
    for s in table.file_system_view(timeline).latest_file_slices():
        base_rows = pq.read_table(base / s.base_file.relative_path) if s.base_file is not None else None
        blocks = [b for log in s.log_files for b in read_data_log(
            (base / join_partition(s.partition_path, log.file_name)).read_bytes(), source=log.file_name)]
        merged = merge_file_slice(base_rows, blocks, completed=merge, rule=merge.rule, as_of=merge.as_of)
        rows += [_row(r) for r in merged.to_pylist()]
    keys = [r["_hoodie_record_key"] for r in rows]
    assert len(keys) == len(set(keys)), "a record key in two file slices"
    return sorted(rows, key=lambda r: str(r["_hoodie_record_key"]))


def stray_data_files(base: Path) -> list[str]:
    """Data files (base or log) whose instant is not a completed instant of the timeline: what a rolled-back or
    interrupted write would leave."""
    table = HoodieTable.open(str(base))
    completed = {i.time for i in table.timeline().completed()}
    out: list[str] = []
    for f in base.rglob("*"):
        rel = f.relative_to(base)
        if ".hoodie" in rel.parts or not f.is_file():
            continue
        if f.suffix == ".parquet":
            instant = f.stem.rsplit("_", 1)[-1]
        elif ".log." in f.name:
            instant = f.name.split(".log.")[0].rsplit("_", 1)[-1]
        else:
            continue
        if instant not in completed:
            out.append(rel.as_posix())
    return sorted(out)


def pending(base: Path) -> list[str]:
    """The table's pending instants (``T.action.state``)."""
    return [f"{i.time}.{i.action.value}.{i.state.value}" for i in HoodieTable.open(str(base)).timeline().pending()]
