"""Object-store URIs and clients, without a network: which bucket and key a URI names in each cloud's form, which
settings win (options, then the environment, then the SDK chains), and that secrets never show."""

from __future__ import annotations

from pathlib import Path

import pytest

from hudi_clusterd.errors import StorageAccessError, StorageError
from hudi_clusterd.storage import ObjectStorage, StorageSpec, is_secret_option, object_store_options, open_storage
from hudi_clusterd.storage.object_config import MemoryBuckets, build_store, parse_location, safe_endpoint, versions

KEYS = {"access_key_id": "AKIAOPTION", "secret_access_key": "option-secret"}


@pytest.mark.parametrize(("uri", "cloud", "bucket", "key", "account"), [
    ("s3://bkt/a/b", "s3", "bkt", "a/b", None),
    ("s3a://bkt/a/b/", "s3", "bkt", "a/b", None),
    ("s3://bkt", "s3", "bkt", "", None),
    ("gs://bkt/t", "gcs", "bkt", "t", None),
    ("abfs://cont@acct.dfs.core.windows.net/w/t", "azure", "cont", "w/t", "acct"),
    ("abfss://cont@acct.blob.core.windows.net/t", "azure", "cont", "t", "acct"),
    ("az://cont/t", "azure", "cont", "t", None),
])
def test_uris_name_bucket_key_and_account(uri: str, cloud: str, bucket: str, key: str, account: str | None) -> None:
    loc = parse_location(uri)
    assert (loc.cloud, loc.bucket, loc.key, loc.account) == (cloud, bucket, key, account)


@pytest.mark.parametrize(("uri", "says"), [
    ("s3:///t", "no bucket"), ("s3://b/t?region=x", "options"), ("s3://b/a/../t", "segments"),
    ("s3://b/a//t", "segments"), ("abfs://cont@localhost:10000/t", "dfs.core.windows.net"),
    ("hdfs://nn/t", "not an object-store URI"),
])
def test_malformed_uris_are_refused(uri: str, says: str) -> None:
    with pytest.raises(StorageError, match=says):
        parse_location(uri)


def test_s3_and_s3a_name_the_same_objects_and_uris_keep_the_scheme_given() -> None:
    s3, s3a = open_storage("s3://bkt/warehouse/t"), open_storage("s3a://bkt/warehouse/t")
    assert s3.uri("p/f.parquet") == "s3://bkt/warehouse/t/p/f.parquet"
    assert s3a.uri("p/f.parquet") == "s3a://bkt/warehouse/t/p/f.parquet"
    assert s3.full_path("p/f.parquet") == s3a.full_path("p/f.parquet") == "bkt/warehouse/t/p/f.parquet"
    for storage in (s3, s3a):
        assert storage.rel_from_uri("s3a://bkt/warehouse/t/p/f.parquet") == "p/f.parquet"
        assert storage.rel_from_uri("s3://bkt/warehouse/t/p/f.parquet") == "p/f.parquet"
        assert storage.rel_from_uri("bkt/warehouse/t/p/f.parquet") == "p/f.parquet"
        assert storage.child(".hoodie").uri("x").split("://")[0] == storage.uri().split("://")[0]


@pytest.mark.parametrize("uri", ["gs://bkt/warehouse/t/p/f", "s3://other/warehouse/t/p/f", "s3://bkt/warehouse/t2/f",
                                 "s3://bkt/warehouse/t/../t2/f", "abfs://bkt/warehouse/t/f", "/warehouse/t/f"])
def test_uris_of_other_buckets_schemes_or_folders_are_outside(uri: str) -> None:
    with pytest.raises(StorageError, match="outside the table"):
        open_storage("s3a://bkt/warehouse/t").rel_from_uri(uri)


def test_azure_uris_keep_container_and_account() -> None:
    table = open_storage("abfss://cont@acct.dfs.core.windows.net/w/t")
    assert table.rel_from_uri("abfs://cont@acct.dfs.core.windows.net/w/t/p/f") == "p/f"
    with pytest.raises(StorageError, match="outside the table"):
        table.rel_from_uri("abfss://cont@other.dfs.core.windows.net/w/t/p/f")


