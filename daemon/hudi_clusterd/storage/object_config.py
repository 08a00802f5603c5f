"""Where an object-store URI points, and the obstore client that reaches it, configured the way the clouds' own
SDKs are.

URIs: ``s3://bucket/path`` and ``s3a://bucket/path`` (the same objects: Hudi records paths with its writer's
scheme), ``gs://bucket/path``, ``abfs[s]://container@account.dfs.core.windows.net/path`` and
``az://container/path`` (the account from the options or ``AZURE_STORAGE_ACCOUNT_NAME``).

Settings, highest first: the spec's options (obstore's own keys; the HTTP client's: ``connect_timeout``,
``timeout``, ``read_timeout``, ``proxy_url``...; retries: ``max_retries``, ``retry_timeout`` in seconds), then the
environment. S3's endpoint, region, addressing style, plain HTTP and credentials are resolved by `s3_settings`
(options and their aliases, then the variables every AWS SDK reads, then boto3's default chain for credentials),
the same resolution Spark's S3A settings are derived from (`object_hadoop`). GCS and Azure read their own
variables (``GOOGLE_SERVICE_ACCOUNT``, ``GOOGLE_APPLICATION_CREDENTIALS``, ``AZURE_STORAGE_ACCOUNT_NAME``,
``AZURE_STORAGE_ACCOUNT_KEY``...), as obstore does. The option ``store=memory`` serves the URI from this process's
in-memory object store of that bucket name instead (obstore's ``MemoryStore``, for tests).

Conditional writes: S3, Azure and the memory store compare ETags (S3's is the MD5 of the bytes, so identical
bytes give an identical version); GCS compares generations, which change on every write.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

from hudi_clusterd.domain.keys import Key, KeyReader, at_least
from hudi_clusterd.domain.values import java_int
from hudi_clusterd.errors import StorageAccessError, StorageError
from hudi_clusterd.storage.s3_settings import DEFAULT_REGION, resolve_s3, truthy

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
RETRY_KEYS: Final = frozenset(key.name for key in RETRY_OPTION_KEYS)
_CREDENTIAL_TTL: Final = timedelta(minutes=5)


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
    conditional writes compare; ``unique`` whether every write makes a new one (see the module docstring)."""

    field: Literal["e_tag", "version"]
    unique: bool


def versions(loc: Location, options: Mapping[str, str]) -> Versions:
    """How the store of ``loc`` versions objects (known without building it)."""
    if STORE_KEY in {k.strip().lower() for k in options}:
        return Versions("e_tag", unique=True)  # the memory store's ETag is a counter
    if loc.cloud == "gcs":
        return Versions("version", unique=True)  # generations
    return Versions("e_tag", unique=loc.cloud == "azure")  # S3: MD5 of the bytes; Azure: new on every write


class _StaticCredentials:
    """Fixed S3 credentials (and nothing from the environment mixed in)."""

    def __init__(self, access_key_id: str, secret_access_key: str, session_token: str | None) -> None:
        self._credential: S3Credential = {"access_key_id": access_key_id, "secret_access_key": secret_access_key,
                                          "token": session_token, "expires_at": None}

    def __call__(self) -> S3Credential:
        return self._credential

    def __repr__(self) -> str:
        return "_StaticCredentials(***)"


def safe_endpoint(endpoint: str) -> str:
    """An endpoint URL without any user or password in it."""
    parts = urlsplit(endpoint)
    if parts.username is None and parts.password is None:
        return endpoint
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return parts._replace(netloc=host + port).geturl()


def _split(options: Mapping[str, str], uri: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The spec's options as (store config, client options, retry options); ``store`` is left out."""
    store: dict[str, str] = {}
    client: dict[str, str] = {}
    retry: dict[str, str] = {}
    for raw_key, value in options.items():
        key = raw_key.strip().lower()
        if key == STORE_KEY:
            continue
        target = client if key in CLIENT_KEYS else retry if key in RETRY_KEYS else store
        if key in target:
            raise StorageAccessError(f"{uri}: storage option {key!r} is given twice")
        target[key] = value
    return store, client, retry


def _retry_config(retry: Mapping[str, str], uri: str) -> RetryConfig:
    reader = KeyReader(retry)
    max_retries, timeout_s = reader.get(MAX_RETRIES), reader.get(RETRY_TIMEOUT)
    if reader.problems:
        raise StorageAccessError(f"{uri}: storage option {reader.problems[0]}")
    return {"max_retries": max_retries, "retry_timeout": timedelta(seconds=timeout_s),
            "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=5),
                        "base": 2}}


