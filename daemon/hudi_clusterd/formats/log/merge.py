"""Merging one file slice: its base file's rows (or none, for a log-only slice) and the decoded blocks of its
log files, as Hudi's readers merge them for a snapshot, a compaction or a clustering as of an instant.

Block selection:

- a ROLLBACK command block drops every data and DELETE block of its target instant, in every log file of the
  slice, wherever it stands (Hudi 1.x, and 0.15 with the optimized scan);
- a data or DELETE block is applied only when its instant is among the completed instants given (the caller
  gives those up to the as-of instant; on table version 6 archived instants count as completed, on 8 and later
  the plan's log files are all completed) and not after ``as_of``;
- CORRUPT blocks are skipped;
- blocks apply oldest first: the log files in the order given (Hudi's log file order), blocks in file order.

Records of one key then meet by the ``MergeRule``. A record with ``_hoodie_is_deleted`` true (when the schema
has the column) is a delete that takes part in the ordering like any record. Deleted keys are not returned; the
winning record is returned whole, with its own ``_hoodie_commit_time`` and ``_hoodie_commit_seqno`` (its
``_hoodie_file_name`` is the caller's to rewrite). Output order: the base rows in their order (each replaced by
its winner), then the keys found only in the logs, in the order they first appeared. Not read as deletes:
``_hoodie_operation`` and custom delete markers (``hoodie.payload.delete.field``). The record key is
``_hoodie_record_key`` (tables without meta fields are refused) and the ordering value is one field's.

Memory: the base table, each applied data block's batch (shaped to the output schema) and one dict entry per
record key found in the logs (the winner's place and ordering value) are held until the end.

An ordering value's class (for the DELETE block rules) comes from the ordering column's Arrow type: 8-, 16- and
32-bit integers are Integer, 64-bit integers and timestamps Long (a timestamp compared as its integer in the
column's unit, as Hudi's Avro records hold it and as a DELETE block's Long holds it), then Float, Double, String,
Boolean, bytes, Date and Decimal. A missing ordering value (null, or no ordering field) never loses to the held
record.
"""

from __future__ import annotations

from collections.abc import Container, Sequence, Set
from dataclasses import dataclass

import pyarrow as pa

from hudi_clusterd.errors import LogFileError
from hudi_clusterd.formats.log.arrow_blocks import conform_batch
from hudi_clusterd.formats.log.data_log import DataBlock, DecodedBlock, DeleteBlock, RollbackBlock
from hudi_clusterd.formats.log.merge_rule import MergeRule

RECORD_KEY = "_hoodie_record_key"
IS_DELETED = "_hoodie_is_deleted"


@dataclass(frozen=True, slots=True)
class SliceMerge:
    """How a clustering merges its slices with log files: the table's ``rule``, the write instants ``completed``
    up to ``as_of`` (the clustering instant; blocks after it are not applied) and the active timeline's first
    instant ``archived_before``: an older instant has been archived and counts as completed, as Hudi's readers
    count it; ``table_schema``: the table's latest Avro schema (the merged rows keep a column only logs have).
    Picklable: it travels to the Spark tasks."""

    rule: MergeRule
    completed: frozenset[str]
    as_of: str
    archived_before: str | None = None
    table_schema: str | None = None

    @classmethod
    def as_of_instant(cls, rule: MergeRule, completed: Set[str], instant: str,
                      archived_before: str | None = None, table_schema: str | None = None) -> SliceMerge:
        """The merge of a clustering ``instant``: the completed instants not after it."""
        return cls(rule, frozenset(i for i in completed if i <= instant), instant, archived_before, table_schema)

    def __contains__(self, instant: object) -> bool:
        """Whether the blocks of ``instant`` are applied as completed."""
        return isinstance(instant, str) and (instant in self.completed or (
            self.archived_before is not None and instant < self.archived_before))


@dataclass(frozen=True, slots=True)
class _Held:
    """A key's current winner: its place (``source`` index into the applied batches, -1 for a DELETE block's
    delete) and what the rules compare."""

    source: int
    row: int
    ordering: object
    kind: str
    deleted: bool
    delete_block: bool = False
    default_ordering: bool = False


