"""Daemon settings: the .properties format, tables, per-table policies, defaults and aggregated errors."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hudi_clusterd import settings as settings_module
from hudi_clusterd.domain.merging import Release
from hudi_clusterd.domain.policy import DEFAULT_POLICY, PartitionFilterMode, parse_policy
from hudi_clusterd.domain.row_order import LayoutStrategy
from hudi_clusterd.errors import ConfigError
from hudi_clusterd.lock import lock_problems
from hudi_clusterd.settings import (
    LogFormat,
    ObjectStoreReader,
    Settings,
    WatchMode,
    load_settings,
    settings_from_properties,
    settings_reference,
)

REPO = Path(__file__).resolve().parents[2]
TARGET = "hoodie.clustering.plan.strategy.target.file.max.bytes"
GROUPS = "hoodie.clustering.plan.strategy.max.num.groups"


def write(tmp_path: Path, text: str, name: str = "clusterd.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_problems(path: Path | None, **kwargs: object) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_settings(path, **kwargs)  # type: ignore[arg-type]
    return info.value.problems


ONE_TABLE = "clusterd.tables=t\nclusterd.table.t.base.path=/data/t\n"


# --- the example files ---


def test_load_settings_example_clusterd_properties_loads() -> None:
    # Given the annotated example shipped in config/
    settings, warnings = load_settings(REPO / "config" / "clusterd.properties")
    # Then both tables load with the shared defaults and the events overrides
    assert warnings == []
    orders, events = settings.tables
    assert (orders.name, orders.base_path) == ("orders", "/data/lake/orders")
    assert (events.name, events.base_path) == ("events", "/data/lake/events")
    assert orders.policy.target_file_max_bytes == events.policy.target_file_max_bytes == 268435456
    assert orders.policy.partition_filter_mode is PartitionFilterMode.NONE
    assert events.policy.partition_filter_mode is PartitionFilterMode.RECENT_DAYS
    assert events.policy.lookback_partitions == 3
    assert events.policy.sort_columns == ("event_type", "user_id")
    assert events.policy.layout_strategy is LayoutStrategy.ZORDER
    assert settings.metrics_address == ("127.0.0.1", 9464)
    assert settings.spark_master == "local[*]"
    assert settings.spark_conf_dict == {"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "8"}


def test_load_settings_hudi_clusteringjob_properties_loads_unchanged() -> None:
    # Given the Hudi-style clusteringjob.properties and a table passed as --base-path
    settings, warnings = load_settings(
        REPO / "config" / "clusteringjob.properties", extra_base_paths=["/data/lake/orders/"]
    )
    # Then every key is read as Hudi reads it and the table takes its folder name
    assert warnings == []
    (table,) = settings.tables
    assert (table.name, table.base_path) == ("orders", "/data/lake/orders")
    assert table.policy == settings.default_policy
    assert table.policy.target_file_max_bytes == 1073741824
    assert table.policy.small_file_limit == 629145600
    assert table.policy.inline_max_commits == 4
    assert table.policy.sort_columns == ("column1", "column2")


# --- defaults ---


def test_load_settings_minimal_file_gives_every_default(tmp_path: Path) -> None:
    settings, warnings = load_settings(write(tmp_path, ONE_TABLE))
    assert warnings == []
    assert settings == Settings(
        tables=settings.tables,
        default_policy=DEFAULT_POLICY,
        metrics_address=("127.0.0.1", 9464),
        spark_master="local[*]",
        spark_conf=(),
        object_store_reader=ObjectStoreReader.PYTHON,
        poll_interval_seconds=10.0,
        watch_mode=WatchMode.EVENTS,
        shutdown_grace_seconds=60.0,
        log_level="INFO",
        log_format=LogFormat.AUTO,
        lock_timeout_seconds=60.0,
        lock_stale_seconds=120.0,
        commit_wait_seconds=60.0,
        merge_semantics=Release.HUDI_0_15,
        source=str(tmp_path / "clusterd.properties"),
    )
    assert settings.tables[0].policy == DEFAULT_POLICY
    assert settings.tables[0].merge_semantics is Release.HUDI_0_15


def test_merge_semantics_daemon_wide_and_per_table(tmp_path: Path) -> None:
    text = ("clusterd.tables=a,b\nclusterd.table.a.base.path=/t/a\nclusterd.table.b.base.path=/t/b\n"
            "clusterd.merge.semantics=hudi-1.x\nclusterd.table.b.merge.semantics=HUDI-0.15\n")
    settings, _ = load_settings(write(tmp_path, text))
    assert [t.merge_semantics for t in settings.tables] == [Release.HUDI_1_X, Release.HUDI_0_15]
    with pytest.raises(ConfigError) as e:
        load_settings(write(tmp_path, text + "clusterd.table.a.merge.semantics=hudi-2\n"))
    assert "clusterd.table.a.merge.semantics: must be hudi-0.15 or hudi-1.x, got 'hudi-2'" in e.value.problems


def test_load_settings_no_file_with_base_path_uses_defaults(tmp_path: Path) -> None:
    settings, _ = load_settings(None, extra_base_paths=[str(tmp_path / "sales")])
    assert [(t.name, t.base_path) for t in settings.tables] == [("sales", str(tmp_path / "sales"))]
    assert settings.source is None


def test_settings_reference_lists_every_daemon_key_with_parsable_default(tmp_path: Path) -> None:
    rows = settings_reference()
    keys = {key for key, _, _ in rows}
    assert {"clusterd.tables", "clusterd.table.<name>.base.path", "clusterd.spark.conf.<key>"} <= keys
    explicit = {key: default for key, default, _ in rows if default is not None}
    assert explicit["clusterd.metrics.address"] == "127.0.0.1:9464"
    assert explicit["clusterd.lock.stale.seconds"] == "120"
    # Writing every default back explicitly changes nothing.
    text = ONE_TABLE + "".join(f"{k}={v}\n" for k, v in explicit.items())
    explicit_settings, _ = load_settings(write(tmp_path, text, "explicit.properties"))
    implicit_settings, _ = load_settings(write(tmp_path, ONE_TABLE, "implicit.properties"))
    assert dataclasses.replace(explicit_settings, source=None) == dataclasses.replace(implicit_settings, source=None)


# --- daemon keys ---


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        ("localhost:0", ("localhost", 0)),
        ("[::1]:9464", ("::1", 9464)),
        ("off", None),
        ("", None),
    ],
)
def test_load_settings_metrics_address_forms(tmp_path: Path, value: str, expected: object) -> None:
    settings, _ = load_settings(write(tmp_path, ONE_TABLE + f"clusterd.metrics.address={value}\n"))
    assert settings.metrics_address == expected


def test_load_settings_daemon_values_parsed(tmp_path: Path) -> None:
    text = ONE_TABLE + (
        "clusterd.log.level=warn\nclusterd.log.format=JSON\nclusterd.watch.mode=polling\n"
        "clusterd.poll.interval.seconds=0.5\nclusterd.shutdown.grace.seconds=0\nclusterd.lock.timeout.seconds=0\n"
        "clusterd.spark.master=spark://127.0.0.1:7077\nclusterd.spark.conf.spark.ui.enabled=false\n"
        "clusterd.spark.object.store.reader=S3A\n"
    )
    settings, _ = load_settings(write(tmp_path, text))
    assert settings.log_level == "WARNING"
    assert settings.log_format is LogFormat.JSON
    assert settings.watch_mode is WatchMode.POLLING
    assert settings.poll_interval_seconds == 0.5
    assert settings.shutdown_grace_seconds == 0.0
    assert settings.lock_timeout_seconds == 0.0
    assert settings.spark_master == "spark://127.0.0.1:7077"
    assert settings.spark_conf == (("spark.ui.enabled", "false"),)
    assert settings.object_store_reader is ObjectStoreReader.S3A


def test_load_settings_every_bad_daemon_value_reported_together(tmp_path: Path) -> None:
    text = ONE_TABLE + (
        "clusterd.metrics.address=9464\nclusterd.poll.interval.seconds=0\nclusterd.shutdown.grace.seconds=-1\n"
        "clusterd.lock.stale.seconds=nan\nclusterd.lock.timeout.seconds=soon\nclusterd.log.level=LOUD\n"
        "clusterd.log.format=xml\nclusterd.watch.mode=inotify\nclusterd.spark.master= \n"
    )
    problems = load_problems(write(tmp_path, text))
    assert sorted(p.split(":", 1)[0] for p in problems) == sorted(
        [
            "clusterd.metrics.address",
            "clusterd.poll.interval.seconds",
            "clusterd.shutdown.grace.seconds",
            "clusterd.lock.stale.seconds",
            "clusterd.lock.timeout.seconds",
            "clusterd.log.level",
            "clusterd.log.format",
            "clusterd.watch.mode",
            "clusterd.spark.master",
        ]
    )
    assert "clusterd.poll.interval.seconds: must be > 0, got 0" in problems


def test_load_settings_unknown_daemon_key_is_error_with_suggestion(tmp_path: Path) -> None:
    problems = load_problems(write(tmp_path, ONE_TABLE + "clusterd.metric.address=127.0.0.1:1\n"))
    assert problems == ["clusterd.metric.address: unknown daemon key (did you mean clusterd.metrics.address?)"]


def test_load_settings_foreign_namespace_key_warned(tmp_path: Path) -> None:
    _, warnings = load_settings(write(tmp_path, ONE_TABLE + "spark.executor.memory=4g\n"))
    assert warnings == ["spark.executor.memory: neither a hoodie.* nor a clusterd.* key; ignored"]


# --- tables ---


def test_load_settings_relative_base_path_resolved_against_settings_folder(tmp_path: Path) -> None:
    conf_dir = tmp_path / "etc"
    conf_dir.mkdir()
    settings, _ = load_settings(write(conf_dir, "clusterd.tables=t\nclusterd.table.t.base.path=../lake/t/\n"))
    assert settings.tables[0].base_path == str(tmp_path / "lake" / "t")


def test_load_settings_override_and_extra_paths_resolved_against_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf_dir = tmp_path / "etc"
    conf_dir.mkdir()
    monkeypatch.chdir(tmp_path)
    settings, _ = load_settings(
        write(conf_dir, ONE_TABLE),
        extra_base_paths=["lake/extra"],
        overrides={"clusterd.table.t.base.path": "lake/t"},
    )
    assert [t.base_path for t in settings.tables] == [str(tmp_path / "lake" / "t"), str(tmp_path / "lake" / "extra")]


def test_load_settings_uri_base_path_kept_without_trailing_slash(tmp_path: Path) -> None:
    settings, _ = load_settings(
        write(tmp_path, "clusterd.tables=t\nclusterd.table.t.base.path=s3a://bucket/lake/t/\n"),
        extra_base_paths=["gs://bucket/lake/u/"],
    )
    assert [(t.name, t.base_path) for t in settings.tables] == [
        ("t", "s3a://bucket/lake/t"),
        ("u", "gs://bucket/lake/u"),
    ]


def test_load_settings_overrides_replace_file_values(tmp_path: Path) -> None:
    path = write(tmp_path, ONE_TABLE + f"{TARGET}=1000\nclusterd.log.level=INFO\n")
    settings, _ = load_settings(path, overrides={TARGET: "2000", "clusterd.log.level": "DEBUG"})
    assert settings.tables[0].policy.target_file_max_bytes == 2000
    assert settings.log_level == "DEBUG"


def test_load_settings_per_table_policy_overrides_defaults(tmp_path: Path) -> None:
    text = (
        "clusterd.tables=a,b\nclusterd.table.a.base.path=/a\nclusterd.table.b.base.path=/b\n"
        f"{TARGET}=1000\n{GROUPS}=5\nclusterd.table.b.{TARGET}=3000\n"
    )
    settings, _ = load_settings(write(tmp_path, text))
    a, b = settings.tables
    assert (a.policy.target_file_max_bytes, a.policy.max_num_groups) == (1000, 5)
    assert (b.policy.target_file_max_bytes, b.policy.max_num_groups) == (3000, 5)
    assert a.policy is settings.default_policy


def test_load_settings_reads_each_tables_write_lock_keys_and_refuses_a_lock_it_cannot_take(tmp_path: Path) -> None:
    lock_path, provider = "hoodie.write.lock.filesystem.path", "hoodie.write.lock.provider"
    in_process = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"
    zookeeper = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"
    # Given the writers' lock keys as defaults, overridden for one table
    text = (
        "clusterd.tables=a,b\nclusterd.table.a.base.path=/a\nclusterd.table.b.base.path=/b\n"
        f"{lock_path}=/locks/all\nclusterd.table.b.{lock_path}=/locks/b\n"
    )
    a, b = load_settings(write(tmp_path, text))[0].tables
    # Then each table carries its own, outside the clustering policy
    assert a.lock_properties == ((lock_path, "/locks/all"),)
    assert b.lock_properties == ((lock_path, "/locks/b"),)
    assert a.policy == b.policy
    # And a lock the daemon cannot take is refused when the settings are read, once per place it is set
    text += f"clusterd.table.a.{provider}={in_process}\nclusterd.table.b.{lock_path}=locks\n"
    assert sorted(load_problems(write(tmp_path, text))) == [
        f"table a: {lock_problems({provider: in_process})[0]}",
        f"table b: {lock_path}: must be an absolute path or a URI (a folder holding the lock file), got 'locks'",
    ]
    # And a ZooKeeper lock needs the writers' connect string and path
    zk_text = f"clusterd.tables=a\nclusterd.table.a.base.path=/a\n{provider}={zookeeper}\n"
    assert [p.split(": ")[:2] for p in load_problems(write(tmp_path, zk_text))] == [
        ["hoodie.* defaults", "hoodie.write.lock.zookeeper.url"],
        ["hoodie.* defaults", "hoodie.write.lock.zookeeper.base_path"]]
    zk_text += "hoodie.write.lock.zookeeper.url=zk:2181\nhoodie.write.lock.zookeeper.base_path=/hudi/locks\n"
    (table,) = load_settings(write(tmp_path, zk_text))[0].tables
    assert dict(table.lock_properties)["hoodie.write.lock.zookeeper.url"] == "zk:2181"
    assert load_problems(write(tmp_path, f"clusterd.tables=a\nclusterd.table.a.base.path=/a\n{lock_path}=x\n")) \
        == [f"hoodie.* defaults: {lock_path}: must be an absolute path or a URI (a folder holding the lock file), "
            "got 'x'"]


def test_load_settings_policy_warnings_not_repeated_per_table(tmp_path: Path) -> None:
    text = (
        "clusterd.tables=a,b\nclusterd.table.a.base.path=/a\nclusterd.table.b.base.path=/b\n"
        "hoodie.clustering.typo=1\nclusterd.table.b.hoodie.layout.optimize.enable=true\n"
    )
    _, warnings = load_settings(write(tmp_path, text))
    assert warnings == [
        "hoodie.clustering.typo: unknown clustering key; ignored",
        "table b: hoodie.layout.optimize.enable: deprecated since Hudi 0.11; no effect, ignored",
    ]


def test_load_settings_errors_of_every_table_reported_together(tmp_path: Path) -> None:
    # Given bad policy values in the defaults and in two tables, plus table-definition mistakes
    text = (
        "clusterd.tables=a,b,c,a,bad!name\n"
        "clusterd.table.a.base.path=/a\nclusterd.table.b.base.path=/b\n"
        "hoodie.clustering.plan.strategy.small.file.limit=abc\n"
        f"clusterd.table.a.{GROUPS}=0\n"
        f"clusterd.table.b.{TARGET}=-1\nclusterd.table.b.{GROUPS}=zero\n"
        f"clusterd.table.c.{GROUPS}=-5\n"
        "clusterd.table.z.base.path=/z\nclusterd.table.a.basepath=/q\n"
    )
    problems = load_problems(write(tmp_path, text))
    # Then one error lists each problem once, per-table ones prefixed with the table name
    assert sorted(problems) == sorted(
        [
            "hoodie.* defaults: hoodie.clustering.plan.strategy.small.file.limit: must be an integer, got 'abc'",
            f"table a: {GROUPS}: must be > 0, got 0",
            f"table b: {TARGET}: must be > 0, got -1",
            f"table b: {GROUPS}: must be an integer, got 'zero'",
            f"table c: {GROUPS}: must be > 0, got -5",
            "table c: clusterd.table.c.base.path is not set",
            "clusterd.tables: 'a' is listed twice",
            "clusterd.tables: 'bad!name' is not a valid table name (letters, digits, _ and -)",
            "clusterd.table.z.*: table 'z' is not listed in clusterd.tables",
            "clusterd.table.a.basepath: unknown table key (expected clusterd.table.<name>.base.path, "
            ".merge.semantics or .hoodie.<key>)",
        ]
    )


def test_load_settings_duplicate_base_paths_rejected(tmp_path: Path) -> None:
    text = "clusterd.tables=a,b\nclusterd.table.a.base.path=/lake/x\nclusterd.table.b.base.path=/lake/x/\n"
    problems = load_problems(write(tmp_path, text), extra_base_paths=["file:///lake/x"])
    assert problems == [
        "table b: base path /lake/x is also table a",
        "table x: base path file:///lake/x is also table a",
    ]


def test_load_settings_extra_base_path_name_clash_rejected(tmp_path: Path) -> None:
    problems = load_problems(write(tmp_path, ONE_TABLE), extra_base_paths=["/other/t"])
    assert len(problems) == 1
    assert problems[0].startswith("table t: two tables share this name (/data/t and /other/t)")


def test_load_settings_unnamable_extra_base_path_rejected(tmp_path: Path) -> None:
    problems = load_problems(write(tmp_path, ONE_TABLE), extra_base_paths=["/"])
    assert problems == ["--base-path '/': cannot name a table after this path"]


def test_load_settings_no_tables_rejected(tmp_path: Path) -> None:
    assert load_problems(write(tmp_path, "# nothing\n")) == [
        "no tables: list them in clusterd.tables or pass --base-path"
    ]


def test_settings_table_lookup_by_name(tmp_path: Path) -> None:
    settings, _ = load_settings(write(tmp_path, ONE_TABLE))
    assert settings.table("t").base_path == "/data/t"
    with pytest.raises(ConfigError, match=r"no table named 'u' \(tables: t\)"):
        settings.table("u")


# --- the file itself ---


def test_load_settings_missing_file_names_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.properties"
    with pytest.raises(ConfigError, match=f"cannot read settings file {missing}"):
        load_settings(missing)


def test_load_settings_directory_instead_of_file_names_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"cannot read settings file {tmp_path}"):
        load_settings(tmp_path)


def test_load_settings_non_utf8_file_rejected(tmp_path: Path) -> None:
    path = tmp_path / "latin1.properties"
    path.write_bytes(b"clusterd.tables=caf\xe9\n")
    with pytest.raises(ConfigError, match="is not UTF-8"):
        load_settings(path)


def test_load_settings_malformed_escape_is_config_error_with_line(tmp_path: Path) -> None:
    path = write(tmp_path, ONE_TABLE + "clusterd.spark.master=\\u12\n")
    with pytest.raises(ConfigError, match="line 3: malformed"):
        load_settings(path)


def test_load_settings_duplicate_keys_and_dropped_backslashes_warned(tmp_path: Path) -> None:
    text = ONE_TABLE + "clusterd.log.level=INFO\nclusterd.log.level=DEBUG\n"
    text += "hoodie.clustering.plan.strategy.partition.regex.pattern=\\d+\n"
    settings, warnings = load_settings(write(tmp_path, text))
    assert settings.log_level == "DEBUG"
    assert len(warnings) == 2
    assert "line 5: '\\d' reads as 'd'" in warnings[0]
    assert warnings[1].endswith("clusterd.log.level is set on lines 3, 4; the last one wins")


def test_load_settings_same_file_twice_gives_equal_settings(tmp_path: Path) -> None:
    # Reload compares settings by value: an unchanged file must give an equal (and hashable) object.
    path = write(tmp_path, ONE_TABLE + "clusterd.spark.conf.b=2\nclusterd.spark.conf.a=1\n")
    first, _ = load_settings(path)
    second, _ = load_settings(path)
    assert first == second
    assert hash(first) == hash(second)


def test_settings_from_properties_validates_without_a_file() -> None:
    settings, _ = settings_from_properties(
        {"clusterd.tables": "t", "clusterd.table.t.base.path": "/x", TARGET: "5"}, source="inline"
    )
    assert settings.source == "inline"
    assert settings.tables[0].policy == parse_policy({TARGET: "5"}, source="x")[0]
    assert os.path.isabs(settings.tables[0].base_path)


def test_settings_module_docstring_example_loads(tmp_path: Path) -> None:
    # The format documented in the module docstring (and copied to docs/configuration.md) must itself be valid.
    doc = settings_module.__doc__ or ""
    lines: list[str] = []
    for line in doc.split("::\n\n", 1)[1].splitlines():
        if line and not line.startswith("    "):
            break  # the literal block ends at the first unindented line
        lines.append(line[4:])
    settings, warnings = load_settings(write(tmp_path, "\n".join(lines)))
    assert warnings == []
    assert [t.name for t in settings.tables] == ["orders", "events"]
    assert settings.table("events").policy.sort_columns == ("event_type", "ts")
    assert settings.spark_conf_dict == {"spark.executor.memory": "4g"}


def test_load_settings_s3a_and_s3_name_the_same_table(tmp_path: Path) -> None:
    text = ("clusterd.tables=a,b\nclusterd.table.a.base.path=s3a://bucket/events\n"
            "clusterd.table.b.base.path=s3://bucket/events/\n")
    assert load_problems(write(tmp_path, text)) == ["table b: base path s3://bucket/events is also table a"]


_OPEN_A_LOCAL_TABLE = """
import sys
from hudi_clusterd.lock import lock_provider_from_properties
from hudi_clusterd.settings import load_settings
from hudi_clusterd.storage import open_storage, table_storage_spec

settings, _ = load_settings(sys.argv[1])
for table in settings.tables:
    props = dict(table.lock_properties)
    provider = lock_provider_from_properties(props, open_storage(table_storage_spec(table.base_path, props)))
    print(type(provider).__name__)
print(" ".join(sorted({name.split(".")[0] for name in sys.modules} & {"boto3", "botocore", "kazoo"})) or "none")
"""


def test_a_local_tables_settings_and_lock_import_no_cloud_client(tmp_path: Path) -> None:
    """boto3, botocore and kazoo are imported for a table whose lock or storage needs them, never at start-up."""
    props = tmp_path / "clusterd.properties"
    props.write_text(f"clusterd.tables=t\nclusterd.table.t.base.path={tmp_path / 't'}\n"
                     "hoodie.write.lock.zookeeper.url=zk:2181\n")  # another provider's keys: read, not used
    (tmp_path / "t" / ".hoodie").mkdir(parents=True)
    out = subprocess.run([sys.executable, "-c", _OPEN_A_LOCAL_TABLE, str(props)], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert out == ["FileSystemLockProvider", "none"]
