"""A Spark process running a released Apache Hudi bundle, driven by JSON lines on stdin.

Run by the Python of the Hudi virtual environment (see ``tests/harness/hudi_setup.py``), never by the project's
own: it imports nothing but the standard library and PySpark. One request per line on stdin, one reply per line
on stdout. Everything else (Spark, log4j, py4j, print) goes to stderr: the real stdout file descriptor is kept
for replies and fd 1 is pointed at stderr before the JVM starts, so the JVM inherits the redirect.

Requests are JSON objects ``{"id": <any>, "op": <name>, ...arguments}``; replies are
``{"id": <same>, "ok": true, "result": {...}}`` or ``{"id": <same>, "ok": false, "error": {"type", "message",
"java_class", "java_message", "causes"}}``. Operations: ``ping``, ``write``, ``read``, ``sql``,
``stream_start``, ``stream_status``, ``stream_stop``, ``stop``, ``read_stats``, and ``lock_try``, ``lock_acquire``,
``lock_release``, which drive the lock provider class a writer's options name (Hudi's own Java classes, built as
Hudi's ``LockManager`` builds them) in this JVM.

Tables may live on any file system the JVM's Hadoop configuration reaches (``s3a://`` when the worker was started
with Hadoop's S3A connector on ``spark.jars`` and its ``spark.hadoop.fs.s3a.*`` settings).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import decimal
import json
import os
import re
import sys
import tempfile
import time
import traceback
import zipfile
from collections.abc import Callable
from typing import Any, TextIO

HUDI_SPARK_CONF: dict[str, str] = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
    "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
}

BASE_SPARK_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.catalogImplementation": "in-memory",
    # Parquet that pyarrow reads back without INT96 surprises.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.numRecentProgressUpdates": "1000",
}

# Hudi's global defaults for every write, SQL statement and procedure of this worker. Hudi's embedded timeline
# server listens on all interfaces (it takes no bind address), so it stays off here; writers then use direct
# markers and an in-process file-system view.
HUDI_DEFAULTS: dict[str, str] = {
    "hoodie.embed.timeline.server": "false",
}


_ACTIONS = "commit|deltacommit|replacecommit|clean|rollback|savepoint|restore|indexing|compaction|clustering"
_TIMELINE_V1 = re.compile(rf"^(\d+)\.({_ACTIONS})$")  # <requested time>.<action>
_TIMELINE_V2 = re.compile(rf"^(\d+)_(\d+)\.({_ACTIONS})$")  # <requested time>_<completion time>.<action>


class RequestError(Exception):
    """A request that is malformed (unknown op, missing argument)."""


def _protocol_stream() -> TextIO:
    """Keep the real stdout for replies; send fd 1 (and ``sys.stdout``) to stderr from here on."""
    sys.stdout.flush()
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(reply_fd, "w", encoding="utf-8", buffering=1)


def _jsonable(value: Any) -> Any:
    """Spark values as JSON: containers recursively, anything else not native to JSON as a string."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "asDict"):
        return _jsonable(value.asDict(recursive=True))
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, _dt.datetime | _dt.date | decimal.Decimal):
        return str(value)
    return str(value)


def _java_throwable(exc: BaseException) -> Any:
    """The py4j handle of the Java exception behind a PySpark exception, if any."""
    for attr in ("java_exception", "_origin"):
        handle = getattr(exc, attr, None)
        if handle is not None:
            return handle
    return None


def _error_payload(exc: BaseException) -> dict[str, Any]:
    text = str(exc).strip()
    payload: dict[str, Any] = {
        "type": type(exc).__name__,
        "message": " ".join(text.splitlines()[:2])[:1000],
        "detail": text[:6000],
        "java_class": None,
        "java_message": None,
        "causes": [],
    }
    throwable = _java_throwable(exc)
    seen = 0
    while throwable is not None and seen < 12:
        try:
            cls = throwable.getClass().getName()
            msg = throwable.getMessage()
        except Exception:  # the gateway may be gone
            break
        text = f"{cls}: {msg}" if msg is not None else cls
        if seen == 0:
            payload["java_class"] = cls
            payload["java_message"] = msg
        payload["causes"].append(text[:2000])
        nxt = throwable.getCause()
        if nxt is None or nxt.equals(throwable):
            break
        throwable = nxt
        seen += 1
    if payload["java_class"] is None and not isinstance(exc, RequestError):
        payload["traceback"] = traceback.format_exc()[-4000:]
    return payload


