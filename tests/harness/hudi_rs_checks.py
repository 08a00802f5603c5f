"""Checks of a table our writer produced: hudi-rs reads (a second, independent reader) plus what hudi-rs does not
look at (write stats, partition metadata, footers, leftovers). See ../shared/docs/hudi-rs-validation.md."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

from hudi_clusterd.domain.file_group import BaseFile
from hudi_clusterd.domain.instant import Action
from hudi_clusterd.table.hoodie_table import HoodieTable


def hudi_table(base: Path | str, storage_options: Mapping[str, str] | None = None) -> Any:
    """A fresh hudi-rs table object (its timeline is cached per object) of the table at ``base`` (a folder or a
    URI), reached with ``storage_options`` (hudi-rs's keys: :func:`s3_storage_options` for the S3 test server)."""
    builder = HudiTableBuilder.from_base_uri(str(base))
    if storage_options:
        builder = builder.with_storage_options(dict(storage_options))
    return builder.build()


def s3_storage_options(s3: Any) -> dict[str, str]:
    """hudi-rs's storage options that reach the S3 test server ``s3`` (a ``tests.harness.servers.S3Server``)."""
    return {"aws_endpoint_url": s3.endpoint, "aws_allow_http": "true", "aws_region": s3.region,
            "aws_access_key_id": s3.access_key, "aws_secret_access_key": s3.secret_key}


def hudi_rs_rows(base: Path | str, cols: list[str] | None = None,
                 key: str | Callable[[dict[str, Any]], Any] | None = None, as_of: str | None = None,
                 storage_options: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The snapshot hudi-rs reads (as of ``as_of`` when given) of the table at ``base`` (a folder, or a URI reached
    with ``storage_options``): the columns ``cols`` (all when None), sorted by the column or function ``key`` (when
    None: by record key, or by ``id`` in a table without meta fields)."""
    opts = HudiReadOptions()
    if as_of:
        opts = opts.with_as_of_timestamp(as_of)
    batches = hudi_table(base, storage_options).read(opts)
    if not batches:
        return []
    table = pa.Table.from_batches(batches)
    rows = (table if cols is None else table.select(cols)).to_pylist()
    if callable(key):
        return sorted(rows, key=key)
    if key is not None:
        return sorted(rows, key=lambda r: r[key])
    return sorted(rows, key=lambda r: str(r.get("_hoodie_record_key") or r.get("id")))


def hudi_rs_incremental(base: Path, start: str, end: str) -> list[pa.RecordBatch]:
    """What hudi-rs's incremental query reads of the commits after ``start`` up to ``end``."""
    opts = HudiReadOptions().with_query_type(HudiQueryType.Incremental).with_start_timestamp(start) \
        .with_end_timestamp(end)
    return list(hudi_table(base).read(opts))


def without_file_name(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "_hoodie_file_name"} for r in rows]


def assert_meta_consistent(base: Path | str, storage_options: Mapping[str, str] | None = None) -> int:
    """Meta columns agree with the file slice that holds them; record keys are unique. Returns the row count.
    A record of a merge-on-read slice's log files names its file group (Hudi writes the file id as its
    ``_hoodie_file_name`` in a log block) and is newer than the slice's base file; a record of the base file names
    that file and is not newer. ``base``: a folder, or a URI reached with ``storage_options``."""
    t = hudi_table(base, storage_options)
    reader = t.create_file_group_reader_with_options()
    keys: list[str] = []
    for fs in t.get_file_slices():
        d = reader.read_file_slice(fs).to_pydict()
        allowed = {fs.base_file_name, fs.file_id} if fs.has_log_files else {fs.base_file_name}
        assert set(d["_hoodie_file_name"]) <= allowed, (fs.file_id, set(d["_hoodie_file_name"]) - allowed)
        assert set(d["_hoodie_partition_path"]) <= {fs.partition_path}
        assert all(ct <= fs.creation_instant_time
                   for name, ct in zip(d["_hoodie_file_name"], d["_hoodie_commit_time"], strict=True)
                   if name == fs.base_file_name)
        keys += d["_hoodie_record_key"]
    assert len(keys) == len(set(keys)), "duplicate record keys in the snapshot"
    return len(keys)


def completed_commits(base: Path) -> list[str]:
    """Requested times of the completed commits, in order (any timeline layout)."""
    timeline = HoodieTable.open(str(base)).timeline()
    return [i.time for i in timeline.of_actions([Action.COMMIT]).completed()]


def assert_table_layout(base: Path, *, meta_fields: bool = True) -> None:
    """What hudi-rs ignores: write stats name existing files of their file id, every live base file is in a
    completed commit, partitions carry metadata, footers are Hudi's, and no marker or heartbeat is left."""
    referenced: set[str] = set()
    table = HoodieTable.open(str(base))
    timeline = table.timeline()
    for inst in timeline.of_actions([Action.COMMIT]).completed():
        commit = table.timeline_store.commit_metadata(inst)
        assert commit.schema
        for partition, stats in commit.partition_to_write_stats.items():
            for ws in stats:
                assert ws.path is not None
                path = base / ws.path
                assert path.is_file(), ws.path
                assert ws.path.rsplit("/", 1)[-1].startswith(ws.file_id + "_")
                assert ws.partition_path == partition
                assert ws.file_size_in_bytes == ws.total_write_bytes == path.stat().st_size
                assert ws.num_writes == ws.num_inserts == pq.read_metadata(path).num_rows
                assert ws.prev_commit == "null"
                referenced.add(ws.path)
    for f in base.rglob("*.parquet"):
        rel = f.relative_to(base).as_posix()
        if rel.startswith(".hoodie"):
            continue
        bf = BaseFile.parse(rel.rpartition("/")[0], f.name, 0)
        assert bf is not None and rel in referenced, f"orphan base file {rel}"
        assert (f.parent / ".hoodie_partition_metadata").is_file()
        footer = pq.read_metadata(f).metadata
        assert footer[b"writer.model.name"] == b"avro" and b"parquet.avro.schema" in footer
        if meta_fields:
            keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0).to_pylist()
            assert footer[b"hoodie_min_record_key"].decode() == min(keys)
            assert footer[b"hoodie_max_record_key"].decode() == max(keys)
    temp = base / ".hoodie" / ".temp"
    assert not temp.exists() or not any(temp.iterdir()), "markers left behind"
    beats = base / ".hoodie" / ".heartbeat"
    assert not beats.exists() or not any(beats.iterdir()), "heartbeats left behind"
    assert not [i for i in timeline.pending() if i.action is not Action.ROLLBACK], "pending instants left behind"


