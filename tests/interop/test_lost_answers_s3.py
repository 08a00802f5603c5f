"""On S3, answers lost after the store carried the request out: ``hudi-clusterd cluster`` still commits, exactly
(issue #33, must-show 2).

A table Apache Hudi 1.2.0 wrote on the SeaweedFS server (table version 9, its default metadata table), clustered
by the daemon under Hudi's ``StorageBasedLockProvider`` (``.hoodie/.locks/table_lock.json``, renewed every second)
through a proxy (``tests/harness/s3_proxy.py``) that forwards chosen PUTs to the server, lets the server store the
object and answer, and then closes the daemon's connection without passing the answer on (in the long run, ``-m
slow``, also with a ``500 InternalError`` in place of the answer): the completed replacecommit, the first renewal of
the lock and the metadata table's first ``files`` log file. The metadata
table's completed deltacommit is answered 2.5 s late, so the lock is renewed while it is held for the commit.
Hudi's writers run before the daemon, as a single writer (Hudi 1.2 has no S3 client of the storage lock on Maven
Central), straight to the server.

The run ends ``completed`` with each fault fired once; Hudi's snapshot and hudi-rs read exactly the rows written,
Hudi's metadata table lists exactly what the bucket holds, nothing is pending on either timeline, no marker is
left, and the lock file says ``expired: true``. The long run also loses the first answer of every write the daemon
makes under ``.hoodie/`` (each timeline, metadata-table, lock, heartbeat and marker file, and the bulk deletes of
markers and heartbeat), with the same checks.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from hudi_clusterd.storage import StorageSpec
from tests.builders import EVENTS_SCHEMA, event_rows
from tests.harness.apache_hudi import HudiWorker
from tests.harness.daemon_harness import clusterd, clusterd_environment, completed, instant_files, instant_names
from tests.harness.hudi_rs_checks import s3_storage_options
from tests.harness.hudi_s3 import s3_writer_options, s3a_uri
from tests.harness.hudi_versions import HUDI_1_2_V9
from tests.harness.metadata_checks import validate_files
from tests.harness.plan_steps import SharedTable, assert_reads
from tests.harness.s3_proxy import AnswerFault, CountingS3Proxy

pytestmark = [pytest.mark.hudi, pytest.mark.hudi_s3,
              pytest.mark.usefixtures("spark")]  # clusterd(...) runs in this process, on the session's Spark

STORAGE_LOCK = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"
LOCK_KEY = ".hoodie/.locks/table_lock.json"
# The shortest times Hudi allows: a lease of 10 s renewed every second
LOCK_TIMES = {"hoodie.write.lock.storage.validity.timeout.secs": "10",
              "hoodie.write.lock.storage.renew.interval.secs": "1"}
SLOW_MDT_COMMIT_S = 2.5  # the metadata deltacommit's answer, held back: two renewals under the commit's lock


class Renewals:
    """A body matcher of the lock file's PUTs that chooses renewals: a write of the lock, not expired, by an owner
    whose lock was written before (the first write of an owner takes the lock)."""

    def __init__(self) -> None:
        self.owners: set[str] = set()

    def __call__(self, body: bytes) -> bool:
        lock = json.loads(body)
        if lock["expired"]:
            return False
        if lock["owner"] in self.owners:
            return True
        self.owners.add(lock["owner"])
        return False


@dataclass
class ClusterRun:
    """A ``hudi-clusterd cluster`` run through the proxy on a table Hudi wrote, and what it left."""

    hudi: HudiWorker
    table: SharedTable
    spec: StorageSpec
    batches: list[list[dict[str, Any]]]
    out: str
    requests: dict[str, int]
    seconds: dict[str, float]


def cluster_through_proxy(hudi: HudiWorker, s3_server: Any, tmp_path: Path,
                          faults: Callable[[CountingS3Proxy, str], None]) -> ClusterRun:
    """Hudi 1.2 writes a table on S3 in two inserts (two new file groups each), its metadata table on; then
    ``hudi-clusterd cluster`` clusters it under the storage lock through a proxy given ``faults(proxy, prefix)``
    (``prefix``: the table's key, escaped for a pattern)."""
    started = time.monotonic()
    uri = s3a_uri(s3_server.fresh_uri("lost-answers"))
    writer = s3_writer_options(HUDI_1_2_V9, "events", {"hoodie.write.concurrency.mode": "single_writer"},
                               extra={"hoodie.parquet.small.file.limit": "0"})
    props = tmp_path / "clusterd.properties"
    props.write_text(f"hoodie.write.lock.provider={STORAGE_LOCK}\n"
                     + "".join(f"{k}={v}\n" for k, v in LOCK_TIMES.items())
                     + "hoodie.clustering.plan.strategy.sort.columns=val\n")
    batches = [event_rows(b) for b in range(2)]
    for batch in batches:
        hudi.write(batch, uri, {**writer, "hoodie.datasource.write.operation": "insert"}, schema=EVENTS_SCHEMA)
    written = time.monotonic()
    with CountingS3Proxy(s3_server.endpoint) as proxy:
        faults(proxy, re.escape(uri.split("/", 3)[3]))
        with clusterd_environment({**s3_server.env(), "AWS_ENDPOINT_URL_S3": proxy.endpoint}):
            out = clusterd("cluster", "--base-path", uri, "--props", str(props), "--force", "--commit-wait", "0")
    clustered = time.monotonic()
    return ClusterRun(hudi, SharedTable(uri, lambda: tmp_path, writer, props, s3_storage_options(s3_server)),
                      StorageSpec(uri, s3_server.storage_options()), batches, out, proxy.snapshot(),
                      {"hudi writes": written - started, "cluster": clustered - written})


def assert_committed_exactly(run: ClusterRun, s3_server: Any) -> tuple[str, dict[str, Any]]:
    """The run completed one clustering, and left the table exact and clean: Hudi and hudi-rs read exactly the rows
    written, Hudi's metadata table lists exactly what S3 holds, nothing is pending on the table's timeline or its
    metadata table's, no marker of the clustering is left, and the lock file says expired. Returns the clustering's
    instant and the lock file's content."""
    [instant] = completed(run.spec, "replacecommit")
    assert f"completed {instant}" in run.out, run.out
    mdt = StorageSpec(f"{run.table.uri}/.hoodie/metadata", s3_server.storage_options())
    for timeline in (run.spec, mdt):
        files = instant_files(timeline)
        done = {f.time for f in files if f.state == "completed"}
        assert done and all(f.time in done for f in files), instant_names(timeline)
    s3 = s3_server.boto3()
    key_prefix = run.table.uri.split("/", 3)[3]
    markers = s3.list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{key_prefix}/.hoodie/.temp/{instant}")
    assert markers.get("KeyCount", 0) == 0, markers.get("Contents")
    lock = json.loads(s3.get_object(Bucket=s3_server.bucket, Key=f"{key_prefix}/{LOCK_KEY}")["Body"].read())
    assert lock["expired"] is True, lock
    assert_reads(run.hudi, run.table, run.batches)
    validate_files(run.hudi, run.spec, f"lost_answers_{uuid.uuid4().hex[:8]}", uri=run.table.uri).assert_clean()
    return instant, lock


# a connection closed without an answer in every run; a 500 in place of the answer in the long run only (the
# client handles both the same way: it tries again, and its second try finds the object there)
@pytest.mark.parametrize("how", ["close", pytest.param("500", marks=pytest.mark.slow)])
def test_cluster_commits_though_s3_lost_the_answers_of_its_replacecommit_a_lock_renewal_and_a_metadata_log_file(
        s3_hudi: Callable[[Any], HudiWorker], s3_server: Any, tmp_path: Path, how: Literal["close", "500"]) -> None:
    renewals = Renewals()
    faults: dict[str, AnswerFault] = {}

    def lose(proxy: CountingS3Proxy, prefix: str) -> None:
        # a store that carries out these PUTs of the daemon's and loses their answers (the connection closed, or a
        # 500 in place of the answer), and answers the metadata table's completed deltacommit late
        faults["replacecommit"] = proxy.lose_answers(
            "PUT", rf"^{prefix}/\.hoodie/timeline/\d+_\d+\.replacecommit$", how=how)
        faults["renewal"] = proxy.lose_answers("PUT", rf"^{prefix}/{re.escape(LOCK_KEY)}$", body_matches=renewals,
                                               how=how)
        faults["mdt log file"] = proxy.lose_answers(
            "PUT", rf"^{prefix}/\.hoodie/metadata/files/\.files-[^/]+\.log\.\d+_[^/]+$", how=how)
        faults["slow mdt commit"] = proxy.delay_answers(
            "PUT", rf"^{prefix}/\.hoodie/metadata/\.hoodie/timeline/\d+_\d+\.deltacommit$", SLOW_MDT_COMMIT_S)

    # Given a table Hudi 1.2 wrote on S3, when hudi-clusterd clusters it through that store under the storage lock
    run = cluster_through_proxy(s3_hudi(HUDI_1_2_V9), s3_server, tmp_path, lose)
    # Then each fault fired once, on a write the server had stored
    for name, fault in faults.items():
        assert fault.fired == 1 and fault.hits[0][1] == 200, (name, fault)
    # and the run committed, exactly, leaving nothing pending and the lock given back by the lease whose renewal's
    # answer was lost
    instant, lock = assert_committed_exactly(run, s3_server)
    assert faults["replacecommit"].hits[0][0].rsplit("/", 1)[-1].startswith(f"{instant}_"), faults["replacecommit"]
    assert lock["owner"] in renewals.owners, (lock, renewals.owners)
    print(f"{how}: {', '.join(f'{k} {v:.1f}s' for k, v in run.seconds.items())}; requests through the proxy "
          f"{run.requests}")


@pytest.mark.slow
def test_cluster_commits_though_s3_lost_the_first_answer_of_every_write_under_hoodie(
        s3_hudi: Callable[[Any], HudiWorker], s3_server: Any, tmp_path: Path) -> None:
    faults: list[AnswerFault] = []

    def lose(proxy: CountingS3Proxy, prefix: str) -> None:
        # every write the daemon makes under .hoodie/ (timeline and metadata-table files, the lock file's every
        # write, heartbeat, markers, and the bulk deletes of markers and heartbeat) loses its first answer
        key = f"<Key>{prefix.replace(chr(92), '')}/.hoodie/".encode()
        for method in ("PUT", "DELETE"):
            faults.append(proxy.lose_answers(method, rf"^{prefix}/\.hoodie/", times=1000, once_each=True))
        faults.append(proxy.lose_answers("POST", r"^$", times=1000, once_each=True,
                                         body_matches=lambda body: key in body))

    run = cluster_through_proxy(s3_hudi(HUDI_1_2_V9), s3_server, tmp_path, lose)
    lost = [hit for fault in faults for hit in fault.hits]
    written = {k.split("/.hoodie/", 1)[1].split("/", 1)[0] for k, _ in lost if "/.hoodie/" in k}
    assert {".locks", "timeline", "metadata", ".heartbeat", ".temp"} <= written, lost
    assert faults[2].fired >= 1 and all(status == 200 for _, status in lost), lost  # a bulk delete's too
    assert_committed_exactly(run, s3_server)
    print(f"every write: {len(lost)} answers lost; {', '.join(f'{k} {v:.1f}s' for k, v in run.seconds.items())}; "
          f"requests through the proxy {run.requests}")
