"""S3's settings, resolved once (`resolve_s3`): the daemon's own client (`object_config.build_store`) and Spark's
S3A settings (`object_config.s3a_bucket_options`) are both derived from one `S3Settings`.

Each setting is a `Key` of the storage options below (case and surrounding blanks do not matter, a blank value is
unset), read from its aliases and then from the environment as the AWS SDKs read it; docs/configuration.md ("Object
stores: the client's settings") lists them. The credentials are one pair: the options', else the environment's,
never half of each; none means a default chain (boto3's for the daemon's client, S3A's own for Spark). Secrets never
appear in a ``repr``, a log line or an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from hudi_clusterd.domain.keys import Key, KeyReader
from hudi_clusterd.domain.values import optional_text
from hudi_clusterd.errors import StorageAccessError

__all__ = ["DEFAULT_REGION", "HUDI_AWS_KEYS", "S3_OPTION_KEYS", "S3Credentials", "S3Settings", "object_store_options",
           "resolve_s3", "truthy"]


DEFAULT_REGION: Final = "us-east-1"


def truthy(value: str | None) -> bool:
    """Whether an option or variable says yes (``1``, ``true``, ``yes``, ``on``)."""
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")


def _optional_flag(raw: str) -> bool | None:
    return truthy(raw) if raw.strip() else None


ENDPOINT = Key("endpoint", None, optional_text, (
    "S3 endpoint URL (an http:// one allows plain HTTP; any endpoint means path-style requests)."),
    aliases=("aws_endpoint", "aws_endpoint_url", "aws_endpoint_url_s3", "endpoint_url"),
    env=("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"))
REGION = Key("region", None, optional_text, (
    "S3 region; unset everywhere = the credential profile's region, else us-east-1."),
    aliases=("aws_region", "aws_default_region"), env=("AWS_REGION", "AWS_DEFAULT_REGION"))
ACCESS_KEY_ID = Key("access_key_id", None, optional_text, (
    "S3 access key id, with secret_access_key (the options' pair, else the environment's); neither = boto3's "
    "default chain (profiles, web identity, container and instance metadata)."),
    aliases=("aws_access_key_id",), env=("AWS_ACCESS_KEY_ID",))
SECRET_ACCESS_KEY = Key("secret_access_key", None, optional_text, "S3 secret access key; never logged.",
                        aliases=("aws_secret_access_key",), env=("AWS_SECRET_ACCESS_KEY",), secret=True)
SESSION_TOKEN = Key("session_token", None, optional_text, (
    "S3 session token of temporary credentials, with the pair above; never logged."),
    aliases=("aws_session_token", "aws_token", "token"), env=("AWS_SESSION_TOKEN",), secret=True)
ALLOW_HTTP = Key("allow_http", "false", truthy, (
    "Whether plain HTTP is allowed (true with an http:// endpoint unless given)."),
    aliases=("aws_allow_http",), env=("AWS_ALLOW_HTTP",))
VIRTUAL_HOSTED = Key("virtual_hosted_style_request", None, _optional_flag, (
    "true: virtual-hosted-style requests (bucket in the host name); unset with an endpoint = path-style."),
    "virtual_hosted", aliases=("aws_virtual_hosted_style_request",), env=("AWS_VIRTUAL_HOSTED_STYLE_REQUEST",))
SKIP_SIGNATURE = Key("skip_signature", "false", truthy, "true: unsigned requests (a public bucket), no credentials.",
                     aliases=("aws_skip_signature",))
_CREDENTIAL_KEYS: Final = (ACCESS_KEY_ID, SECRET_ACCESS_KEY, SESSION_TOKEN)
_SETTING_KEYS: Final = (ENDPOINT, REGION, ALLOW_HTTP, VIRTUAL_HOSTED, SKIP_SIGNATURE)
"""The keys that fill `S3Settings`' fields of the same names (``field`` where it differs)."""
S3_OPTION_KEYS: Final = (ENDPOINT, REGION, *_CREDENTIAL_KEYS, ALLOW_HTTP, VIRTUAL_HOSTED, SKIP_SIGNATURE)
"""The settings the S3 client and S3A both take."""

