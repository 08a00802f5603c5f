"""Timeline payloads of table versions 8 and 9 (Hudi 1.x, timeline layout 2): commit metadata and clustering plans as
Avro containers with the 1.x writer schemas, checked against the golden tables Apache Hudi wrote (no JVM)."""

from __future__ import annotations

import io
import json
import tomllib
import zipfile
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.domain.commit import CommitMetadata, Operation, RuntimeStats, WriteStat
from hudi_clusterd.domain.plan import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    RequestedReplaceMetadata,
    SliceInfo,
)
from hudi_clusterd.errors import MetadataDecodeError
from hudi_clusterd.formats import avro
from tests.support import FUZZ, REPO_ROOT, V8_V9_TABLES, require_shared

SIMPLE = "v9_txns_simple_nometa"
CLUSTERING = "20260307135709297"
CLUSTERING_PLAN = f"{CLUSTERING}.clustering.requested"
CLUSTERING_COMMIT = f"{CLUSTERING}_20260307135709818.replacecommit"
UPSERT_COMMIT = "20260307135700696_20260307135701669.commit"
UPSERT_PROFILE = "20260307135700696.inflight"
NONPART_CLUSTERING_COMMIT = "20260307135802835_20260307135803308.replacecommit"
SORT_AND_SIZE = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
SCHEMA_FILES = {
    "HoodieRequestedReplaceMetadata": (SIMPLE, CLUSTERING_PLAN),
    "HoodieReplaceCommitMetadata": (SIMPLE, CLUSTERING_COMMIT),
    "HoodieCommitMetadata": (SIMPLE, UPSERT_COMMIT),
}


