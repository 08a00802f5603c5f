#!/usr/bin/env bash
# hudi-clusterd's clustering on a Spark 4.3 cluster: worked examples, one per sub-command.
#
#   deploy/spark/spark-submit.sh daemon       (a) the long-running daemon; master and Spark settings in a
#                                                 properties file (clusterd.spark.master, clusterd.spark.conf.*)
#   deploy/spark/spark-submit.sh standalone   (b) one clustering run through spark-submit, Spark standalone
#   deploy/spark/spark-submit.sh kubernetes   (b) the same with executors as Kubernetes pods
#   deploy/spark/spark-submit.sh yarn         (b) the same on YARN, executors' Python from a packed venv
#   deploy/spark/spark-submit.sh connect      one clustering run on a Spark Connect server (read its caveat)
#
# hudi-clusterd is a Python program that creates (or, under spark-submit, joins) its SparkSession in CLIENT mode:
# the process running it is the Spark driver, so --deploy-mode cluster is not supported. (b) runs launch.py, which
# calls hudi_clusterd.cli.main(["cluster", ...]): schedule a plan if one is due (or with FORCE=1), execute it, exit.
# Run (b) from cron or a Kubernetes CronJob when a resident daemon is not wanted; never beside a daemon that
# serves the same table (both would be correct, thanks to the table lock, but would compete for the same plans).
#
# Requirements on every cluster (details in clusterd-cluster.properties):
#   - executors need Python 3.11 (the driver's minor version) with hudi-clusterd installed: they write the files;
#   - the table's base path must be the same path or URI on the driver and every executor;
#   - executors must reach the driver (spark.driver.host; fixed ports if a firewall sits between them).
#
# Variables (defaults in brackets): BASE_PATH [/shared/lake/events], PROPS [clustering .properties, optional],
# SPARK_MASTER_URL [spark://spark-master:7077], DRIVER_HOST [this host's name], FORCE [0],
# K8S_API [https://kubernetes.default.svc:443], K8S_NAMESPACE [lake], EXECUTOR_IMAGE, ENV_ARCHIVE
# [hudi-clusterd-env.tar.gz], CONNECT_URL [sc://spark-connect:15002]. DRY_RUN=1 prints the command instead.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
launcher="$here/launch.py"

BASE_PATH="${BASE_PATH:-/shared/lake/events}"
SPARK_MASTER_URL="${SPARK_MASTER_URL:-spark://spark-master:7077}"
DRIVER_HOST="${DRIVER_HOST:-$(hostname -f 2>/dev/null || hostname)}"
K8S_API="${K8S_API:-https://kubernetes.default.svc:443}"
K8S_NAMESPACE="${K8S_NAMESPACE:-lake}"
EXECUTOR_IMAGE="${EXECUTOR_IMAGE:-registry.example.com/hudi-clusterd-executor:0.1.0}"
ENV_ARCHIVE="${ENV_ARCHIVE:-hudi-clusterd-env.tar.gz}"
CONNECT_URL="${CONNECT_URL:-sc://spark-connect:15002}"

# Arguments of `hudi-clusterd cluster` (launch.py passes them on).
cluster_args=(--base-path "$BASE_PATH")
if [[ -n "${PROPS:-}" ]]; then cluster_args+=(--props "$PROPS"); fi
if [[ "${FORCE:-0}" == 1 ]]; then cluster_args+=(--force); fi

run() {
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    printf '%q ' "$@"
    printf '\n'
  else
    exec "$@"
  fi
}

