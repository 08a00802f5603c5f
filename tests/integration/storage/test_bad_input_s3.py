"""Bad input for tables on S3 (SeaweedFS): wrong credentials, a missing bucket, an unreachable endpoint, access
denied on the DynamoDB lock table (moto checking IAM), ZooKeeper down, an unknown lock provider class. Through
``hudi-clusterd cluster`` each is one line on stderr naming the bucket, endpoint, table or key, with nothing
written to the bucket; through a daemon's ``run --once`` each broken table's tick fails with one log line naming it
while the good table beside it is clustered. The secret key given never appears in either."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.exit_codes import EXIT_CONFIG, EXIT_FAILURE
from hudi_clusterd.storage import ObjectStorage, StorageSpec, open_storage
from tests.builders import TableGen
from tests.harness.daemon_harness import _clusterd_in_process
from tests.harness.process_lock import ProcessLock
from tests.harness.servers import free_port, start_moto_checking_credentials

STORAGE_LOCK = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"
ZOOKEEPER_LOCK = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"
DYNAMODB_LOCK = "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider"
WRONG_SECRET = "wrong-secret-never-shown"


def _table(s3: Any, prefix: str, commits: int = 3) -> str:
    storage = open_storage(StorageSpec(s3.fresh_uri(prefix), s3.storage_options()))
    assert isinstance(storage, ObjectStorage)
    rng = random.Random(3)
    gen = TableGen(Path("unused"), storage=storage, lock_provider=ProcessLock())
    for _ in range(commits):
        gen.commit({"p1": [rng.uniform(0, 100) for _ in range(20)], "p2": [rng.uniform(0, 100) for _ in range(20)]})
    return storage.base_uri


def _objects(s3: Any, uri: str) -> dict[str, str]:
    """Every object under the table ``uri`` with its ETag."""
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    pages = s3.boto3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    return {o["Key"]: o["ETag"] for page in pages for o in page.get("Contents", [])}


@pytest.fixture(scope="module")
def iam_dynamodb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto server that checks credentials after its first request (which creates the lock table): any key it
    did not issue is refused. Its endpoint."""
    import boto3

    endpoint, proc = start_moto_checking_credentials(tmp_path_factory.mktemp("moto-iam"), 1)
    try:
        boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="admin",
                     aws_secret_access_key="admin").create_table(
            TableName="hudi_locks", KeySchema=[{"AttributeName": "key", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "key", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        yield endpoint
    finally:
        proc.stop()


def _zookeeper_down() -> dict[str, str]:
    return {"hoodie.write.lock.provider": ZOOKEEPER_LOCK, "hoodie.write.lock.zookeeper.url": f"127.0.0.1:{free_port()}",
            "hoodie.write.lock.zookeeper.base_path": "/hudi/locks",
            "hoodie.write.lock.zookeeper.connection_timeout_ms": "3000"}


def _cases(s3: Any, good: str, dynamodb: str) -> dict[str, tuple[str, dict[str, str], str]]:
    """Per case: the base path, the table's properties, and what its one line says (a regular expression)."""
    endpoint = s3.endpoint.replace(".", r"\.")
    return {
        "wrong credentials": (good, {"hoodie.aws.access.key": "AKIAWRONGKEY", "hoodie.aws.secret.key": WRONG_SECRET},
                              rf"s3://hudi/\S+/\.hoodie/hoodie\.properties \(endpoint {endpoint}\): access denied "
                              r"\(HTTP 403\); check the credentials"),
        "missing bucket": ("s3://no-such-bucket/t", {},
                           rf"s3://no-such-bucket/t/\.hoodie/hoodie\.properties \(endpoint {endpoint}\): the bucket "
                           r"does not exist \(HTTP 404 NoSuchBucket\)"),
        "access denied on the DynamoDB lock table": (
            good, {"hoodie.write.lock.provider": DYNAMODB_LOCK, "hoodie.write.lock.dynamodb.table": "hudi_locks",
                   "hoodie.write.lock.dynamodb.region": "us-east-1",
                   "hoodie.write.lock.dynamodb.endpoint_url": dynamodb, "hoodie.write.lock.wait_time_ms": "3000"},
            rf"DynamoDB lock table hudi_locks \(region us-east-1, endpoint {dynamodb.replace('.', '[.]')}\): access "
            r"denied to DescribeTable: InvalidClientTokenId"),
        "ZooKeeper down": (good, _zookeeper_down(), r"ZooKeeper 127\.0\.0\.1:\d+: no connection within 3s"),
        "unknown lock provider": (good, {"hoodie.write.lock.provider": "org.example.NoSuchLockProvider"},
                                  r"hoodie\.write\.lock\.provider: org\.example\.NoSuchLockProvider is not supported"),
    }


def _error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.spark
def test_each_bad_input_is_one_line_through_the_cli_and_nothing_is_written(
        s3_server: Any, iam_dynamodb: str, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    # Given a table on S3 that the CLI reaches through the environment, and a secret key in that environment too
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    good = _table(s3_server, "bad-cli")
    props = tmp_path / "cluster.properties"
    codes = {"unknown lock provider": EXIT_CONFIG}
    for case, (base, settings, says) in _cases(s3_server, good, iam_dynamodb).items():
        props.write_text("".join(f"{k}={v}\n" for k, v in settings.items())
                         + "hoodie.clustering.plan.strategy.sort.columns=x\n")
        before = _objects(s3_server, good)
        # When hudi-clusterd cluster runs on it
        code, out, err = _clusterd_in_process(["cluster", "--base-path", base, "--props", str(props), "--force"])
        # Then it exits with the documented code, printing one line that names what is wrong, no secret, and
        # leaves the bucket as it was
        lines = _error_lines(err)
        assert code == codes.get(case, EXIT_FAILURE), (case, code, err)
        assert len(lines) == 1 and lines[0].startswith("error: ") and re.search(says, lines[0]), (case, err)
        assert WRONG_SECRET not in out + err and s3_server.secret_key not in out + err, case
        assert _objects(s3_server, good) == before, case
    # And an unreachable endpoint is one line naming it
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{free_port()}")
    props.write_text("")
    code, out, err = _clusterd_in_process(["cluster", "--base-path", good, "--props", str(props), "--force"])
    lines = _error_lines(err)
    assert code == EXIT_FAILURE, err
    assert len(lines) == 1 and re.search(r"^error: stat s3://hudi/\S+/\.hoodie/hoodie\.properties \(endpoint "
                                         r"http://127\.0\.0\.1:\d+\): cannot reach the endpoint", lines[0]), err
    assert s3_server.secret_key not in out + err


@pytest.mark.spark
def test_a_daemon_clusters_the_good_table_and_logs_one_line_per_broken_one(
        s3_server: Any, iam_dynamodb: str, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    # Given a daemon with a good table on S3 (Hudi's storage lock) and one broken table of each kind found at a
    # tick (an unknown lock provider class is a settings error, refused at start: below)
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    good = _table(s3_server, "bad-daemon-good", commits=4)
    cases = _cases(s3_server, "", iam_dynamodb)
    unknown_provider = cases.pop("unknown lock provider")
    names = {case: f"broken{i}" for i, case in enumerate(cases)}
    lines = ["clusterd.tables=good," + ",".join(names.values()), "clusterd.metrics.address=off",
             "clusterd.log.format=json", "clusterd.poll.interval.seconds=1", "clusterd.spark.master=local[1]",
             "clusterd.spark.conf.spark.sql.shuffle.partitions=2",
             "hoodie.clustering.async.max.commits=2", "hoodie.clustering.plan.strategy.sort.columns=x",
             f"clusterd.table.good.base.path={good}", f"clusterd.table.good.hoodie.write.lock.provider={STORAGE_LOCK}"]
    broken: dict[str, str] = {}
    for case, (base, settings, _) in cases.items():
        name = names[case]
        broken[name] = base or _table(s3_server, f"bad-daemon-{name}")
        lines.append(f"clusterd.table.{name}.base.path={broken[name]}")
        lines += [f"clusterd.table.{name}.{k}={v}" for k, v in settings.items()]
    props = tmp_path / "daemon.properties"
    props.write_text("\n".join(lines) + "\n")
    before = {name: _objects(s3_server, uri) for name, uri in broken.items() if uri.startswith("s3://hudi/")}
    # When it runs one tick of every table, in a process of its own that finds the server in its environment (as
    # its Spark tasks' Python workers do)
    env = {**os.environ, **s3_server.env(), "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-m", "hudi_clusterd", "run", "--once", "--props", str(props)],
                          capture_output=True, text=True, timeout=600, env=env)
    out, err = done.stdout, done.stderr
    # Then the good table was clustered
    good_files = _objects(s3_server, good)
    assert any(k.endswith(".replacecommit") for k in good_files), sorted(good_files)
    # And each broken table's tick failed with one error line naming it and what is wrong, and wrote nothing
    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    for case, (_, _, says) in cases.items():
        name = names[case]
        errors = [r for r in records if r.get("level") == "error" and r.get("table") == name]
        assert len(errors) == 1, (case, errors)
        assert re.search(says, json.dumps(errors[0])), (case, errors[0])
    for name, objects in before.items():
        assert _objects(s3_server, broken[name]) == objects, name
    assert WRONG_SECRET not in out + err and s3_server.secret_key not in out + err
    # And a daemon given a table with an unknown lock provider class refuses to start, in one line naming the table
    odd = unknown_provider[1]["hoodie.write.lock.provider"]
    props.write_text("\n".join([*lines[1:10], "clusterd.tables=good,odd", f"clusterd.table.odd.base.path={good}",
                                 f"clusterd.table.odd.hoodie.write.lock.provider={odd}"]) + "\n")
    code, out, err = _clusterd_in_process(["run", "--once", "--props", str(props)])
    assert code == EXIT_CONFIG, err
    refused = _error_lines(err)
    assert len(refused) == 1 and "table odd: " in refused[0] and re.search(unknown_provider[2], refused[0]), err
    assert _objects(s3_server, good) == good_files
