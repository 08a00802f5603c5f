"""Apache Hudi on the S3 test server: workers whose writers reach ``s3a://`` tables on SeaweedFS, and the options
that make those writers share a table's lock through DynamoDB (moto's server) or ZooKeeper.

A worker for a setup on S3 (:func:`s3_worker`) is the setup's bundle plus what ``HudiSetup.s3_runtimes`` lists
(Hadoop's S3A connector for PySpark 3.5.1; for Hudi 0.15.0 also the runtime of its ``DynamoDBBasedLockProvider``,
which the bundles lack), the S3A settings of ``../shared/docs/hudi-object-stores.md`` §8 as ``spark.hadoop.*``
(endpoint, path-style access, no TLS, the server's keys through the simple credentials provider, ``s3://`` served
by S3A too, fail-fast connection settings, a pool of 16,000 connections for Hudi 1.2's metadata-table reader,
which keeps taking connections and never gives them back (the server closes them, they stay in CLOSE-WAIT): 500
ran out at the 13th micro-batch of a stream beside the daemon, 2,000 at the 45th of the S3 crash-point run, whose
checks read the table through Hudi after every kill, and that run holds about 180 more per kill, so its 50 kills
need about 9,000; each connection is an open socket of the worker, which may have 20,000 open files here), and an
environment a developer's own AWS settings cannot leak into. It is a :class:`~tests.harness.apache_hudi.HudiWorker`
under a :class:`~tests.harness.apache_hudi.WorkerProfile`, shared like every worker by the session's
:class:`~tests.harness.apache_hudi.HudiWorkers` (one running at a time).

Writer options: :func:`s3_writer_options` is the project's writer settings (``hudi_write_options``) with the lock
set-up of :func:`dynamodb_lock_options` or :func:`zookeeper_lock_options` in place of the file-system lock;
:func:`lock_props` picks from them what a lock provider of the table is built from (Hudi's, in the worker, and the
daemon's), so that both sides name the same lock.

A missing runtime skips the calling test naming it, or fails it under ``CLUSTERD_REQUIRE_HUDI=1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.harness import hudi_setup
from tests.harness.apache_hudi import (
    REQUIRE_ENV,
    HudiUnavailableError,
    HudiWorker,
    HudiWorkers,
    WorkerProfile,
    hudi_required,
    hudi_write_options,
)
from tests.harness.hudi_versions import HudiSetup

DYNAMODB_PROVIDER = "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider"
ZOOKEEPER_PROVIDER = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"
LOCK_TABLE = "hudi_locks"
ZOOKEEPER_BASE_PATH = "/hudi/locks"
S3A_CONNECTION_MAXIMUM = "16000"

# Variables of a developer's own AWS set-up that must not reach the worker's SDKs.
_UNSET = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
          "AWS_ENDPOINT_URL_DYNAMODB", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ACCESS_KEY_ID",
          "AWS_SECRET_ACCESS_KEY")

# Optimistic concurrency with LAZY cleaning of failed writes: what a shared lock needs (both key names: Hudi 0.x
# reads the first, 1.x the second and still accepts the first).
OCC_OPTIONS: Mapping[str, str] = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.cleaner.policy.failed.writes": "LAZY",
    "hoodie.clean.failed.writes.policy": "LAZY",
}

# What a lock provider is built from, beside the hoodie.write.lock.* keys.
_LOCK_CONTEXT_KEYS = ("hoodie.table.name", "hoodie.base.path", "hoodie.aws.access.key", "hoodie.aws.secret.key",
                      "hoodie.aws.session.token")


def s3a_uri(uri: str) -> str:
    """``s3://bucket/key`` as ``s3a://bucket/key`` (what Hudi's writers are given); other URIs as they are."""
    return "s3a://" + uri[len("s3://"):] if uri.startswith("s3://") else uri


def s3a_hadoop_conf(s3: Any) -> dict[str, str]:
    """Hadoop's S3A settings that reach the test server ``s3`` (a ``tests.harness.servers.S3Server``)."""
    return {
        "fs.s3a.endpoint": s3.endpoint,
        "fs.s3a.endpoint.region": s3.region,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.access.key": s3.access_key,
        "fs.s3a.secret.key": s3.secret_key,
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.s3a.connection.establish.timeout": "5000",
        "fs.s3a.attempts.maximum": "3",
        "fs.s3a.connection.maximum": S3A_CONNECTION_MAXIMUM,
    }


def locate_s3_runtime(setup: HudiSetup) -> list[Path]:
    """The jars ``setup`` adds on S3, from the cache; :class:`HudiUnavailableError` names what is missing."""
    missing = hudi_setup.missing_s3_for(setup)
    if missing:
        what = "; ".join(m.detail for m in missing)
        raise HudiUnavailableError(f"Apache Hudi setup {setup.name} cannot run on S3: missing {what}. Run "
                                   f"`{hudi_setup.SETUP_COMMAND}`")
    return [jar for runtime in setup.s3_runtimes for jar in hudi_setup.runtime_jars(runtime) or []]


