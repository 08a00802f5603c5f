"""Engine helpers that need no JVM: literal read paths and Spark error messages."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(("path", "escaped"), [
    ("/t/a b/f.parquet", "/t/a b/f.parquet"),
    ("/t/[x]/f.parquet", "/t/\\[x\\]/f.parquet"),
    ("/t/{a,b}/f.parquet", "/t/\\{a,b\\}/f.parquet"),
    ("/t/st*r?/f.parquet", "/t/st\\*r\\?/f.parquet"),
    ("/t/back\\slash/f.parquet", "/t/back\\\\slash/f.parquet"),
])
def test_literal_read_path_escapes_hadoop_glob_characters(path: str, escaped: str) -> None:
    from hudi_clusterd.engine.files import literal_read_path

    assert literal_read_path(path) == escaped


def test_spark_error_message_py4j_wrapper_gives_innermost_cause_naming_file() -> None:
    from hudi_clusterd.engine.files import spark_error_message

    text = ("An error occurred while calling o77.parquet.\n: org.apache.spark.SparkException: Job aborted.\n"
            "\tat org.apache.spark.Foo.bar(Foo.scala:1)\n"
            "Caused by: org.apache.spark.SparkException: [FAILED_READ_FILE] Task failed\n"
            "Caused by: java.lang.RuntimeException: file:/t/p1/f_0-1-2_1.parquet is not a Parquet file.\n"
            "\tat org.apache.parquet.hadoop.ParquetFileReader.readFooter(ParquetFileReader.java:622)\n")
    assert spark_error_message(RuntimeError(text)) == (
        "java.lang.RuntimeException: file:/t/p1/f_0-1-2_1.parquet is not a Parquet file.")
    assert spark_error_message(RuntimeError("[PATH_NOT_FOUND] Path does not exist: x\nmore")) == \
        "[PATH_NOT_FOUND] Path does not exist: x"
