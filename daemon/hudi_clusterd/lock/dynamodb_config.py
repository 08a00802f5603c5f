"""The keys of Apache Hudi's DynamoDB lock providers, read with Hudi's names, defaults and inferences (the item's
key: ``hoodie.write.lock.dynamodb.partition_key``, else ``hoodie.table.name``; with
``DynamoDBBasedImplicitPartitionKeyLockProvider``, the XXHash64 of the base path). Credentials are
``hoodie.aws.*``, else the AWS SDK's default chain; the secret key and the session token never appear in a
``repr``, a log line or an error.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from hudi_clusterd.domain.keys import Key, KeyReader, at_least
from hudi_clusterd.domain.values import java_int, java_long, optional_text
from hudi_clusterd.errors import LockError
from hudi_clusterd.lock.base_path_id import base_path_id
from hudi_clusterd.lock.table_keys import TABLE_BASE_PATH, TABLE_NAME, table_name
from hudi_clusterd.storage import Storage
from hudi_clusterd.storage.s3_settings import HUDI_AWS_KEYS

DYNAMODB_PROVIDER = "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider"
DYNAMODB_IMPLICIT_PROVIDER = "org.apache.hudi.aws.transaction.lock.DynamoDBBasedImplicitPartitionKeyLockProvider"

_PREFIX = "hoodie.write.lock.dynamodb."
ACCESS_KEY, SECRET_KEY, SESSION_TOKEN = HUDI_AWS_KEYS

UNPROVISIONED_CAPACITIES = (20, 10)
"""The read and write capacities of a table that is not PROVISIONED (Hudi reads their keys only then)."""
MIN_LEASE_MS = 1_000
"""A shorter lease leaves no time to renew it between heartbeats over a network."""


def _matching(pattern: str, wanted: str) -> Callable[[str], str]:
    """The parser of a value that, stripped, fully matches ``pattern`` (``must be <wanted>, got ...`` if not)."""
    compiled = re.compile(pattern)

    def parse(raw: str) -> str:
        text = raw.strip()
        if not compiled.fullmatch(text):
            raise ValueError(f"must be {wanted}, got {text!r}")
        return text

    return parse


_URL_WANTED = ("must be a URL such as https://dynamodb.us-east-1.amazonaws.com or http://127.0.0.1:8000 "
               "(host[:port] gets https://)")


def _endpoint(raw: str) -> str | None:
    if not raw:
        return None
    url = endpoint_url(raw)
    try:
        parts = urlsplit(url)
        ok = (parts.port is None or parts.port > 0) and bool(parts.hostname) and not parts.query \
            and not parts.fragment and not any(c.isspace() for c in url)
    except ValueError:  # a port that is not a number
        ok = False
    if not ok:
        raise ValueError(f"{_URL_WANTED}, got {raw!r}")
    return url


TABLE = Key(_PREFIX + "table", "hudi_locks", _matching(
    r"[A-Za-z0-9_.-]{3,255}", "a DynamoDB table name (3 to 255 of A-Z a-z 0-9 _ . -)"), (
    "DynamoDB table of the writers' DynamoDBBasedLockProvider lock; created (hash key 'key', type S) when missing, "
    "as Hudi creates it."))
PARTITION_KEY = Key(_PREFIX + "partition_key", None, optional_text, (
    f"The lock item's key; unset = {TABLE_NAME.name} (from the properties, else the table's hoodie.properties), as "
    "Hudi infers it. Ignored by DynamoDBBasedImplicitPartitionKeyLockProvider, whose key is the XXHash64 of the "
    "base path (s3a:// read as s3://)."))
REGION = Key(_PREFIX + "region", "us-east-1", _matching(
    r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?", "an AWS region such as us-east-1"), "Region of the lock table.",
    env=("AWS_REGION",))
ENDPOINT = Key(_PREFIX + "endpoint_url", None, _endpoint, (
    "DynamoDB endpoint (a value without http:// or https:// gets https://); unset = AWS_ENDPOINT_URL_DYNAMODB, "
    "AWS_ENDPOINT_URL, else AWS's endpoint of the region."))
BILLING_MODE = Key(_PREFIX + "billing_mode", "PAY_PER_REQUEST", _matching(
    "PAY_PER_REQUEST|PROVISIONED", "PAY_PER_REQUEST or PROVISIONED"), (
    "Billing mode of a lock table the daemon creates: PAY_PER_REQUEST or PROVISIONED."))
READ_CAPACITY = Key(_PREFIX + "read_capacity", "20", at_least(java_long, 1),
                    "Read capacity of a PROVISIONED lock table it creates.")
WRITE_CAPACITY = Key(_PREFIX + "write_capacity", "10", at_least(java_long, 1),
                     "Write capacity of a PROVISIONED lock table it creates.")
CREATION_TIMEOUT = Key(_PREFIX + "table_creation_timeout", "120000", at_least(java_int, 0),
                       "Milliseconds to wait for a created lock table to become ACTIVE.")
LEASE = Key("hoodie.write.lock.wait_time_ms", "60000", at_least(java_long, MIN_LEASE_MS), (
    "With a DynamoDB lock: the lease in milliseconds written into the lock item (renewed every third of it), as "
    f"Hudi's writers use it; at least {MIN_LEASE_MS}."))
DYNAMODB_KEYS = (TABLE, PARTITION_KEY, REGION, ENDPOINT, BILLING_MODE, READ_CAPACITY, WRITE_CAPACITY,
                 CREATION_TIMEOUT, LEASE)
"""The keys of the DynamoDB locks, for the reference (with the table's, :mod:`.table_keys`, and the AWS
credentials, :data:`~hudi_clusterd.storage.s3_settings.HUDI_AWS_KEYS`)."""


@dataclass(frozen=True, slots=True)
class AwsCredentials:
    """Static credentials from ``hoodie.aws.*``; ``repr`` shows the access key id only."""

    access_key: str
    secret_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    def secrets(self) -> tuple[str, ...]:
        """The values that must never be shown."""
        return tuple(s for s in (self.secret_key, self.session_token) if s)


@dataclass(frozen=True, slots=True)
class DynamoDBLockConfig:
    """Where the lock lives and how it is held, as the writers' keys say (see the module docstring).

    ``partition_key`` is the explicit key (or ``hoodie.table.name`` from the properties); ``None`` means the
    table's ``hoodie.properties`` names it. ``implicit`` selects the base-path hash, of ``base_path`` (Hudi's
    ``hoodie.base.path`` when the properties carry it, else the table storage's base path). ``endpoint_url``
    ``None`` lets boto3 choose (``AWS_ENDPOINT_URL_DYNAMODB``, ``AWS_ENDPOINT_URL``, else AWS's endpoint of the
    region)."""

    table: str
    region: str
    endpoint_url: str | None
    partition_key: str | None
    implicit: bool
    base_path: str | None
    billing_mode: str
    read_capacity: int
    write_capacity: int
    table_creation_timeout_ms: int
    lease_ms: int
    credentials: AwsCredentials | None = field(repr=False)

    @property
    def lease_s(self) -> float:
        return self.lease_ms / 1000.0


def implicit_partition_key(base_path: str) -> str:
    """The partition key of ``DynamoDBBasedImplicitPartitionKeyLockProvider``: Hudi's
    ``HashID.generateXXHashAsString(s3aToS3(base_path), BITS_64)``, upper-case hex of the big-endian hash."""
    return base_path_id(base_path)


def endpoint_url(raw: str) -> str:
    """Hudi's reading of ``hoodie.write.lock.dynamodb.endpoint_url``: a value without ``http://`` or ``https://``
    gets ``https://``."""
    text = raw.strip()
    return text if text.startswith(("https://", "http://")) else "https://" + text