def s3_profile(setup: HudiSetup, s3: Any) -> WorkerProfile:
    """The worker profile of ``setup`` on the test server ``s3``: its S3 runtimes on ``spark.jars``, the S3A
    settings as ``spark.hadoop.*``, and the environment (no instance metadata, the server's region for the AWS SDKs,
    a developer's AWS variables unset)."""
    jars = locate_s3_runtime(setup)
    env: list[tuple[str, str | None]] = [(name, None) for name in _UNSET]
    env += [("AWS_EC2_METADATA_DISABLED", "true"), ("AWS_REGION", s3.region), ("AWS_DEFAULT_REGION", s3.region)]
    return WorkerProfile(
        name="s3",
        jars=tuple(jars),
        spark_conf=tuple((f"spark.hadoop.{k}", v) for k, v in s3a_hadoop_conf(s3).items()),
        env=tuple(env),
    )


def require_s3_profile(setup: HudiSetup, s3: Any) -> WorkerProfile:
    """:func:`s3_profile`, or skip the calling test naming what is missing (fail it under
    ``CLUSTERD_REQUIRE_HUDI=1``)."""
    try:
        return s3_profile(setup, s3)
    except HudiUnavailableError as exc:
        if hudi_required():
            pytest.fail(f"{exc} ({REQUIRE_ENV}=1)", pytrace=False)
        pytest.skip(str(exc))


def s3_worker(workers: HudiWorkers, setup: HudiSetup, s3: Any) -> HudiWorker:
    """A running worker of ``setup`` whose writers reach the test server ``s3``, from the session's ``workers``
    (started on first use, shared by the setups of one bundle; another bundle's or profile's worker stops first).
    Skips or fails as :func:`require_s3_profile` and ``require_installation`` do."""
    return workers.for_setup(setup, require_s3_profile(setup, s3))


def dynamodb_lock_options(dynamodb: Any, *, table: str = LOCK_TABLE) -> dict[str, str]:
    """Hudi's DynamoDB lock on moto's server ``dynamodb`` (a ``tests.harness.servers.DynamoServer``): its table,
    region, endpoint and credentials; the partition key is left to Hudi's inference (``hoodie.table.name``)."""
    return {
        "hoodie.write.lock.provider": DYNAMODB_PROVIDER,
        "hoodie.write.lock.dynamodb.table": table,
        "hoodie.write.lock.dynamodb.region": dynamodb.region,
        "hoodie.write.lock.dynamodb.endpoint_url": dynamodb.endpoint,
        "hoodie.aws.access.key": dynamodb.access_key,
        "hoodie.aws.secret.key": dynamodb.secret_key,
    }


def zookeeper_lock_options(zookeeper: Any, *, base_path: str = ZOOKEEPER_BASE_PATH) -> dict[str, str]:
    """Hudi's ZooKeeper lock on ``zookeeper`` (a ``tests.harness.servers.ZooKeeperServer``): the whole connect
    string as ``url`` and the base path; the lock key is left to Hudi's inference (``hoodie.table.name``)."""
    return {
        "hoodie.write.lock.provider": ZOOKEEPER_PROVIDER,
        "hoodie.write.lock.zookeeper.url": zookeeper.connect,
        "hoodie.write.lock.zookeeper.base_path": base_path,
    }


def s3_writer_options(
    setup: HudiSetup,
    table_name: str,
    lock_options: Mapping[str, str],
    *,
    record_key: str = "id",
    partition_path: str | None = "part",
    precombine: str | None = "ts",
    operation: str = "upsert",
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Writer options of a shared table on S3: the project's writer settings (``hudi_write_options``) with
    ``lock_options`` (:func:`dynamodb_lock_options`, :func:`zookeeper_lock_options`) as its lock, optimistic
    concurrency and LAZY failed-writes cleaning, then ``extra``."""
    options = hudi_write_options(setup, table_name, record_key=record_key, partition_path=partition_path,
                                 precombine=precombine, operation=operation)
    options = {k: v for k, v in options.items() if not k.startswith("hoodie.write.lock.provider")}
    options.update(OCC_OPTIONS)
    options.update(lock_options)
    options.update(extra or {})
    return options


def lock_props(writer_options: Mapping[str, str], base_uri: str) -> dict[str, str]:
    """What a provider of the lock ``writer_options`` name is built from: their ``hoodie.write.lock.*`` keys, the
    table's name, its base path ``base_uri`` (as the writers were given it) and the ``hoodie.aws.*`` credentials."""
    props = {k: v for k, v in writer_options.items()
             if k.startswith("hoodie.write.lock.") or k in _LOCK_CONTEXT_KEYS}
    props["hoodie.base.path"] = base_uri
    return props


def dynamodb_lock_owners(client: Any, lock_key: str, *, table: str = LOCK_TABLE) -> list[str]:
    """Who holds the DynamoDB lock ``lock_key`` (a boto3 DynamoDB ``client``): the item's ``ownerName``, read
    consistently; none when there is no item, or no lock table yet (the first writer that locks creates it)."""
    try:
        item = client.get_item(TableName=table, Key={"key": {"S": lock_key}}, ConsistentRead=True).get("Item")
    except client.exceptions.ResourceNotFoundException:
        return []
    owner = (item or {}).get("ownerName", {}).get("S")
    return [owner] if owner else []


def zookeeper_lock_nodes(zk: Any, lock_key: str, *, base_path: str = ZOOKEEPER_BASE_PATH) -> list[str]:
    """The nodes under the ZooKeeper lock ``<base_path>/<lock_key>`` (a started kazoo client ``zk``): each
    holder's or waiter's, by name; none when the lock path does not exist yet."""
    from kazoo.exceptions import NoNodeError

    try:
        return sorted(zk.get_children(f"{base_path}/{lock_key}"))
    except NoNodeError:
        return []
