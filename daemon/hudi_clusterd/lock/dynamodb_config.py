"""The keys of Apache Hudi's DynamoDB lock providers, read with Hudi's names, defaults and inferences.

``DynamoDBBasedLockProvider`` locks one item of a DynamoDB table (``hoodie.write.lock.dynamodb.table``, default
``hudi_locks``) whose hash key ``key`` is ``hoodie.write.lock.dynamodb.partition_key``; when that key is unset,
Hudi infers it from ``hoodie.table.name``. ``DynamoDBBasedImplicitPartitionKeyLockProvider`` (Hudi 1.x) ignores it
and uses the XXHash64 of the table's base path instead (:func:`implicit_partition_key`). Every writer of a table
and the daemon must agree on the table, the region or endpoint and the partition key: the daemon reads the same
keys and infers the same way, reading ``hoodie.table.name`` from the table's ``hoodie.properties`` when the
properties do not carry it.

Credentials are Hudi's ``hoodie.aws.access.key`` / ``hoodie.aws.secret.key`` / ``hoodie.aws.session.token``, else
the AWS SDK's default chain. The secret key and the session token never appear in a ``repr``, a log line or an
error.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from hudi_clusterd.domain.values import java_int, java_long
from hudi_clusterd.errors import LockError, MetadataDecodeError, StorageError
from hudi_clusterd.formats.java_properties import parse_properties
from hudi_clusterd.lock.base_path_id import base_path_id
from hudi_clusterd.storage import Storage

DYNAMODB_PROVIDER = "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider"
DYNAMODB_IMPLICIT_PROVIDER = "org.apache.hudi.aws.transaction.lock.DynamoDBBasedImplicitPartitionKeyLockProvider"

_PREFIX = "hoodie.write.lock.dynamodb."
TABLE_KEY = _PREFIX + "table"
PARTITION_KEY_KEY = _PREFIX + "partition_key"
REGION_KEY = _PREFIX + "region"
ENDPOINT_KEY = _PREFIX + "endpoint_url"
BILLING_MODE_KEY = _PREFIX + "billing_mode"
READ_CAPACITY_KEY = _PREFIX + "read_capacity"
WRITE_CAPACITY_KEY = _PREFIX + "write_capacity"
CREATION_TIMEOUT_KEY = _PREFIX + "table_creation_timeout"
WAIT_TIME_KEY = "hoodie.write.lock.wait_time_ms"
ACCESS_KEY_KEY = "hoodie.aws.access.key"
SECRET_KEY_KEY = "hoodie.aws.secret.key"
SESSION_TOKEN_KEY = "hoodie.aws.session.token"
TABLE_NAME_KEY = "hoodie.table.name"
BASE_PATH_KEY = "hoodie.base.path"

DEFAULT_TABLE = "hudi_locks"
DEFAULT_REGION = "us-east-1"
DEFAULT_BILLING_MODE = "PAY_PER_REQUEST"
BILLING_MODES = ("PAY_PER_REQUEST", "PROVISIONED")
DEFAULT_READ_CAPACITY = 20
DEFAULT_WRITE_CAPACITY = 10
DEFAULT_CREATION_TIMEOUT_MS = 120_000
DEFAULT_LEASE_MS = 60_000
MIN_LEASE_MS = 1_000
"""A shorter lease leaves no time to renew it between heartbeats over a network."""

_TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")
_REGION_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


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

    table: str = DEFAULT_TABLE
    region: str = DEFAULT_REGION
    endpoint_url: str | None = None
    partition_key: str | None = None
    implicit: bool = False
    base_path: str | None = None
    billing_mode: str = DEFAULT_BILLING_MODE
    read_capacity: int = DEFAULT_READ_CAPACITY
    write_capacity: int = DEFAULT_WRITE_CAPACITY
    table_creation_timeout_ms: int = DEFAULT_CREATION_TIMEOUT_MS
    lease_ms: int = DEFAULT_LEASE_MS
    credentials: AwsCredentials | None = field(default=None, repr=False)

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


def _region(props: Mapping[str, str], env: Mapping[str, str], has_endpoint: bool,
            problems: list[str]) -> str:
    if REGION_KEY in props:
        region, source = props[REGION_KEY].strip(), REGION_KEY
    elif env.get("AWS_REGION", "").strip():
        region, source = env["AWS_REGION"].strip(), f"{REGION_KEY} (from AWS_REGION)"
    else:
        return DEFAULT_REGION
    if not _REGION_NAME.fullmatch(region):
        problems.append(f"{source}: must be an AWS region such as us-east-1, got {region!r}")
    elif not has_endpoint and region not in known_regions():
        problems.append(f"{source}: must be a region DynamoDB is known in (set {ENDPOINT_KEY} to use another "
                        f"one), got {region!r}")
    return region


def _endpoint(props: Mapping[str, str], problems: list[str]) -> str | None:
    raw = props.get(ENDPOINT_KEY)
    if raw is None:
        return None
    url = endpoint_url(raw)
    try:
        parts = urlsplit(url)
        ok = (parts.port is None or parts.port > 0) and bool(parts.hostname) and not parts.query \
            and not parts.fragment and not any(c.isspace() for c in url)
    except ValueError:  # a port that is not a number
        ok = False
    if not ok:
        problems.append(f"{ENDPOINT_KEY}: must be a URL such as https://dynamodb.us-east-1.amazonaws.com or "
                        f"http://127.0.0.1:8000 (host[:port] gets https://), got {raw!r}")
    return url


def _integer(props: Mapping[str, str], key: str, default: int, minimum: int, problems: list[str],
             *, long: bool = True) -> int:
    raw = props.get(key)
    if raw is None:
        return default
    try:
        value = java_long(raw) if long else java_int(raw)
    except ValueError as e:
        problems.append(f"{key}: {e}")
        return default
    if value < minimum:
        problems.append(f"{key}: must be >= {minimum}, got {value}")
    return value


def _credentials(props: Mapping[str, str], problems: list[str]) -> AwsCredentials | None:
    access = props.get(ACCESS_KEY_KEY, "").strip()
    secret = props.get(SECRET_KEY_KEY, "").strip()
    token = props.get(SESSION_TOKEN_KEY, "").strip() or None
    if access and secret:
        return AwsCredentials(access, secret, token)
    if access:
        problems.append(f"{SECRET_KEY_KEY}: must be set with {ACCESS_KEY_KEY}, got nothing")
    elif secret:
        problems.append(f"{ACCESS_KEY_KEY}: must be set with {SECRET_KEY_KEY}, got nothing")
    elif token:
        problems.append(f"{SESSION_TOKEN_KEY}: must come with {ACCESS_KEY_KEY} and {SECRET_KEY_KEY}, got neither")
    return None


def dynamodb_lock_config(props: Mapping[str, str], *, implicit: bool = False,
                         env: Mapping[str, str] | None = None) -> tuple[DynamoDBLockConfig | None, list[str]]:
    """The lock the writers' keys name (``implicit``: the base-path-hash provider), or ``None`` with the problems
    (``<key>: must be ..., got ...``; a secret's value is never shown). ``env`` (default ``os.environ``) gives
    ``AWS_REGION``, ``AWS_ENDPOINT_URL_DYNAMODB`` and ``AWS_ENDPOINT_URL``."""
    env = os.environ if env is None else env
    problems: list[str] = []
    table = props.get(TABLE_KEY, DEFAULT_TABLE).strip()
    if not _TABLE_NAME.fullmatch(table):
        problems.append(f"{TABLE_KEY}: must be a DynamoDB table name (3 to 255 of A-Z a-z 0-9 _ . -), got {table!r}")
    partition_key: str | None = None
    if not implicit:
        if PARTITION_KEY_KEY in props:
            partition_key = props[PARTITION_KEY_KEY].strip()
            if not partition_key:
                problems.append(f"{PARTITION_KEY_KEY}: must not be empty (unset, it is {TABLE_NAME_KEY}), got ''")
        elif props.get(TABLE_NAME_KEY, "").strip():
            partition_key = props[TABLE_NAME_KEY].strip()
    endpoint = _endpoint(props, problems)
    has_endpoint = endpoint is not None or any(env.get(v, "").strip() for v in
                                               ("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"))
    region = _region(props, env, has_endpoint, problems)
    billing = props.get(BILLING_MODE_KEY, DEFAULT_BILLING_MODE).strip()
    if billing not in BILLING_MODES:
        problems.append(f"{BILLING_MODE_KEY}: must be {' or '.join(BILLING_MODES)}, got {billing!r}")
    read, write = DEFAULT_READ_CAPACITY, DEFAULT_WRITE_CAPACITY
    if billing == "PROVISIONED":  # Hudi reads the capacities only then
        read = _integer(props, READ_CAPACITY_KEY, DEFAULT_READ_CAPACITY, 1, problems)
        write = _integer(props, WRITE_CAPACITY_KEY, DEFAULT_WRITE_CAPACITY, 1, problems)
    creation = _integer(props, CREATION_TIMEOUT_KEY, DEFAULT_CREATION_TIMEOUT_MS, 0, problems, long=False)
    lease = _integer(props, WAIT_TIME_KEY, DEFAULT_LEASE_MS, MIN_LEASE_MS, problems)
    credentials = _credentials(props, problems)
    if problems:
        return None, problems
    base_path = (props.get(BASE_PATH_KEY, "").strip() or None) if implicit else None
    return DynamoDBLockConfig(table, region, endpoint, partition_key, implicit, base_path, billing, read, write,
                              creation, lease, credentials), []


def partition_key(config: DynamoDBLockConfig, storage: Storage | None) -> str:
    """The partition key the writers lock: the base path's hash (implicit), the configured key, or the
    ``hoodie.table.name`` of the table's ``hoodie.properties`` (``LockError`` naming the file when unreadable)."""
    if config.implicit:
        base = config.base_path or (storage.base_uri if storage is not None else None)
        if not base:
            raise LockError(f"{BASE_PATH_KEY}: the base path is needed to derive the DynamoDB lock's partition key")
        return implicit_partition_key(base)
    if config.partition_key:
        return config.partition_key
    if storage is None:
        raise LockError(f"{PARTITION_KEY_KEY}: not set, and no table to read {TABLE_NAME_KEY} from")
    name = _table_name(storage)
    if not name:
        raise LockError(f"{storage.full_path('.hoodie/hoodie.properties')}: no {TABLE_NAME_KEY}, so the DynamoDB "
                        f"lock's partition key cannot be inferred; set {PARTITION_KEY_KEY} to the writers' value")
    return name


def _table_name(storage: Storage) -> str | None:
    errors: list[str] = []
    for rel in (".hoodie/hoodie.properties", ".hoodie/hoodie.properties.backup"):
        try:
            text = storage.read_bytes(rel).decode("iso-8859-1")  # Java's properties encoding
        except StorageError as e:
            errors.append(str(e))
            continue
        try:
            return parse_properties(text, storage.full_path(rel)).get(TABLE_NAME_KEY, "").strip() or None
        except MetadataDecodeError as e:
            raise LockError(f"{PARTITION_KEY_KEY} is not set and {TABLE_NAME_KEY} cannot be read: {e}") from e
    raise LockError(f"{PARTITION_KEY_KEY} is not set and {TABLE_NAME_KEY} cannot be read: {errors[0]}")


def reference() -> list[tuple[str, str | None, str]]:
    """``(key, default, description)`` of every key the DynamoDB lock reads."""
    return [
        (TABLE_KEY, DEFAULT_TABLE, "DynamoDB table of the writers' DynamoDBBasedLockProvider lock; created (hash key "
         "'key', type S) when missing, as Hudi creates it."),
        (PARTITION_KEY_KEY, None, f"The lock item's key; unset = {TABLE_NAME_KEY} (from the properties, else the "
         "table's hoodie.properties), as Hudi infers it. Ignored by DynamoDBBasedImplicitPartitionKeyLockProvider, "
         "whose key is the XXHash64 of the base path (s3a:// read as s3://)."),
        (REGION_KEY, DEFAULT_REGION, "Region of the lock table; unset = AWS_REGION when set, else us-east-1."),
        (ENDPOINT_KEY, None, "DynamoDB endpoint (a value without http:// or https:// gets https://); unset = "
         "AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL, else AWS's endpoint of the region."),
        (BILLING_MODE_KEY, DEFAULT_BILLING_MODE, "Billing mode of a lock table the daemon creates: PAY_PER_REQUEST "
         "or PROVISIONED."),
        (READ_CAPACITY_KEY, str(DEFAULT_READ_CAPACITY), "Read capacity of a PROVISIONED lock table it creates."),
        (WRITE_CAPACITY_KEY, str(DEFAULT_WRITE_CAPACITY), "Write capacity of a PROVISIONED lock table it creates."),
        (CREATION_TIMEOUT_KEY, str(DEFAULT_CREATION_TIMEOUT_MS), "Milliseconds to wait for a created lock table to "
         "become ACTIVE."),
        (WAIT_TIME_KEY, str(DEFAULT_LEASE_MS), "With a DynamoDB lock: the lease in milliseconds written into the "
         f"lock item (renewed every third of it), as Hudi's writers use it; at least {MIN_LEASE_MS}."),
        (ACCESS_KEY_KEY, None, "AWS access key id for the DynamoDB lock; unset = the AWS SDK's default credentials "
         "(environment, profile, instance role)."),
        (SECRET_KEY_KEY, None, "AWS secret key, with hoodie.aws.access.key; never logged."),
        (SESSION_TOKEN_KEY, None, "AWS session token of temporary credentials, with the two above; never logged."),
    ]


__all__ = [
    "DYNAMODB_IMPLICIT_PROVIDER",
    "DYNAMODB_PROVIDER",
    "AwsCredentials",
    "DynamoDBLockConfig",
    "dynamodb_lock_config",
    "endpoint_url",
    "implicit_partition_key",
    "partition_key",
    "reference",
]