def test_spec_repr_hides_secrets_by_the_name_of_the_option() -> None:
    spec = StorageSpec("s3://b/t", {"endpoint": "http://127.0.0.1:9000", "region": "eu-west-1", **KEYS,
                                    "session_token": "tok-value", "service_account_key": "{json}",
                                    "client_secret": "cs", "password": "pw", "allow_http": "true"})
    text = repr(spec) + str(spec) + repr(open_storage(spec))
    for secret in ("AKIAOPTION", "option-secret", "tok-value", "{json}", "cs'", "pw'"):
        assert secret not in text
    assert "http://127.0.0.1:9000" in text and "eu-west-1" in text and "'allow_http': 'true'" in text
    assert [k for k in spec.options if is_secret_option(k)] == [
        "access_key_id", "secret_access_key", "session_token", "service_account_key", "client_secret", "password"]
    assert spec == StorageSpec("s3://b/t", dict(spec.options))  # equality is untouched


def test_hudi_writer_keys_map_to_store_options() -> None:
    props = {"hoodie.aws.access.key": " AK ", "hoodie.aws.secret.key": "SK", "hoodie.aws.session.token": "",
             "hoodie.table.name": "t"}
    assert object_store_options(props) == {"access_key_id": "AK", "secret_access_key": "SK"}


def _s3(options: dict[str, str], env: dict[str, str]) -> tuple[object, dict[str, object], object, str]:
    setup = build_store(parse_location("s3://bkt/t"), options, MemoryBuckets(), env)
    store = setup.store
    return store, dict(store.config), store.credential_provider, setup.endpoint  # type: ignore[attr-defined]


def test_options_win_over_the_environment_and_an_endpoint_means_path_style() -> None:
    env = {"AWS_ENDPOINT_URL_S3": "http://env-s3:1", "AWS_ENDPOINT_URL": "http://env:1", "AWS_REGION": "eu-north-1",
           "AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_SESSION_TOKEN": "env-token"}
    store, config, provider, endpoint = _s3({"endpoint": "http://opt:9000", "region": "eu-west-3", **KEYS}, env)
    # (obstore prefers AWS_ENDPOINT_URL_S3 to an endpoint option: the option is given under that name too)
    assert config["endpoint"] == config["endpoint_url_s3"] == "http://opt:9000" == endpoint
    assert config["region"] == "eu-west-3" and config["virtual_hosted_style_request"] in (False, "false")
    assert store.client_options["allow_http"] in (True, "true")  # type: ignore[attr-defined]
    credential = provider()  # type: ignore[operator]
    assert (credential["access_key_id"], credential["secret_access_key"], credential["token"]) == (
        "AKIAOPTION", "option-secret", None)  # nothing of the environment's identity mixed in
    assert "option-secret" not in repr(provider) + repr(store)


def test_the_environment_as_aws_sdks_read_it() -> None:
    env = {"AWS_ENDPOINT_URL_S3": "https://s3-env:443", "AWS_ENDPOINT_URL": "http://generic:1",
           "AWS_DEFAULT_REGION": "ap-south-1", "AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "env-secret",
           "AWS_SESSION_TOKEN": "env-token"}
    store, config, provider, _ = _s3({}, env)
    assert config["endpoint"] == "https://s3-env:443" and config["region"] == "ap-south-1"
    assert store.client_options["allow_http"] in (False, "false")  # type: ignore[attr-defined]
    assert provider()["token"] == "env-token"  # type: ignore[operator]
    _, config, _, _ = _s3({}, {**env, "AWS_ENDPOINT_URL_S3": "", "AWS_REGION": "us-west-2"})
    assert config["endpoint"] == "http://generic:1" and config["region"] == "us-west-2"
    store, config, _, endpoint = _s3({"skip_signature": "true"}, {"AWS_ALLOW_HTTP": "true"})
    assert "endpoint" not in config and config["region"] == "us-east-1"
    assert endpoint == "https://s3.us-east-1.amazonaws.com"
    assert store.client_options["allow_http"] in (True, "true")  # type: ignore[attr-defined]
    _, config, _, _ = _s3({"endpoint": "http://x:1", "virtual_hosted_style_request": "true", **KEYS}, {})
    assert config["virtual_hosted_style_request"] in (True, "true")


