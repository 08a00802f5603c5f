"""The DynamoDB lock's keys, read as Apache Hudi reads them, without a network: names, defaults, inferences, the
implicit partition key, the problems of bad values, and secrets kept out of every repr and message."""

from __future__ import annotations

from pathlib import Path

import pytest

from hudi_clusterd.errors import ConfigError, LockError
from hudi_clusterd.lock import PROVIDER_KEY, lock_problems, lock_properties, lock_provider_from_properties
from hudi_clusterd.lock.base_path_id import s3a_to_s3
from hudi_clusterd.lock.dynamodb import DynamoDBLockProvider
from hudi_clusterd.lock.dynamodb_config import (
    DYNAMODB_IMPLICIT_PROVIDER,
    DYNAMODB_PROVIDER,
    DynamoDBLockConfig,
    dynamodb_lock_config,
    endpoint_url,
    implicit_partition_key,
    partition_key,
)
from hudi_clusterd.settings import TableSpec
from hudi_clusterd.storage import open_storage
from tests.builders import make_policy

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
TOKEN = "FwoGZXIvYXdzEXAMPLETOKEN"
LOCAL = {"hoodie.write.lock.dynamodb.endpoint_url": "http://127.0.0.1:1"}  # never contacted here


def config(props: dict[str, str], *, implicit: bool = False, env: dict[str, str] | None = None
           ) -> DynamoDBLockConfig:
    parsed, problems = dynamodb_lock_config(props, implicit=implicit, env=env or {})
    assert parsed is not None, problems
    return parsed


def problems(props: dict[str, str], env: dict[str, str] | None = None) -> list[str]:
    return dynamodb_lock_config(props, env=env or {})[1]


# --- keys, defaults and inferences ------------------------------------------------------------------------------


def test_the_defaults_are_hudis() -> None:
    c = config({})
    assert (c.table, c.region, c.endpoint_url, c.partition_key, c.billing_mode) == (
        "hudi_locks", "us-east-1", None, None, "PAY_PER_REQUEST")
    assert (c.read_capacity, c.write_capacity, c.table_creation_timeout_ms, c.lease_ms) == (20, 10, 120000, 60000)
    assert c.credentials is None and not c.implicit


def test_every_key_is_read_by_hudis_name() -> None:
    c = config({
        "hoodie.write.lock.dynamodb.table": "locks.v2",
        "hoodie.write.lock.dynamodb.partition_key": " events ",
        "hoodie.write.lock.dynamodb.region": "eu-west-1",
        "hoodie.write.lock.dynamodb.endpoint_url": "dynamodb.eu-west-1.amazonaws.com",
        "hoodie.write.lock.dynamodb.billing_mode": "PROVISIONED",
        "hoodie.write.lock.dynamodb.read_capacity": "5",
        "hoodie.write.lock.dynamodb.write_capacity": "3",
        "hoodie.write.lock.dynamodb.table_creation_timeout": "30000",
        "hoodie.write.lock.wait_time_ms": "15000",
        "hoodie.aws.access.key": "AKIAEXAMPLE",
        "hoodie.aws.secret.key": SECRET,
        "hoodie.aws.session.token": TOKEN,
    })
    assert (c.table, c.partition_key, c.region, c.endpoint_url) == (
        "locks.v2", "events", "eu-west-1", "https://dynamodb.eu-west-1.amazonaws.com")
    assert (c.billing_mode, c.read_capacity, c.write_capacity, c.table_creation_timeout_ms, c.lease_ms) == (
        "PROVISIONED", 5, 3, 30000, 15000)
    assert c.credentials is not None
    assert (c.credentials.access_key, c.credentials.secret_key, c.credentials.session_token) == (
        "AKIAEXAMPLE", SECRET, TOKEN)


@pytest.mark.parametrize(("raw", "url"), [("localhost:8000", "https://localhost:8000"),
                                          ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
                                          ("https://dynamodb.us-east-1.amazonaws.com",
                                           "https://dynamodb.us-east-1.amazonaws.com"),
                                          (" dynamodb.local ", "https://dynamodb.local")])