def _is_local(base_path: str) -> bool:
    return base_path.startswith("file:") or "://" not in base_path


def _local_names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _hadoop_names(spark: Any, folder: str) -> list[str]:
    """The names in a folder of a Hadoop file system (``s3a://...``); none when it does not exist."""
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(folder)
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return []
    return [str(status.getPath().getName()) for status in fs.listStatus(path)]


def _completed_instants(base_path: str, spark: Any = None) -> list[str]:
    """Completed instants of a table, ``<time>.<action>``, for layout 1 and layout 2 (best effort): a local table
    is listed by Python, any other through the JVM's Hadoop file system (``spark`` given)."""
    local = _is_local(base_path)
    if not local and spark is None:
        return []
    path = base_path[len("file://") :] if base_path.startswith("file://") else base_path.rstrip("/")
    hoodie = f"{path}/.hoodie"
    found: list[str] = []
    for folder, pattern in ((hoodie, _TIMELINE_V1), (f"{hoodie}/timeline", _TIMELINE_V2)):
        names = _local_names(folder) if local else _hadoop_names(spark, folder)
        for name in names:
            m = pattern.match(name)
            if m is not None:
                found.append(f"{m.group(1)}.{m.group(m.lastindex or 1)}")
    return sorted(found)


def _hudi_version(jars: list[str]) -> str | None:
    for jar in jars:
        try:
            with zipfile.ZipFile(jar) as zf:
                for name in zf.namelist():
                    if name.startswith("META-INF/maven/org.apache.hudi/hudi-spark") and name.endswith(
                        "-bundle_2.12/pom.properties"
                    ):
                        for line in zf.read(name).decode("utf-8").splitlines():
                            if line.startswith("version="):
                                return line.split("=", 1)[1].strip()
        except (OSError, zipfile.BadZipFile):
            continue
    return None


def _str_options(raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RequestError("options must be an object of string values")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in raw.items()}


def _write_options(req: dict[str, Any]) -> dict[str, str]:
    """A request's writer options, with :data:`HUDI_DEFAULTS` enforced (no listener on other interfaces)."""
    return {**_str_options(req.get("options")), **HUDI_DEFAULTS}


def _need(req: dict[str, Any], key: str) -> Any:
    if req.get(key) is None:
        raise RequestError(f"request {req.get('op')!r} needs {key!r}")
    return req[key]


class _Stream:
    """One running streaming query and what has been seen of its progress."""

    def __init__(self, query: Any) -> None:
        self.query = query
        self.batches: dict[int, int] = {}  # batch id -> input rows, for batches that read data

    def refresh(self) -> None:
        for progress in self.query.recentProgress or []:
            rows = int(progress.get("numInputRows", 0) or 0)
            if rows > 0:
                self.batches[int(progress["batchId"])] = rows

    def status(self) -> dict[str, Any]:
        self.refresh()
        exc = self.query.exception()
        last = self.query.lastProgress
        return {
            "name": self.query.name,
            "id": str(self.query.id),
            "active": bool(self.query.isActive),
            "batches": len(self.batches),
            "rows": sum(self.batches.values()),
            "last_batch_id": max(self.batches) if self.batches else None,
            "message": (self.query.status or {}).get("message"),
            "exception": None if exc is None else str(exc.desc if hasattr(exc, "desc") else exc)[:8000],
            "last_progress": _jsonable(last) if last else None,
        }


class _HeldLock:
    """A lock provider of Hudi's holding its lock across requests, and since when (monotonic seconds)."""

    def __init__(self, provider: Any, since: float) -> None:
        self.provider = provider
        self.since = since


def _close_quietly(provider: Any) -> None:
    try:
        provider.close()
    except Exception:  # closing a provider that failed is best effort; the JVM logs it
        traceback.print_exc()


