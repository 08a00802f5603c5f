"""A file slice merged as Hudi merges it: which blocks apply (completed instants up to as-of, rollback blocks
across the slice, corrupt blocks skipped) and which record wins per merge mode, 0.15 payload and release."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from hudi_clusterd.errors import UnsupportedTableError
from hudi_clusterd.formats.log import (
    CorruptBlock,
    DataBlock,
    DecodedBlock,
    DeleteBlock,
    DeletedRecord,
    MergeMode,
    MergeRule,
    OrderingValue,
    Payload,
    Release,
    RollbackBlock,
    merge_file_slice,
)

SCHEMA = pa.schema([("_hoodie_commit_time", pa.string()), ("_hoodie_commit_seqno", pa.string()),
                    ("_hoodie_record_key", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
DELETED = pa.schema([*SCHEMA, pa.field("_hoodie_is_deleted", pa.bool_())])
EVENT = MergeRule.of_mode(MergeMode.EVENT_TIME, "ts")
COMMIT = MergeRule.of_mode(MergeMode.COMMIT_TIME, "ts")
OWL_015 = MergeRule.of_payload(Payload.OVERWRITE_WITH_LATEST, "ts", Release.HUDI_0_15)
OWL_1X = MergeRule.of_payload(Payload.OVERWRITE_WITH_LATEST, "ts", Release.HUDI_1_X)
DEFAULT_015 = MergeRule.of_payload(Payload.DEFAULT, "ts", Release.HUDI_0_15)
EVENT_015 = MergeRule.of_payload(Payload.EVENT_TIME, "ts", Release.HUDI_0_15)
ALL = {str(i) for i in range(1, 10)}


def _rows(instant: str, *rows: tuple[str, int | None, str], schema: pa.Schema = SCHEMA,
          deleted: Sequence[bool] = ()) -> pa.Table:
    cols: dict[str, Any] = {"_hoodie_commit_time": [instant] * len(rows),
                            "_hoodie_commit_seqno": [f"{instant}_{i}" for i in range(len(rows))],
                            "_hoodie_record_key": [k for k, _t, _v in rows], "ts": [t for _k, t, _v in rows],
                            "v": [v for _k, _t, v in rows]}
    if "_hoodie_is_deleted" in schema.names:
        cols["_hoodie_is_deleted"] = list(deleted) or [False] * len(rows)
    return pa.table(cols, schema=schema)


def _data(instant: str, *rows: tuple[str, int | None, str], source: str = "log1", **kw: Any) -> DataBlock:
    return DataBlock(source, 0, instant, _rows(instant, *rows, **kw).to_batches()[0])


def _delete(instant: str, key: str, kind: str = "int", value: object = 0, source: str = "log1") -> DeleteBlock:
    return DeleteBlock(source, 0, instant, (DeletedRecord(key, "", OrderingValue(kind, value)),))


def _merged(base: pa.Table | None, blocks: Sequence[DecodedBlock], rule: MergeRule = EVENT,
            completed: set[str] = ALL, as_of: str | None = None) -> dict[str, tuple[str, str]]:
    """key -> (value, commit time) of the merged rows."""
    out = merge_file_slice(base, blocks, completed=completed, rule=rule, as_of=as_of)
    rows = out.to_pylist()
    assert len({r["_hoodie_record_key"] for r in rows}) == len(rows)
    return {r["_hoodie_record_key"]: (r["v"], r["_hoodie_commit_time"]) for r in rows}


BASE = _rows("1", ("a", 10, "a1"), ("b", 10, "b1"), ("c", 10, "c1"))


def test_the_winning_log_record_keeps_its_commit_time_and_seqno_and_new_keys_follow_the_base_rows() -> None:
    out = merge_file_slice(BASE, [_data("2", ("b", 11, "b2"), ("d", 1, "d2"))], completed=ALL, rule=EVENT)
    assert out.schema == SCHEMA
    assert out.to_pylist() == [
        {"_hoodie_commit_time": "1", "_hoodie_commit_seqno": "1_0", "_hoodie_record_key": "a", "ts": 10, "v": "a1"},
        {"_hoodie_commit_time": "2", "_hoodie_commit_seqno": "2_0", "_hoodie_record_key": "b", "ts": 11, "v": "b2"},
        {"_hoodie_commit_time": "1", "_hoodie_commit_seqno": "1_2", "_hoodie_record_key": "c", "ts": 10, "v": "c1"},
        {"_hoodie_commit_time": "2", "_hoodie_commit_seqno": "2_1", "_hoodie_record_key": "d", "ts": 1, "v": "d2"}]


# -------------------------------------------------------------------------------------------- merge modes


def test_event_time_keeps_the_greater_ordering_and_ties_go_to_the_later_record() -> None:
    blocks: list[DecodedBlock] = [_data("2", ("a", 20, "a2"), ("b", 5, "b2"), ("c", 10, "c2")),
                                  _data("3", ("a", 15, "a3"))]
    assert _merged(BASE, blocks) == {"a": ("a2", "2"), "b": ("b1", "1"), "c": ("c2", "2")}


def test_commit_time_takes_the_later_record_whatever_its_ordering() -> None:
    blocks: list[DecodedBlock] = [_data("2", ("a", 20, "a2"), ("b", 5, "b2")), _data("3", ("a", 15, "a3"))]
    assert _merged(BASE, blocks, COMMIT) == {"a": ("a3", "3"), "b": ("b2", "2"), "c": ("c1", "1")}


def test_overwrite_with_latest_differs_between_0_15_and_1_x() -> None:
    blocks: list[DecodedBlock] = [_data("2", ("a", 20, "a2"), ("b", 5, "b2")), _data("3", ("a", 15, "a3"))]
    # 0.15: logs pre-combine by ordering, then the log record overwrites the base row whatever its ordering
    assert _merged(BASE, blocks, OWL_015) == {"a": ("a2", "2"), "b": ("b2", "2"), "c": ("c1", "1")}
    # 1.x infers COMMIT_TIME_ORDERING from the payload
    assert _merged(BASE, blocks, OWL_1X) == _merged(BASE, blocks, COMMIT)


@pytest.mark.parametrize("rule", [DEFAULT_015, EVENT_015])
def test_default_and_event_time_payloads_keep_a_base_row_of_greater_ordering(rule: MergeRule) -> None:
    blocks: list[DecodedBlock] = [_data("2", ("a", 20, "a2"), ("b", 5, "b2")), _data("3", ("a", 15, "a3"))]
    assert _merged(BASE, blocks, rule) == {"a": ("a2", "2"), "b": ("b1", "1"), "c": ("c1", "1")}
    for payload in (Payload.DEFAULT, Payload.EVENT_TIME):
        assert MergeRule.of_payload(payload, "ts", Release.HUDI_1_X) == EVENT


def test_a_missing_ordering_value_never_loses_to_the_held_record() -> None:
    assert _merged(BASE, [_data("2", ("a", 20, "a2")), _data("3", ("a", None, "a3"))]) == {
        "a": ("a3", "3"), "b": ("b1", "1"), "c": ("c1", "1")}
    assert _merged(None, [_data("2", ("a", None, "a2")), _data("3", ("a", 1, "a3"))]) == {"a": ("a3", "3")}


def test_unsupported_modes_and_payloads_are_refused_naming_the_key() -> None:
    with pytest.raises(UnsupportedTableError, match=r"^hoodie.record.merge.mode=CUSTOM is not merged \(supported: "
                                                    r"COMMIT_TIME_ORDERING, EVENT_TIME_ORDERING\)$"):
        MergeRule.of_mode("CUSTOM", "ts")
    with pytest.raises(UnsupportedTableError, match=r"^hoodie.compaction.payload.class=x.MyPayload is not merged"):
        MergeRule.of_payload("x.MyPayload", "ts", Release.HUDI_0_15)


# ------------------------------------------------------------------------------------------------ deletes


@pytest.mark.parametrize("rule", [EVENT, COMMIT, OWL_015, DEFAULT_015])
def test_a_delete_with_the_default_ordering_always_wins(rule: MergeRule) -> None:
    blocks: list[DecodedBlock] = [_data("2", ("a", 99, "a2")), _delete("3", "a"), _delete("3", "b"), _delete("3", "zz")]
    assert _merged(BASE, blocks, rule) == {"c": ("c1", "1")}


def test_a_delete_with_an_ordering_value_loses_only_to_a_greater_value_of_the_same_class() -> None:
    blocks: list[DecodedBlock] = [_data("2", ("a", 20, "a2"), ("b", 20, "b2")),
              _delete("3", "a", "long", 15),  # a Long below the held 20: the record stays
              _delete("3", "b", "int", 15),  # an Integer: another class than the column's Long, the delete wins
              _delete("3", "c", "long", 5)]  # against the base row: EVENT_TIME keeps the greater base row
    assert _merged(BASE, blocks) == {"a": ("a2", "2"), "c": ("c1", "1")}
    assert _merged(BASE, blocks, DEFAULT_015) == {"a": ("a2", "2")}  # 0.15: a delete always removes the base row


def test_a_timestamp_ordering_meets_a_delete_blocks_long_as_its_integer_in_the_column_unit() -> None:
    def rows(instant: str, *items: tuple[str, int, str]) -> pa.Table:
        t = _rows(instant, *items)
        return t.set_column(t.schema.get_field_index("ts"), "ts", t.column("ts").cast(pa.timestamp("us", tz="UTC")))

    base = rows("1", ("a", 10, "a1"), ("b", 10, "b1"), ("c", 10, "c1"))
    updates = rows("2", ("a", 20, "a2"), ("b", 20, "b2")).to_batches()[0]
    blocks: list[DecodedBlock] = [DataBlock("log1", 0, "2", updates),
                                  _delete("3", "a", "long", 15),  # a Long below the held 20 us: the record stays
                                  _delete("3", "b", "long", 25),  # above it: deleted
                                  _delete("3", "c", "long", 5)]  # below the base row's 10 us: EVENT_TIME keeps it
    assert _merged(base, blocks) == {"a": ("a2", "2"), "c": ("c1", "1")}


def test_a_record_after_a_delete_wins_by_natural_order_in_0_15_and_by_ordering_in_1_x() -> None:
    blocks: list[DecodedBlock] = [_delete("2", "a", "long", 30), _data("3", ("a", 25, "a3"))]
    assert _merged(BASE, blocks, OWL_015) == {"a": ("a3", "3"), "b": ("b1", "1"), "c": ("c1", "1")}
    assert _merged(BASE, blocks, EVENT) == {"b": ("b1", "1"), "c": ("c1", "1")}
    # after a delete by commit time, any record wins; the base row still meets the logs' winner by ordering
    assert _merged(None, [_delete("2", "a"), _data("3", ("a", -5, "a3"))], EVENT) == {"a": ("a3", "3")}
    assert _merged(BASE, [_delete("2", "a"), _data("3", ("a", 1, "a3"))], EVENT)["a"] == ("a1", "1")


def test_is_deleted_records_delete_by_their_ordering() -> None:
    base = _rows("1", ("a", 10, "a1"), ("b", 10, "b1"), schema=DELETED)
    blocks: list[DecodedBlock] = [_data("2", ("a", 11, "x"), ("b", 9, "x"), ("n", 1, "x"), schema=DELETED,
                                        deleted=[True] * 3)]
    assert _merged(base, blocks) == {"b": ("b1", "1")}
    assert _merged(base, blocks, COMMIT) == {}
    assert _merged(base, [*blocks, _data("3", ("n", 2, "n3"), schema=DELETED)]) == {
        "b": ("b1", "1"), "n": ("n3", "3")}


# ------------------------------------------------------------------------------------------ block selection


def test_blocks_of_instants_not_completed_or_after_as_of_are_skipped() -> None:
    blocks: list[DecodedBlock] = [_data("2", ("a", 20, "a2")), _data("3", ("b", 20, "b3")), _data("4", ("c", 20, "c4"))]
    assert _merged(BASE, blocks, completed={"1", "2", "4"}, as_of="3") == {
        "a": ("a2", "2"), "b": ("b1", "1"), "c": ("c1", "1")}


def test_a_rollback_block_drops_its_target_in_every_log_file_wherever_it_stands() -> None:
    blocks: list[DecodedBlock] = [
        _data("2", ("a", 20, "a2"), source="log1"), _data("3", ("b", 20, "b3"), source="log1"),
        RollbackBlock("log1", 0, "4", "3"),
        _data("3", ("c", 20, "c3"), source="log2"),  # after the rollback block, in another file
        CorruptBlock("log2", 100, 50), _delete("3", "a", source="log2")]
    assert _merged(BASE, blocks) == {"a": ("a2", "2"), "b": ("b1", "1"), "c": ("c1", "1")}


def test_a_log_only_slice_merges_its_logs() -> None:
    blocks: list[DecodedBlock] = [_data("2", ("a", 1, "a2"), ("b", 1, "b2")), _delete("3", "b"),
                                  _data("4", ("a", 0, "a4"))]
    assert _merged(None, blocks) == {"a": ("a2", "2")}
    assert _merged(None, [], completed=set()) == {}


def test_a_block_without_a_new_nullable_column_reads_it_as_null() -> None:
    wider = pa.schema([*BASE.schema, pa.field("extra", pa.string())])
    base = BASE.append_column("extra", pa.array(["x", "y", "z"]))
    out = merge_file_slice(base, [_data("2", ("a", 20, "a2"))], completed=ALL, rule=EVENT, schema=wider)
    assert out.column("extra").to_pylist() == [None, "y", "z"]
