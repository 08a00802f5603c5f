"""Run ``hudi-clusterd cluster`` (schedule a plan when due, then execute it) under ``spark-submit``.

    spark-submit --master spark://spark-master:7077 --deploy-mode client \\
        --conf spark.scheduler.mode=FAIR --executor-memory 4g \\
        deploy/spark/launch.py --base-path /shared/lake/events --props clustering.properties

The arguments are those of ``hudi-clusterd cluster`` (``--base-path``, ``--props``, ``--force``) except
``--spark-master``/``--spark-conf``: the master and every Spark setting come from spark-submit. The session is
created here first, from spark-submit's configuration, and the command attaches to it; ``spark.sql.*`` settings
given to spark-submit are passed on so that the command's own defaults do not replace them. Client deploy mode
only: the driver is this process. The exit code is the command's (0 done or nothing due, 1 failed, 3 bad
properties, 4 unusable table).
"""

import sys

from pyspark.sql import SparkSession

from hudi_clusterd.cli import main


def launch(argv: list[str]) -> int:
    if any(a == "--spark-master" or a.startswith(("--spark-master=", "--spark-conf")) for a in argv):
        print("launch.py: give the master and Spark settings to spark-submit, not to the command", file=sys.stderr)
        return 2
    spark = SparkSession.builder.getOrCreate()  # spark-submit's master, --conf, --name ...
    master = str(spark.sparkContext.master)
    conf = spark.sparkContext.getConf().getAll()
    passed_on = [f"--spark-conf={key}={value}" for key, value in conf if key.startswith("spark.sql.")]
    return main(["cluster", "--spark-master", master, *passed_on, *argv])


if __name__ == "__main__":
    sys.exit(launch(sys.argv[1:]))