def _kind_of(t: pa.DataType) -> str:
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return "int"
    if pa.types.is_int64(t) or pa.types.is_timestamp(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "bytes"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_decimal(t):
        return "decimal"
    return str(t)


def _greater(a: object, b: object) -> bool:
    """``a > b`` for two ordering values of one class; False when either is missing."""
    if a is None or b is None:
        return False
    return bool(a > b)  # type: ignore[operator]


def _over_held(rule: MergeRule, held: _Held | None, new: _Held) -> _Held:
    """The winner of a log record (or delete) ``new`` against the key's ``held`` winner from earlier blocks."""
    if held is None or not rule.log_by_ordering:
        return new
    if new.delete_block:
        if new.default_ordering or held.kind != new.kind:
            return new
        return held if _greater(held.ordering, new.ordering) else new
    if held.delete_block and (rule.natural_order_after_delete or held.default_ordering or held.kind != new.kind):
        return new
    return held if _greater(held.ordering, new.ordering) else new


def _over_base(rule: MergeRule, base: _Held, log: _Held) -> _Held:
    """The winner of the logs' record ``log`` against the base row ``base``."""
    if log.delete_block:
        if not rule.deletes_by_ordering_against_base or log.default_ordering or base.kind != log.kind:
            return log
        return base if _greater(base.ordering, log.ordering) else log
    if not rule.base_by_ordering:
        return log
    return base if _greater(base.ordering, log.ordering) else log


def applied_blocks(blocks: Sequence[DecodedBlock], completed: Container[str],
                   as_of: str | None = None) -> list[DataBlock | DeleteBlock]:
    """The data and DELETE blocks a reader applies, in order: of a completed instant, not after ``as_of``, not
    rolled back by any ROLLBACK block of the slice."""
    rolled_back = {b.target for b in blocks if isinstance(b, RollbackBlock)}
    return [b for b in blocks if isinstance(b, DataBlock | DeleteBlock) and b.instant in completed
            and (as_of is None or b.instant <= as_of) and b.instant not in rolled_back]


class _Columns:
    """The key, ordering and delete-flag columns of one batch, as Python values."""

    def __init__(self, batch: pa.RecordBatch, rule: MergeRule, where: str) -> None:
        names = batch.schema.names
        if RECORD_KEY not in names:
            raise LogFileError(f"{where}: has no {RECORD_KEY} column (tables without meta fields are not merged)")
        self.keys: list[str] = batch.column(RECORD_KEY).to_pylist()
        field = rule.ordering_field
        if field and field in names:
            column = batch.column(field)
            self.kind = _kind_of(column.type)
            if pa.types.is_timestamp(column.type):  # a Long, as Hudi compares it (and as fast as integers)
                column = column.cast(pa.int64())
            self.ordering: list[object] = column.to_pylist()
        else:
            self.ordering, self.kind = [None] * batch.num_rows, "none"
        self.deleted: list[bool] = ([v is True for v in batch.column(IS_DELETED).to_pylist()]
                                    if IS_DELETED in names else [False] * batch.num_rows)

    def held(self, source: int, row: int) -> _Held:
        return _Held(source, row, self.ordering[row], self.kind, self.deleted[row])


def merge_file_slice(base: pa.Table | None, blocks: Sequence[DecodedBlock], *, completed: Container[str],
                     rule: MergeRule, as_of: str | None = None, schema: pa.Schema | None = None) -> pa.Table:
    """The live rows of a file slice after merging ``blocks`` (its log files' blocks, oldest file first) into
    ``base`` (None for a log-only slice), in ``schema`` (the base table's, else the first applied data block's).
    Raises ``LogFileError`` for a batch without ``_hoodie_record_key`` or one that does not fit the schema."""
    applied = applied_blocks(blocks, completed, as_of)
    if schema is None:
        first = next((b.records.schema for b in applied if isinstance(b, DataBlock)), None)
        schema = base.schema if base is not None else first
    if schema is None:
        return pa.table({})
    batches: list[pa.RecordBatch] = []
    held: dict[str, _Held] = {}
    for block in applied:
        where = f"{block.source}: block at byte {block.offset}"
        if isinstance(block, DeleteBlock):
            for record in block.records:
                if record.record_key is None:
                    raise LogFileError(f"{where}: DELETE block holds a record without a key")
                new = _Held(-1, -1, record.ordering.value, record.ordering.kind, True, delete_block=True,
                            default_ordering=record.ordering.is_default)
                held[record.record_key] = _over_held(rule, held.get(record.record_key), new)
            continue
        batch = conform_batch(block.records, schema, where=where)
        columns = _Columns(batch, rule, where)
        source = len(batches)
        batches.append(batch)
        for row, key in enumerate(columns.keys):
            held[key] = _over_held(rule, held.get(key), columns.held(source, row))
    base_table = conform_batch(base, schema, where="base file") if base is not None else None
    picks: list[tuple[int, int]] = []  # (source, row); source len(batches) is the base
    base_source = len(batches)
    if base_table is not None:
        columns = _Columns(base_table, rule, "base file")
        deleted = columns.deleted
        for row, key in enumerate(columns.keys):
            log = held.pop(key, None)
            if log is None:  # no log record: the base row stands unless it is itself a delete
                if not deleted[row]:
                    picks.append((base_source, row))
                continue
            winner = _over_base(rule, columns.held(base_source, row), log)
            if not winner.deleted:
                picks.append((winner.source, winner.row))
    picks += [(h.source, h.row) for h in held.values() if not h.deleted]
    return _take(batches + ([base_table] if base_table is not None else []), picks, schema)


def _take(sources: list[pa.RecordBatch], picks: list[tuple[int, int]], schema: pa.Schema) -> pa.Table:
    if not picks:
        return schema.empty_table()
    offsets = [0]
    for batch in sources:
        offsets.append(offsets[-1] + batch.num_rows)
    table = pa.Table.from_batches(sources, schema=schema)
    return table.take(pa.array([offsets[s] + r for s, r in picks], pa.int64())).combine_chunks()
