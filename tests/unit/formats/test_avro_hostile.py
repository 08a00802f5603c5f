"""Hostile plan Avro (mutated and random bytes, hostile records and types): a valid plan or a
MetadataDecodeError naming the file."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.domain.plan import RequestedReplaceMetadata
from hudi_clusterd.errors import MetadataDecodeError, PlanError
from hudi_clusterd.formats import avro as avro_io
from hudi_clusterd.formats.avro import decode_requested_replace, encode_requested_replace
from tests.builders import JSON, valid_plan_meta
from tests.support import FUZZ

VALID_PLAN = encode_requested_replace(valid_plan_meta())


def _assert_valid_plan(meta: RequestedReplaceMetadata | None) -> None:
    if meta is None:
        return
    assert meta.operation_type is None or isinstance(meta.operation_type, str)
    plan = meta.clustering_plan
    if plan is None:
        return
    assert isinstance(plan.strategy.class_name, str)
    try:
        assert isinstance(plan.strategy.work_order.sort_columns, tuple)
    except PlanError as e:
        assert "strategyParams" in str(e)
    assert type(plan.input_bytes) is int
    for gid in plan.group_ids():
        hash(gid)
    for group in plan.input_groups:
        assert type(group.num_output_file_groups) is int
        for s in group.slices:
            assert all(isinstance(v, str) for v in (s.file_id, s.partition_path, s.data_file_path,
                                                     s.bootstrap_file_path, *s.delta_file_paths))
            assert isinstance(s.file_name, str)


def _decode_plan_or_error(data: bytes) -> None:
    try:
        meta = decode_requested_replace(data, "/t/.hoodie/20240101000000000.replacecommit.requested")
    except MetadataDecodeError as e:
        assert "20240101000000000.replacecommit.requested" in str(e)
        return
    _assert_valid_plan(meta)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(VALID_PLAN) - 1), st.integers(0, 255)), max_size=6),
       st.integers(0, len(VALID_PLAN)))
def test_decode_requested_replace_mutated_bytes_decode_or_metadata_error(edits: list[tuple[int, int]],
                                                                          cut: int) -> None:
    data = bytearray(VALID_PLAN)
    for pos, value in edits:
        data[pos] = value
    _decode_plan_or_error(bytes(data[:cut]) if cut else bytes(data))


@FUZZ
@given(st.binary(max_size=120))
def test_decode_requested_replace_random_bytes_decode_or_metadata_error(tail: bytes) -> None:
    _decode_plan_or_error(b"Obj\x01" + tail)


def _hostile(node: Any) -> st.SearchStrategy[Any]:
    """The valid record's shape, any node of which may be replaced by an arbitrary JSON-like value."""
    if isinstance(node, dict):
        inner: st.SearchStrategy[Any] = st.fixed_dictionaries({k: _hostile(v) for k, v in node.items()})
    elif isinstance(node, list) and node:
        inner = st.lists(_hostile(node[0]), max_size=3)
    else:
        inner = st.just(node)
    return st.one_of(inner, inner, inner, JSON | st.binary(max_size=4))


@FUZZ
@given(record=_hostile(valid_plan_meta().to_avro()))
def test_decode_requested_replace_hostile_record_decodes_or_metadata_error(record: Any,
                                                                           monkeypatch_record: Any) -> None:
    monkeypatch_record["value"] = record
    _decode_plan_or_error(VALID_PLAN)


@pytest.fixture
def monkeypatch_record(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Whatever the container decoder returns is ``holder["value"]`` (the record a hostile writer schema gives)."""
    holder: dict[str, Any] = {}
    monkeypatch.setattr(avro_io, "decode_ocf", lambda data, source: holder["value"])
    return holder


@pytest.mark.parametrize("patch", [
    {"version": 1e300},  # int(1e300) is fine, but an Avro writer schema may give float inf
    {"version": float("inf")},
    {"clusteringPlan": {"inputGroups": [{"slices": [{"fileId": "f", "dataFilePath": 7}]}]}},
    {"clusteringPlan": {"inputGroups": [{"slices": [{"fileId": "f", "partitionPath": ["p"]}]}]}},
    {"clusteringPlan": {"inputGroups": [{"slices": [{"fileId": "f", "deltaFilePaths": [1, 2]}]}]}},
    {"clusteringPlan": {"strategy": {"strategyClassName": {"x": 1}}, "inputGroups": []}},
    {"operationType": 5},
])
def test_decode_requested_replace_wrong_types_raise_metadata_error_naming_file(
        patch: dict[str, Any], monkeypatch_record: dict[str, Any]) -> None:
    record = {**valid_plan_meta().to_avro(), **patch}
    monkeypatch_record["value"] = record
    if patch.get("version") == 1e300:
        _decode_plan_or_error(VALID_PLAN)
        return
    with pytest.raises(MetadataDecodeError, match=r"20240101000000000\.replacecommit\.requested"):
        decode_requested_replace(VALID_PLAN, "/t/.hoodie/20240101000000000.replacecommit.requested")
