"""The Structured Streaming sink: one commit per micro-batch, replays skipped, crashes recovered."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.engine.ingest.sink import BATCH_ID_KEY, QUERY_ID_KEY, SINK_CHECKPOINT_KEY, HudiStreamingSink
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.harness.hudi_rs_checks import (
    assert_meta_consistent,
    assert_table_layout,
    completed_commits,
    hudi_rs_rows,
)

pytestmark = pytest.mark.spark

FILES = 10
CRASH_FILES = 4
ROWS_PER_FILE = 20


def _source(folder: Path, files: int = FILES) -> list[dict[str, Any]]:
    """Small parquet files (one micro-batch each); returns every row written."""
    folder.mkdir(parents=True)
    rows: list[dict[str, Any]] = []
    for i in range(files):
        ids = list(range(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE))
        part = [f"p{x % 3}" for x in ids]
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "p": part, "v": [float(x) for x in ids]}),
                       folder / f"part-{i:03d}.parquet")
        rows += [{"id": x, "p": p} for x, p in zip(ids, part, strict=True)]
    return rows


def _commit_extra(base: Path) -> list[dict[str, str]]:
    return [json.loads((base / ".hoodie" / f"{t}.commit").read_text())["extraMetadata"]
            for t in completed_commits(base)]


def test_sink_ten_micro_batches_make_ten_commits(spark: Any, tmp_path: Path) -> None:
    # Given ten source files read one per micro-batch
    expected = _source(tmp_path / "src")
    base = tmp_path / "t"
    schema = spark.read.parquet(str(tmp_path / "src")).schema
    # When the query runs to the end of its input
    query = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "src"))
             .writeStream.foreachBatch(HudiStreamingSink(str(base), record_key="id", partition_by=["p"]))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination()
    # Then there is one commit per micro-batch, each naming the query and its batch id
    extras = _commit_extra(base)
    assert [int(e[BATCH_ID_KEY]) for e in extras] == list(range(FILES))
    assert {e[QUERY_ID_KEY] for e in extras} == {str(query.id)}
    assert [json.loads(e[SINK_CHECKPOINT_KEY]) for e in extras] == [{str(query.id): str(b)} for b in range(FILES)]
    # And hudi-rs reads every row once
    assert hudi_rs_rows(base, ["id", "p"], "id") == sorted(expected, key=lambda r: r["id"])
    assert assert_meta_consistent(base) == FILES * ROWS_PER_FILE
    assert_table_layout(base)


def test_sink_replayed_and_empty_batches_make_no_commit(spark: Any, tmp_path: Path) -> None:
    base = tmp_path / "t"
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id long, p string")
    sink = HudiStreamingSink(str(base), record_key="id", identifier="writer-1")
    sink(df, 0)
    sink(df, 0)  # replay in the same process
    restarted = HudiStreamingSink(str(base), record_key="id", identifier="writer-1")
    restarted(df, 0)  # replay after a restart: learned from the timeline
    restarted(df.limit(0), 1)  # empty
    restarted(df.filter("id = 2").withColumn("id", df["id"] + 10), 2)
    other = HudiStreamingSink(str(base), record_key="id", identifier="writer-2")
    other(df.withColumn("id", df["id"] + 100), 0)  # another writer's batch 0 is its own
    assert [e[BATCH_ID_KEY] for e in _commit_extra(base)] == ["0", "2", "0"]
    assert [r["id"] for r in hudi_rs_rows(base, ["id"], "id")] == [1, 2, 12, 101, 102]
    assert HoodieTable.open(str(base)).config.record_key_fields == ("id",)


_JOB = """
import sys, threading
from pathlib import Path
from hudi_clusterd.engine.ingest import writer
from hudi_clusterd.engine.session import get_or_create_session
from hudi_clusterd.engine.ingest.sink import BATCH_ID_KEY, HudiStreamingSink

base, src, ckpt, pause_batch = sys.argv[1:5]
if pause_batch != "-1":
    real_complete = writer.complete_commit

    def complete_or_hang(table, handle, *args, **kwargs):
        if handle.extra_metadata.get(BATCH_ID_KEY) == pause_batch:
            print("PAUSED", handle.instant_time, flush=True)  # files written, commit not: wait to be killed
            threading.Event().wait()
        return real_complete(table, handle, *args, **kwargs)

    writer.complete_commit = complete_or_hang
spark = get_or_create_session("local[2]", conf={"spark.sql.shuffle.partitions": "2"})
spark.sparkContext.setLogLevel("ERROR")
schema = spark.read.parquet(src).schema
query = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(src)
         .writeStream.foreachBatch(HudiStreamingSink(base, record_key="id", partition_by=["p"]))
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
query.awaitTermination()
print("DONE", flush=True)
"""


def _run_job(tmp_path: Path, pause_batch: int) -> subprocess.Popen[str]:
    args = [str(tmp_path / "t"), str(tmp_path / "src"), str(tmp_path / "ckpt"), str(pause_batch)]
    return subprocess.Popen([sys.executable, "-c", _JOB, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, start_new_session=True)


def _wait_for_line(proc: subprocess.Popen[str], prefix: str, timeout_s: float) -> str:
    """The first stdout line starting with ``prefix``; the process is killed if it takes too long."""
    killer = threading.Timer(timeout_s, lambda: os.killpg(proc.pid, signal.SIGKILL))
    killer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(prefix):
                return line.strip()
        raise AssertionError(f"the job ended (code {proc.wait()}) without printing {prefix}")
    finally:
        killer.cancel()


def test_sink_killed_mid_batch_recovers_without_duplicates_or_orphans(tmp_path: Path) -> None:
    # Given a streaming job killed (SIGKILL) while micro-batch 2 is in flight: files written, no commit
    expected = _source(tmp_path / "src", CRASH_FILES)
    base = tmp_path / "t"
    job = _run_job(tmp_path, pause_batch=2)
    try:
        paused = _wait_for_line(job, "PAUSED", 240).split()[1]
        assert (base / ".hoodie" / f"{paused}.inflight").exists()
        orphans = sorted(base.rglob(f"*_{paused}.parquet"))
        assert orphans  # the doomed batch's data files exist on disk
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    assert len(completed_commits(base)) == 2
    # When the job is restarted from its checkpoint
    restarted = _run_job(tmp_path, pause_batch=-1)
    try:
        _wait_for_line(restarted, "DONE", 300)
    finally:
        restarted.wait(timeout=120)
    assert restarted.returncode == 0
    # Then the crashed instant was rolled back and the batch written again: no duplicate, no lost row
    assert not any(p.exists() for p in orphans)
    assert not list((base / ".hoodie").glob(f"{paused}.*"))
    assert list((base / ".hoodie").glob("*.rollback"))
    assert [int(e[BATCH_ID_KEY]) for e in _commit_extra(base)] == list(range(CRASH_FILES))
    assert hudi_rs_rows(base, ["id", "p"], "id") == sorted(expected, key=lambda r: r["id"])
    assert assert_meta_consistent(base) == CRASH_FILES * ROWS_PER_FILE
    assert_table_layout(base)