def test_an_endpoint_without_a_scheme_gets_https(raw: str, url: str) -> None:
    assert endpoint_url(raw) == url
    assert config({"hoodie.write.lock.dynamodb.endpoint_url": raw}).endpoint_url == url


def test_the_region_is_the_key_else_aws_region_else_us_east_1() -> None:
    assert config({}, env={"AWS_REGION": "ap-south-1"}).region == "ap-south-1"
    assert config({"hoodie.write.lock.dynamodb.region": "eu-central-1"}, env={"AWS_REGION": "ap-south-1"}).region \
        == "eu-central-1"
    assert config({}, env={"AWS_DEFAULT_REGION": "ap-south-1"}).region == "us-east-1"  # Hudi reads AWS_REGION only


def test_the_partition_key_is_the_key_else_the_table_name_of_the_properties() -> None:
    assert config({"hoodie.table.name": "events"}).partition_key == "events"
    assert config({"hoodie.table.name": "events",
                   "hoodie.write.lock.dynamodb.partition_key": "shared"}).partition_key == "shared"
    assert config({}).partition_key is None


def test_the_partition_key_is_inferred_from_the_tables_hoodie_properties(tmp_path: Path) -> None:
    # Given a table whose hoodie.properties names it (and a backup that names it otherwise)
    (tmp_path / ".hoodie").mkdir()
    (tmp_path / ".hoodie" / "hoodie.properties").write_text("hoodie.table.type=COPY_ON_WRITE\n"
                                                            "hoodie.table.name=trips\n")
    storage = open_storage(str(tmp_path))
    # Then the writers' inference (hoodie.table.name) is read from it
    assert partition_key(config({}), storage) == "trips"
    # And the properties' own hoodie.table.name, or an explicit key, come first
    assert partition_key(config({"hoodie.table.name": "events"}), storage) == "events"
    # And without hoodie.properties, its backup is read; without both, the error names the file and the key
    (tmp_path / ".hoodie" / "hoodie.properties").rename(tmp_path / ".hoodie" / "hoodie.properties.backup")
    assert partition_key(config({}), storage) == "trips"
    (tmp_path / ".hoodie" / "hoodie.properties.backup").unlink()
    with pytest.raises(LockError, match=r"hoodie\.write\.lock\.dynamodb\.partition_key is not set and "
                                        r"hoodie\.table\.name cannot be read: .*hoodie\.properties"):
        partition_key(config({}), storage)
    (tmp_path / ".hoodie" / "hoodie.properties").write_text("hoodie.table.type=COPY_ON_WRITE\n")
    with pytest.raises(LockError, match=r"hoodie\.properties: no hoodie\.table\.name, .* set "
                                        r"hoodie\.write\.lock\.dynamodb\.partition_key"):
        partition_key(config({}), storage)


# --- the implicit partition key (Hudi 1.x) ---------------------------------------------------------------------


@pytest.mark.parametrize(("base_path", "expected"), [("s3://hudi/t015", "85EF697BEEA58661"),
                                                     ("s3://bucket/warehouse/events", "E22DDBD18FB27409"),
                                                     ("", "0D6FDE68D55B45DA")])
def test_the_implicit_partition_key_matches_hudis_hash_id(base_path: str, expected: str) -> None:
    # the three vectors Java's HashID.generateXXHashAsString(..., BITS_64) of Hudi 1.2.0 gave
    assert implicit_partition_key(base_path) == expected


def test_the_implicit_partition_key_reads_s3a_as_s3_and_ignores_the_explicit_key() -> None:
    assert s3a_to_s3("S3A://hudi/t015") == "s3://hudi/t015"
    assert s3a_to_s3("s3://x/s3a://y") == "s3://x/s3a://y"
    assert implicit_partition_key("s3a://hudi/t015") == "85EF697BEEA58661"
    c = config({"hoodie.write.lock.dynamodb.partition_key": "ignored", "hoodie.base.path": "s3a://hudi/t015"},
               implicit=True)
    assert partition_key(c, None) == "85EF697BEEA58661"
    # without hoodie.base.path, the table storage's base path is hashed
    assert partition_key(config({}, implicit=True), open_storage("memory://dyn/warehouse/events")) \
        == implicit_partition_key("memory://dyn/warehouse/events")