def _s3(loc: Location, options: Mapping[str, str], env: Mapping[str, str]) -> StoreSetup:
    from obstore.store import S3Store

    uri = f"{loc.scheme}://{loc.bucket}"
    settings = resolve_s3(options, env, uri)
    opts, client, retry = _split(settings.options, uri)
    client["allow_http"] = "true" if settings.allow_http else "false"
    if settings.virtual_hosted is not None or settings.endpoint:
        opts["virtual_hosted_style_request"] = "false" if settings.path_style else "true"
    if settings.skip_signature:
        opts["skip_signature"] = "true"
    region = settings.fixed_region or ""
    provider: Any = None
    if settings.credentials is not None:
        c = settings.credentials
        provider = _StaticCredentials(c.access_key_id, c.secret_access_key, c.session_token)
    elif settings.uses_chain:
        provider, profile_region = _boto3_chain(loc)
        region = region or profile_region or DEFAULT_REGION
    if settings.endpoint:
        opts["endpoint"] = settings.endpoint
        opts["aws_endpoint_url_s3"] = settings.endpoint  # else obstore would prefer the variable's
    try:
        store = S3Store(loc.bucket, config={**opts, "region": region},  # type: ignore[arg-type]
                        client_options=_client(client), retry_config=_retry_config(retry, uri),
                        credential_provider=provider)
    except Exception as e:
        raise StorageAccessError(f"{uri}: cannot configure the S3 client: {_first_line(e)}") from e
    described = safe_endpoint(settings.endpoint) if settings.endpoint else f"https://s3.{region}.amazonaws.com"
    bulk = not truthy(opts.get("disable_bulk_delete"))
    return StoreSetup(store, described, bulk_delete=bulk)


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


def _client(client: Mapping[str, str]) -> ClientConfig:
    return {**DEFAULT_CLIENT, **client}  # type: ignore[typeddict-item]


def _gcs(loc: Location, config: dict[str, str], client: dict[str, str], retry: RetryConfig) -> StoreSetup:
    from obstore.store import GCSStore

    try:
        store = GCSStore(loc.bucket, config=config, client_options=_client(client),  # type: ignore[arg-type]
                         retry_config=retry)
    except Exception as e:
        raise StorageAccessError(f"gs://{loc.bucket}: cannot configure the GCS client: {_first_line(e)}") from e
    endpoint = config.get("base_url") or config.get("google_base_url") or "https://storage.googleapis.com"
    return StoreSetup(store, safe_endpoint(endpoint), bulk_delete=False)


def _azure(loc: Location, config: dict[str, str], client: dict[str, str], retry: RetryConfig,
           env: Mapping[str, str]) -> StoreSetup:
    from obstore.store import AzureStore

    named = {"account_name", "azure_storage_account_name"} & set(config)
    if loc.account and not named:
        config["account_name"] = loc.account
    account = loc.account or next((config[k] for k in named), None) or env.get("AZURE_STORAGE_ACCOUNT_NAME")
    if not account:
        raise StorageAccessError(f"{loc.scheme}://{loc.netloc}: no Azure storage account: name it in the URI "
                                 f"({loc.scheme}://<container>@<account>.dfs.core.windows.net/...), the option "
                                 "account_name or AZURE_STORAGE_ACCOUNT_NAME")
    try:
        store = AzureStore(loc.bucket, config=config, client_options=_client(client),  # type: ignore[arg-type]
                           retry_config=retry)
    except Exception as e:
        raise StorageAccessError(f"{loc.scheme}://{loc.netloc}: cannot configure the Azure client: "
                                 f"{_first_line(e)}") from e
    endpoint = config.get("endpoint") or config.get("azure_storage_endpoint") or \
        f"https://{account}.blob.core.windows.net"
    return StoreSetup(store, safe_endpoint(endpoint), bulk_delete=False)


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
    if loc.cloud == "s3":
        return _s3(loc, options, env)
    config, client, retry = _split(options, uri)
    retry_config = _retry_config(retry, uri)
    if loc.cloud == "gcs":
        return _gcs(loc, config, client, retry_config)
    return _azure(loc, config, client, retry_config, env)


def _first_line(e: BaseException) -> str:
    """obstore's message without its debug dump (first line only)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


__all__ = ["OBJECT_STORE_SCHEMES", "S3_SCHEMES", "Location", "MemoryBuckets", "StoreSetup", "Versions", "build_store",
           "parse_location", "safe_endpoint", "versions"]