@pytest.fixture(scope="module")
def timelines(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``.hoodie/timeline/`` folders of every golden v8/v9 table, unzipped once per module."""
    src = require_shared("reference", "hudi-tables", "cow")
    archives = sorted(src.glob("v[89]_*.zip"))
    if not archives:
        pytest.skip(f"no golden v8/v9 tables (v8_*.zip, v9_*.zip) in {src}")
    out = tmp_path_factory.mktemp("golden-v1x")
    for archive in archives:
        prefix = f"{archive.stem}/.hoodie/timeline/"
        with zipfile.ZipFile(archive) as zf:
            members = [m for m in zf.namelist() if m.startswith(prefix) and "/" not in m[len(prefix):]
                       and m[len(prefix):] and not m[len(prefix):].startswith("._")]
            zf.extractall(out, members)
    return out


def _timeline(timelines: Path, table: str) -> Path:
    folder = timelines / table / ".hoodie" / "timeline"
    if not folder.is_dir():
        pytest.skip(f"golden table {table} not found among the shared references")
    return folder


def _is_commit_metadata(name: str) -> bool:
    """Completed commits and replacecommits, and the workload profiles of inflight commits and replacecommits."""
    return (("_" in name and name.endswith((".commit", ".replacecommit")))
            or name.endswith(".replacecommit.inflight")
            or (name.endswith(".inflight") and name.count(".") == 1))


def _commit_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.stat().st_size and _is_commit_metadata(p.name))


def _read_long(buf: io.BytesIO) -> int:
    shift = acc = 0
    while True:
        byte = buf.read(1)[0]
        acc |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (acc >> 1) ^ -(acc & 1)


def _header(data: bytes) -> dict[bytes, bytes]:
    """The raw metadata map of an Avro container file's header (byte strings, exactly as stored)."""
    buf = io.BytesIO(data)
    assert buf.read(4) == b"Obj\x01"
    meta: dict[bytes, bytes] = {}
    while (count := _read_long(buf)) != 0:
        if count < 0:
            count = -count
            _read_long(buf)
        for _ in range(count):
            key = buf.read(_read_long(buf))
            meta[key] = buf.read(_read_long(buf))
    return meta


def _records(data: bytes) -> tuple[fastavro.reader, list[Any]]:
    reader = fastavro.reader(io.BytesIO(data))
    return reader, list(reader)


def _same_but_sync(ours: bytes, theirs: bytes) -> bool:
    """Equal bytes once the random 16-byte sync marker (the container's last 16 bytes) is set to theirs."""
    return ours.replace(ours[-16:], theirs[-16:]) == theirs


def _without_prev_base_file(record: dict[str, Any]) -> dict[str, Any]:
    """A commit record with ``prevBaseFile`` nulled (Hudi's update stats name the replaced base file; we keep
    ``prevCommit`` only)."""
    return {**record, "partitionToWriteStats": {
        p: [{**ws, "prevBaseFile": None} for ws in stats] for p, stats in record["partitionToWriteStats"].items()}}


def _golden_schema(timelines: Path, record: str) -> bytes:
    table, name = SCHEMA_FILES[record]
    return _header((_timeline(timelines, table) / name).read_bytes())[b"avro.schema"]


# --- the shipped writer schemas ---------------------------------------------------------------------------------


@pytest.mark.parametrize("record", sorted(SCHEMA_FILES))
def test_shipped_v2_writer_schema_is_hudis_header_byte_for_byte(timelines: Path, record: str) -> None:
    shipped = resources.files("hudi_clusterd.formats").joinpath("schemas", "v2", f"{record}.writer-schema.json")
    assert shipped.read_bytes() == _golden_schema(timelines, record)


def test_every_golden_file_of_a_record_embeds_the_same_schema(timelines: Path) -> None:
    seen: dict[str, set[bytes]] = {}
    for table in V8_V9_TABLES:
        folder = timelines / table / ".hoodie" / "timeline"
        for path in (p for p in folder.glob("*") if p.is_file() and p.stat().st_size):
            header = _header(path.read_bytes())
            assert list(header) == [b"avro.schema"], path.name  # codec null is the default: no avro.codec entry
            name = json.loads(header[b"avro.schema"])["name"]
            seen.setdefault(name, set()).add(header[b"avro.schema"])
    assert {"HoodieCommitMetadata", "HoodieReplaceCommitMetadata", "HoodieRequestedReplaceMetadata"} <= set(seen)
    assert all(len(schemas) == 1 for schemas in seen.values()), {k: len(v) for k, v in seen.items()}


def test_package_data_globs_ship_every_schema_file() -> None:
    globs = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "tool"]["setuptools"]["package-data"]["hudi_clusterd"]
    package = REPO_ROOT / "daemon" / "hudi_clusterd"
    files = [p.relative_to(package).as_posix() for p in (package / "formats" / "schemas").rglob("*") if p.is_file()]
    assert any(f.startswith("formats/schemas/v2/") for f in files)
    assert [f for f in files if not any(fnmatch(f, g) for g in globs)] == []


# --- decoding every golden commit file --------------------------------------------------------------------------


@pytest.mark.parametrize("table", V8_V9_TABLES)
def test_every_golden_commit_file_decodes_and_encodes_back_to_hudis_record(timelines: Path, table: str) -> None:
    files = _commit_files(_timeline(timelines, table))
    assert len(files) >= 4, table
    for path in files:
        data = path.read_bytes()
        meta = avro.decode_commit_metadata_v2(data, str(path))
        (golden,) = _records(data)[1]
        assert meta.operation_type == golden["operationType"], path.name
        assert meta.compacted is False
        is_replace = path.name.endswith(".replacecommit") and "_" in path.name
        assert (meta.partition_to_replace_file_ids is not None) == is_replace, path.name
        for partition, stats in meta.partition_to_write_stats.items():
            for ws in stats:
                if path.name.endswith(".inflight"):  # a workload profile: where records go, not files yet
                    assert ws.path is None and ws.file_size_in_bytes == 0, path.name
                else:
                    assert ws.partition_path == partition and ws.path is not None, path.name
                    assert ws.path.startswith(f"{partition}/" if partition else "") and ws.path.endswith(".parquet")
                    assert ws.path.rsplit("/", 1)[-1].startswith(f"{ws.file_id}_"), path.name
                    assert ws.path.endswith(f"_{path.name.split('_')[0]}.parquet"), path.name
        # every field we write is the value Hudi wrote (zeros and nulls included)
        assert meta.to_avro_dict() == _without_prev_base_file(golden), path.name
        again = avro.decode_commit_metadata_v2(avro.encode_commit_metadata_v2(meta), "again")
        assert again == meta, path.name