# --- problems ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("props", "problem"), [
    ({"hoodie.write.lock.dynamodb.table": "x"},
     "hoodie.write.lock.dynamodb.table: must be a DynamoDB table name (3 to 255 of A-Z a-z 0-9 _ . -), got 'x'"),
    ({"hoodie.write.lock.dynamodb.partition_key": " "},
     "hoodie.write.lock.dynamodb.partition_key: must not be empty (unset, it is hoodie.table.name), got ''"),
    ({"hoodie.write.lock.dynamodb.region": "mars-1"},
     "hoodie.write.lock.dynamodb.region: must be a region DynamoDB is known in (set "
     "hoodie.write.lock.dynamodb.endpoint_url to use another one), got 'mars-1'"),
    ({"hoodie.write.lock.dynamodb.region": "US East"},
     "hoodie.write.lock.dynamodb.region: must be an AWS region such as us-east-1, got 'US East'"),
    ({"hoodie.write.lock.dynamodb.endpoint_url": "http://host:port"},
     "hoodie.write.lock.dynamodb.endpoint_url: must be a URL such as https://dynamodb.us-east-1.amazonaws.com or "
     "http://127.0.0.1:8000 (host[:port] gets https://), got 'http://host:port'"),
    ({"hoodie.write.lock.dynamodb.billing_mode": "on_demand"},
     "hoodie.write.lock.dynamodb.billing_mode: must be PAY_PER_REQUEST or PROVISIONED, got 'on_demand'"),
    ({"hoodie.write.lock.dynamodb.billing_mode": "PROVISIONED", "hoodie.write.lock.dynamodb.read_capacity": "0"},
     "hoodie.write.lock.dynamodb.read_capacity: must be >= 1, got 0"),
    ({"hoodie.write.lock.dynamodb.table_creation_timeout": "2m"},
     "hoodie.write.lock.dynamodb.table_creation_timeout: must be an integer, got '2m'"),
    ({"hoodie.write.lock.wait_time_ms": "500"}, "hoodie.write.lock.wait_time_ms: must be >= 1000, got 500"),
    ({"hoodie.aws.access.key": "AKIAEXAMPLE"},
     "hoodie.aws.secret.key: must be set with hoodie.aws.access.key, got nothing"),
    ({"hoodie.aws.secret.key": SECRET}, "hoodie.aws.access.key: must be set with hoodie.aws.secret.key, got nothing"),
    ({"hoodie.aws.session.token": TOKEN},
     "hoodie.aws.session.token: must come with hoodie.aws.access.key and hoodie.aws.secret.key, got neither"),
], ids=lambda v: str(v)[:50])
def test_a_bad_key_is_one_problem_line_naming_it(props: dict[str, str], problem: str) -> None:
    assert problems(props) == [problem]
    assert lock_problems({PROVIDER_KEY: DYNAMODB_PROVIDER, **props}) == [problem]


def test_capacities_are_read_only_for_a_provisioned_table_and_a_region_any_with_an_endpoint() -> None:
    assert problems({"hoodie.write.lock.dynamodb.read_capacity": "lots"}) == []  # as Hudi: unused, unread
    assert problems({"hoodie.write.lock.dynamodb.region": "mars-1", **LOCAL}) == []
    assert problems({"hoodie.write.lock.dynamodb.region": "mars-1"}, env={"AWS_ENDPOINT_URL_DYNAMODB": "x"}) == []
    assert problems({}, env={"AWS_REGION": "mars-1"}) == [
        "hoodie.write.lock.dynamodb.region (from AWS_REGION): must be a region DynamoDB is known in (set "
        "hoodie.write.lock.dynamodb.endpoint_url to use another one), got 'mars-1'"]


