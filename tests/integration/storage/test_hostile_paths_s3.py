"""Hostile paths (``../x``, ``/etc/x``, ``a\\..\\b``, ``s3://other-bucket/x``, NUL) in a clustering plan, a
commit's write stats, a rollback plan and a marker of a table on S3 (SeaweedFS): the command that reads each
(``execute``, ``cluster``, ``rollback``, reaching the server through the environment) refuses it in one line naming
the file and the path, and nothing outside the table's prefix changes: the canary ``x`` beside the table (``../x``
names it), an object under a sibling prefix whose name starts with the table's, and ``x`` in another bucket keep
their bytes, ETag and modification time, and so do the table's data files. The same on local disk:
``tests/unit/test_cli_hostile_paths.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.storage import ObjectStorage, StorageSpec, open_storage
from tests.builders import TableGen
from tests.harness.daemon_harness import _clusterd_in_process
from tests.harness.hostile_paths import CANARY, HOSTILE_PATHS, PLACES, plant
from tests.harness.process_lock import ProcessLock

OTHER_BUCKET = "other-bucket"
STORAGE_LOCK = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"


def _objects(s3: Any, bucket: str, prefix: str = "") -> dict[str, tuple[bytes, str, str]]:
    """Every object under ``prefix`` of ``bucket`` with its bytes, ETag and modification time."""
    client = s3.boto3()
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            body = client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            out[o["Key"]] = (body, o["ETag"], o["LastModified"].isoformat())
    return out


@pytest.fixture(scope="module")
def other_bucket(s3_server: Any) -> str:
    """A second bucket holding the canary ``x`` (``s3://other-bucket/x`` names it)."""
    client = s3_server.boto3()
    if OTHER_BUCKET not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
        client.create_bucket(Bucket=OTHER_BUCKET)
    client.put_object(Bucket=OTHER_BUCKET, Key=CANARY, Body=b"canary in another bucket")
    return OTHER_BUCKET


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", sorted(HOSTILE_PATHS))
def test_a_hostile_path_on_s3_is_refused_in_one_line_and_nothing_outside_the_table_changes(
        s3_server: Any, other_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, place: str,
        name: str) -> None:
    # Given a table on S3, the canary x beside it, an object under a sibling prefix and x in another bucket
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    path = HOSTILE_PATHS[name]
    here = s3_server.fresh_uri("hostile")
    storage = open_storage(StorageSpec(f"{here}/t", s3_server.storage_options()))
    assert isinstance(storage, ObjectStorage)
    gen = TableGen(Path("unused"), storage=storage, lock_provider=ProcessLock())
    for i in range(3):
        gen.commit({"p1": [float(i), i + 0.5], "p2": [float(i)]})
    beside = open_storage(StorageSpec(here, s3_server.storage_options()))
    beside.put(CANARY, b"canary")
    beside.put(f"t-evil/{CANARY}", b"canary too")
    props = tmp_path / "cluster.properties"
    props.write_text(f"hoodie.write.lock.provider={STORAGE_LOCK}\nhoodie.clustering.plan.strategy.sort.columns=x\n")
    # And the hostile path written into the place
    planted = plant(gen, place, path, str(props))
    bucket, _, prefix = here[len("s3://"):].partition("/")
    table_prefix = f"{prefix}/t/"

    def outside() -> dict[str, tuple[bytes, str, str]]:
        return {k: v for k, v in _objects(s3_server, bucket).items() if not k.startswith(table_prefix)}

    def data_files() -> dict[str, tuple[bytes, str, str]]:
        return {k: v for k, v in _objects(s3_server, bucket, table_prefix).items() if k.endswith(".parquet")}

    before, other, data = outside(), _objects(s3_server, other_bucket), data_files()
    assert {f"{prefix}/{CANARY}", f"{prefix}/t-evil/{CANARY}"} <= set(before) and CANARY in other
    # When the command that reads it runs
    code, _out, err = _clusterd_in_process(planted.argv)
    # Then it is refused in one line naming the file and the path
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert planted.file in lines[0] and repr(path)[1:-1] in lines[0], lines[0]
    # And nothing outside the table's prefix, in this bucket or the other, nor any data file of the table changed
    assert outside() == before
    assert _objects(s3_server, other_bucket) == other
    assert data_files() == data
