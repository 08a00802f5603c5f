"""The metadata deltacommit of a clustering and its rollback, per table version, on a minimal metadata table as
Hudi initialises it (one ``files`` file group, its 80-byte init log file, an init deltacommit)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hudi_clusterd.domain.commit import CommitMetadata, Operation, WriteStat
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.errors import MetadataDecodeError, MetadataTableError, TransientStorageError
from hudi_clusterd.formats.avro import encode_commit_metadata_v2, encode_record
from hudi_clusterd.formats.log import LogFileName, decode_log_file
from hudi_clusterd.storage import FileInfo, StorageSpec, is_stale_temp_file, open_storage
from hudi_clusterd.storage.local import LocalStorage
from hudi_clusterd.table.metadata.writer import MetadataTable
from tests.builders import small_table
from tests.support import METADATA_INIT as INIT
from tests.support import add_metadata_table, new_metadata_table

T = "20261126010101000"
R = "20261126010202000"


def mdt_table(base: Path, version: int) -> MetadataTable:
    """A data table of ``version`` declaring ``files``, and its metadata table right after Hudi initialised it."""
    config = TableConfig.for_new_table(name="t", record_key_fields=["id"], partition_fields=["p"],
                                       table_version=version)
    config = TableConfig({**config.raw, "hoodie.table.metadata.partitions": "files"})
    new_metadata_table(base, version)
    times = iter(["20261126010101500", "20261126010202500", "20261126010303500"])
    storage = open_storage(str(base))
    storage.makedirs("p=a")
    return MetadataTable(storage, config, before_write=lambda: None, new_time=lambda: next(times))


def clustering(base: Path) -> CommitMetadata:
    path = base / "p=a" / f"f1-0_0-1-1_{T}.parquet"
    path.write_bytes(b"x" * 1234)
    stat = WriteStat(file_id="f1-0", path=f"p=a/{path.name}", partition_path="p=a", file_size_in_bytes=1234)
    return CommitMetadata({"p=a": (stat,)}, {}, Operation.CLUSTER, partition_to_replace_file_ids={"p=a": ("f0-0",)})


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_file())


@pytest.mark.parametrize("version", [6, 9])
def test_a_clustering_commits_one_log_file_and_a_deltacommit_then_its_rollback_removes_both(tmp_path: Path,
                                                                                            version: int) -> None:
    mdt = mdt_table(tmp_path, version)
    meta = clustering(tmp_path)
    done = mdt.commit(T, meta, {"p=a": [meta.write_stats()[0].path or ""]}, [T])
    # one new log file: v6 rolls over to the slice's next version, v9 names the deltacommit's own instant
    files = tmp_path / ".hoodie" / "metadata" / "files"
    logs = [n for n in names(files) if n.startswith(".files-0000-0_")]
    assert len(logs) == 2
    [ours] = [LogFileName.parse(n) for n in logs if not n.endswith("_0-0-0")]
    assert ours is not None
    if version == 6:
        assert (ours.base_instant, ours.version) == (INIT[6], 2)
    else:
        assert (ours.base_instant, ours.version) == (T, 1)
    assert done.log_files == (f".hoodie/metadata/files/{ours}",)
    [block] = decode_log_file((files / str(ours)).read_bytes())
    assert block.header  # INSTANT_TIME and SCHEMA
    # and the files partition lists the new file, with its size, once the data instant completes
    assert mdt.live_files([T]) == {"p=a": {f"f1-0_0-1-1_{T}.parquet": 1234}}
    assert mdt.live_files([]) == {}  # the data instant is not complete: readers skip its block
    timeline = tmp_path / ".hoodie" / "metadata" / ".hoodie" / ("timeline" if version >= 8 else "")
    ours_instant = [n for n in names(timeline) if n.startswith(T)]
    if version == 6:
        assert ours_instant == [f"{T}.deltacommit", f"{T}.deltacommit.inflight", f"{T}.deltacommit.requested"]
        inflight = json.loads((timeline / f"{T}.deltacommit.inflight").read_text())
        [stat] = inflight["partitionToWriteStats"]["files"]
        assert stat["path"] == f"files/{ours}" and stat["prevCommit"] == INIT[6]
    else:
        assert ours_instant == [f"{T}.deltacommit.inflight", f"{T}.deltacommit.requested",
                                f"{T}_20261126010101500.deltacommit"]
        assert (timeline / f"{T}.deltacommit.requested").stat().st_size == 0
    # When the clustering is rolled back (its data commit never completed)
    deleted = mdt.rollback(T, R)
    # Then its log file and instant files are gone, and a completed metadata rollback records it
    assert deleted == [f"files/{ours}"]
    assert not (files / str(ours)).exists()
    assert not [n for n in names(timeline) if n.startswith(T)]
    rb = R + ("006" if version == 6 else "")
    rollback = [n for n in names(timeline) if n.startswith(rb)]
    assert len(rollback) == 3 and any(n.endswith(".rollback") for n in rollback), rollback
    assert mdt.live_files([T]) == {}


# Apache Hudi 0.15's log file pattern (FSUtils.LOG_FILE_PATTERN), which it applies with Matcher.find(): anchored
# at the start only, so any longer name that begins like a log file is taken for one
HUDI_0_15_LOG_FILE = re.compile(r"\.(.+)_(.*)\.(log|archive)\.(\d+)(_((\d+)-(\d+)-(\d+))(.cdc)?)?")


@pytest.mark.parametrize("version", [6, 9])
def test_the_temporary_files_of_a_metadata_commit_are_never_taken_for_log_files(
        tmp_path: Path, version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # A reader listing a metadata partition while a log file is being written must not list its temporary file:
    # it is renamed away before the reader opens it (seen as a failed micro-batch of Hudi 0.15)
    mdt = mdt_table(tmp_path, version)
    meta = clustering(tmp_path)
    temporary: list[str] = []
    link = os.link

    def recording_link(src: str, dst: str) -> None:
        temporary.append(os.path.basename(src))
        link(src, dst)

    monkeypatch.setattr(os, "link", recording_link)
    mdt.commit(T, meta, {"p=a": [meta.write_stats()[0].path or ""]}, [T])
    assert len(temporary) >= 3  # the log file and the instant's states
    now = time.time()
    for name in temporary:
        assert HUDI_0_15_LOG_FILE.match(name) is None, name
        assert ".log" not in name, name  # Hudi 0.15 looks no further at names without it
        assert is_stale_temp_file(FileInfo(name, 1, 0, False), now, 60), name  # recovery knows it for ours
    folders = {f"{tmp_path}/{f}" for f in mdt.written_folders()}
    assert f"{tmp_path}/.hoodie/metadata/files" in folders
    assert any(f.endswith(".hoodie/metadata/.hoodie" + ("/timeline" if version >= 8 else "")) for f in folders)


@pytest.mark.parametrize("version", [6, 9])
def test_an_interrupted_metadata_rollback_resumes_with_its_instant(tmp_path: Path, version: int) -> None:
    mdt = mdt_table(tmp_path, version)
    meta = clustering(tmp_path)
    mdt.commit(T, meta, {"p=a": []}, [T])
    timeline = tmp_path / ".hoodie" / "metadata" / ".hoodie" / ("timeline" if version >= 8 else "")
    # Given a rollback that stopped after its plan (the kill came before it deleted anything)
    store = mdt.timeline_store()
    real = store.storage.delete
    calls = {"n": 0}

    def dies_on_first_delete(rel: str, *, missing_ok: bool = True) -> bool:
        calls["n"] += 1
        raise OSError("killed")

    store.storage.delete = dies_on_first_delete  # type: ignore[method-assign]
    mdt.storage.delete = dies_on_first_delete  # type: ignore[method-assign]
    with pytest.raises(OSError):
        mdt.rollback(T, R)
    mdt.storage.delete = real  # type: ignore[method-assign]
    rb = R + ("006" if version == 6 else "")
    assert f"{rb}.rollback.requested" in names(timeline)
    # When the rollback runs again, under a new data rollback time
    mdt2 = MetadataTable(mdt.data_storage, mdt.data_config, before_write=lambda: None,
                         new_time=lambda: "20261126010909000")
    mdt2.rollback(T, "20261126010808000")
    # Then it finished the first rollback instant, not a second one
    assert not [n for n in names(timeline) if n.startswith(T)]
    assert not [n for n in names(timeline) if n.startswith("20261126010808")]
    assert any(n.startswith(rb) and n.endswith(".rollback") for n in names(timeline))


@pytest.mark.parametrize("version", [6, 9])
def test_a_metadata_rollback_killed_after_it_completed_finishes_removing_its_deltacommit(tmp_path: Path,
                                                                                         version: int) -> None:
    mdt = mdt_table(tmp_path, version)
    mdt.commit(T, clustering(tmp_path), {"p=a": []}, [T])
    timeline = tmp_path / ".hoodie" / "metadata" / ".hoodie" / ("timeline" if version >= 8 else "")
    # Given a rollback killed right after it completed, before it removed the deltacommit's instant files
    store = mdt.timeline_store()
    real = store.delete_all

    def dies(inst: Instant) -> None:
        raise OSError("killed")

    store.delete_all = dies  # type: ignore[method-assign]
    mdt.timeline_store = lambda: store  # type: ignore[method-assign]
    with pytest.raises(OSError):
        mdt.rollback(T, R)
    store.delete_all = real  # type: ignore[method-assign]
    rb = R + ("006" if version == 6 else "")
    assert any(n.startswith(rb) and n.endswith(".rollback") for n in names(timeline))
    assert [n for n in names(timeline) if n.startswith(T)]
    # When the data table's rollback resumes with its own time, the metadata rollback finishes: its deltacommit's
    # instant files go, and no second rollback instant is made
    mdt2 = MetadataTable(mdt.data_storage, mdt.data_config, before_write=lambda: None,
                         new_time=lambda: "20261126010909000")
    assert mdt2.rollback(T, R) == []
    assert not [n for n in names(timeline) if n.startswith(T)]
    assert len([n for n in names(timeline) if ".rollback" in n]) == len(
        [n for n in names(timeline) if n.startswith(rb)])


def test_a_rollback_after_the_metadata_table_was_compacted_past_it_is_refused(tmp_path: Path) -> None:
    mdt = mdt_table(tmp_path, 9)
    meta = clustering(tmp_path)
    mdt.commit(T, meta, {"p=a": []}, [T])
    timeline = tmp_path / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    compaction = "20261126010150000"
    (timeline / f"{compaction}.compaction.requested").write_bytes(b"")
    (timeline / f"{compaction}_20261126010151000.commit").write_bytes(encode_commit_metadata_v2(CommitMetadata()))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(MetadataTableError, match=f"compacted by {compaction}.*Restore"):
        mdt.rollback(T, R)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_a_table_handle_keeps_one_metadata_table_with_its_prepared_column_ranges(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a table whose properties gained a metadata table (columns indexed) after it was opened
    gen = small_table(tmp_path, commits=1)
    add_metadata_table(gen.base)
    props = gen.base / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("metadata.partitions=files", "metadata.partitions=files,column_stats"))
    assert gen.table.metadata_table() is None
    # When the table is checked, its metadata table is built once and prepares a new file's column ranges
    with pytest.raises(MetadataTableError, match="column_stats has no file group"):
        gen.table.check_clusterable()
    mdt = gen.table.metadata_table()
    assert mdt is not None and gen.table.metadata_table() is mdt
    bf = gen.table.list_base_files()[0]
    ws = WriteStat(file_id=bf.file_id, path=bf.relative_path, partition_path=bf.partition_path,
                   file_size_in_bytes=bf.size)
    schema = gen.table.latest_schema()
    assert schema
    mdt.prepare(schema, [ws])
    # Then the commit of the same handle finds them without reading the footer again
    footers: list[object] = []
    monkeypatch.setattr(pq, "ParquetFile", lambda f: footers.append(f))
    meta = CommitMetadata({bf.partition_path: (ws,)}, {"schema": schema}, Operation.CLUSTER)
    assert gen.table.metadata_table() is mdt
    assert mdt.indexes.records("20990101000000000", meta, {}, [])["column_stats"]
    assert footers == []
    # and a change of the table's properties gives the handle a new metadata table
    props.write_text(props.read_text() + "hoodie.some.key=1\n")
    with pytest.raises(MetadataTableError):
        gen.table.check_clusterable()
    assert gen.table.metadata_table() is not mdt


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_rollback_plan_names_log_files_by_uri_with_the_table_scheme(scheme: str) -> None:
    # Given a data table on an object store (nothing is read: the plan is built from names)
    config = TableConfig.for_new_table(name="t", record_key_fields=["id"], partition_fields=["p"], table_version=6)
    data = open_storage(StorageSpec(f"{scheme}://bucket/tbl"))
    mdt = MetadataTable(data, config, before_write=lambda: None, new_time=lambda: R)
    log_file = f"files/.files-0000-0_{T}.log.1_0-0-0"
    # When the metadata rollback of instant T is planned
    plan = mdt._rollback_plan(T, [log_file])
    # Then the files to delete are full URIs of the metadata table, under the data table's bucket and scheme
    assert [r["filesToBeDeleted"] for r in plan["RollbackRequests"]] == [
        [f"{scheme}://bucket/tbl/.hoodie/metadata/{log_file}"]]
    assert mdt.storage.rel_from_uri(plan["RollbackRequests"][0]["filesToBeDeleted"][0]) == log_file


@pytest.mark.parametrize("hostile", ["{base}/../x", "/etc/x", "{mdt}/files/a\\..\\b", "s3://other-bucket/x",
                                     "{mdt}/files/x\x00"])
def test_an_interrupted_metadata_rollback_whose_plan_names_a_path_outside_is_refused(tmp_path: Path,
                                                                                    hostile: str) -> None:
    # Given an interrupted metadata rollback whose plan also names a path outside the metadata table
    base = tmp_path / "t"
    mdt = mdt_table(base, 9)
    mdt.commit(T, clustering(base), {"p=a": []}, [T])
    (tmp_path / "x").write_bytes(b"canary")
    store = mdt.timeline_store()
    requested = Instant(R, Action.ROLLBACK, State.REQUESTED)
    bad = hostile.format(base=base, mdt=base / ".hoodie" / "metadata")
    plan = {"instantToRollback": {"commitTime": T, "action": "deltacommit"},
            "RollbackRequests": [{"partitionPath": "files", "fileId": "files-0000-0", "latestBaseInstant": T,
                                  "filesToBeDeleted": [bad], "logBlocksToBeDeleted": None}], "version": 1}
    store.create(requested, encode_record("HoodieRollbackPlan", plan))
    before = {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    # When the rollback runs again, then it is refused in one line naming the plan's file and the path
    with pytest.raises(MetadataDecodeError, match=rf"{R}\.rollback\.requested: filesToBeDeleted: path "
                                                  rf"{re.escape(repr(bad))} is outside the table's storage"):
        mdt.rollback(T, "20261126010808000")
    # And nothing was written or deleted
    assert {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


# A metadata-table file the store does not answer for is not a file that is gone: the rollback does not delete a
# log file it could not read, and the next commit does not take an older log file's schema for the newest's.

OURS = re.compile(r"^files/\.files-0000-0_.*\.log\.\d+_(?!0-0-0$)")  # not Hudi's initial log file


class _Unanswered(LocalStorage):
    """Reads of our log files time out; everything else is served."""

    def read_bytes(self, rel: str) -> bytes:
        if OURS.search(rel):
            raise TransientStorageError(f"get {self.full_path(rel)}: cannot reach the endpoint (timed out)")
        return super().read_bytes(rel)


def _ours(base: Path) -> list[Path]:
    return [p for p in (base / ".hoodie" / "metadata" / "files").iterdir()
            if OURS.search(f"files/{p.name}")]


def _unanswered(mdt: MetadataTable) -> None:
    mdt.storage.__class__ = _Unanswered


@pytest.mark.parametrize("version", [6, 9])
def test_a_rollback_does_not_delete_a_log_file_it_could_not_read(tmp_path: Path, version: int) -> None:
    mdt = mdt_table(tmp_path, version)
    meta = clustering(tmp_path)
    mdt.commit(T, meta, {"p=a": [meta.write_stats()[0].path or ""]}, [T])
    [log_file] = _ours(tmp_path)
    _unanswered(mdt)
    with pytest.raises(TransientStorageError, match="timed out"):
        mdt.rollback(T, R)
    assert log_file.exists()


def test_a_commit_does_not_take_an_older_schema_for_a_log_file_it_could_not_read(tmp_path: Path) -> None:
    # version 6 appends a new log version to the file group's slice, under the schema its newest block carries
    mdt = mdt_table(tmp_path, 6)
    meta = clustering(tmp_path)
    mdt.commit(T, meta, {"p=a": [meta.write_stats()[0].path or ""]}, [T])
    fresh = MetadataTable(mdt.data_storage, mdt.data_config, before_write=lambda: None,
                          new_time=lambda: "20261126010909000")
    _unanswered(fresh)
    with pytest.raises(TransientStorageError, match="timed out"):
        fresh.commit("20261126020202000", meta, {"p=a": [meta.write_stats()[0].path or ""]}, [T])
    assert len(_ours(tmp_path)) == 1