def test_every_problem_is_reported_at_once() -> None:
    found = problems({"hoodie.write.lock.dynamodb.table": "x", "hoodie.write.lock.wait_time_ms": "-1",
                      "hoodie.write.lock.dynamodb.billing_mode": "cheap"})
    assert [p.split(":")[0] for p in found] == ["hoodie.write.lock.dynamodb.table",
                                                "hoodie.write.lock.dynamodb.billing_mode",
                                                "hoodie.write.lock.wait_time_ms"]


# --- the registry ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [DYNAMODB_PROVIDER, DYNAMODB_IMPLICIT_PROVIDER])
def test_both_hudi_class_names_build_the_dynamodb_lock(tmp_path: Path, name: str) -> None:
    props = {PROVIDER_KEY: name, "hoodie.write.lock.dynamodb.partition_key": "events",
             "hoodie.write.lock.wait_time_ms": "9000", **LOCAL}
    provider = lock_provider_from_properties(props, open_storage(str(tmp_path)), timeout_s=3, stale_s=7)
    assert isinstance(provider, DynamoDBLockProvider)
    assert provider.timeout_s == 3
    assert provider.config.lease_ms == 9000 and provider.heartbeat_interval_s == 3.0
    assert provider.config.implicit is (name == DYNAMODB_IMPLICIT_PROVIDER)
    expected = "events" if name == DYNAMODB_PROVIDER else implicit_partition_key(str(tmp_path))
    assert provider.partition_key == expected
    assert not list(tmp_path.iterdir())  # building it touched nothing


def test_bad_keys_are_refused_when_the_provider_is_built(tmp_path: Path) -> None:
    props = {PROVIDER_KEY: DYNAMODB_PROVIDER, "hoodie.write.lock.dynamodb.billing_mode": "x"}
    with pytest.raises(ConfigError, match=r"billing_mode: must be PAY_PER_REQUEST or PROVISIONED, got 'x'"):
        lock_provider_from_properties(props, open_storage(str(tmp_path)))


def test_lock_properties_keep_the_aws_credentials_and_the_table_name() -> None:
    props = {"hoodie.aws.access.key": "AKIAEXAMPLE", "hoodie.aws.secret.key": SECRET, "hoodie.table.name": "t",
             "hoodie.write.lock.dynamodb.table": "locks", "hoodie.clustering.x": "1"}
    assert lock_properties(props) == (("hoodie.aws.access.key", "AKIAEXAMPLE"), ("hoodie.aws.secret.key", SECRET),
                                      ("hoodie.table.name", "t"), ("hoodie.write.lock.dynamodb.table", "locks"))


# --- secrets -----------------------------------------------------------------------------------------------------


def test_no_secret_appears_in_a_repr_or_a_problem(tmp_path: Path) -> None:
    props = {PROVIDER_KEY: DYNAMODB_PROVIDER, "hoodie.aws.access.key": "AKIAEXAMPLE", "hoodie.aws.secret.key": SECRET,
             "hoodie.aws.session.token": TOKEN, "hoodie.write.lock.dynamodb.partition_key": "k", **LOCAL}
    c = config(props)
    provider = lock_provider_from_properties(props, open_storage(str(tmp_path)))
    spec = TableSpec("t", str(tmp_path), make_policy(), lock_properties(props))
    shown = " ".join([repr(c), repr(c.credentials), repr(provider), repr(spec), repr(provider.table.where)])
    assert "AKIAEXAMPLE" in repr(c.credentials)
    assert SECRET not in shown and TOKEN not in shown
    bad = {**props, "hoodie.aws.access.key": "", "hoodie.write.lock.dynamodb.table": "x"}
    message = " ".join(problems(bad))
    assert "hoodie.aws.access.key: must be set with hoodie.aws.secret.key" in message
    assert SECRET not in message and TOKEN not in message
