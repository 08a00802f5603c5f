"""A Spark DataFrame over a table's snapshot: the latest committed base file of every live file group.

Which files make the snapshot comes from our own file-system view (listing + timeline, replaced file groups
dropped, uncommitted files ignored), optionally as of an instant, so the result is what Hudi's snapshot and
time-travel queries return for a copy-on-write table. Files are read with ``mergeSchema`` so slices written
under older (compatible) schemas still line up; on an object store, which Spark's own readers cannot open, in
the Python workers (`engine.clustering.scan`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from hudi_clusterd.formats.avro_schema import meta_arrow_fields
from hudi_clusterd.table.hoodie_table import HoodieTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def snapshot(spark: SparkSession, table: HoodieTable, as_of: str | None = None) -> DataFrame:
    """The table's rows (meta columns included) as of ``as_of`` (an instant time) or now.

    A table without committed files gives an empty DataFrame with the table's schema when it is known
    (and no columns otherwise)."""
    from hudi_clusterd.engine.files import literal_read_path
    from hudi_clusterd.engine.ingest.writer import table_data_schema

    timeline = table.timeline()
    files = table.file_system_view(timeline).latest_base_files(as_of=as_of)
    if files and not table.storage.spark_readable:  # an object store: read in the Python workers
        from hudi_clusterd.engine.clustering.scan import ScanFile, read_through_storage

        scan = [ScanFile(f.relative_path, f.size) for f in sorted(files, key=lambda f: f.relative_path)]
        return read_through_storage(spark, table.storage, scan)[0]
    if files:
        paths = sorted(literal_read_path(table.storage.uri(f.relative_path)) for f in files)
        return spark.read.option("mergeSchema", "true").parquet(*paths)
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType

    data = table_data_schema(table, timeline)
    if data is None:
        return spark.createDataFrame([], StructType([]))
    return spark.createDataFrame([], from_arrow_schema(pa.schema(meta_arrow_fields() + list(data))))
