"""Pending compactions and log compactions read from their plans on a version 6 timeline (layout 1), and the
file-system view they make: a new empty slice at the compaction's instant, which the version 6 writers' next logs
name; a compaction plan that is not one is refused naming its file."""

from __future__ import annotations

import json
from pathlib import Path

import fastavro
import pytest

from hudi_clusterd.domain.compaction import CompactionOperation, CompactionPlan
from hudi_clusterd.errors import MetadataDecodeError
from hudi_clusterd.formats.avro import decode_compaction_plan, encode_ocf
from hudi_clusterd.storage import open_storage
from hudi_clusterd.table.listing import file_system_view, list_data_files, pending_compaction
from hudi_clusterd.table.timeline_store import TimelineStore

T1, T2, T3 = "20240101000000001", "20240101000000002", "20240101000000003"
_STR = ["null", "string"]
# the fields of Hudi's HoodieCompactionPlan the daemon reads, written here for hand-made timelines
_OPERATION = {"type": "record", "name": "HoodieCompactionOperation", "fields": [
    {"name": "baseInstantTime", "type": _STR},
    {"name": "deltaFilePaths", "type": ["null", {"type": "array", "items": "string"}]},
    {"name": "dataFilePath", "type": _STR}, {"name": "fileId", "type": _STR}, {"name": "partitionPath", "type": _STR},
    {"name": "metrics", "type": ["null", {"type": "map", "values": "double"}]},
    {"name": "bootstrapFilePath", "type": _STR}]}
_PLAN = {"type": "record", "name": "HoodieCompactionPlan", "namespace": "org.apache.hudi.avro.model", "fields": [
    {"name": "operations", "type": ["null", {"type": "array", "items": _OPERATION}]},
    {"name": "extraMetadata", "type": ["null", {"type": "map", "values": "string"}]},
    {"name": "version", "type": ["int", "null"]}]}


def _plan_bytes(plan: CompactionPlan, schema: dict[str, object] = _PLAN) -> bytes:
    text = json.dumps(schema)
    return encode_ocf(text, fastavro.parse_schema(json.loads(text)), plan.to_avro())


def _touch(root: Path, rel: str, data: bytes = b"") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_a_pending_compaction_and_log_compaction_on_a_v6_timeline(tmp_path: Path) -> None:
    _touch(tmp_path, f".hoodie/{T1}.deltacommit", b"{}")
    for f in ("a", "b"):
        _touch(tmp_path, f"p/{f}_0-1-2_{T1}.parquet", b"x")
        _touch(tmp_path, f"p/.{f}_{T1}.log.1_0-1-2", b"x")
    compaction = CompactionPlan(
        (CompactionOperation("a", "p", T1, f"a_0-1-2_{T1}.parquet", (f".a_{T1}.log.1_0-1-2",)),))
    _touch(tmp_path, f".hoodie/{T2}.compaction.requested", _plan_bytes(compaction))
    log_compaction = CompactionPlan((CompactionOperation("b", "p", T1, "", (f".b_{T1}.log.1_0-1-2",)),))
    _touch(tmp_path, f".hoodie/{T3}.logcompaction.requested", _plan_bytes(log_compaction))
    _touch(tmp_path, f".hoodie/{T3}.logcompaction.inflight")
    _touch(tmp_path, f"p/.a_{T2}.log.1_0-1-2", b"x")  # a write after the compaction was requested
    store = TimelineStore(open_storage(str(tmp_path)))
    timeline = store.load()
    pending = pending_compaction(store, timeline)
    assert dict(pending.compaction) == {("p", "a"): T2}
    assert dict(pending.log_compaction) == {("p", "b"): T3}
    view = file_system_view(store, timeline, list_data_files(store.storage, ["p"]), ["p"], [])
    a = view.latest_slice_of(("p", "a"))
    assert a is not None and (a.base_instant, a.base_file) == (T2, None)
    assert [lf.file_name for lf in a.log_files] == [f".a_{T2}.log.1_0-1-2"]
    b = view.latest_slice_of(("p", "b"))  # a log compaction starts no slice
    assert b is not None and b.base_instant == T1 and view.is_pending_compaction(("p", "b"))


@pytest.mark.parametrize(("data", "match"), [
    (b"", "empty compaction plan"),
    (b"{}", "not an Avro container file"),
])
def test_a_compaction_plan_that_is_not_one_is_refused_naming_its_file(data: bytes, match: str) -> None:
    with pytest.raises(MetadataDecodeError, match=f"^x/T.compaction.requested: {match}"):
        decode_compaction_plan(data, "x/T.compaction.requested")


def test_another_record_is_refused() -> None:
    other = {**_PLAN, "name": "HoodieCleanerPlan"}
    with pytest.raises(MetadataDecodeError, match="expected a HoodieCompactionPlan Avro record, found Hoodie"):
        decode_compaction_plan(_plan_bytes(CompactionPlan(()), other), "src")


def test_an_operation_outside_the_table_is_refused() -> None:
    bad = CompactionPlan((CompactionOperation("a", "../up", T1),))
    with pytest.raises(MetadataDecodeError, match=r"src: not a HoodieCompactionPlan record .*partitionPath '\.\./up'"):
        decode_compaction_plan(_plan_bytes(bad), "src")
