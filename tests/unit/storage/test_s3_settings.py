"""S3 settings are resolved once: the daemon's own S3 client (obstore) and the S3A settings given to Spark agree on
the endpoint, the addressing style, plain HTTP, the region and the credentials, for the same options (under any
alias) and environment."""

from __future__ import annotations

import pytest

from hudi_clusterd.errors import StorageAccessError
from hudi_clusterd.storage.object_config import MemoryBuckets, build_store, parse_location, s3a_bucket_options
from hudi_clusterd.storage.s3_settings import object_store_options, resolve_s3

KEYS = {"access_key_id": "AKIAOPTION", "secret_access_key": "option-secret"}
ENV_KEYS = {"AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "env-secret"}
CASES: list[tuple[str, dict[str, str], dict[str, str]]] = [
    ("options", {"endpoint": "http://127.0.0.1:9000", "region": "eu-west-1", **KEYS}, {}),
    ("aliases", {"AWS_ENDPOINT_URL": " http://minio:9000 ", "aws_region": "eu-west-2", "aws_access_key_id": "AK",
                 "aws_secret_access_key": "SK", "aws_token": "TOK"}, {}),
    ("environment", {}, {"AWS_ENDPOINT_URL_S3": "https://s3.example:8443", "AWS_ENDPOINT_URL": "http://other:1",
                         "AWS_DEFAULT_REGION": "ap-south-1", **ENV_KEYS, "AWS_SESSION_TOKEN": "env-token"}),
    ("options over environment", {"endpoint_url": "http://opt:9000", "region": "eu-west-3", **KEYS},
     {"AWS_ENDPOINT_URL": "http://env:1", "AWS_REGION": "us-west-2", **ENV_KEYS, "AWS_SESSION_TOKEN": "env-token"}),
    ("virtual-hosted", {"endpoint": "https://s3.example", "virtual_hosted_style_request": "true", **KEYS}, {}),
    ("virtual-hosted from the environment", {**KEYS},
     {"AWS_ENDPOINT_URL": "https://s3.example", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true", "AWS_REGION": "r1"}),
    ("no endpoint", {"region": "sa-east-1", **KEYS}, {"AWS_ALLOW_HTTP": "true"}),
    ("a blank option is unset", {"endpoint": " ", "region": "", **KEYS},
     {"AWS_ENDPOINT_URL": "http://env:2", "AWS_REGION": "eu-north-1"}),
]


def _flag(value: object) -> bool:
    return value in (True, "true")


@pytest.mark.parametrize(("options", "env"), [(o, e) for _, o, e in CASES], ids=[c[0] for c in CASES])
def test_the_client_and_s3a_reach_the_bucket_alike(options: dict[str, str], env: dict[str, str]) -> None:
    loc = parse_location("s3a://hudi/t")
    store = build_store(loc, options, MemoryBuckets(), env).store
    config: dict[str, object] = dict(store.config)  # type: ignore[attr-defined]
    client: dict[str, object] = dict(store.client_options)  # type: ignore[attr-defined]
    credential = store.credential_provider()  # type: ignore[attr-defined]
    s3a = s3a_bucket_options(loc, options, env)
    assert s3a is not None
    hadoop = {k.removeprefix("fs.s3a.bucket.hudi."): v for k, v in s3a.items()}

    assert config.get("endpoint") == hadoop.get("endpoint")
    if "endpoint" in hadoop:
        assert _flag(config["virtual_hosted_style_request"]) == (hadoop["path.style.access"] == "false")
        plain = hadoop["endpoint"].startswith("http://")
        assert (hadoop.get("connection.ssl.enabled") == "false") == plain
        assert _flag(client["allow_http"]) or not plain
    assert config["region"] == hadoop["endpoint.region"]
    assert (credential["access_key_id"], credential["secret_access_key"], credential["token"]) == (
        hadoop["access.key"], hadoop["secret.key"], hadoop.get("session.token"))
    assert hadoop["aws.credentials.provider"].endswith(
        "TemporaryAWSCredentialsProvider" if credential["token"] else "SimpleAWSCredentialsProvider")


def test_what_is_resolved_from_aliases_and_the_environment() -> None:
    settings = resolve_s3({"AWS_Endpoint": "http://h:1", "aws_default_region": "r2", "token": "T", **KEYS},
                          {"AWS_REGION": "ignored", "AWS_SESSION_TOKEN": "not-mixed-in"}, "s3://b")
    assert (settings.endpoint, settings.region, settings.allow_http, settings.path_style) == ("http://h:1", "r2",
                                                                                             True, True)
    assert settings.credentials is not None and settings.credentials.session_token == "T"
    assert "option-secret" not in repr(settings) and "T'" not in repr(settings)
    # allow_http given says what it says, even beside an http:// endpoint
    assert not resolve_s3({"endpoint": "http://h:1", "aws_allow_http": "false"}, {}, "s3://b").allow_http
    assert resolve_s3({}, {"AWS_ALLOW_HTTP": "true"}, "s3://b").allow_http
    # options the S3 settings do not name are left for the client
    assert resolve_s3({"timeout": "10s", "Region": "r", "max_retries": "2"}, {}, "s3://b").options == {
        "timeout": "10s", "max_retries": "2"}


@pytest.mark.parametrize(("options", "env", "says"), [
    ({"endpoint": "http://a:1", "aws_endpoint_url": "http://b:1"}, {}, "aws_endpoint_url: alias of endpoint, given "
                                                                       "twice with different values"),
    ({"access_key_id": "AK", "aws_access_key_id": "OTHER", "secret_access_key": "s3cr3t-value"}, {},
     "aws_access_key_id: alias of access_key_id"),
    ({"access_key_id": "AK"}, {"AWS_SECRET_ACCESS_KEY": "s3cr3t-value"}, "the storage options give an access key id "
                                                                           "without a secret"),
    ({}, {"AWS_SECRET_ACCESS_KEY": "s3cr3t-value"}, "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"),
])
def test_contradictions_are_refused_in_one_line_by_both(options: dict[str, str], env: dict[str, str],
                                                        says: str) -> None:
    loc = parse_location("s3://bkt/t")
    for derive in (lambda: build_store(loc, options, MemoryBuckets(), env), lambda: s3a_bucket_options(loc, options,
                                                                                                        env)):
        with pytest.raises(StorageAccessError, match=r"^s3://bkt: ") as refused:
            derive()
        assert says in str(refused.value) and "\n" not in str(refused.value)
        assert "s3cr3t-value" not in str(refused.value)


def test_the_writers_aws_keys_become_the_credential_options() -> None:
    props = {"hoodie.aws.access.key": " AK ", "hoodie.aws.secret.key": "SK", "hoodie.aws.session.token": " "}
    assert object_store_options(props) == {"access_key_id": "AK", "secret_access_key": "SK"}
    settings = resolve_s3(object_store_options(props), {**ENV_KEYS, "AWS_SESSION_TOKEN": "env"}, "s3://b")
    assert settings.credentials is not None
    assert (settings.credentials.access_key_id, settings.credentials.session_token) == ("AK", None)
