# syntax=docker/dockerfile:1
#
# hudi-clusterd: the clustering daemon with Python 3.11, PySpark and a Java 17 runtime in one image.
#
#   docker build -t hudi-clusterd:0.1.0 .
#   docker run --rm -v /srv/lake:/lake -v /srv/clusterd:/etc/hudi-clusterd:ro -p 9464:9464 hudi-clusterd:0.1.0
#
# The default command runs the daemon on /etc/hudi-clusterd/clusterd.properties (mount it; see
# config/clusterd.properties and deploy/k8s/configmap.yaml). In a container that file must set
#   clusterd.metrics.address=0.0.0.0:9464
# because the daemon's default (127.0.0.1:9464) is unreachable from outside the container, so Prometheus could
# not scrape it (the HEALTHCHECK below runs inside the container and works either way).
#
# Stopping: `docker stop` sends SIGTERM; the daemon stops planning and lets running groups finish within
# clusterd.shutdown.grace.seconds (default 60), so give it more than that: `docker stop -t 120`. A second SIGTERM
# exits at once (code 130); running work is rolled back on the next start. Exit codes:
# daemon/hudi_clusterd/exit_codes.py (0 ok, 3 bad config, 4 unusable table, 5 grace expired, 130 forced).
#
# The same image runs one-shot commands (`docker run ... hudi-clusterd:0.1.0 status --base-path /lake/t`) and
# PySpark streaming writers using hudi_clusterd.engine.sink.HudiStreamingSink (override the entrypoint with
# python3, as deploy/k8s/deployment.yaml does).

FROM python:3.11-slim-bookworm

# Java 17 for Spark's JVM, procps because Spark's launch scripts call `ps`. JAVA_HOME points at a stable
# symlink so the image builds the same on amd64 and arm64 (the JDK folder name carries the architecture). The
# man1 folder, absent from slim images, is where the JDK's alternatives link their man pages.
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends openjdk-17-jre-headless procps; \
    rm -rf /var/lib/apt/lists/*; \
    ln -s "$(dirname "$(dirname "$(readlink -f /usr/bin/java)")")" /usr/lib/jvm/java-17; \
    /usr/lib/jvm/java-17/bin/java -version

ENV JAVA_HOME=/usr/lib/jvm/java-17 \
    PYSPARK_PYTHON=python3 \
    PYSPARK_DRIVER_PYTHON=python3 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Only what `pip install .` needs: the build metadata, the README it names, and the package sources.
COPY pyproject.toml README.md /tmp/hudi-clusterd/
COPY daemon/ /tmp/hudi-clusterd/daemon/
RUN set -eux; \
    pip install --no-cache-dir /tmp/hudi-clusterd; \
    rm -rf /tmp/hudi-clusterd; \
    hudi-clusterd --version

# A fixed non-root uid with a passwd entry and a home: Hadoop's user lookup inside Spark needs a user name for
# the uid, and Kubernetes' runAsNonRoot check needs a numeric USER.
RUN set -eux; \
    groupadd --system --gid 10001 clusterd; \
    useradd --system --uid 10001 --gid 10001 --home-dir /home/clusterd --create-home --shell /usr/sbin/nologin \
        clusterd; \
    mkdir -p /etc/hudi-clusterd
WORKDIR /home/clusterd
USER 10001:10001

# /metrics and /healthz (needs clusterd.metrics.address=0.0.0.0:9464 in the config to be reachable from outside).
EXPOSE 9464

# /healthz answers 200 while every table loop is alive and 503 once one is stuck; the daemon starts Spark before
# the HTTP server, hence the start period. python's urllib because the slim image has no curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python3", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=4).status == 200 else 1)"]

# First SIGTERM: graceful stop within clusterd.shutdown.grace.seconds; a second one: immediate exit.
STOPSIGNAL SIGTERM

ENTRYPOINT ["hudi-clusterd"]
CMD ["run", "--props", "/etc/hudi-clusterd/clusterd.properties"]