def test_golden_clustering_replacecommit_facts(timelines: Path) -> None:
    folder = _timeline(timelines, SIMPLE)
    meta = avro.decode_commit_metadata_v2((folder / CLUSTERING_COMMIT).read_bytes(), CLUSTERING_COMMIT)
    assert meta.operation_type == Operation.CLUSTER
    assert meta.partition_to_replace_file_ids == {
        "region=apac": ("501c09bc-09b2-4abe-81ee-31bd9cea901b-0", "859bcb77-dfd4-4b44-9ead-ed0ba8abe35a-0"),
        "region=eu": ("2ecf970b-9f50-488a-b55b-6ee0f6e29d3c-0",),
        "region=us": ("d32df875-21bd-41a4-941a-924fc7b82f01-0", "742a4f26-7e5c-4b1c-bb9a-d13433f75557-0"),
    }
    assert set(meta.partition_to_write_stats) == {"region=apac", "region=eu", "region=us"}
    (eu,) = meta.partition_to_write_stats["region=eu"]
    assert eu.file_id == "54893091-ea2c-4ad4-aee4-1fd87f68ad8c-0"
    assert eu.path == f"region=eu/{eu.file_id}_1-59-122_{CLUSTERING}.parquet"
    (apac,) = meta.partition_to_write_stats["region=apac"]
    assert apac.file_id == "e7a919f0-d0f4-4bd5-82ee-32f7e35168b8-0"
    assert apac.path == f"region=apac/{apac.file_id}_0-59-121_{CLUSTERING}.parquet"
    assert (apac.num_writes, apac.num_inserts, apac.total_write_bytes, apac.file_size_in_bytes) == (4, 4, 436858,
                                                                                                     436858)
    assert apac.runtime_stats == RuntimeStats(total_scan_time=0, total_upsert_time=0, total_create_time=102)
    for ws in meta.write_stats():
        assert ws.prev_commit == "null" and ws.num_writes == ws.num_inserts > 0
        assert ws.total_write_bytes == ws.file_size_in_bytes > 0
    assert json.loads(meta.schema or "")["name"] == "v9_txns_cow_simple_nometa_record"
    # the replaced groups are exactly the plan's input groups
    plan = avro.decode_requested_replace((folder / CLUSTERING_PLAN).read_bytes(), CLUSTERING_PLAN)
    assert plan is not None and plan.clustering_plan is not None
    assert meta.replaced_groups() == set(plan.clustering_plan.group_ids())


def test_golden_non_partitioned_clustering_keys_the_root_partition_as_empty(timelines: Path) -> None:
    path = _timeline(timelines, "v9_txns_nonpart_nometa") / NONPART_CLUSTERING_COMMIT
    meta = avro.decode_commit_metadata_v2(path.read_bytes(), path.name)
    assert meta.operation_type == Operation.CLUSTER
    assert list(meta.partition_to_replace_file_ids or {}) == [""]
    assert list(meta.partition_to_write_stats) == [""]
    assert all(ws.partition_path == "" and "/" not in (ws.path or "/") for ws in meta.write_stats())


def test_golden_upsert_commit_and_its_workload_profile(timelines: Path) -> None:
    folder = _timeline(timelines, SIMPLE)
    meta = avro.decode_commit_metadata_v2((folder / UPSERT_COMMIT).read_bytes(), UPSERT_COMMIT)
    assert meta.operation_type == "UPSERT_PREPPED" and meta.partition_to_replace_file_ids is None
    assert meta.extra_metadata["_hoodie.spark.sql.writes.prepped"] == "true"
    (ws,) = meta.write_stats()
    assert ws == WriteStat(
        file_id="742a4f26-7e5c-4b1c-bb9a-d13433f75557-0",
        path="region=us/742a4f26-7e5c-4b1c-bb9a-d13433f75557-0_0-10-23_20260307135700696.parquet",
        partition_path="region=us", prev_commit="20260307135657661", num_writes=3, num_update_writes=1,
        total_write_bytes=438538, file_size_in_bytes=438538, runtime_stats=RuntimeStats(0, 555, 0))
    profile = avro.decode_commit_metadata_v2((folder / UPSERT_PROFILE).read_bytes(), UPSERT_PROFILE)
    assert profile.operation_type == "UPSERT_PREPPED" and profile.extra_metadata == {}
    insert, update = profile.partition_to_write_stats["region=us"]
    assert (insert.file_id, insert.prev_commit, insert.path, insert.partition_path) == ("", "null", None, None)
    assert (update.file_id, update.prev_commit, update.num_update_writes) == (ws.file_id, "20260307135657661", 1)


