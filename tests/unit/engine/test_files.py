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


def test_spark_error_message_gives_our_error_raised_in_a_python_worker() -> None:
    from hudi_clusterd.engine.files import spark_error_message

    text = ("An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
            '  File "/x/merged.py", line 64, in read_logs\n    blocks += read_data_log(data, source=rel)\n'
            "hudi_clusterd.errors.LogFileError: /t/p/.f-0_1.log.1_0-1-1: HFILE_DATA block at byte 0: HFILE data "
            "blocks are not read on a data table\n\n\tat org.apache.spark.api.python.Foo(Foo.scala:1)\n")
    assert spark_error_message(RuntimeError(text)) == (
        "/t/p/.f-0_1.log.1_0-1-1: HFILE_DATA block at byte 0: HFILE data blocks are not read on a data table")
