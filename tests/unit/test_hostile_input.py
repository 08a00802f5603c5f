"""Hostile input without a JVM: fuzzed instant names, commit JSON and plan Avro; corrupt timeline files under the
CLI; empty partitions; and the security rules (loopback metrics, no code from config, deletes only inside the
table and only of files that markers or a rollback plan name)."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from hudi_clusterd.cli import main
from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.instant import Action, Instant, State, parse_instant_file_name, parse_instant_time
from hudi_clusterd.domain.plan import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    RequestedReplaceMetadata,
    SliceInfo,
)
from hudi_clusterd.domain.policy import parse_policy
from hudi_clusterd.errors import (
    ConfigError,
    ExecutionError,
    MetadataDecodeError,
    PlanError,
    StorageError,
    TimelineError,
)
from hudi_clusterd.io import avro as avro_io
from hudi_clusterd.io.avro import decode_requested_replace, encode_record, encode_requested_replace
from hudi_clusterd.io.markers import MARKERS_TYPE_FILE, marker_dir
from hudi_clusterd.io.rollback import rollback_pending
from hudi_clusterd.io.storage import Storage
from hudi_clusterd.ops.events import Event, TableObserved
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.runtime.metrics import Metrics
from hudi_clusterd.runtime.metrics_server import MetricsServer
from hudi_clusterd.runtime.reload import SettingsHolder
from hudi_clusterd.runtime.service import MAX_ATTEMPTS_PER_PLAN, Daemon, TableWorker
from hudi_clusterd.settings import settings_from_properties
from tests.builders import TableGen, make_policy

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

JSON_LEAF = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
             | st.text(max_size=8))
JSON = st.recursive(JSON_LEAF, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)


# --- instant file names -------------------------------------------------------------------------------------

INSTANT_NAMES = st.one_of(
    st.text(max_size=40),
    st.builds(lambda t, a, s: f"{t}.{a}{s}",
              st.text(alphabet="0123456789٠١٢३\n", min_size=0, max_size=20),
              st.sampled_from([*(a.value for a in Action), "inflight", "COMMIT", "bogus", ""]),
              st.sampled_from(["", ".requested", ".inflight", ".bogus", ".requested\n", "."])),
)


@FUZZ
@given(INSTANT_NAMES)
def test_parse_instant_file_name_fuzzed_gives_instant_none_or_timeline_error(name: str) -> None:
    try:
        inst = parse_instant_file_name(name)
    except TimelineError as e:
        assert repr(name) in str(e) or name in str(e)
        return
    if inst is None:
        return
    assert inst.time.isascii() and inst.time.isdigit() and len(inst.time) in (14, 17)
    assert name.startswith(inst.time + ".") and "\n" not in name
    with contextlib.suppress(TimelineError):  # an impossible date is a TimelineError, never a bare ValueError
        parse_instant_time(inst.time)


@pytest.mark.parametrize("name", ["20240101000000000.commit\n", "٢٠٢٤٠١٠١٠٠٠٠٠٠٠٠٠.commit",
                                  "20240101000000000.commit.requested\n"])
def test_parse_instant_file_name_trailing_newline_or_non_ascii_digits_is_not_an_instant(name: str) -> None:
    assert parse_instant_file_name(name) is None


@pytest.mark.parametrize("time", ["00000000000000000", "20249999000000000", "99999999999999"])
def test_parse_instant_time_impossible_date_is_timeline_error(time: str) -> None:
    with pytest.raises(TimelineError, match=time[:14]):
        parse_instant_time(time)


# --- commit JSON --------------------------------------------------------------------------------------------

WRITE_STAT_KEYS = ["fileId", "path", "partitionPath", "prevCommit", "numWrites", "numInserts", "totalWriteBytes",
                   "fileSizeInBytes", "minEventTime", "maxEventTime", "runtimeStats"]


def _assert_valid_commit(meta: CommitMetadata) -> None:
    """A decoded model holds the types its users rely on, and survives a write/read round trip."""
    for partition, stats in meta.partition_to_write_stats.items():
        assert isinstance(partition, str)
        for ws in stats:
            assert isinstance(ws, WriteStat) and isinstance(ws.file_id, str) and isinstance(ws.prev_commit, str)
            assert ws.path is None or isinstance(ws.path, str)
            assert ws.partition_path is None or isinstance(ws.partition_path, str)
            for n in (ws.num_writes, ws.num_inserts, ws.total_write_bytes, ws.file_size_in_bytes):
                assert type(n) is int
            for t in (ws.min_event_time, ws.max_event_time):
                assert t is None or type(t) is int
            hash((ws.partition_path, ws.file_id))
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.extra_metadata.items())
    assert isinstance(meta.operation_type, str)
    assert meta.replaced_groups() is not None
    assert CommitMetadata.from_json_bytes(meta.to_json_bytes(), "again") == meta


def _decode_commit_or_error(data: bytes) -> None:
    try:
        meta = CommitMetadata.from_json_bytes(data, "/t/.hoodie/20240101000000000.commit")
    except MetadataDecodeError as e:
        assert "20240101000000000.commit" in str(e)
        return
    _assert_valid_commit(meta)


@FUZZ
@given(st.binary(max_size=200))
def test_commit_from_json_bytes_fuzzed_bytes_decode_or_metadata_error(data: bytes) -> None:
    _decode_commit_or_error(data)


COMMIT_SHAPED = st.fixed_dictionaries(
    {"partitionToWriteStats": JSON | st.dictionaries(
        st.text(max_size=4), st.lists(st.dictionaries(st.sampled_from(WRITE_STAT_KEYS), JSON, max_size=6)) | JSON,
        max_size=2)},
    optional={"extraMetadata": JSON, "operationType": JSON, "compacted": JSON, "partitionToReplaceFileIds": JSON},
)


@FUZZ
@given(COMMIT_SHAPED)
def test_commit_from_json_bytes_fuzzed_structure_decodes_or_metadata_error(doc: dict[str, Any]) -> None:
    _decode_commit_or_error(json.dumps(doc).encode())


@pytest.mark.parametrize("data", [
    b'{"partitionToWriteStats": {"p": [{"fileId": "f", "numWrites": 1e999}]}}',  # int(inf): OverflowError
    b"[" * 100_000,  # json.loads: RecursionError
    b'{"partitionToWriteStats": {"p": [{"fileId": "f", "path": ["a"]}]}}',
    b'{"partitionToWriteStats": {"p": [{"fileId": "f", "partitionPath": {"a": 1}}]}}',
    b'{"partitionToWriteStats": {"p": [{"fileId": "f", "minEventTime": "soon"}]}}',
])
def test_commit_from_json_bytes_hostile_values_raise_metadata_error_naming_file(data: bytes) -> None:
    with pytest.raises(MetadataDecodeError, match=r"20240101000000000\.commit"):
        CommitMetadata.from_json_bytes(data, "/t/.hoodie/20240101000000000.commit")


# --- plan Avro ----------------------------------------------------------------------------------------------

def _valid_plan_meta() -> RequestedReplaceMetadata:
    slices = tuple(SliceInfo(f"f{i}-0", "p1", f"file:/t/p1/f{i}-0_0-1-2_20240101000000000.parquet")
                   for i in range(2))
    group = ClusteringGroup(slices, 1, {"TOTAL_IO_READ_MB": 1.0})
    return RequestedReplaceMetadata.for_plan(ClusteringPlan((group,), ClusteringStrategy("S", {"k": "v"})))


VALID_PLAN = encode_requested_replace(_valid_plan_meta())


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
@given(record=_hostile(_valid_plan_meta().to_avro()))
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
    record = {**_valid_plan_meta().to_avro(), **patch}
    monkeypatch_record["value"] = record
    if patch.get("version") == 1e300:
        _decode_plan_or_error(VALID_PLAN)
        return
    with pytest.raises(MetadataDecodeError, match=r"20240101000000000\.replacecommit\.requested"):
        decode_requested_replace(VALID_PLAN, "/t/.hoodie/20240101000000000.replacecommit.requested")


# --- corrupt timeline files under the CLI -------------------------------------------------------------------

def _table(tmp_path: Path, commits: int = 4) -> TableGen:
    gen = TableGen(tmp_path / "t")
    for i in range(commits):
        gen.commit({"p1": [float(i)], "p2": [float(i) + 0.5]})
    return gen


def _one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    assert code != 0
    assert "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    return lines[0]


@pytest.mark.parametrize("command", ["status", "schedule"])
@pytest.mark.parametrize("content", [b"{\n  \"partitionToWriteStats\" : {\n    \"p1\" : [ {", b"\xff\xfe\x00",
                                     b'{"partitionToWriteStats": {"p1": [{"fileId": "f", "numWrites": 1e999}]}}'])
def test_cli_corrupt_commit_file_prints_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           command: str, content: bytes) -> None:
    gen = _table(tmp_path)
    victim = sorted((gen.base / ".hoodie").glob("*.commit"))[-1]
    victim.write_bytes(content)
    props = tmp_path / "c.properties"  # sort columns: scheduling checks them against the newest commit's schema
    props.write_text("hoodie.clustering.plan.strategy.sort.columns=x\n")
    extra = ["--props", str(props)] if command == "schedule" else []
    line = _one_error_line(capsys, [command, "--base-path", str(gen.base), *extra])
    assert victim.name in line


def test_cli_schedule_corrupt_completed_clustering_prints_one_line_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = _table(tmp_path)
    t = gen.next_time()
    store = gen.table.timeline_store
    store.create(Instant(t, Action.REPLACE_COMMIT, State.REQUESTED), VALID_PLAN)
    store.create(Instant(t, Action.REPLACE_COMMIT, State.INFLIGHT), b"")
    store.create(Instant(t, Action.REPLACE_COMMIT, State.COMPLETED), b'{"operationType": "CLUSTER", "partitionTo')
    line = _one_error_line(capsys, ["schedule", "--base-path", str(gen.base), "--force"])
    assert f"{t}.replacecommit" in line


@pytest.mark.parametrize("command", ["status", "schedule"])
@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_cli_corrupt_plan_file_prints_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         command: str, cut: float) -> None:
    gen = _table(tmp_path)
    result = schedule(gen.table, make_policy(), force=True)
    assert result.instant is not None
    plan_file = gen.base / ".hoodie" / f"{result.instant}.replacecommit.requested"
    data = plan_file.read_bytes()
    plan_file.write_bytes(data[: int(len(data) * cut)])
    line = _one_error_line(capsys, [command, "--base-path", str(gen.base), *(["--force"] if command == "schedule"
                                                                                else [])])
    assert plan_file.name in line


@pytest.mark.parametrize("name", ["123.commit", "00000000000000000000.replacecommit.requested"])
def test_cli_malformed_instant_file_name_prints_one_line_naming_it(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   name: str) -> None:
    gen = _table(tmp_path)
    (gen.base / ".hoodie" / name).write_bytes(b"")
    assert name in _one_error_line(capsys, ["schedule", "--base-path", str(gen.base), "--force"])


def test_instant_age_of_impossible_pending_instant_is_timeline_error(tmp_path: Path) -> None:
    gen = _table(tmp_path, commits=1)
    (gen.base / ".hoodie" / "99999999999999999.replacecommit.requested").write_bytes(VALID_PLAN)
    (pending,) = gen.table.timeline().pending()
    with pytest.raises(TimelineError, match="99999999999999"):  # not a bare ValueError from strptime
        gen.table.instant_age_seconds(pending.time)


# --- empty partitions ---------------------------------------------------------------------------------------

def test_schedule_empty_partitions_are_ignored(tmp_path: Path) -> None:
    gen = _table(tmp_path)
    (gen.base / "empty").mkdir()
    (gen.base / "empty" / ".hoodie_partition_metadata").write_text("#partition metadata\npartitionDepth=1\n")
    (gen.base / "bare").mkdir()  # not even a metafile
    (gen.base / "zero").mkdir()
    (gen.base / "zero" / ".hoodie_partition_metadata").write_bytes(b"")
    assert "empty" in gen.table.list_partitions()
    result = schedule(gen.table, make_policy(), force=True)
    assert result.plan is not None and result.instant is not None
    assert {g.partition_path for g in result.plan.input_groups} == {"p1", "p2"}


def test_schedule_table_of_only_empty_partitions_plans_nothing(tmp_path: Path) -> None:
    gen = TableGen(tmp_path / "t")
    for p in ("a", "b"):
        (gen.base / p).mkdir()
        (gen.base / p / ".hoodie_partition_metadata").write_text("#partition metadata\npartitionDepth=1\n")
    result = schedule(gen.table, make_policy(), force=True)
    assert result.instant is None and result.plan is None


# --- security -----------------------------------------------------------------------------------------------

def test_metrics_default_address_is_loopback() -> None:
    # Given settings that name no metrics address, the host the daemon binds is the settings' default
    settings_, _ = settings_from_properties({"clusterd.tables": "t", "clusterd.table.t.base.path": "/x/t"})
    assert settings_.metrics_address is not None and settings_.metrics_address[0] == "127.0.0.1"
    with MetricsServer(settings_.metrics_address[0], 0, Metrics(), health=lambda: True) as server:
        assert server.url.startswith("http://127.0.0.1:")
        other = _non_loopback_address()
        if other is not None:  # not reachable on another interface of this host
            with pytest.raises(OSError), socket.create_connection((other, server.port), timeout=2):
                pass


def _non_loopback_address() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # UDP connect sends nothing; it only picks the outgoing interface
            addr = str(s.getsockname()[0])
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


@pytest.fixture
def trap_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module that, if ever imported, leaves a file behind."""
    sentinel = tmp_path / "imported"
    (tmp_path / "clusterd_trap.py").write_text(f"open({str(sentinel)!r}, 'w').close()\nclass Evil: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "clusterd_trap", raising=False)
    return sentinel


@pytest.mark.parametrize("key", ["hoodie.clustering.execution.strategy.class", "hoodie.clustering.plan.strategy.class"])
def test_policy_unknown_strategy_class_is_config_error_without_import(trap_module: Path, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        parse_policy({key: "clusterd_trap.Evil"}, source="test")
    with pytest.raises(ConfigError, match="clusterd_trap"):
        settings_from_properties({"clusterd.tables": "t", "clusterd.table.t.base.path": "/x/t",
                                  f"clusterd.table.t.{key}": "clusterd_trap.Evil"})
    assert not trap_module.exists() and "clusterd_trap" not in sys.modules


@pytest.mark.parametrize("uri", ["file:{base}-evil/p/f.parquet", "file:{base}/p/../../x.parquet",
                                 "file:///etc/passwd", "{base}/../t2/f.parquet", "s3://bucket{base}/f.parquet"])
def test_storage_rel_from_uri_sibling_or_traversal_is_refused(tmp_path: Path, uri: str) -> None:
    base = tmp_path / "t"
    with pytest.raises(StorageError, match="outside the table"):
        Storage(str(base)).rel_from_uri(uri.format(base=base))


def _pending_commit(gen: TableGen) -> str:
    t = gen.next_time()
    store = gen.table.timeline_store
    store.create(Instant(t, Action.COMMIT, State.REQUESTED))
    store.create(Instant(t, Action.COMMIT, State.INFLIGHT), b"")
    return t


def _victims(tmp_path: Path, base: Path, t: str) -> list[Path]:
    """Files a hostile marker or plan names: outside the table, in ``.hoodie``, and of another instant."""
    name = f"ffff-0_0-1-2_{t}.parquet"
    paths = [tmp_path / "outside" / name, tmp_path / "t-evil" / "p1" / name, base / ".hoodie" / name,
             base / "p1" / "aaaa-0_0-1-2_20200101000000000.parquet"]
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"keep me")
    return paths


def test_rollback_timeline_server_markers_naming_outside_files_delete_nothing_outside(tmp_path: Path) -> None:
    gen = _table(tmp_path, commits=1)
    t = _pending_commit(gen)
    victims = _victims(tmp_path, gen.base, t)
    own = gen.base / "p1" / f"own-0_0-1-2_{t}.parquet"
    own.write_bytes(b"written by the failed commit")
    folder = gen.base / marker_dir(t)
    folder.mkdir(parents=True)
    (folder / MARKERS_TYPE_FILE).write_text("TIMELINE_SERVER_BASED")
    (folder / "MARKERS0").write_text("\n".join([
        f"../outside/{victims[0].name}.marker.CREATE",
        f"../t-evil/p1/{victims[1].name}.marker.CREATE",
        f"p1/../../outside/{victims[0].name}.marker.CREATE",
        f".hoodie/{victims[2].name}.marker.CREATE",
        f"p1/{victims[3].name}.marker.CREATE",
        f"p1/{own.name}.marker.CREATE",
    ]))
    before = sorted(p.name for p in (gen.base / ".hoodie").iterdir())
    with pytest.raises(MetadataDecodeError, match=f"MARKERS0: marker partition .* is not a path inside the table; "
                                                  f"the markers of instant {t} are refused"):
        rollback_pending(gen.table, t, delete_requested=True)
    assert own.exists()  # the instant is refused as a whole: nothing deleted, nothing written
    assert all(v.read_bytes() == b"keep me" for v in victims)
    assert sorted(p.name for p in (gen.base / ".hoodie").iterdir()) == before


def test_rollback_resumed_plan_naming_outside_files_deletes_nothing_outside(tmp_path: Path) -> None:
    gen = _table(tmp_path, commits=1)
    t = _pending_commit(gen)
    victims = _victims(tmp_path, gen.base, t)
    own = gen.base / "p1" / f"own-0_0-1-2_{t}.parquet"
    own.write_bytes(b"written by the failed commit")
    files = [f"file:{v}" for v in victims] + [f"file:{gen.base}/p1/../../outside/{victims[0].name}",
                                              str(victims[0]), f"file:{own}"]
    plan = {"instantToRollback": {"commitTime": t, "action": "commit"},
            "RollbackRequests": [{"partitionPath": "p1", "fileId": "x", "latestBaseInstant": t,
                                  "filesToBeDeleted": files, "logBlocksToBeDeleted": None}],
            "version": 1}
    r = gen.next_time()  # an interrupted rollback: requested plan only
    gen.table.timeline_store.create(Instant(r, Action.ROLLBACK, State.REQUESTED),
                                    encode_record("HoodieRollbackPlan", plan))
    result = rollback_pending(gen.table, t, delete_requested=True)
    assert result is not None and result.resumed and result.rollback_time == r
    assert result.deleted_files == (f"p1/{own.name}",)
    assert all(v.read_bytes() == b"keep me" for v in victims)


def test_commit_metadata_round_trip_of_regular_commit_still_works(tmp_path: Path) -> None:
    """The stricter decoder still reads what a writer produces (guards the fixes above)."""
    gen = _table(tmp_path, commits=1)
    commit = next((gen.base / ".hoodie").glob("*.commit"))
    meta = CommitMetadata.from_json_bytes(commit.read_bytes(), commit.name)
    assert meta.operation_type == Operation.INSERT and len(meta.write_stats()) == 2
    _assert_valid_commit(meta)


# --- engine helpers (no JVM needed) -------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "escaped"), [
    ("/t/a b/f.parquet", "/t/a b/f.parquet"),
    ("/t/[x]/f.parquet", "/t/\\[x\\]/f.parquet"),
    ("/t/{a,b}/f.parquet", "/t/\\{a,b\\}/f.parquet"),
    ("/t/st*r?/f.parquet", "/t/st\\*r\\?/f.parquet"),
    ("/t/back\\slash/f.parquet", "/t/back\\\\slash/f.parquet"),
])
def test_literal_read_path_escapes_hadoop_glob_characters(path: str, escaped: str) -> None:
    from hudi_clusterd.engine.files import literal_read_path

    assert literal_read_path(path) == escaped