def data_files(base: Path) -> set[Path]:
    return {p for p in base.rglob("*.parquet") if ".hoodie" not in p.parts}


def completed_clusterings(base: Path) -> list[str]:
    """Times of the completed replacecommits whose operation is a clustering, in order (any timeline layout)."""
    table = HoodieTable.open(str(base))
    return [i.time for i in table.timeline().replaces().completed() if table.is_clustering_instant(i)]


def assert_no_orphan_files(base: Path, *, at_rest: bool = False) -> int:
    """Every data file is named by a write stat of a completed commit, replacecommit or compaction (files of
    failed or rolled-back attempts are gone; replaced file groups stay until a cleaner runs), so it also belongs to a
    completed instant. ``at_rest``: also no marker is left and no commit is pending. Returns how many files are
    named."""
    referenced: set[str] = set()
    hoodie = base / ".hoodie"
    table = HoodieTable.open(str(base))
    for inst in table.timeline().writes().completed():  # compactions too (their base files)
        referenced.update(ws.path for ws in table.timeline_store.commit_metadata(inst).write_stats() if ws.path)
    orphans = sorted(rel for f in base.rglob("*.parquet")
                     if not (rel := f.relative_to(base).as_posix()).startswith(".hoodie") and rel not in referenced)
    assert not orphans, f"{len(orphans)} orphan data file(s), named by no completed commit: {orphans[:5]}"
    if at_rest:
        timeline = table.timeline()
        completed = {i.time for i in timeline.completed()}
        for f in data_files(base):
            instant = f.name.rsplit("_", 1)[-1].split(".")[0]
            assert instant in completed, f"orphan data file {f} of instant {instant}"
        assert not list((hoodie / ".temp").glob("*/*")), "markers left behind"
        assert not any(i.is_pending for i in timeline if i.action.value == "commit"), "commit stuck pending"
    return len(referenced)


def data_bytes(path: Path) -> int:
    """A base file's size without Hudi's bloom filter footer (a fixed ~431 KB that the size target leaves out,
    as Hudi's own writer does)."""
    meta = pq.read_metadata(path).metadata or {}
    return path.stat().st_size - len(meta.get(b"org.apache.hudi.bloomfilter", b""))