# --- the golden clustering plan -----------------------------------------------------------------------------------


def test_golden_plan_decodes_and_reencodes_with_the_1x_schema(timelines: Path) -> None:
    data = (_timeline(timelines, SIMPLE) / CLUSTERING_PLAN).read_bytes()
    meta = avro.decode_requested_replace(data, CLUSTERING_PLAN)
    assert meta is not None and meta.is_clustering and meta.clustering_plan is not None
    plan = meta.clustering_plan
    assert plan.strategy.class_name == SORT_AND_SIZE and plan.strategy.params == {}
    assert plan.preserve_hoodie_metadata is True and plan.version == 1
    assert [g.partition_path for g in plan.input_groups] == ["region=apac", "region=eu", "region=us"]
    first = plan.input_groups[0].slices[0]
    assert first.file_id == "501c09bc-09b2-4abe-81ee-31bd9cea901b-0" and first.base_instant == "20260307135708654"
    assert first.data_file_path == ("file:/tmp/v9-gen/warehouse/v9_txns_cow_simple_nometa/region=apac/"
                                    "501c09bc-09b2-4abe-81ee-31bd9cea901b-0_0-55-112_20260307135708654.parquet")
    assert first.bootstrap_file_path == "" and first.delta_file_paths == ()

    ours = avro.encode_requested_replace_v2(meta)
    assert avro.decode_requested_replace(ours, "again") == meta
    assert _header(ours) == _header(data)
    reader, (record,) = _records(ours)
    assert reader.codec == "null"
    assert record["clusteringPlan"]["missingSchedulePartitions"] == []
    assert record == _records(data)[1][0]
    assert _same_but_sync(ours, data)  # the very bytes Hudi wrote


def test_golden_insert_overwrite_requested_with_null_fields_decodes(timelines: Path) -> None:
    folder = _timeline(timelines, SIMPLE)
    (path,) = folder.glob("*.replacecommit.requested")
    meta = avro.decode_requested_replace(path.read_bytes(), path.name)
    assert meta is not None and meta.operation_type is None and meta.clustering_plan is None
    assert not meta.is_clustering


def test_golden_clustering_replacecommit_reencodes_to_hudis_bytes(timelines: Path) -> None:
    data = (_timeline(timelines, SIMPLE) / CLUSTERING_COMMIT).read_bytes()
    ours = avro.encode_commit_metadata_v2(avro.decode_commit_metadata_v2(data, CLUSTERING_COMMIT))
    assert _same_but_sync(ours, data)


# --- round trips of our own metadata ------------------------------------------------------------------------------


def _clustering_commit() -> CommitMetadata:
    ws = WriteStat("n-0", "p=1/n-0_0-1-2_20240101000000003.parquet", "p=1", num_writes=5, num_inserts=5,
                   total_write_bytes=100, file_size_in_bytes=100, runtime_stats=RuntimeStats(0, 0, 7))
    return CommitMetadata({"p=1": (ws,)}, {"schema": '{"type":"record"}'}, Operation.CLUSTER,
                          partition_to_replace_file_ids={"p=1": ("a-0", "b-0")})


def _upsert_commit() -> CommitMetadata:
    ws = WriteStat("u-0", "u-0_0-1-2_20240101000000004.parquet", "", prev_commit="20240101000000001",
                   num_writes=9, num_update_writes=2, total_write_bytes=50, file_size_in_bytes=50,
                   min_event_time=1, max_event_time=2)
    return CommitMetadata({"": (ws,)}, {"schema": "{}", "k": "v"}, "UPSERT")


