"""Where an object-store URI points (`parse_location`), the obstore client that reaches it, configured the way the
clouds' own SDKs are (`build_store`, held by an `ObjectClient`), and the S3A settings that reach the same bucket from
Spark (`s3a_bucket_options`).

URIs: ``s3://bucket/path`` and ``s3a://bucket/path`` (the same objects: Hudi records paths with its writer's
scheme), ``gs://bucket/path``, ``abfs[s]://container@account.dfs.core.windows.net/path`` and ``az://container/path``
(the account from the options or ``AZURE_STORAGE_ACCOUNT_NAME``).

Settings: the spec's options (obstore's own keys, its HTTP client's `CLIENT_KEYS`, the retries'
`RETRY_OPTION_KEYS`), then the environment; S3's are resolved by `s3_settings`, for this client and S3A alike, and
GCS and Azure read their own variables, as obstore does (docs/operations.md, "Tables on object stores"). The option
``store=memory`` serves the URI from this process's in-memory store of that bucket name (obstore's ``MemoryStore``,
for tests).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

from hudi_clusterd.domain.keys import Key, KeyReader, at_least
from hudi_clusterd.domain.values import java_int
from hudi_clusterd.errors import StorageAccessError, StorageError
from hudi_clusterd.storage.requests import RequestCounts
from hudi_clusterd.storage.s3_settings import DEFAULT_REGION, S3Credentials, S3Settings, resolve_s3, truthy

if TYPE_CHECKING:
    from obstore.store import ClientConfig, MemoryStore, ObjectStore, RetryConfig, S3Credential

Cloud = Literal["s3", "gcs", "azure"]
S3_SCHEMES: Final = frozenset({"s3", "s3a"})
"""The schemes Hudi's writers name S3 objects with (``StorageSchemes``); one family of objects."""
GCS_SCHEMES: Final = frozenset({"gs"})
AZURE_SCHEMES: Final = frozenset({"abfs", "abfss", "az"})
OBJECT_STORE_SCHEMES: Final = S3_SCHEMES | GCS_SCHEMES | AZURE_SCHEMES

CLIENT_KEYS: Final = frozenset({
    "allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type", "http1_only",
    "http2_keep_alive_interval", "http2_keep_alive_timeout", "http2_keep_alive_while_idle", "http2_only",
    "pool_idle_timeout", "pool_max_idle_per_host", "proxy_url", "proxy_ca_certificate", "proxy_excludes",
    "randomize_addresses", "read_timeout", "root_certificate", "timeout", "user_agent"})
"""Options for obstore's HTTP client rather than for the store."""
STORE_KEY: Final = "store"

DEFAULT_CLIENT: Final[Mapping[str, str]] = {"connect_timeout": "5s", "read_timeout": "30s", "timeout": "300s"}
"""A connection is given 5 s, a stalled answer 30 s, a whole request (a large range or part) 5 minutes."""