case "${1:-}" in
  daemon)
    # (a) Edit clusterd-cluster.properties (tables, clusterd.spark.master, clusterd.spark.conf.*). The executors'
    # Python comes from PYSPARK_PYTHON in this environment (a path valid on the workers).
    run env PYSPARK_PYTHON="${PYSPARK_PYTHON:-python3}" \
      hudi-clusterd run --props "${CLUSTERD_PROPS:-$here/clusterd-cluster.properties}"
    ;;

  standalone)
    # (b) Spark standalone. Workers need hudi-clusterd in the Python named by spark.pyspark.python.
    run spark-submit \
      --master "$SPARK_MASTER_URL" \
      --deploy-mode client \
      --name hudi-clusterd-cluster \
      --conf spark.driver.host="$DRIVER_HOST" \
      --conf spark.driver.port=7078 \
      --conf spark.blockManager.port=7079 \
      --conf spark.scheduler.mode=FAIR \
      --conf spark.pyspark.python=python3 \
      --conf spark.sql.shuffle.partitions=64 \
      --driver-memory 2g \
      --executor-memory 4g \
      --executor-cores 2 \
      --total-executor-cores 8 \
      "$launcher" "${cluster_args[@]}"
    ;;

  kubernetes)
    # (b) Kubernetes, client mode from a pod (a CronJob running the hudi-clusterd image, with a service account
    # allowed to create pods). Executors: an image with Spark's entrypoint, Python 3.11 and hudi-clusterd (e.g.
    # Spark's docker-image-tool.sh -p image plus `pip install .`). The table volume must be ReadWriteMany to be
    # mounted by every executor at the same path. DRIVER_HOST: the pod IP (hostname -i) or a headless Service.
    # Inside a pod, naming it as the driver pod makes the executor pods its children (deleted with it).
    driver_pod=()
    if [[ -n "${KUBERNETES_SERVICE_HOST:-}" && -n "${HOSTNAME:-}" ]]; then
      driver_pod=(--conf "spark.kubernetes.driver.pod.name=$HOSTNAME")
    fi
    run spark-submit \
      --master "k8s://$K8S_API" \
      --deploy-mode client \
      --name hudi-clusterd-cluster \
      --conf spark.kubernetes.namespace="$K8S_NAMESPACE" \
      --conf spark.kubernetes.container.image="$EXECUTOR_IMAGE" \
      ${driver_pod[@]+"${driver_pod[@]}"} \
      --conf spark.driver.host="$DRIVER_HOST" \
      --conf spark.driver.port=7078 \
      --conf spark.blockManager.port=7079 \
      --conf spark.scheduler.mode=FAIR \
      --conf spark.kubernetes.executor.volumes.persistentVolumeClaim.lake.options.claimName=hudi-lake \
      --conf spark.kubernetes.executor.volumes.persistentVolumeClaim.lake.mount.path=/shared/lake \
      --conf spark.kubernetes.executor.podNamePrefix=hudi-clusterd \
      --num-executors 4 \
      --executor-cores 2 \
      --executor-memory 4g \
      "$launcher" "${cluster_args[@]}"
    ;;

  yarn)
    # (b) YARN (HADOOP_CONF_DIR set). Executors get Python and hudi-clusterd from a packed virtualenv, built once:
    #   python3.11 -m venv env && env/bin/pip install . venv-pack && env/bin/venv-pack -o hudi-clusterd-env.tar.gz
    # The driver (this process) uses the local python3, which needs hudi-clusterd installed too. An hdfs:// base
    # path needs libhdfs for pyarrow on the driver and executors (ARROW_LIBHDFS_DIR, CLASSPATH).
    run env PYSPARK_DRIVER_PYTHON=python3 PYSPARK_PYTHON=./environment/bin/python spark-submit \
      --master yarn \
      --deploy-mode client \
      --name hudi-clusterd-cluster \
      --archives "$ENV_ARCHIVE#environment" \
      --conf spark.scheduler.mode=FAIR \
      --num-executors 4 \
      --executor-cores 2 \
      --executor-memory 4g \
      "$launcher" "${cluster_args[@]}"
    ;;

  connect)
    # Spark Connect: a server started on the cluster from a Spark 4.3 distribution, with hudi-clusterd installed
    # in its Python (the clustering functions run there):
    #   $SPARK_HOME/sbin/start-connect-server.sh --master spark://spark-master:7077 \
    #       --conf spark.connect.grpc.binding.port=15002
    # and the client libraries here: pip install 'pyspark[connect]==4.3.0' (not in hudi-clusterd's dependencies).
    # For the daemon, set clusterd.spark.master=sc://host:15002 in its properties instead.
    # CAVEAT (hudi-clusterd 0.1.0): clustering execution uses SparkContext job groups for cancellation, which a
    # Spark Connect session does not have, so this fails until the engine uses session tags instead.
    run hudi-clusterd cluster --spark-master "$CONNECT_URL" "${cluster_args[@]}"
    ;;

  *)
    sed -n '2,10p' "${BASH_SOURCE[0]}" >&2
    exit 2
    ;;
esac