def test_spark_error_message_py4j_wrapper_gives_innermost_cause_naming_file() -> None:
    from hudi_clusterd.engine.files import spark_error_message

    text = ("An error occurred while calling o77.parquet.\n: org.apache.spark.SparkException: Job aborted.\n"
            "\tat org.apache.spark.Foo.bar(Foo.scala:1)\n"
            "Caused by: org.apache.spark.SparkException: [FAILED_READ_FILE] Task failed\n"
            "Caused by: java.lang.RuntimeException: file:/t/p1/f_0-1-2_1.parquet is not a Parquet file.\n"
            "\tat org.apache.parquet.hadoop.ParquetFileReader.readFooter(ParquetFileReader.java:622)\n")
    assert spark_error_message(RuntimeError(text)) == (
        "java.lang.RuntimeException: file:/t/p1/f_0-1-2_1.parquet is not a Parquet file.")
    assert spark_error_message(RuntimeError("[PATH_NOT_FOUND] Path does not exist: x\nmore")) == \
        "[PATH_NOT_FOUND] Path does not exist: x"


# --- the daemon: repeated failures drop a plan; a broken table does not stop the others ----------------------

class _BrokenRunner:
    """A group runner whose every group fails, as on a damaged input file."""

    def run_group(self, table: Any, instant: str, plan: Any, index: int, files: Any) -> list[WriteStat]:
        raise ExecutionError(f"group {index}: /t/p1/x.parquet: 0 bytes, not a Parquet file")

    def cancel(self, table: Any, instant: str) -> None:
        return None

    def close(self) -> None:
        return None