def _seconds(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError(f"must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"must be > 0 seconds, got {raw.strip()}")
    return value


MAX_RETRIES = Key("max_retries", "4", at_least(java_int, 0), (
    "Object stores (S3, GCS, Azure): how often a failed request is retried, backing off from 100 ms to at most "
    "5 s (an unreachable endpoint fails within about two seconds)."))
RETRY_TIMEOUT = Key("retry_timeout", "60", _seconds, (
    "Object stores: seconds after which a request is no longer retried."))
RETRY_OPTION_KEYS: Final = (MAX_RETRIES, RETRY_TIMEOUT)
"""Every store's retry options (the other options go to obstore as they are)."""
_CREDENTIAL_TTL: Final = timedelta(minutes=5)
_SIMPLE: Final = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
_TEMPORARY: Final = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
S3A_FILE_SYSTEM: Final = "org.apache.hadoop.fs.s3a.S3AFileSystem"
S3_SCHEME_KEY: Final = "spark.hadoop.fs.s3.impl"
"""The Spark setting that has ``s3://`` served by `S3A_FILE_SYSTEM` too."""


@dataclass(frozen=True, slots=True)
class Location:
    """Where an object-store URI points: ``netloc`` and ``key`` as written (no slashes around the key),
    ``bucket`` (the container on Azure) and, on Azure, the account when the URI names it."""

    scheme: str
    cloud: Cloud
    netloc: str
    bucket: str
    key: str
    account: str | None = None

    @property
    def family(self) -> str:
        """Schemes of one family name the same objects (``s3`` and ``s3a``; ``abfs`` and ``abfss``)."""
        return "s3" if self.scheme in S3_SCHEMES else {"abfss": "abfs"}.get(self.scheme, self.scheme)

    def same_bucket(self, other: Location) -> bool:
        return (self.family, self.bucket, self.account) == (other.family, other.bucket, other.account)


def parse_location(uri: str) -> Location:
    """The location of an object-store URI; `StorageError` naming it when it is not one."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme not in OBJECT_STORE_SCHEMES:
        raise StorageError(f"{uri}: not an object-store URI ({', '.join(sorted(OBJECT_STORE_SCHEMES))})")
    if parts.query or parts.fragment or "?" in uri or "#" in uri:
        raise StorageError(f"{uri}: give object-store options as the spec's options, not in the URI")
    netloc = parts.netloc
    if not netloc:
        raise StorageError(f"{uri}: no bucket (expected {scheme}://<bucket>/<path>)")
    key = parts.path.strip("/")
    if any(seg in (".", "..") for seg in key.split("/")) or "//" in key:
        raise StorageError(f"{uri}: a path with empty, '.' or '..' segments names no object")
    if scheme in S3_SCHEMES:
        return Location(scheme, "s3", netloc, netloc, key)
    if scheme in GCS_SCHEMES:
        return Location(scheme, "gcs", netloc, netloc, key)
    container, at, host = netloc.partition("@")
    account = None
    if at:
        labels = host.split(".")
        if not container or len(labels) < 3 or labels[1] not in ("dfs", "blob"):
            raise StorageError(f"{uri}: expected {scheme}://<container>@<account>.dfs.core.windows.net/<path>")
        account = labels[0]
    return Location(scheme, "azure", netloc, container, key, account)


class MemoryBuckets:
    """In-memory object stores of this process by bucket name (obstore ``MemoryStore``s, thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stores: dict[str, MemoryStore] = {}

    def get(self, bucket: str) -> MemoryStore:
        from obstore.store import MemoryStore

        with self._lock:
            return self._stores.setdefault(bucket, MemoryStore())

    def drop(self, bucket: str) -> None:
        with self._lock:
            self._stores.pop(bucket, None)


@dataclass(frozen=True, slots=True)
class StoreSetup:
    """A built store, and where its requests go (for messages: no credentials in it)."""

    store: ObjectStore
    endpoint: str
    bulk_delete: bool
    """Whether a delete of many keys is one request per 1000 keys (else one per key)."""


@dataclass(frozen=True, slots=True)
class Versions:
    """How a store versions its objects: ``field`` is the metadata field that is an object's version and that
    conditional writes compare; ``unique`` whether every write makes a new one."""

    field: Literal["e_tag", "version"]
    unique: bool


def _is_memory(options: Mapping[str, str]) -> bool:
    return STORE_KEY in {k.strip().lower() for k in options}


def versions(loc: Location, options: Mapping[str, str]) -> Versions:
    """How the store of ``loc`` versions objects (known without building it)."""
    if _is_memory(options):
        return Versions("e_tag", unique=True)  # the memory store's ETag is a counter
    if loc.cloud == "gcs":
        return Versions("version", unique=True)  # generations
    return Versions("e_tag", unique=loc.cloud == "azure")  # S3: MD5 of the bytes; Azure: new on every write


def safe_endpoint(endpoint: str) -> str:
    """An endpoint URL without any user or password in it."""
    parts = urlsplit(endpoint)
    if parts.username is None and parts.password is None:
        return endpoint
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return parts._replace(netloc=host + port).geturl()


def build_store(loc: Location, options: Mapping[str, str], memory: MemoryBuckets,
                env: Mapping[str, str] | None = None) -> StoreSetup:
    """The obstore client of ``loc`` as the options and the environment configure it (see the module docstring);
    `StorageAccessError` for options no store takes."""
    env = os.environ if env is None else env
    uri = f"{loc.scheme}://{loc.netloc}"
    kind = {k.strip().lower(): v for k, v in options.items()}.get(STORE_KEY)
    if kind is not None:
        if kind.strip().lower() != "memory":
            raise StorageAccessError(f"{uri}: storage option store={kind!r}: only 'memory' is known")
        return StoreSetup(memory.get(loc.bucket), "memory", bulk_delete=True)
    s3 = resolve_s3(options, env, uri) if loc.cloud == "s3" else None
    config, client, retry = _split(s3.options if s3 is not None else options, uri)
    if s3 is not None:
        return _s3(loc, s3, config, client, retry)
    if loc.cloud == "gcs":
        from obstore.store import GCSStore

        endpoint = config.get("base_url") or config.get("google_base_url") or "https://storage.googleapis.com"
        return StoreSetup(_store(GCSStore, "GCS", loc, config, client, retry), safe_endpoint(endpoint), False)
    from obstore.store import AzureStore

    named = {"account_name", "azure_storage_account_name"} & set(config)
    if loc.account and not named:
        config["account_name"] = loc.account
    account = loc.account or next((config[k] for k in named), None) or env.get("AZURE_STORAGE_ACCOUNT_NAME")
    if not account:
        raise StorageAccessError(f"{uri}: no Azure storage account: name it in the URI ({loc.scheme}://<container>"
                                 "@<account>.dfs.core.windows.net/...), the option account_name or "
                                 "AZURE_STORAGE_ACCOUNT_NAME")
    endpoint = config.get("endpoint") or config.get("azure_storage_endpoint") or \
        f"https://{account}.blob.core.windows.net"
    return StoreSetup(_store(AzureStore, "Azure", loc, config, client, retry), safe_endpoint(endpoint), False)


def _split(options: Mapping[str, str], uri: str) -> tuple[dict[str, str], dict[str, str], RetryConfig]:
    """The spec's options as (store config, client options, retry config); ``store`` is left out."""
    store: dict[str, str] = {}
    client: dict[str, str] = {}
    retry: dict[str, str] = {}
    retry_keys = {key.name for key in RETRY_OPTION_KEYS}
    for raw_key, value in options.items():
        key = raw_key.strip().lower()
        if key == STORE_KEY:
            continue
        target = client if key in CLIENT_KEYS else retry if key in retry_keys else store
        if key in target:
            raise StorageAccessError(f"{uri}: storage option {key!r} is given twice")
        target[key] = value
    reader = KeyReader(retry)
    max_retries, timeout_s = reader.get(MAX_RETRIES), reader.get(RETRY_TIMEOUT)
    if reader.problems:
        raise StorageAccessError(f"{uri}: storage option {reader.problems[0]}")
    return store, client, {"max_retries": max_retries, "retry_timeout": timedelta(seconds=timeout_s),
                           "backoff": {"init_backoff": timedelta(milliseconds=100),
                                       "max_backoff": timedelta(seconds=5), "base": 2}}


def _store(cls: Any, name: str, loc: Location, config: Mapping[str, str], client: Mapping[str, str],
           retry: RetryConfig, **kwargs: Any) -> ObjectStore:
    """``cls`` (obstore's store class of ``loc``'s cloud) built for ``loc``'s bucket, with the default timeouts
    under the client options given; `StorageAccessError` naming the bucket when obstore refuses the settings."""
    options: ClientConfig = {**DEFAULT_CLIENT, **client}  # type: ignore[typeddict-item]
    try:
        store: ObjectStore = cls(loc.bucket, config=config, client_options=options, retry_config=retry, **kwargs)
    except Exception as e:
        raise StorageAccessError(f"{loc.scheme}://{loc.netloc}: cannot configure the {name} client: "
                                 f"{_first_line(e)}") from e
    return store


def _s3(loc: Location, settings: S3Settings, config: dict[str, str], client: dict[str, str],
        retry: RetryConfig) -> StoreSetup:
    from obstore.store import S3Store

    client["allow_http"] = "true" if settings.allow_http else "false"
    if settings.virtual_hosted is not None or settings.endpoint:
        config["virtual_hosted_style_request"] = "false" if settings.path_style else "true"
    if settings.skip_signature:
        config["skip_signature"] = "true"
    region = settings.fixed_region or ""
    provider: Any = None
    if settings.credentials is not None:
        provider = _fixed(settings.credentials)
    elif settings.uses_chain:
        provider, profile_region = _boto3_chain(loc)
        region = region or profile_region or DEFAULT_REGION
    if settings.endpoint:
        config["endpoint"] = settings.endpoint
        config["aws_endpoint_url_s3"] = settings.endpoint  # else obstore would prefer the variable's
    store = _store(S3Store, "S3", loc, {**config, "region": region}, client, retry, credential_provider=provider)
    described = safe_endpoint(settings.endpoint) if settings.endpoint else f"https://s3.{region}.amazonaws.com"
    return StoreSetup(store, described, bulk_delete=not truthy(config.get("disable_bulk_delete")))


def _fixed(c: S3Credentials) -> Callable[[], S3Credential]:
    """A provider of fixed credentials (nothing of the environment's mixed in; its repr shows none of them)."""
    credential: S3Credential = {"access_key_id": c.access_key_id, "secret_access_key": c.secret_access_key,
                                "token": c.session_token, "expires_at": None}
    return lambda: credential


def _boto3_chain(loc: Location) -> tuple[Any, str]:
    """obstore's provider of boto3's default credentials (boto3 renews expiring ones; obstore asks again every
    `_CREDENTIAL_TTL`), and the profile's region: `StorageAccessError` when the chain finds none."""
    import boto3
    from obstore.auth.boto3 import Boto3CredentialProvider

    try:
        session = boto3.Session()
        credentials = session.get_credentials()
    except Exception as e:  # a broken profile file, an unknown profile
        raise StorageAccessError(f"{loc.scheme}://{loc.bucket}: cannot read AWS credentials: "
                                 f"{_first_line(e)}") from e
    if credentials is None:
        raise StorageAccessError(
            f"{loc.scheme}://{loc.bucket}: no AWS credentials: none in the storage options, the environment "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), a profile (AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE, "
            "~/.aws), web identity or instance metadata (skip_signature=true for a public bucket)")
    return Boto3CredentialProvider(session, ttl=_CREDENTIAL_TTL), session.region_name or ""


def _first_line(e: BaseException) -> str:
    """obstore's message without its debug dump (first line only)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def s3a_bucket_options(loc: Location, options: Mapping[str, str], env: Mapping[str, str] | None = None
                       ) -> dict[str, str] | None:
    """The Hadoop settings (``fs.s3a.bucket.<bucket>.*``: that bucket's only) with which Spark's S3A connector
    reaches ``loc``'s bucket as the daemon's client does, from the same `resolve_s3`: the endpoint (path-style unless
    virtual-hosted requests are asked for, TLS off for ``http://``), the region as the client takes it, and the
    credentials through S3A's simple (or temporary) provider; what is not found is left to S3A's own defaults. None
    where S3A cannot reach the bucket (not S3, or the in-memory test store). They hold secrets: they go to Spark's
    configuration (which redacts them), never to a log line or an error."""
    env = os.environ if env is None else env
    if loc.cloud != "s3" or _is_memory(options):
        return None
    settings = resolve_s3(options, env, f"{loc.scheme}://{loc.bucket}")
    out: dict[str, str] = {}
    if settings.endpoint:
        out["endpoint"] = settings.endpoint
        out["path.style.access"] = "true" if settings.path_style else "false"
        if settings.endpoint.startswith("http://"):
            out["connection.ssl.enabled"] = "false"
    if settings.fixed_region:
        out["endpoint.region"] = settings.fixed_region
    if (c := settings.credentials) is not None:
        out["access.key"], out["secret.key"] = c.access_key_id, c.secret_access_key
        out["aws.credentials.provider"] = _TEMPORARY if c.session_token else _SIMPLE
        if c.session_token:
            out["session.token"] = c.session_token
    return {f"fs.s3a.bucket.{loc.bucket}.{key}": value for key, value in out.items()}


class ObjectClient:
    """The store of one bucket as a spec's options configure it (built on first use) and the requests made to it
    (`RequestCounts`); shared by a storage and its children."""

    def __init__(self, location: Location, options: Mapping[str, str], memory: MemoryBuckets) -> None:
        self.location = location
        self.options = dict(options)
        self.requests = RequestCounts()
        self._memory = memory
        self._setup: StoreSetup | None = None
        self._lock = threading.Lock()

    def setup(self) -> StoreSetup:
        if self._setup is None:
            with self._lock:
                if self._setup is None:
                    self._setup = build_store(self.location, self.options, self._memory)
        return self._setup

    @property
    def store(self) -> ObjectStore:
        return self.setup().store

    @property
    def endpoint(self) -> str:
        """Where requests go (for messages); the scheme and bucket before the client is built."""
        return self._setup.endpoint if self._setup is not None else f"{self.location.scheme}://{self.location.bucket}"


__all__ = ["OBJECT_STORE_SCHEMES", "S3A_FILE_SYSTEM", "S3_SCHEMES", "S3_SCHEME_KEY", "Location", "MemoryBuckets",
           "ObjectClient", "StoreSetup", "Versions", "build_store", "parse_location", "s3a_bucket_options",
           "safe_endpoint", "versions"]
