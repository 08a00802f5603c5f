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
left, and the lock file says ``expired: true``.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
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
from tests.harness.s3_proxy import CountingS3Proxy

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


# a connection closed without an answer in every run; a 500 in place of the answer in the long run only (the
# client handles both the same way: it tries again, and its second try finds the object there)
@pytest.mark.parametrize("how", ["close", pytest.param("500", marks=pytest.mark.slow)])
def test_cluster_commits_though_s3_lost_the_answers_of_its_replacecommit_a_lock_renewal_and_a_metadata_log_file(
        s3_hudi: Callable[[Any], HudiWorker], s3_server: Any, tmp_path: Path, how: Literal["close", "500"]) -> None:
    started = time.monotonic()
    hudi = s3_hudi(HUDI_1_2_V9)
    uri = s3a_uri(s3_server.fresh_uri("lost-answers"))
    prefix = re.escape(uri.split("/", 3)[3])
    writer = s3_writer_options(HUDI_1_2_V9, "events", {"hoodie.write.concurrency.mode": "single_writer"},
                               extra={"hoodie.parquet.small.file.limit": "0"})
    props = tmp_path / "clusterd.properties"
    props.write_text(f"hoodie.write.lock.provider={STORAGE_LOCK}\n"
                     + "".join(f"{k}={v}\n" for k, v in LOCK_TIMES.items())
                     + "hoodie.clustering.plan.strategy.sort.columns=val\n")
    spec = StorageSpec(uri, s3_server.storage_options())
    table = SharedTable(uri, lambda: tmp_path, writer, props, s3_storage_options(s3_server))
    # Given a table Hudi 1.2 wrote on S3 in two inserts (two new file groups each), its metadata table on
    batches = [event_rows(b) for b in range(2)]
    for batch in batches:
        hudi.write(batch, uri, {**writer, "hoodie.datasource.write.operation": "insert"}, schema=EVENTS_SCHEMA)
    written_s = time.monotonic() - started
    with CountingS3Proxy(s3_server.endpoint) as proxy:
        # and a store that carries out these PUTs of the daemon's and loses their answers (the connection closed,
        # or a 500 in place of the answer)
        replacecommit = proxy.lose_answers("PUT", rf"^{prefix}/\.hoodie/timeline/\d+_\d+\.replacecommit$", how=how)
        renewal = proxy.lose_answers("PUT", rf"^{prefix}/{re.escape(LOCK_KEY)}$", body_matches=Renewals(), how=how)
        mdt_log = proxy.lose_answers("PUT", rf"^{prefix}/\.hoodie/metadata/files/\.files-[^/]+\.log\.\d+_[^/]+$",
                                     how=how)
        slow = proxy.delay_answers("PUT", rf"^{prefix}/\.hoodie/metadata/\.hoodie/timeline/\d+_\d+\.deltacommit$",
                                   SLOW_MDT_COMMIT_S)
        # When hudi-clusterd clusters it through that store, under the storage lock
        with clusterd_environment({**s3_server.env(), "AWS_ENDPOINT_URL_S3": proxy.endpoint}):
            cluster_started = time.monotonic()
            out = clusterd("cluster", "--base-path", uri, "--props", str(props), "--force", "--commit-wait", "0")
            cluster_s = time.monotonic() - cluster_started
    # Then the run completed its clustering, and each lost answer was one the server had given (the write stored)
    [instant] = completed(spec, "replacecommit")
    assert f"completed {instant}" in out, out
    for fault in (replacecommit, renewal, mdt_log, slow):
        assert fault.fired == 1 and fault.hits[0][1] == 200, fault
    assert replacecommit.hits[0][0].split("/")[-1].startswith(f"{instant}_"), replacecommit.hits
    # nothing is pending on the table's timeline or its metadata table's, and no marker of the clustering is left
    mdt = StorageSpec(f"{uri}/.hoodie/metadata", s3_server.storage_options())
    for timeline in (spec, mdt):
        files = instant_files(timeline)
        done = {f.time for f in files if f.state == "completed"}
        assert done and all(f.time in done for f in files), instant_names(timeline)
    s3 = s3_server.boto3()
    key_prefix = uri.split("/", 3)[3]
    markers = s3.list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{key_prefix}/.hoodie/.temp/{instant}")
    assert markers.get("KeyCount", 0) == 0, markers.get("Contents")
    # the lock was given back: its file says expired, written by the lease whose renewal's answer was lost
    lock = json.loads(s3.get_object(Bucket=s3_server.bucket, Key=f"{key_prefix}/{LOCK_KEY}")["Body"].read())
    assert lock["expired"] is True and lock["owner"] in renewal.body_matches.owners, lock  # type: ignore[union-attr]
    # and Hudi and hudi-rs read exactly the rows written, Hudi's metadata table listing exactly what S3 holds
    assert_reads(hudi, table, batches)
    validate_files(hudi, spec, f"lost_answers_{uuid.uuid4().hex[:8]}", uri=uri).assert_clean()
    print(f"{how}: hudi writes {written_s:.1f}s, cluster {cluster_s:.1f}s, whole {time.monotonic() - started:.1f}s; "
          f"requests through the proxy {proxy.snapshot()}")