@functools.cache
def known_regions() -> frozenset[str]:
    """Every region botocore knows DynamoDB in, in every partition."""
    import boto3

    session = boto3.session.Session()
    return frozenset(r for p in session.get_available_partitions()
                     for r in session.get_available_regions("dynamodb", partition_name=p))


def _credentials(reader: KeyReader) -> AwsCredentials | None:
    access, secret, token = (reader.get(key) for key in HUDI_AWS_KEYS)
    if access and secret:
        return AwsCredentials(access, secret, token)
    if access:
        reader.problems.append(f"{SECRET_KEY.name}: must be set with {ACCESS_KEY.name}, got nothing")
    elif secret:
        reader.problems.append(f"{ACCESS_KEY.name}: must be set with {SECRET_KEY.name}, got nothing")
    elif token:
        reader.problems.append(f"{SESSION_TOKEN.name}: must come with {ACCESS_KEY.name} and {SECRET_KEY.name}, "
                               "got neither")
    return None


def dynamodb_lock_config(props: Mapping[str, str], *, implicit: bool = False,
                         env: Mapping[str, str] | None = None) -> tuple[DynamoDBLockConfig | None, list[str]]:
    """The lock the writers' keys name (``implicit``: the base-path-hash provider), or ``None`` with the problems
    (``<key>: must be ..., got ...``; a secret's value is never shown). ``env`` (default ``os.environ``) gives
    ``AWS_REGION``, ``AWS_ENDPOINT_URL_DYNAMODB`` and ``AWS_ENDPOINT_URL``."""
    env = os.environ if env is None else env
    reader = KeyReader(props, env)
    table = reader.get(TABLE)
    partition_key: str | None = None
    if not implicit:
        partition_key = reader.get(PARTITION_KEY)
        if reader.is_set(PARTITION_KEY) and not partition_key:
            reader.problems.append(f"{PARTITION_KEY.name}: must not be empty (unset, it is {TABLE_NAME.name}), "
                                   "got ''")
        partition_key = partition_key or reader.get(TABLE_NAME)
    known = len(reader.problems)
    endpoint = reader.get(ENDPOINT)
    if endpoint is None and reader.is_set(ENDPOINT) and len(reader.problems) == known:  # set to ""
        reader.problems.append(f"{ENDPOINT.name}: {_URL_WANTED}, got ''")
    region = reader.parsed(REGION)
    has_endpoint = endpoint is not None or any(env.get(v, "").strip() for v in
                                               ("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"))
    if region is not None and not has_endpoint and region not in known_regions():
        where = (reader.lookup(REGION) or (REGION.name, ""))[0]
        reader.problems.append(f"{where}: must be a region DynamoDB is known in (set {ENDPOINT.name} to use "
                               f"another one), got {region!r}")
    billing = reader.get(BILLING_MODE)
    read, write = ((reader.get(READ_CAPACITY), reader.get(WRITE_CAPACITY)) if billing == "PROVISIONED"
                   else UNPROVISIONED_CAPACITIES)
    creation, lease = reader.get(CREATION_TIMEOUT), reader.get(LEASE)
    credentials = _credentials(reader)
    if reader.problems or region is None:
        return None, reader.problems
    base_path = reader.get(TABLE_BASE_PATH) if implicit else None
    return DynamoDBLockConfig(table, region, endpoint, partition_key, implicit, base_path,
                              billing, read, write, creation, lease, credentials), []


def partition_key(config: DynamoDBLockConfig, storage: Storage | None) -> str:
    """The partition key the writers lock: the base path's hash (implicit), the configured key, or the
    ``hoodie.table.name`` of the table's ``hoodie.properties`` (``LockError`` naming the file when unreadable)."""
    if config.implicit:
        base = config.base_path or (storage.base_uri if storage is not None else None)
        if not base:
            raise LockError(f"{TABLE_BASE_PATH.name}: the base path is needed to derive the DynamoDB lock's "
                            "partition key")
        return implicit_partition_key(base)
    return table_name(config.partition_key, storage, instead_of=PARTITION_KEY.name)


__all__ = [
    "DYNAMODB_IMPLICIT_PROVIDER",
    "DYNAMODB_KEYS",
    "DYNAMODB_PROVIDER",
    "AwsCredentials",
    "DynamoDBLockConfig",
    "dynamodb_lock_config",
    "endpoint_url",
    "implicit_partition_key",
    "partition_key",
]