@pytest.mark.parametrize(("meta", "record"), [(_clustering_commit(), "HoodieReplaceCommitMetadata"),
                                              (_upsert_commit(), "HoodieCommitMetadata")])
def test_commit_metadata_round_trips_through_fastavro_with_hudis_header(
        timelines: Path, meta: CommitMetadata, record: str) -> None:
    data = avro.encode_commit_metadata_v2(meta)
    assert _header(data) == {b"avro.schema": _golden_schema(timelines, record)}
    reader, records = _records(data)
    assert reader.codec == "null" and len(records) == 1
    assert reader.writer_schema["name"] == f"org.apache.hudi.avro.model.{record}"
    assert records[0] == meta.to_avro_dict()
    assert CommitMetadata.from_mapping(records[0], "x") == meta
    assert avro.decode_commit_metadata_v2(data, "x") == meta


def test_write_stat_record_has_every_1x_field_in_schema_order() -> None:
    schema = json.loads(avro._writer(avro.COMMIT_WRITER_SCHEMA_V2)[0])
    write_stat = schema["fields"][0]["type"][1]["values"]["items"]
    ws = _clustering_commit().write_stats()[0]
    assert list(ws.to_avro()) == [f["name"] for f in write_stat["fields"]]
    assert list(_upsert_commit().to_avro_dict()) == [f["name"] for f in schema["fields"]]


def test_own_plan_round_trips_with_the_1x_schema() -> None:
    slices = (SliceInfo("f1-0", "p=1", "file:/t/p=1/f1-0_0-1-2_20240101000000001.parquet"),
              SliceInfo("f2-0", "p=1", "file:/t/p=1/f2-0_1-1-3_20240101000000002.parquet"))
    plan = ClusteringPlan((ClusteringGroup(slices, 1, {"TOTAL_IO_READ_MB": 1.5}),),
                          ClusteringStrategy(SORT_AND_SIZE, {"hoodie.clustering.plan.strategy.sort.columns": "a"}))
    meta = RequestedReplaceMetadata.for_plan(plan)
    data = avro.encode_requested_replace_v2(meta)
    assert avro.decode_requested_replace(data, "x") == meta
    (record,) = _records(data)[1]
    assert record["clusteringPlan"]["missingSchedulePartitions"] == []
    # a requested replacecommit without a plan (insert_overwrite) encodes too
    empty = RequestedReplaceMetadata(None, None)
    assert avro.decode_requested_replace(avro.encode_requested_replace_v2(empty), "x") == empty


_PARTS = st.sampled_from(["", "p=1", "2024/01/02", "a b"])
_LONGS = st.integers(min_value=0, max_value=2**63 - 1)


@st.composite
def _commits(draw: st.DrawFn) -> CommitMetadata:
    p2ws: dict[str, tuple[WriteStat, ...]] = {}
    for partition in draw(st.sets(_PARTS, max_size=3)):
        stats = []
        for i in range(draw(st.integers(0, 3))):
            fid = f"f{i}-0"
            path = f"{partition}/{fid}_0-1-2_20240101000000001.parquet" if partition else f"{fid}_0.parquet"
            stats.append(WriteStat(
                fid, draw(st.sampled_from([path, None])), draw(st.sampled_from([partition, None])),
                prev_commit=draw(st.sampled_from(["null", "20240101000000001"])),
                num_writes=draw(_LONGS), num_deletes=draw(_LONGS), num_update_writes=draw(_LONGS),
                num_inserts=draw(_LONGS), total_write_bytes=draw(_LONGS), total_write_errors=draw(_LONGS),
                file_size_in_bytes=draw(_LONGS), min_event_time=draw(st.none() | _LONGS),
                max_event_time=draw(st.none() | _LONGS),
                runtime_stats=draw(st.none() | st.builds(RuntimeStats, _LONGS, _LONGS, _LONGS))))
        p2ws[partition] = tuple(stats)
    replaced = draw(st.none() | st.dictionaries(_PARTS, st.lists(st.text(min_size=1), max_size=3).map(tuple)))
    return CommitMetadata(p2ws, draw(st.dictionaries(st.text(), st.text(), max_size=3)),
                          draw(st.sampled_from([Operation.CLUSTER, "UPSERT", "INSERT", Operation.UNKNOWN])),
                          draw(st.booleans()), replaced)


