from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from hudi_clusterd.lock.base_path_id import s3a_to_s3
from hudi_clusterd.lock.zookeeper_options import (
    DEFAULT_APP_ID,
    ZooKeeperOptions,
    implicit_base_path,
    path_problem,
    zookeeper_options,
    zookeeper_problems,
)

URL = "hoodie.write.lock.zookeeper.url"
BASE = "hoodie.write.lock.zookeeper.base_path"
KEY = "hoodie.write.lock.zookeeper.lock_key"
GOOD = {URL: "zk1:2181,zk2:2181", BASE: "/hudi/locks", KEY: "events"}


def test_hudis_defaults_and_the_connect_string_passed_as_is() -> None:
    options, problems = zookeeper_options(GOOD, timeout_s=7)
    assert not problems
    assert options == ZooKeeperOptions("zk1:2181,zk2:2181", "/hudi/locks", "events", 60_000, 15_000, 15, 1_000,
                                       16_000, DEFAULT_APP_ID, 7)
    assert options.lock_path("events") == "/hudi/locks/events"
    assert options.node_data == b"application_id=hudi-clusterd"


def test_every_key_is_read() -> None:
    props = {**GOOD, "hoodie.write.lock.zookeeper.session_timeout_ms": "30000",
             "hoodie.write.lock.zookeeper.connection_timeout_ms": "2000", "hoodie.write.lock.num_retries": "0",
             "hoodie.write.lock.wait_time_ms_between_retry": "10",
             "hoodie.write.lock.max_wait_time_ms_between_retry": "20", "hoodie.write.lock.app_id": "job-7"}
    options, _ = zookeeper_options(props)
    assert options is not None
    assert (options.session_timeout_ms, options.connection_timeout_ms, options.num_retries, options.retry_wait_ms,
            options.retry_max_wait_ms, options.app_id) == (30_000, 2_000, 0, 10, 20, "job-7")
    assert options.node_data == b"application_id=job-7"


def test_the_lock_key_is_the_table_name_unless_set() -> None:
    no_key = {URL: "zk:2181", BASE: "/hudi/locks"}
    assert zookeeper_options(no_key)[0].lock_key is None  # type: ignore[union-attr]  # read from the table later
    assert zookeeper_options({**no_key, "hoodie.table.name": "trips"})[0].lock_key == "trips"  # type: ignore[union-attr]
    assert zookeeper_options({**no_key, "hoodie.table.name": "trips", KEY: "k"})[0].lock_key == "k"  # type: ignore[union-attr]


@pytest.mark.parametrize(("props", "problem"), [
    ({BASE: "/b"}, f"{URL}: must be set"),
    ({URL: "zk:2181"}, f"{BASE}: must be set"),
    ({URL: "zk:port", BASE: "/b"}, f"{URL}: must be a ZooKeeper connect string host:port[,host:port][/chroot], "
                                   "got 'zk:port'"),
    ({**GOOD, BASE: "hudi/locks"}, f"{BASE}: must start with / (a ZooKeeper path), got 'hudi/locks' with lock key "
                                   "'events' (lock path hudi/locks/events)"),
    ({**GOOD, BASE: "/hudi/locks/"}, f"{BASE}: must not have an empty, . or .. part (a ZooKeeper path)"),
    ({URL: "zk:2181", BASE: "/a/"}, f"{BASE}: must not end with / (a ZooKeeper path), got '/a/'"),
    ({**GOOD, "hoodie.write.lock.num_retries": "-1"}, "hoodie.write.lock.num_retries: must be >= 0, got -1"),
    ({**GOOD, "hoodie.write.lock.zookeeper.session_timeout_ms": "soon"},
     "hoodie.write.lock.zookeeper.session_timeout_ms: must be an integer, got 'soon'"),
    ({**GOOD, "hoodie.write.lock.zookeeper.connection_timeout_ms": "0"},
     "hoodie.write.lock.zookeeper.connection_timeout_ms: must be >= 1, got 0"),
], ids=["no-url", "no-base", "bad-url", "relative-base", "trailing-slash", "trailing-slash-no-key", "retries",
        "not-a-number", "zero-timeout"])
def test_one_problem_line_per_missing_or_bad_key(props: dict[str, str], problem: str) -> None:
    problems = zookeeper_problems(props)
    assert len(problems) == 1 and problems[0].startswith(problem), problems
    assert zookeeper_options(props) == (None, problems)


def test_the_implicit_provider_needs_only_the_url() -> None:
    assert zookeeper_problems({}, implicit=True) == [
        f"{URL}: must be set (the ZooKeeper connect string host:port[,host:port], as the table's writers set it)"]
    options, _ = zookeeper_options({URL: "zk:2181", BASE: "/ignored", KEY: "ignored"}, implicit=True,
                                   table_base_uri="s3://hudi/t015")
    assert options is not None
    assert options.lock_path(options.lock_key or "") == "/tmp/85EF697BEEA58661/lock_key"


@pytest.mark.parametrize(("base_path", "digest"), [
    ("s3://hudi/t015", "85EF697BEEA58661"), ("s3a://hudi/t015", "85EF697BEEA58661"),
    ("S3A://hudi/t015", "85EF697BEEA58661"), ("s3://bucket/warehouse/events", "E22DDBD18FB27409"),
    ("", "0D6FDE68D55B45DA"),
])
def test_the_implicit_base_path_is_hudis_hash(base_path: str, digest: str) -> None:
    # values of Hudi 1.2.0's HashID.generateXXHashAsString(s3aToS3(path), BITS_64)
    assert implicit_base_path(base_path) == f"/tmp/{digest}"


def test_s3a_to_s3_changes_only_a_leading_scheme() -> None:
    assert s3a_to_s3("s3a://b/s3a://x") == "s3://b/s3a://x"
    assert s3a_to_s3("gs://b/t") == "gs://b/t"
    assert s3a_to_s3("ſ3a://b") == "ſ3a://b"  # Java's (?i) folds ASCII only


@pytest.mark.parametrize(("path", "ok"), [("/", True), ("/a/b", True), ("a", False), ("/a/", False),
                                          ("/a//b", False), ("/a/./b", False), ("/a/../b", False),
                                          ("/a\u0001", False)])
def test_zookeeper_paths(path: str, ok: bool) -> None:
    assert (path_problem(path) is None) is ok


def test_the_port_key_is_ignored_with_a_warning_and_the_implicit_provider_warns_of_keys_it_ignores() -> None:
    with capture_logs() as logs:
        zookeeper_options({**GOOD, "hoodie.write.lock.zookeeper.port": "2181"})
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "hoodie.write.lock.zookeeper.port is ignored by Apache Hudi and by the daemon: "
        "hoodie.write.lock.zookeeper.url is the whole connect string (host:port)"]
    with capture_logs() as logs:
        zookeeper_options(GOOD)
    assert not [e for e in logs if e["log_level"] == "warning"]
    with capture_logs() as logs:
        zookeeper_options(GOOD, implicit=True, table_base_uri="/t")
    assert [e["keys"] for e in logs if e["log_level"] == "warning"] == [[BASE, KEY]]
