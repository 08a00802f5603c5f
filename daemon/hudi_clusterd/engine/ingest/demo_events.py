"""The demo's event stream: Spark's ``rate-micro-batch`` source shaped like the reference dataset (skewed points)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HOT_SPOTS = 8
CATEGORIES = ("a", "b", "c")


def skewed_events(spark: SparkSession, rows_per_batch: int, batch_millis: int) -> DataFrame:
    """Events in micro-batches of exactly ``rows_per_batch`` rows whose event times advance ``batch_millis`` per
    batch from now: skewed points around a few hot spots, like the reference dataset, in `CATEGORIES`.

    Every batch holds the same rows whatever the machine's pace (``rate`` would put the backlog of a slow batch
    into the next one), so every ingestion commit writes files of the same size. Each category gets every hot
    spot (3 and 8 are coprime), and every batch covers the whole (lat, lon) domain: unclustered files overlap
    every query."""
    from pyspark.sql import functions as F

    v = F.col("value")
    hot = (v % HOT_SPOTS).cast("double")
    jitter_a = (F.hash(v, F.lit(1)) % 1000) / 250.0
    jitter_b = (F.hash(v, F.lit(2)) % 1000) / 250.0
    categories = F.array(*(F.lit(c) for c in CATEGORIES))
    return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch)
            .option("advanceMillisPerBatch", batch_millis).option("startTimestamp", int(time.time() * 1000))
            .load()
            .select(v.alias("event_id"), F.col("timestamp").alias("event_ts"),
                    (hot * 12.0 + jitter_a).alias("lat"), (F.lit(90.0) - hot * 11.0 + jitter_b).alias("lon"),
                    F.element_at(categories, (v % len(CATEGORIES) + 1).cast("int")).alias("category")))
