"""The S3A settings given to Spark reach the bucket where the daemon's own client does
(`object_config.s3a_bucket_options`)."""

from __future__ import annotations

from hudi_clusterd.storage import ObjectStorage, StorageSpec, open_storage
from hudi_clusterd.storage.object_config import parse_location, s3a_bucket_options

PREFIX = "fs.s3a.bucket.hudi."


def test_options_give_endpoint_path_style_plain_http_region_and_keys() -> None:
    options = {"endpoint": "http://127.0.0.1:9000", "region": "eu-west-1", "allow_http": "true",
               "access_key_id": "AK", "secret_access_key": "SK"}
    got = s3a_bucket_options(parse_location("s3a://hudi/t"), options, env={"AWS_ACCESS_KEY_ID": "other"})
    assert got == {PREFIX + "endpoint": "http://127.0.0.1:9000", PREFIX + "path.style.access": "true",
                   PREFIX + "connection.ssl.enabled": "false", PREFIX + "endpoint.region": "eu-west-1",
                   PREFIX + "access.key": "AK", PREFIX + "secret.key": "SK",
                   PREFIX + "aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"}


def test_the_environment_is_read_as_the_aws_sdks_read_it() -> None:
    env = {"AWS_ENDPOINT_URL": "https://other", "AWS_ENDPOINT_URL_S3": "https://s3.example:8443",
           "AWS_DEFAULT_REGION": "us-west-2", "AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK",
           "AWS_SESSION_TOKEN": "TOK", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true"}
    got = s3a_bucket_options(parse_location("s3://hudi/t"), {}, env=env)
    assert got == {PREFIX + "endpoint": "https://s3.example:8443", PREFIX + "path.style.access": "false",
                   PREFIX + "endpoint.region": "us-west-2", PREFIX + "access.key": "AK",
                   PREFIX + "secret.key": "SK", PREFIX + "session.token": "TOK",
                   PREFIX + "aws.credentials.provider": "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"}


def test_nothing_found_leaves_s3a_its_own_credential_chain() -> None:
    assert s3a_bucket_options(parse_location("s3a://hudi/t"), {}, env={}) == {}


def test_no_s3a_settings_where_s3a_does_not_serve_the_table() -> None:
    assert s3a_bucket_options(parse_location("gs://b/t"), {}, env={}) is None
    assert s3a_bucket_options(parse_location("s3://b/t"), {"store": "memory"}, env={}) is None
    memory = open_storage(StorageSpec("s3://b/t", {"store": "memory"}))
    assert isinstance(memory, ObjectStorage) and memory.s3a_options() is None
    s3 = open_storage(StorageSpec("s3a://hudi/t", {"region": "r1", "endpoint": "http://h:1"}))
    options = s3.s3a_options()
    assert options is not None and options[PREFIX + "endpoint.region"] == "r1"