HUDI_AWS_KEYS: Final = (
    Key("hoodie.aws.access.key", None, optional_text, (
        "AWS access key id of the table's writers, for the DynamoDB lock and the S3 client; unset = the "
        "environment, else the AWS SDK's default credentials (profile, web identity, instance role)."),
        ACCESS_KEY_ID.name),
    Key("hoodie.aws.secret.key", None, optional_text, "AWS secret key, with hoodie.aws.access.key; never logged.",
        SECRET_ACCESS_KEY.name, secret=True),
    Key("hoodie.aws.session.token", None, optional_text, (
        "AWS session token of temporary credentials, with the two above; never logged."), SESSION_TOKEN.name,
        secret=True),
)
"""The writers' AWS credentials (``field``: the storage option each gives)."""


@dataclass(frozen=True, slots=True)
class S3Credentials:
    """Static credentials; ``repr`` shows the access key id only."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class S3Settings:
    """The S3 settings of one bucket (see the module docstring). ``None`` means not given anywhere: the client's and
    S3A's own defaults apply. ``options`` are the storage options left for the client (its HTTP and retry settings,
    obstore's other S3 keys)."""

    endpoint: str | None
    region: str | None
    allow_http: bool
    virtual_hosted: bool | None
    skip_signature: bool
    credentials: S3Credentials | None = field(default=None, repr=False)
    options: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def uses_chain(self) -> bool:
        """Whether credentials come from a default chain (none given, requests signed)."""
        return self.credentials is None and not self.skip_signature

    @property
    def fixed_region(self) -> str | None:
        """The region both clients use: the one given, else ``us-east-1`` unless a credential chain is asked
        (``None``: its profile's region, else ``us-east-1``)."""
        return self.region or (None if self.uses_chain else DEFAULT_REGION)

    @property
    def path_style(self) -> bool:
        """Whether requests name the bucket in the path: with an endpoint, unless virtual-hosted is asked for."""
        return bool(self.endpoint) and not self.virtual_hosted


def object_store_options(props: Mapping[str, str]) -> dict[str, str]:
    """The storage options a Hudi writer's properties give (:data:`HUDI_AWS_KEYS`); blank values are left out."""
    reader = KeyReader(props)
    return {key.field or key.name: value for key in HUDI_AWS_KEYS if (value := reader.get(key))}


def resolve_s3(options: Mapping[str, str], env: Mapping[str, str], where: str) -> S3Settings:
    """The settings of the bucket ``where`` names, from the storage options (``store`` excluded by the caller) and
    ``env``; `StorageAccessError` naming the option (never a secret's value) when they contradict each other."""
    given = {k.strip().lower(): v.strip() for k, v in options.items() if v.strip()}
    reader = KeyReader(given, env, conflicts="refuse")
    settings = reader.get_all(_SETTING_KEYS)
    if not any(name in given for name in ALLOW_HTTP.names) and (settings["endpoint"] or "").startswith("http://"):
        settings["allow_http"] = True
    from_options = any(name in given for key in _CREDENTIAL_KEYS[:2] for name in key.names)
    source = "the storage options" if from_options else "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
    pair = KeyReader(given, conflicts="refuse") if from_options else KeyReader({}, env)  # never half of each
    key_id, secret, token = (pair.get(key) for key in _CREDENTIAL_KEYS)
    if reader.problems or pair.problems:
        raise StorageAccessError(f"{where}: storage option {(reader.problems or pair.problems)[0]}")
    if bool(key_id) != bool(secret):
        raise StorageAccessError(f"{where}: {source} give an access key id without a secret access key, or the "
                                 "other way round")
    ours = {name for key in S3_OPTION_KEYS for name in key.names}
    return S3Settings(**settings, credentials=S3Credentials(key_id, secret, token) if key_id and secret else None,
                      options={k: v for k, v in options.items() if k.strip().lower() not in ours})