def test_without_keys_the_boto3_chain_reads_a_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = AKIAPROFILE\naws_secret_access_key = profile-secret\n"
                           "[other]\naws_access_key_id = AKIAOTHER\naws_secret_access_key = other-secret\n")
    (tmp_path / "config").write_text("[profile other]\nregion = sa-east-1\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
                 "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    _, config, provider, _ = _s3({}, {})
    assert provider()["access_key_id"] == "AKIAPROFILE" and config["region"] == "us-east-1"  # type: ignore[operator]
    monkeypatch.setenv("AWS_PROFILE", "other")
    _, config, provider, _ = _s3({}, {})
    assert provider()["access_key_id"] == "AKIAOTHER" and config["region"] == "sa-east-1"  # type: ignore[operator]
    # and with nothing anywhere, one line says where credentials were looked for
    credentials.write_text("")
    monkeypatch.delenv("AWS_PROFILE")
    with pytest.raises(StorageAccessError, match=r"s3://bkt: no AWS credentials: none in the storage options"):
        _s3({}, {})


@pytest.mark.parametrize(("options", "says"), [
    ({"access_key_id": "AKIAONLY"}, "without a secret"),
    ({"bogus_key": "s3cr3t-value", **KEYS}, "bogus_key"),
    ({"endpoint": "http://a:1", "aws_endpoint_url": "http://b:1", **KEYS}, "given twice"),
    ({"max_retries": "many", **KEYS}, "storage option max_retries: must be an integer, got 'many'"),
    ({"retry_timeout": "0", **KEYS}, "storage option retry_timeout: must be > 0 seconds, got 0"),
    ({"store": "disk"}, "only 'memory'"),
])
def test_bad_options_are_refused_in_one_line_without_their_values(options: dict[str, str], says: str) -> None:
    with pytest.raises(StorageAccessError, match=says) as refused:
        build_store(parse_location("s3://bkt/t"), options, MemoryBuckets(), {})
    message = str(refused.value)
    assert "\n" not in message and "s3cr3t-value" not in message and "option-secret" not in message


def test_gcs_and_azure_stores_are_configured_from_uri_and_options() -> None:
    gcs = build_store(parse_location("gs://bkt/t"), {"skip_signature": "true", "timeout": "10s"}, MemoryBuckets(), {})
    assert gcs.store.config["bucket"] == "bkt" and gcs.endpoint == "https://storage.googleapis.com"  # type: ignore[union-attr]
    assert gcs.store.client_options["timeout"] == "10s"  # type: ignore[union-attr]
    azure = build_store(parse_location("abfss://cont@acct.dfs.core.windows.net/t"), {"skip_signature": "true"},
                        MemoryBuckets(), {})
    assert azure.store.config["account_name"] == "acct" and azure.store.config["container_name"] == "cont"  # type: ignore[union-attr]
    assert azure.endpoint == "https://acct.blob.core.windows.net"
    az = build_store(parse_location("az://cont/t"), {"account_name": "named"}, MemoryBuckets(), {})
    assert az.store.config["account_name"] == "named"  # type: ignore[union-attr]
    with pytest.raises(StorageAccessError, match="AZURE_STORAGE_ACCOUNT_NAME"):
        build_store(parse_location("az://cont/t"), {}, MemoryBuckets(), {})


def test_versions_and_capabilities_by_store() -> None:
    """S3 compares ETags (MD5s: not unique per write), GCS generations, Azure ETags (new on every write)."""
    assert versions(parse_location("s3://b/t"), {}) == versions(parse_location("s3a://b/t"), {})
    assert (versions(parse_location("s3://b/t"), {}).field, versions(parse_location("s3://b/t"), {}).unique) == (
        "e_tag", False)
    assert versions(parse_location("gs://b/t"), {}).field == "version"
    assert versions(parse_location("az://c/t"), {}).unique
    for uri, unique in (("s3://b/t", False), ("gs://b/t", True), ("az://c/t", True)):
        caps = ObjectStorage(uri).capabilities
        assert caps.atomic_create and caps.conditional_update and caps.atomic_put
        assert not caps.atomic_rename and not caps.conditional_delete and not caps.empty_folders
        assert caps.unique_versions == unique


def test_endpoints_in_messages_carry_no_credentials() -> None:
    assert safe_endpoint("http://user:pass@host:9000/x") == "http://host:9000/x"
    assert safe_endpoint("https://s3.eu-west-1.amazonaws.com") == "https://s3.eu-west-1.amazonaws.com"


def test_a_tables_storage_spec_carries_the_writers_aws_credentials_on_s3_only() -> None:
    from hudi_clusterd.storage import table_storage_spec

    props = {"hoodie.aws.access.key": "AKIAEXAMPLE", "hoodie.aws.secret.key": "s3cr3t-value",
             "hoodie.write.lock.provider": "x"}
    spec = table_storage_spec("s3a://bucket/events", props)
    assert spec.uri == "s3a://bucket/events"
    assert spec.options == {"access_key_id": "AKIAEXAMPLE", "secret_access_key": "s3cr3t-value"}
    assert "s3cr3t-value" not in repr(spec)
    assert table_storage_spec("s3://bucket/events", {}).options == {}  # the environment, as the SDKs read it
    for elsewhere in ("/lake/events", "gs://bucket/events", "hdfs://nn/events"):
        assert table_storage_spec(elsewhere, props).options == {}