class _Recorded:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def notify(self, event: Event) -> None:
        self.events.append(event)


def _daemon(tables: dict[str, Path], max_commits: str = "1000", observer: _Recorded | None = None) -> Daemon:
    props = {"clusterd.tables": ",".join(tables), "clusterd.metrics.address": "off",
             "hoodie.clustering.async.max.commits": max_commits}
    props.update({f"clusterd.table.{n}.base.path": str(b) for n, b in tables.items()})
    return Daemon(SettingsHolder(settings_from_properties(props, source="test")[0]), _BrokenRunner(),
                  observer or _Recorded())


def test_table_worker_failing_groups_drop_plan_after_max_attempts(tmp_path: Path) -> None:
    gen = _table(tmp_path)
    instant = schedule(gen.table, make_policy(), force=True).instant
    assert instant is not None
    worker = TableWorker("t", _daemon({"t": gen.base}))
    for attempt in range(1, MAX_ATTEMPTS_PER_PLAN + 1):
        worker.tick()  # logged, not raised
        states = [i.state for i in gen.table.timeline() if i.time == instant]
        assert states == ([State.REQUESTED] if attempt < MAX_ATTEMPTS_PER_PLAN else []), attempt


def test_daemon_run_once_broken_table_is_logged_and_others_still_ticked(tmp_path: Path) -> None:
    broken, healthy = _table(tmp_path / "a"), _table(tmp_path / "b")
    (broken.base / ".hoodie" / "hoodie.properties").write_bytes(b"hoodie.table.version=99\n")
    recorded = _Recorded()
    daemon = _daemon({"a": broken.base, "b": healthy.base}, max_commits="4", observer=recorded)
    with capture_logs() as logs:
        failed = daemon.run_once()
    assert failed == ["a"]
    assert [e["event"] for e in logs if e["log_level"] == "error" and e["event"] == "tick failed"] == ["tick failed"]
    observed = [e for e in recorded.events if isinstance(e, TableObserved)]
    assert [e.table for e in observed] == ["b"]  # b was ticked: planned, tried, reported
    assert observed[0].pending_plans == 1
