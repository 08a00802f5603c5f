"""Apache Hudi's streaming writer as the ingestion of a crash run (a table of version 8 or 9 with a metadata table):
``HudiStreamIngestor`` feeds Hudi's Structured Streaming sink and knows the exact rows after any number of committed
micro-batches; ``check_stream_recovered`` / ``check_stream_at_rest`` are the checks a recovered table must pass.

The table is a local folder or a ``tests.harness.crash_table.WatchedTable`` (a table on S3: its rows read from S3
by Hudi and hudi-rs, its files checked in its mirror refreshed before each check, its lock read from its store)."""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tests.harness.apache_hudi import HudiWorker
from tests.harness.crash_harness import (
    CrashableDaemon,
    assert_plans_disjoint,
    check_when_idle,
    folder_entries,
    hoodie_names,
    left_behind,
    leftover_tmp_files,
    listdir,
    mdt_names,
    pending_work,
    wait_at_rest,
)
from tests.harness.crash_table import WatchedTable, as_watched
from tests.harness.daemon_harness import instant_files, instant_metadata
from tests.harness.hudi_rs_checks import assert_meta_consistent, assert_no_orphan_files, hudi_rs_rows
from tests.harness.metadata_checks import validate_files

STREAM_SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("val", pa.int64()), ("ts", pa.int64())])
STREAM_COLUMNS = ["id", "part", "val", "ts"]
STREAM_PARTS = ("p0", "p1", "p2")
STREAM_CHECKPOINT_KEY = "_hudi_streaming_sink_checkpoint"  # extraMetadata of a commit of Hudi's streaming sink
StreamRow = tuple[str, int, int]  # part, val, ts


@dataclass
class StreamStats:
    batches: int = 0
    insert_batches: int = 0  # new keys only
    upsert_batches: int = 0  # new keys and updates of earlier ones
    updated_keys: int = 0
    batch_seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