@FUZZ
@given(meta=_commits())
def test_any_commit_metadata_round_trips(meta: CommitMetadata) -> None:
    assert avro.decode_commit_metadata_v2(avro.encode_commit_metadata_v2(meta), "x") == meta


# --- what is not 1.x commit metadata -----------------------------------------------------------------------------


def test_empty_content_is_empty_metadata() -> None:
    assert avro.decode_commit_metadata_v2(b"", "x.commit") == CommitMetadata()


@pytest.mark.parametrize("data", [
    _clustering_commit().to_json_bytes(),  # the version-6 JSON: Hudi 1.x reads only Avro here
    b"{}", b"not avro", b"Obj\x01", b"Obj\x01\x02garbage",
])
def test_non_avro_content_raises_naming_the_source(data: bytes) -> None:
    with pytest.raises(MetadataDecodeError, match=r"20240101000000005_20240101000000006\.commit"):
        avro.decode_commit_metadata_v2(data, ".hoodie/timeline/20240101000000005_20240101000000006.commit")


def test_truncated_container_raises_naming_the_source() -> None:
    data = avro.encode_commit_metadata_v2(_clustering_commit())
    for cut in (len(data) // 2, len(data) - 17):
        with pytest.raises(MetadataDecodeError, match=r"t\.replacecommit"):
            avro.decode_commit_metadata_v2(data[:cut], "t.replacecommit")


def test_another_record_is_not_commit_metadata(timelines: Path) -> None:
    plan = (_timeline(timelines, SIMPLE) / CLUSTERING_PLAN).read_bytes()
    with pytest.raises(MetadataDecodeError, match=r"clustering\.requested.*HoodieRequestedReplaceMetadata"):
        avro.decode_commit_metadata_v2(plan, CLUSTERING_PLAN)


def test_replace_record_with_null_replaced_ids_stays_a_replace() -> None:
    text, parsed = avro._writer(avro.REPLACE_COMMIT_WRITER_SCHEMA_V2)
    record = {**_clustering_commit().to_avro_dict(), "partitionToReplaceFileIds": None}
    meta = avro.decode_commit_metadata_v2(avro.encode_ocf(text, parsed, record), "x")
    assert meta.partition_to_replace_file_ids == {}
    assert _header(avro.encode_commit_metadata_v2(meta))[b"avro.schema"] == text.encode()


def _hostile(field: str, value: str) -> bytes:
    """A replacecommit of ours with one path changed: a write stat field, a partition key or a replaced one."""
    text, parsed = avro._writer(avro.REPLACE_COMMIT_WRITER_SCHEMA_V2)
    record = _clustering_commit().to_avro_dict()
    if field == "partition":
        record["partitionToWriteStats"] = {value: record["partitionToWriteStats"]["p=1"]}
    elif field == "replaced":
        record["partitionToReplaceFileIds"] = {value: ["a-0"]}
    else:
        record["partitionToWriteStats"]["p=1"][0][field] = value
    return avro.encode_ocf(text, parsed, record)


@pytest.mark.parametrize(("field", "value"), [
    ("path", "../outside.parquet"), ("path", "/abs/f.parquet"), ("partitionPath", "p=1/../.."),
    ("path", ".hoodie/timeline/x"), ("partition", ".."), ("replaced", "/etc"),
])
def test_paths_leading_out_of_the_table_raise_naming_the_source(field: str, value: str) -> None:
    data = _hostile(field, value)
    with pytest.raises(MetadataDecodeError, match=r"t/\.hoodie/timeline/1_2\.replacecommit"):
        avro.decode_commit_metadata_v2(data, "t/.hoodie/timeline/1_2.replacecommit")
