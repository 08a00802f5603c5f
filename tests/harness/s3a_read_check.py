"""Read every partition's base files of a table on S3 with both readers of the daemon's Spark side and report
what each gave: ``python -m tests.harness.s3a_read_check <uri> <storage options as JSON>`` prints one JSON line.

In a process of its own because Hadoop's S3A jars must be on the class path before the JVM starts
(`build_runner(..., s3a_reader=True)`). Per partition: the schema and the sorted rows of `read_group` through S3A
and through the Python workers, the rows of the group's scan (`GroupScan.map_files`) from Spark's frame and from
the files, and the files Spark's reader was given (``inputFiles``)."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from typing import Any


def _sorted_rows(df: Any) -> list[list[Any]]:
    return sorted(([repr(v) for v in row] for row in df.collect()), key=lambda r: r)


def main(argv: list[str]) -> int:
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner, build_runner
    from hudi_clusterd.engine.clustering.scan import GroupScan
    from hudi_clusterd.storage import StorageSpec, open_storage
    from hudi_clusterd.table.hoodie_table import HoodieTable
    from tests.harness.process_lock import ProcessLock

    uri, options = argv[0], json.loads(argv[1])
    storage = open_storage(StorageSpec(uri, options))
    table = HoodieTable.open(uri, storage, lock_provider=ProcessLock())
    groups: dict[str, list[Any]] = defaultdict(list)
    for bf in table.file_system_view().latest_base_files():
        groups[bf.partition_path].append(bf)
    runner = build_runner("local[2]", {"spark.sql.shuffle.partitions": "2"}, s3a_reader=True)
    python = SparkGroupRunner(runner.spark, owns_session=False, s3a_reader=False)
    report: dict[str, Any] = {}
    try:
        for partition, files in sorted(groups.items()):
            scan_files = runner.scan_files(storage, files)
            s3a_df, s3a_rows = runner.read_group(storage, scan_files)
            py_df, py_rows = python.read_group(storage, scan_files)
            by_frame = GroupScan(runner.spark, storage.spec, tuple(scan_files), s3a_df.schema, s3a_df)
            by_files = GroupScan(runner.spark, storage.spec, tuple(scan_files), py_df.schema)
            report[partition] = {
                "files": len(scan_files), "count": [s3a_rows, py_rows],
                "schema_equal": s3a_df.schema == py_df.schema, "schema": s3a_df.schema.simpleString(),
                "rows_equal": _sorted_rows(s3a_df) == _sorted_rows(py_df),
                "scan_rows_equal": _sorted_rows(by_frame.map_files(lambda b: b, s3a_df.schema))
                == _sorted_rows(by_files.map_files(lambda b: b, py_df.schema)),
                "input_schemes": sorted({f.split("://")[0] for f in s3a_df.inputFiles()}),
                "rows": s3a_rows,
            }
    finally:
        runner.close()
    sys.stdout.write(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