class HudiStreamIngestor:
    """Apache Hudi's streaming writer (``writeStream.format("hudi")`` in a ``HudiWorker``, one micro-batch per
    JSON-lines file dropped into its source folder) fed by a thread; keeps every batch, so the expected snapshot
    (key -> latest row) after any number of committed batches is exact.

    Batch 0 inserts ``HOT_KEYS`` keys (files above the clustering's small-file limit, so plans leave them out);
    every later batch inserts new keys in every partition, and about half of them also update hot keys and now
    and then a key of any earlier batch, whose small file a clustering may be rewriting (Hudi's ordering field
    ``ts`` is the batch number). The feeder drops the next file once the previous batch committed (a short random
    pause between), so batch ``n`` is Spark's micro-batch ``n``."""

    HOT_KEYS = 600
    INSERTS = 9

    def __init__(self, worker: HudiWorker, folder: Path, table: Path | WatchedTable, seed: int,
                 options: Mapping[str, str], name: str = "events", recent_updates: int = 0) -> None:
        """Start the query on the table ``table`` (a local folder, or a watched table its writer reaches at its
        ``uri``); ``folder``: where its local source, staging and checkpoint folders go; ``recent_updates``: keys of
        the previous batch every batch with updates also updates (on a merge-on-read table, log files in the
        small file groups the daemon plans)."""
        self.worker = worker
        self.recent_updates = recent_updates
        self.table = as_watched(table)
        self.name = name
        self.identifier = options["hoodie.datasource.write.streaming.checkpoint.identifier"]
        self.rng = random.Random(seed)
        self.batches: list[list[dict[str, Any]]] = []
        self.stats = StreamStats()
        self.source, self.staging = folder / "source", folder / "staging"
        self.source.mkdir(parents=True)
        self.staging.mkdir()
        schema = folder / "schema.parquet"
        pq.write_table(pa.Table.from_pylist([], schema=STREAM_SCHEMA), schema)
        self._log_start = worker.log_offset()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        worker.stream_start(name, source_dir=self.source, schema_from=schema, base_path=self.table.uri,
                            checkpoint_dir=folder / "checkpoint", options=dict(options), source_format="json")

    # -- batches --

    def _make_batch(self, n: int) -> list[dict[str, Any]]:
        if n == 0:
            ids = list(range(self.HOT_KEYS))
            self.stats.insert_batches += 1
            return [{"id": i, "part": STREAM_PARTS[i % len(STREAM_PARTS)], "val": i, "ts": 0} for i in ids]
        first = self.HOT_KEYS + (n - 1) * self.INSERTS
        ids = list(range(first, first + self.INSERTS))
        if self.rng.random() < 0.5:
            updates = set(self.rng.sample(range(self.HOT_KEYS), 3))
            if first > self.HOT_KEYS and self.rng.random() < 0.25:
                updates.add(self.rng.randrange(self.HOT_KEYS, first))
            if first > self.HOT_KEYS:
                updates |= set(self.rng.sample(range(first - self.INSERTS, first), self.recent_updates))
            ids += sorted(updates)
            self.stats.upsert_batches += 1
            self.stats.updated_keys += len(updates)
        else:
            self.stats.insert_batches += 1
        return [{"id": i, "part": STREAM_PARTS[i % len(STREAM_PARTS)], "val": n * 1000 + i, "ts": n} for i in ids]

    def _drop(self) -> int:
        """Write the next batch beside the source folder and move it in whole; returns the batch count."""
        n = len(self.batches)
        rows = self._make_batch(n)
        self.batches.append(rows)
        staged = self.staging / f"batch-{n:04d}.json"
        staged.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.replace(staged, self.source / staged.name)
        return n + 1

    def expected(self, batches: int | None = None) -> dict[int, StreamRow]:
        """Key -> (part, val, ts) after the first ``batches`` batches (all fed batches by default)."""
        out: dict[int, StreamRow] = {}
        for rows in self.batches[:batches]:
            for r in rows:
                out[int(r["id"])] = (r["part"], r["val"], r["ts"])
        return out

    # -- the stream --

    def status(self) -> dict[str, Any]:
        """The query's status; a failure (an exception, or the query no longer active) is recorded and raised."""
        status = self.worker.stream_status(self.name)
        self._check(status)
        return status

    def _check(self, status: Mapping[str, Any]) -> None:
        if status.get("exception") is not None or not status.get("active"):
            failure = f"streaming query stopped: {str(status.get('exception'))[:2000]}"
            if failure not in self.stats.failures:
                self.stats.failures.append(failure)
            raise AssertionError(failure)

    def _wait(self, batches: int, timeout: float, stop: threading.Event | None) -> bool:
        """Until the query has run ``batches`` micro-batches (True), ``stop`` is set (False) or it failed. Asks
        in short requests, so that other requests to the worker interleave."""
        started = time.monotonic()
        while True:
            status = self.worker.stream_status(self.name, wait_for_batches=batches, timeout=1.0)
            self._check(status)
            if int(status["batches"]) >= batches:
                self.stats.batches = int(status["batches"])
                return True
            if stop is not None and stop.is_set():
                return False
            if time.monotonic() - started > timeout:
                failure = f"micro-batch {batches - 1} not committed within {timeout:.0f}s"
                self.stats.failures.append(failure)
                raise AssertionError(failure)

    def feed_once(self, timeout: float = 300) -> None:
        """Drop one batch and wait until it is committed (the feeder thread must not run)."""
        assert self._thread is None
        started = time.monotonic()
        self._wait(self._drop(), timeout, None)
        self.stats.batch_seconds.append(round(time.monotonic() - started, 1))

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                if not self._wait(self._drop(), 600, self._stop):
                    return
                self.stats.batch_seconds.append(round(time.monotonic() - started, 1))
                if self._stop.wait(self.rng.uniform(0.0, 1.0)):
                    return
        except Exception as e:  # recorded; pause() and the test assert on it
            if not self.stats.failures:
                self.stats.failures.append(f"{type(e).__name__}: {e}")

    def start(self) -> None:
        assert self._thread is None
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="hudi-stream-feeder", daemon=True)
        self._thread.start()

    def halt(self) -> None:
        """Drop no more files; a batch in flight goes on (it may wait for the table lock a killed daemon left)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(120)
            assert not self._thread.is_alive(), "the feeder did not stop within 120s"
            self._thread = None

    def pause(self, timeout: float = 400, *, check: bool = True) -> None:
        """Drop no more files and wait until every dropped batch is committed; with ``check``, fail if a batch
        failed for good."""
        self.halt()
        try:
            self._wait(len(self.batches), timeout, None)
        except AssertionError:
            if check:
                raise
        assert not check or not self.stats.failures, f"streaming ingestion failed: {self.stats.failures}"

    def stop(self) -> dict[str, Any]:
        """Stop the query (``pause`` first); returns its last status."""
        self.halt()
        return self.worker.stream_stop(self.name)

    def committed_batches(self) -> int:
        """How many batches the timeline holds completed commits (deltacommits) of (from the streaming sink's
        checkpoint in each commit's metadata): the batches readers must see, even while one waits for a lock."""
        done = -1
        for f in instant_files(self.table.location):
            if f.state == "completed" and f.action in ("commit", "deltacommit"):
                raw = (instant_metadata(f).get("extraMetadata") or {}).get(STREAM_CHECKPOINT_KEY)
                if raw:
                    done = max(done, int(json.loads(raw).get(self.identifier, -1)))
        return done + 1

    def check_readers(self, what: str, attempts: int = 5) -> int:
        """While the stream runs: Hudi's snapshot read and hudi-rs each read exactly the batches the timeline holds
        (read again when a batch committed during the read). Returns that batch count."""
        readers = stream_readers(self.worker, self.table)
        done = 0
        for reader, read in readers:
            for _ in range(attempts):
                done = self.committed_batches()
                rows = read()
                if self.committed_batches() == done:
                    _assert_same(stream_rows(rows, f"{what}, {reader}"), self.expected(done), f"{what}: {reader}")
                    break
            else:
                raise AssertionError(f"{what}: a batch committed during each of {attempts} reads by {reader}")
        return done

    def retried_batches(self) -> list[str]:
        """What Hudi's streaming sink logged about micro-batches that failed (and were retried) since the start."""
        return self.worker.failed_micro_batches(since=self._log_start)


def stream_rows(rows: Iterable[Mapping[str, Any]], what: str) -> dict[int, StreamRow]:
    """Rows read back as key -> (part, val, ts); a key read twice fails."""
    out: dict[int, StreamRow] = {}
    for r in rows:
        assert int(r["id"]) not in out, f"{what}: key {r['id']} read twice"
        out[int(r["id"])] = (r["part"], r["val"], r["ts"])
    return out


def _assert_same(got: Mapping[int, StreamRow], expected: Mapping[int, StreamRow], what: str) -> None:
    if got != expected:
        missing = sorted(set(expected) - set(got))[:5]
        extra = sorted(set(got) - set(expected))[:5]
        stale = sorted(k for k in set(expected) & set(got) if expected[k] != got[k])[:5]
        raise AssertionError(f"{what} differs from the expected rows ({len(got)} vs {len(expected)} keys; missing "
                             f"{missing}, unexpected {extra}, stale {stale})")


def stream_readers(worker: HudiWorker, table: WatchedTable) -> list[tuple[str, Callable[[], list[dict[str, Any]]]]]:
    """(name, read) of the two readers of the table itself (on S3, from S3): Hudi's snapshot read (listing through
    the metadata table) and hudi-rs."""
    return [("Hudi's snapshot read", lambda: worker.read(table.uri, columns=STREAM_COLUMNS).to_pylist()),
            ("hudi-rs", lambda: hudi_rs_rows(table.uri, STREAM_COLUMNS, "id", storage_options=table.rs_options))]


def assert_stream_rows(worker: HudiWorker, table: Path | WatchedTable, expected: Mapping[int, StreamRow],
                       what: str) -> None:
    """Hudi's snapshot read (listing through the metadata table) and hudi-rs both read exactly ``expected``."""
    for reader, rows in stream_readers(worker, as_watched(table)):
        _assert_same(stream_rows(rows(), f"{what}, {reader}"), expected, f"{what}: {reader}")


_MDT_LOG = re.compile(r"^\.(.+)_(\d+)\.log\.(\d+)_(.+)$")
_MDT_BASE = re.compile(r"^(.+)_(\d+-\d+-\d+)_(\d+)\.hfile$")


def mdt_orphan_files(base: Path) -> list[str]:
    """Files of the metadata table (layout 2: a log file is named after its deltacommit, an HFile after its
    compaction) whose instant is neither completed in the metadata timeline nor older than its first instant
    (archived). Written by an attempt that never completed or was rolled back, they should be gone."""
    names = mdt_names(base)
    done = {n.split(".", 1)[0] for n in names if n.count(".") == 1}
    active = sorted(n.split(".", 1)[0] for n in names if not n.startswith("0000000000000"))
    first = active[0] if active else None
    out = []
    root = base / ".hoodie" / "metadata"
    for folder in (d for d in listdir(root) if not d.startswith(".")):
        for n in listdir(root / folder):
            m = _MDT_LOG.match(n) or _MDT_BASE.match(n)
            if m is None:
                continue
            instant = m.group(2) if m.re is _MDT_LOG else m.group(3)
            if instant not in done and (first is None or instant >= first):
                out.append(f"{folder}/{n}")
    return sorted(out)


def mdt_pending_instants(base: Path) -> list[str]:
    """The metadata table's requested or inflight instant files whose instant has no completed file (by time: a
    compaction completes as a ``commit``)."""
    names = mdt_names(base)
    done = {n.split(".", 1)[0] for n in names if n.count(".") == 1}
    return [n for n in names if n.count(".") == 2 and n.split(".", 1)[0] not in done]


def stream_pending_work(table: Path | WatchedTable) -> list[str]:
    """``pending_work`` plus the metadata table's pending instants, markers and heartbeats (as of the table's last
    refresh)."""
    out = pending_work(table)
    base = as_watched(table).root
    out += [f"metadata table: {n}" for n in mdt_pending_instants(base)]
    meta = base / ".hoodie" / "metadata" / ".hoodie"
    out += [f"metadata table: markers of {d.name}" for d in folder_entries(meta / ".temp")
            if folder_entries(d, recursive=True)]
    out += [f"metadata table: heartbeat {p.name}" for p in folder_entries(meta / ".heartbeat")]
    return out


def check_stream_recovered(worker: HudiWorker, table: Path | WatchedTable, table_name: str,
                           expected: Mapping[int, StreamRow], what: str) -> dict[str, Any]:
    """A table Hudi's stream writes, at rest (stream paused, daemon idle): exact rows through Hudi (listing
    through the metadata table) and hudi-rs, unique keys, no orphan data file and no metadata-table file of an
    instant that did not complete, nothing pending (data table and metadata table), the lock takeable, no file
    group in two plans, and the metadata table listing exactly the data files in storage (``validate_files``).
    Rows, keys and the storage listing are read from the table itself; the files, from its refreshed ``root``.
    Returns what the checks counted."""
    watched = as_watched(table)
    base = watched.refresh()
    assert_stream_rows(worker, watched, expected, what)
    keys = assert_meta_consistent(watched.uri, storage_options=watched.rs_options)
    assert keys == len(expected), f"{what}: duplicate or missing record keys ({keys} vs {len(expected)})"
    referenced = assert_no_orphan_files(base)
    orphans = mdt_orphan_files(base)
    assert not orphans, f"{what}: metadata-table files of instants that never completed: {orphans[:5]}"
    left = left_behind(watched, stream_pending_work)
    assert not left, f"{what}: left behind after recovery: {left}"
    watched.lock.assert_takeable(what)
    plans = assert_plans_disjoint(base)
    validation = validate_files(worker, watched.location, table_name)
    try:
        validation.assert_clean()
    except AssertionError as e:
        raise AssertionError(f"{what}: {e}") from None
    return {"files_referenced": referenced, "mdt_files_checked": len(validation.rows), "plans": plans,
            "tmp_left": len(leftover_tmp_files(base))}


def check_stream_at_rest(worker: HudiWorker, table: Path | WatchedTable, daemon: CrashableDaemon, table_name: str,
                         expected: Mapping[int, StreamRow], what: str) -> dict[str, Any]:
    """``check_stream_recovered`` while a daemon runs, the stream paused (see `check_when_idle`; the metadata
    table's pending work and instant files included)."""
    watched = as_watched(table)

    def names() -> list[str]:
        base = watched.refresh()
        return hoodie_names(base) + mdt_names(base)

    return check_when_idle(lambda: wait_at_rest(watched, daemon, pending=stream_pending_work, timeout=300), names,
                           lambda: check_stream_recovered(worker, watched, table_name, expected, what), what)
