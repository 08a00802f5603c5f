"""The S3A connector's jars: the ones matching PySpark's Hadoop, found where the set-up puts them, else one line
naming the coordinates and the command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hudi_clusterd.engine import s3a
from hudi_clusterd.errors import ConfigError


def test_the_connector_matches_the_hadoop_inside_pyspark() -> None:
    version = s3a.hadoop_version()
    coordinates = s3a.artifacts(version)
    assert coordinates[0] == f"org.apache.hadoop:hadoop-aws:{version}"
    assert any(c.startswith("software.amazon.awssdk:bundle:") for c in coordinates)


def test_a_missing_jar_is_one_line_naming_its_coordinates_and_the_set_up(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(s3a.JARS_ENV, str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        s3a.s3a_session_conf({})
    message = str(caught.value)
    assert "\n" not in message
    assert "org.apache.hadoop:hadoop-aws:" in message and s3a.SETUP_COMMAND in message and str(tmp_path) in message


def test_the_jars_join_the_users_spark_jars_and_s3_is_served_by_s3a(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(s3a.JARS_ENV, str(tmp_path))
    names = [s3a.jar_name(c) for c in s3a.artifacts(s3a.hadoop_version())]
    for name in names:
        (tmp_path / name).write_bytes(b"jar")
    conf = s3a.s3a_session_conf({"spark.jars": "/opt/mine.jar", "spark.executor.memory": "2g"},
                                "spark://127.0.0.1:7077")
    assert conf["spark.jars"].split(",") == ["/opt/mine.jar", *(str(tmp_path / n) for n in names)]
    local = s3a.s3a_session_conf({"spark.jars": "/opt/mine.jar"}, "local[2]")
    assert local["spark.jars"] == "/opt/mine.jar"
    assert local["spark.driver.extraClassPath"].split(os.pathsep) == [str(tmp_path / n) for n in names]
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert conf["spark.executor.memory"] == "2g"
    assert s3a.s3a_session_conf({"spark.hadoop.fs.s3.impl": "mine"})["spark.hadoop.fs.s3.impl"] == "mine"


def test_an_unknown_hadoop_version_names_the_other_reader() -> None:
    with pytest.raises(ConfigError, match=r"clusterd\.spark\.object\.store\.reader=python"):
        s3a.artifacts("9.9.9")
