"""Example ingestion job: Spark's rate source -> a Hudi v6 copy-on-write table, one commit per micro-batch.

Runs beside the hudi-clusterd sidecar (deploy/k8s/deployment.yaml), which clusters what this job writes. The sink
commits exactly once per batch across restarts from the same checkpoint; on SIGTERM the query stops between
batches and the process exits 0. Table and checkpoint live on the shared volume.

    python3 streaming_app.py --base-path /lake/events --checkpoint /lake/_checkpoints/events
"""

import argparse
import signal
import threading
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from hudi_clusterd.engine.ingest.sink import HudiStreamingSink

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--base-path", required=True, help="the Hudi table (created on the first batch)")
parser.add_argument("--checkpoint", required=True, help="Structured Streaming checkpoint folder")
parser.add_argument("--master", default="local[2]")
parser.add_argument("--rows-per-second", type=int, default=200)
parser.add_argument("--trigger-seconds", type=int, default=60)
parser.add_argument("--stop-timeout", type=float, default=45.0, help="seconds a running batch gets on SIGTERM")
args = parser.parse_args()

spark = (SparkSession.builder.appName("events-ingest").master(args.master)
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
kinds = F.array(F.lit("click"), F.lit("view"), F.lit("buy"))
events = (spark.readStream.format("rate").option("rowsPerSecond", args.rows_per_second).load()
          .select(F.col("value").alias("id"), F.unix_millis("timestamp").alias("ts"),
                  F.element_at(kinds, (F.col("value") % 3 + 1).cast("int")).alias("event_type"),
                  (F.col("value") % 1000).alias("user_id"), F.date_format("timestamp", "yyyy-MM-dd").alias("dt")))
sink = HudiStreamingSink(args.base_path, record_key="id", partition_by=["dt"], precombine="ts")
query = (events.writeStream.foreachBatch(sink).option("checkpointLocation", args.checkpoint)
         .trigger(processingTime=f"{args.trigger_seconds} seconds").start())

stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
while query.isActive and not stop.is_set():
    query.awaitTermination(5)  # returns after 5 s; raises if the query failed
# Let a running batch commit (bounded): a batch interrupted by stop() is rolled back and replayed on restart.
done, deadline = (query.lastProgress or {}).get("batchId"), time.monotonic() + args.stop_timeout
while (query.isActive and query.status["isTriggerActive"] and (query.lastProgress or {}).get("batchId") == done
       and time.monotonic() < deadline):
    time.sleep(0.5)
query.stop()
spark.stop()