class Worker:
    """Owns the SparkSession and the streaming queries; one method per request op."""

    def __init__(self, spark: Any, jars: list[str]) -> None:
        self.spark = spark
        self.jars = jars
        self.streams: dict[str, _Stream] = {}
        self.locks: dict[str, _HeldLock] = {}
        self.running = True
        self.ops: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "ping": self.ping,
            "write": self.write,
            "read": self.read,
            "sql": self.sql,
            "stream_start": self.stream_start,
            "stream_status": self.stream_status,
            "stream_stop": self.stream_stop,
            "stop": self.stop,
            "read_stats": self.read_stats,
            "lock_try": self.lock_try,
            "lock_acquire": self.lock_acquire,
            "lock_release": self.lock_release,
        }

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        fn = self.ops.get(str(op))
        if fn is None:
            raise RequestError(f"unknown op {op!r}; known: {', '.join(sorted(self.ops))}")
        return fn(req)

    def ping(self, req: dict[str, Any]) -> dict[str, Any]:
        return {
            "spark_version": self.spark.version,
            "hudi_version": _hudi_version(self.jars),
            "python": sys.version.split()[0],
            "pid": os.getpid(),
        }

    def write(self, req: dict[str, Any]) -> dict[str, Any]:
        """Read parquet written by the test (exact schema) and write it through Hudi's datasource."""
        source = str(_need(req, "source"))
        path = str(_need(req, "path"))
        mode = str(req.get("mode") or "append")
        before = set(_completed_instants(path, self.spark))
        df = self.spark.read.parquet(source)
        rows = df.count()
        started = time.monotonic()
        df.write.format("hudi").options(**_write_options(req)).mode(mode).save(path)
        seconds = time.monotonic() - started
        after = _completed_instants(path, self.spark)
        return {"rows": rows, "instants": [i for i in after if i not in before], "timeline": after,
                "seconds": round(seconds, 3)}

    def read(self, req: dict[str, Any]) -> dict[str, Any]:
        """Snapshot, incremental or time-travel read; the rows go to a parquet folder the test names."""
        path = str(_need(req, "path"))
        output = str(_need(req, "output"))
        query = str(req.get("query") or "snapshot")
        options = _str_options(req.get("options"))
        if query == "snapshot":
            options.setdefault("hoodie.datasource.query.type", "snapshot")
        elif query == "incremental":
            options["hoodie.datasource.query.type"] = "incremental"
            options["hoodie.datasource.read.begin.instanttime"] = str(_need(req, "begin"))
            if req.get("end") is not None:
                options["hoodie.datasource.read.end.instanttime"] = str(req["end"])
        elif query == "time_travel":
            options["as.of.instant"] = str(_need(req, "as_of"))
        else:
            raise RequestError(f"unknown query {query!r}; known: snapshot, incremental, time_travel")
        df = self.spark.read.format("hudi").options(**options).load(path)
        columns = req.get("columns")
        if columns:
            df = df.select(*[str(c) for c in columns])
        df.coalesce(1).write.mode("overwrite").parquet(output)
        return {"rows": self.spark.read.parquet(output).count(), "output": output, "schema": df.schema.simpleString()}

    def sql(self, req: dict[str, Any]) -> dict[str, Any]:
        """Run one statement; return its rows as JSON objects."""
        df = self.spark.sql(str(_need(req, "statement")))
        limit = req.get("limit")
        rows = df.limit(int(limit)).collect() if limit is not None else df.collect()
        return {"columns": list(df.columns), "rows": [_jsonable(r.asDict(recursive=True)) for r in rows]}

    def stream_start(self, req: dict[str, Any]) -> dict[str, Any]:
        """File source (parquet or JSON-lines files dropped into a folder) to a Hudi sink, one file per micro-batch
        by default. The schema is read from the parquet file ``schema_from``."""
        name = str(_need(req, "name"))
        if name in self.streams and self.streams[name].query.isActive:
            raise RequestError(f"stream {name!r} is already running")
        source_format = str(req.get("source_format") or "parquet")
        if source_format not in ("parquet", "json"):
            raise RequestError(f"unknown source_format {source_format!r}; known: parquet, json")
        schema = self.spark.read.parquet(str(_need(req, "schema_from"))).schema
        source = (
            self.spark.readStream.schema(schema)
            .option("maxFilesPerTrigger", str(req.get("max_files_per_trigger", 1)))
            .format(source_format)
            .load(str(_need(req, "source")))
        )
        writer = (
            source.writeStream.format("hudi")
            .queryName(name)
            .options(**_write_options(req))
            .option("checkpointLocation", str(_need(req, "checkpoint")))
            .outputMode("append")
        )
        trigger_seconds = req.get("trigger_seconds")
        if trigger_seconds:
            writer = writer.trigger(processingTime=f"{float(trigger_seconds)} seconds")
        query = writer.start(str(_need(req, "path")))
        self.streams[name] = _Stream(query)
        return {"name": name, "id": str(query.id)}

    def _stream(self, req: dict[str, Any]) -> _Stream:
        name = str(_need(req, "name"))
        stream = self.streams.get(name)
        if stream is None:
            raise RequestError(f"no stream named {name!r}; known: {', '.join(sorted(self.streams)) or 'none'}")
        return stream

    def stream_status(self, req: dict[str, Any]) -> dict[str, Any]:
        """Progress of a stream; with ``wait_for_batches`` it first waits (up to ``wait_seconds``) for that many."""
        stream = self._stream(req)
        wanted = req.get("wait_for_batches")
        if wanted is not None:
            deadline = time.monotonic() + float(req.get("wait_seconds") or 120)
            while time.monotonic() < deadline:
                stream.refresh()
                if len(stream.batches) >= int(wanted) or not stream.query.isActive:
                    break
                stream.query.awaitTermination(0.2)
        return stream.status()

    def stream_stop(self, req: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(req)
        stream.refresh()
        stream.query.stop()
        return stream.status()

    # -- Hudi's lock providers ----------------------------------------------------------------------------------

    def _lock_provider(self, props: dict[str, str]) -> Any:
        """A new instance of the lock provider class ``props`` name, built as Hudi's ``LockManager`` builds one for
        a writer with these options: a write config made of them (so Hudi infers and defaults the keys the writer
        would get: the ZooKeeper lock key and retry keys, the DynamoDB partition key), its properties (plus, from
        Hudi 1.x on, the lock holder's application id) as the ``LockConfiguration``, and this JVM's Hadoop
        configuration as the storage configuration."""
        jvm = self.spark._jvm
        gateway = self.spark.sparkContext._gateway
        base_path = props.get("hoodie.base.path")
        if not base_path:
            raise RequestError("lock props need hoodie.base.path (the table's base path, as a writer has it)")
        properties = jvm.java.util.Properties()
        for key, value in props.items():
            properties.setProperty(key, value)
        config = (jvm.org.apache.hudi.config.HoodieWriteConfig.newBuilder().withPath(base_path)
                  .withProperties(properties).build())
        lock_props = jvm.org.apache.hudi.common.config.TypedProperties()
        lock_props.putAll(config.getProps())
        if not (_hudi_version(self.jars) or "").startswith("0."):
            lock_props.put(jvm.org.apache.hudi.common.config.LockConfiguration.LOCK_HOLDER_APP_ID_KEY,
                           config.getApplicationId())
        lock_conf = jvm.org.apache.hudi.common.config.LockConfiguration(lock_props)
        storage_conf = jvm.org.apache.hudi.hadoop.fs.HadoopFSUtils.getStorageConfWithCopy(
            self.spark._jsc.hadoopConfiguration())
        loader = lock_conf.getClass().getClassLoader()
        types = gateway.new_array(jvm.java.lang.Class, 2)
        types[0] = lock_conf.getClass()
        types[1] = jvm.java.lang.Class.forName("org.apache.hudi.storage.StorageConfiguration", True, loader)
        args = gateway.new_array(jvm.java.lang.Object, 2)
        args[0] = lock_conf
        args[1] = storage_conf
        return jvm.org.apache.hudi.common.util.ReflectionUtils.loadClass(config.getLockProviderClass(), types, args)

    def _try_lock(self, props: dict[str, str], timeout_ms: int) -> tuple[Any, dict[str, Any]]:
        """Build a provider and call its ``tryLock(timeout_ms)``: the provider and ``{acquired, waited_s, reason,
        built_s, started_at, returned_at}`` (``started_at``/``returned_at``: ``time.monotonic()`` around
        ``tryLock``, comparable with the test process's on Linux, where the clock is system-wide). A
        ``HoodieLockException`` from ``tryLock`` (the ZooKeeper provider's way of saying "not acquired in time")
        counts as not acquired; its message is the reason."""
        jvm = self.spark._jvm
        building = time.monotonic()
        provider = self._lock_provider(props)
        started = time.monotonic()
        reason = None
        try:
            acquired = bool(provider.tryLock(int(timeout_ms), jvm.java.util.concurrent.TimeUnit.MILLISECONDS))
        except Exception as exc:
            payload = _error_payload(exc)
            if payload.get("java_class") != "org.apache.hudi.exception.HoodieLockException":
                _close_quietly(provider)
                raise
            acquired, reason = False, " <- ".join(payload["causes"])[:2000]
        returned = time.monotonic()
        if not acquired:
            _close_quietly(provider)
        return provider, {"acquired": acquired, "waited_s": round(returned - started, 3), "reason": reason,
                          "built_s": round(started - building, 3), "started_at": started, "returned_at": returned}

    def lock_try(self, req: dict[str, Any]) -> dict[str, Any]:
        """One ``tryLock(timeout_ms)`` of a new provider (the reply of ``_try_lock``). Acquired, the lock is
        given back at once (``unlock`` then ``close``, as ``LockManager.unlock`` does) unless ``hold`` is true,
        when it is kept under ``name`` for ``lock_release``."""
        props = _str_options(_need(req, "props"))
        name = str(req.get("name") or "default")
        hold = bool(req.get("hold"))
        if hold and name in self.locks:
            raise RequestError(f"lock {name!r} is already held in this worker")
        provider, result = self._try_lock(props, int(_need(req, "timeout_ms")))
        if result["acquired"]:
            if hold:
                self.locks[name] = _HeldLock(provider, time.monotonic())
            else:
                provider.unlock()
                provider.close()
        return result

    def lock_acquire(self, req: dict[str, Any]) -> dict[str, Any]:
        """Take the lock and hold it under ``name`` across requests (``tryLock(timeout_ms)``, default 60 s; an error
        when it stays held elsewhere)."""
        props = _str_options(_need(req, "props"))
        name = str(req.get("name") or "default")
        if name in self.locks:
            raise RequestError(f"lock {name!r} is already held in this worker")
        timeout_ms = int(req.get("timeout_ms") or 60000)
        provider, result = self._try_lock(props, timeout_ms)
        if not result["acquired"]:
            raise RequestError(f"lock not acquired within {timeout_ms} ms: "
                               f"{result['reason'] or 'tryLock returned false'}")
        self.locks[name] = _HeldLock(provider, time.monotonic())
        return {**result, "lock": str(provider.getLock())}

    def lock_release(self, req: dict[str, Any]) -> dict[str, Any]:
        """Give back the lock held under ``name`` (``unlock`` then ``close``): ``{held_s, started_at,
        unlocked_at}`` (monotonic times around ``unlock``)."""
        name = str(req.get("name") or "default")
        held = self.locks.pop(name, None)
        if held is None:
            raise RequestError(f"no lock {name!r} is held; held: {', '.join(sorted(self.locks)) or 'none'}")
        started = time.monotonic()
        try:
            held.provider.unlock()
        finally:
            unlocked = time.monotonic()
            held.provider.close()
        return {"held_s": round(started - held.since, 3), "started_at": started, "unlocked_at": unlocked}

    def stop(self, req: dict[str, Any]) -> dict[str, Any]:
        for held in self.locks.values():
            _close_quietly(held.provider)
        self.locks.clear()
        stopped = []
        for name, stream in self.streams.items():
            if stream.query.isActive:
                stream.query.stop()
                stopped.append(name)
        self.running = False
        return {"stopped_streams": stopped}

    def read_stats(self, req: dict[str, Any]) -> dict[str, Any]:
        """A snapshot read, filtered by the SQL predicate ``filter`` if given, with what its file scans read: the
        rows go to a parquet folder the test names; ``scans`` has each FileSourceScanExec's driver metrics (``numFiles``
        is Spark's "number of files read": the files left after Hudi's partition pruning and data skipping) and
        ``input_files`` the relation's files before any filter (the latest snapshot, as the read listed it)."""
        path = str(_need(req, "path"))
        output = str(_need(req, "output"))
        options = _str_options(req.get("options"))
        options.setdefault("hoodie.datasource.query.type", "snapshot")
        df = self.spark.read.format("hudi").options(**options).load(path)
        input_files = sorted(str(f) for f in df.inputFiles())
        if req.get("filter"):
            df = df.where(str(req["filter"]))
        if req.get("columns"):
            df = df.select(*[str(c) for c in req["columns"]])
        rows = df.collect()  # runs df's own query execution, whose plan then carries the scan metrics
        scans = _file_scans(df._jdf.queryExecution().executedPlan())
        self.spark.createDataFrame(rows, df.schema).coalesce(1).write.mode("overwrite").parquet(output)
        return {"rows": len(rows), "output": output, "scans": scans, "input_files": input_files}


_SCAN_METRICS = ("numFiles", "numPartitions", "filesSize", "numOutputRows")


def _file_scans(plan: Any) -> list[dict[str, Any]]:
    """The file scans of an executed physical plan (through adaptive and codegen wrappers) and their metrics."""
    scans: list[dict[str, Any]] = []
    todo = [plan]
    while todo:
        node = todo.pop()
        name = node.getClass().getSimpleName()
        if name == "AdaptiveSparkPlanExec":
            todo.append(node.executedPlan())
            continue
        if "FileSourceScanExec" in name:
            metrics = node.metrics()
            found = {m: int(metrics.get(m).get().value()) for m in _SCAN_METRICS if metrics.get(m).isDefined()}
            scans.append({"node": name, "file_index": node.relation().location().getClass().getName(), **found})
        children = node.children()
        todo.extend(children.apply(i) for i in range(children.size()))
    return scans


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jar", action="append", default=[], help="jar to put on spark.jars (repeatable)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--app-name", default="hudi-clusterd-interop")
    parser.add_argument("--log-level", default="WARN")
    parser.add_argument(
        "--scratch", default=None, help="working folder (Spark local dirs, hudi-conf); default: a new temporary folder"
    )
    parser.add_argument("--conf", action="append", default=[], help="extra Spark conf key=value (repeatable)")
    return parser.parse_args(argv)


def _build_session(args: argparse.Namespace) -> Any:
    from pyspark.sql import SparkSession

    conf = {**BASE_SPARK_CONF, **HUDI_SPARK_CONF, "spark.driver.memory": args.driver_memory}
    if args.jar:
        conf["spark.jars"] = ",".join(args.jar)
    conf["spark.local.dir"] = os.path.join(args.scratch, "local")
    conf["spark.sql.warehouse.dir"] = os.path.join(args.scratch, "warehouse")
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--conf needs key=value, got {item!r}")
        conf[key] = value
    builder = SparkSession.builder.master(args.master).appName(args.app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(args.log_level)
    return spark


def _hermetic_environment(scratch: str) -> None:
    """Loopback only; Hudi reads our ``hudi-defaults.conf``, never a site-wide one (/etc/hudi/conf)."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.makedirs(scratch, exist_ok=True)
    os.chdir(scratch)  # derby.log, spark-warehouse and the like land here, not in the repository
    conf_dir = os.path.join(scratch, "hudi-conf")
    os.makedirs(conf_dir, exist_ok=True)
    with open(os.path.join(conf_dir, "hudi-defaults.conf"), "w", encoding="utf-8") as conf:
        conf.writelines(f"{key}={value}\n" for key, value in HUDI_DEFAULTS.items())
    os.environ["HUDI_CONF_DIR"] = conf_dir


def main(argv: list[str] | None = None) -> int:
    replies = _protocol_stream()
    args = _parse_args(argv)
    if not args.scratch:
        args.scratch = tempfile.mkdtemp(prefix="hudi-worker-")
    _hermetic_environment(args.scratch)
    started = time.monotonic()
    try:
        spark = _build_session(args)
    except Exception as exc:
        replies.write(json.dumps({"id": "startup", "ok": False, "error": _error_payload(exc)}) + "\n")
        return 1
    worker = Worker(spark, list(args.jar))
    ready = {**worker.ping({}), "startup_seconds": round(time.monotonic() - started, 2)}
    replies.write(json.dumps({"id": "startup", "ok": True, "result": ready}) + "\n")

    for line in sys.stdin:
        if not line.strip():
            continue
        req_id: Any = None
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise RequestError("a request is a JSON object")
            req_id = req.get("id")
            reply = {"id": req_id, "ok": True, "result": worker.handle(req)}
        except Exception as exc:
            reply = {"id": req_id, "ok": False, "error": _error_payload(exc)}
        replies.write(json.dumps(reply, default=str) + "\n")
        if not worker.running:
            break
    try:
        spark.stop()
    finally:
        replies.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
