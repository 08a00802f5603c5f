"""Drive real Apache Hudi from tests: a client for ``hudi_worker.py`` running in the Hudi venv, plus helpers.

The worker is a separate process with its own PySpark (3.5) and a released Hudi Spark bundle, the way a user's
ingestion job runs beside the daemon. Tests exchange data with it through parquet files: rows go in as parquet
written by pyarrow (exact schema), and reads come back as parquet the worker writes.

A worker depends on the bundle jar and the interpreter only: the table version a setup writes is a writer option
(see ``tests/harness/hudi_versions.py``). So the setups of one bundle share one worker (:class:`HudiWorkers`), each
test seeing it through a view that carries its setup (:meth:`HudiWorker.for_setup`).

A worker may run with a :class:`WorkerProfile`: jars beside the bundle, Spark settings and environment changes
(``tests/harness/hudi_s3.py`` makes the one that reaches the S3 test server and Hudi's lock providers there).
Workers of different profiles are different processes.

Availability: :func:`require_installation` skips the test when the cache from ``python -m tests.harness.hudi_setup``
is missing, naming what is missing; with ``CLUSTERD_REQUIRE_HUDI=1`` that is a failure instead.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import itertools
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.storage import StorageSpec, open_storage
from tests.harness import hudi_setup
from tests.harness.hudi_versions import HudiSetup, shared_table_writer_options

REQUIRE_ENV = "CLUSTERD_REQUIRE_HUDI"
WORKER_SCRIPT = Path(__file__).resolve().with_name("hudi_worker.py")
_STARTUP_TIMEOUT_S = 180.0
_DEFAULT_TIMEOUT_S = 300.0
_STDERR_TAIL_LINES = 60

ReadQuery = Literal["snapshot", "incremental", "time_travel"]


class HudiUnavailableError(Exception):
    """The Hudi cache (venv or bundle jar) for a setup is not there."""


class HudiWorkerError(Exception):
    """The worker died, timed out or broke the protocol; the message carries its stderr tail."""


class HudiRequestError(Exception):
    """Hudi or Spark raised while serving a request (the worker is still usable)."""

    def __init__(self, op: str, error: Mapping[str, Any]) -> None:
        self.op = op
        self.error = dict(error)
        self.java_class: str | None = error.get("java_class")
        self.java_message: str | None = error.get("java_message")
        self.causes: list[str] = list(error.get("causes") or [])
        if self.java_class:
            head = f"{self.java_class}: {self.java_message}"
        else:
            head = f"{error.get('type')}: {error.get('message')}"
        root = f" (root cause: {self.causes[-1]})" if len(self.causes) > 1 else ""
        super().__init__(f"Hudi worker {op!r} failed: {head}{root}")


@dataclass(frozen=True, slots=True)
class HudiInstallation:
    """Where a setup's interpreter and bundle jar live in the cache."""

    setup: HudiSetup
    python: Path
    jar: Path

    @property
    def key(self) -> tuple[Path, Path]:
        """What a worker process depends on: setups with the same key can share one."""
        return (self.python, self.jar)

    @property
    def name(self) -> str:
        """``hudi-<version>``: the bundle, whatever table version a setup of it writes."""
        return f"hudi-{self.setup.hudi_version}"


def locate(setup: HudiSetup) -> HudiInstallation:
    """The cached venv and jar for ``setup``; :class:`HudiUnavailableError` names what is missing."""
    missing = hudi_setup.missing_for(setup)
    if missing:
        what = "; ".join(m.detail for m in missing)
        raise HudiUnavailableError(
            f"Apache Hudi setup {setup.name} is not installed: missing {what}. Run `{hudi_setup.SETUP_COMMAND}`"
        )
    return HudiInstallation(
        setup=setup,
        python=hudi_setup.venv_python(setup.pyspark_version),
        jar=hudi_setup.jar_path(setup.bundle),
    )


def hudi_required() -> bool:
    """True when ``CLUSTERD_REQUIRE_HUDI=1``: a missing Hudi setup fails tests instead of skipping them."""
    return os.environ.get(REQUIRE_ENV, "").strip().lower() in {"1", "true", "yes"}


def require_installation(setup: HudiSetup) -> HudiInstallation:
    """:func:`locate`, or skip the calling test (fail it under ``CLUSTERD_REQUIRE_HUDI=1``)."""
    try:
        return locate(setup)
    except HudiUnavailableError as exc:
        if hudi_required():
            pytest.fail(f"{exc} ({REQUIRE_ENV}=1)", pytrace=False)
        pytest.skip(str(exc))


@dataclass(frozen=True, slots=True)
class WorkerProfile:
    """What a worker adds to a plain one: ``jars`` after the bundle on ``spark.jars``, ``spark_conf`` (pairs, as
    ``--conf key=value``), and ``env`` changes (a value of None unsets the variable). Hashable: workers are shared
    per (installation, profile)."""

    name: str
    jars: tuple[Path, ...] = ()
    spark_conf: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str | None], ...] = ()


@dataclass
class _WorkerState:
    """What the views of one worker process share beyond the process itself."""

    failed: bool = False  # it died or broke the protocol: keep its scratch folder (and its log) on close


class HudiWorker:
    """One running ``hudi_worker.py``: a SparkSession with a Hudi bundle in another process.

    Requests are synchronous and serialised by a lock. A request that times out kills the worker (its state is
    unknown); an error raised by Hudi leaves it usable and surfaces as :class:`HudiRequestError`.

    ``setup`` is the setup whose tables the caller writes (tests pass it to :func:`hudi_write_options`);
    :meth:`for_setup` gives a view of the same process for another setup of the same bundle. The Spark session is
    shared by every view: a table registered by name (:meth:`register_table`) stays registered for all of them.
    """

    def __init__(
        self,
        installation: HudiInstallation,
        *,
        scratch: Path | None = None,
        master: str = "local[2]",
        driver_memory: str = "1g",
        spark_conf: Mapping[str, str] | None = None,
        startup_timeout: float = _STARTUP_TIMEOUT_S,
        log_path: Path | None = None,
        profile: WorkerProfile | None = None,
    ) -> None:
        self.installation = installation
        self.setup = installation.setup
        self.profile = profile
        self._own_scratch = scratch is None
        self._state = _WorkerState()
        self.scratch = Path(tempfile.mkdtemp(prefix=f"{installation.name}-")) if scratch is None else scratch
        self.scratch.mkdir(parents=True, exist_ok=True)
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL_LINES)
        self._log_path = log_path or self.scratch / "worker-stderr.log"
        self._replies: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        cmd = [
            str(installation.python),
            str(WORKER_SCRIPT),
            "--jar",
            str(installation.jar),
            *(arg for jar in (profile.jars if profile else ()) for arg in ("--jar", str(jar))),
            "--master",
            master,
            "--driver-memory",
            driver_memory,
            "--scratch",
            str(self.scratch / "spark"),
            "--app-name",
            f"hudi-clusterd-interop-{installation.name}",
        ]
        for key, value in [*(profile.spark_conf if profile else ()), *(spark_conf or {}).items()]:
            cmd += ["--conf", f"{key}={value}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_", "PYTHONPATH"))}
        for key, change in profile.env if profile else ():
            if change is None:
                env.pop(key, None)
            else:
                env[key] = change
        env["PYTHONUNBUFFERED"] = "1"
        env["PYSPARK_PYTHON"] = str(installation.python)
        started = time.monotonic()
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            bufsize=1,
            env=env,
            cwd=str(self.scratch),
            start_new_session=True,  # a Ctrl-C to pytest reaches the worker as EOF on stdin, through close()
        )
        self._threads = [
            threading.Thread(target=self._pump_stdout, name=f"{installation.name}-stdout", daemon=True),
            threading.Thread(target=self._pump_stderr, name=f"{installation.name}-stderr", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        try:
            ready = self._await_reply("startup", "startup", startup_timeout)
        except BaseException:
            self.kill()
            self._release()
            raise
        self.info: dict[str, Any] = dict(ready)
        self.startup_seconds = time.monotonic() - started

    def for_setup(self, setup: HudiSetup) -> HudiWorker:
        """This worker process as a worker of ``setup`` (same bundle and interpreter, its own table version): a
        view sharing the process, its lock and its state; closing any view closes the process."""
        installation = locate(setup)
        if installation.key != self.installation.key:
            raise ValueError(f"setup {setup.name} runs {installation.jar.name} on {installation.python}; this worker "
                             f"runs {self.installation.jar.name} on {self.installation.python}")
        view = copy.copy(self)
        view.installation = installation
        view.setup = setup
        return view

    # -- plumbing -----------------------------------------------------------------------------------------------

    def _pump_stdout(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._replies.put(line)
        self._replies.put(None)

    def _pump_stderr(self) -> None:
        assert self._proc.stderr is not None
        with open(self._log_path, "a", encoding="utf-8") as log:
            for line in self._proc.stderr:
                self._stderr_tail.append(line.rstrip("\n"))
                log.write(line)
                log.flush()

    @property
    def log_path(self) -> Path:
        """The file the worker's stderr (Spark and Hudi logs) is appended to."""
        return self._log_path

    def log_offset(self) -> int:
        """Where the worker's log ends now: `failed_micro_batches` reads from here on."""
        return self._log_path.stat().st_size if self._log_path.exists() else 0

    def failed_micro_batches(self, since: int = 0) -> list[str]:
        """Each micro-batch failure Hudi's streaming sink logged after offset ``since`` (the sink retries them),
        as its log line, the exception's first line and its ``Caused by`` lines."""
        if not self._log_path.exists():
            return []
        with open(self._log_path, encoding="utf-8", errors="replace") as log:
            log.seek(since)
            lines = log.read().splitlines()
        out = []
        for i, line in enumerate(lines):
            if "Micro batch id=" not in line or "succeeded" in line:
                continue
            trace = [line]
            for nxt in lines[i + 1:i + 400]:
                if nxt[:2].isdigit() and "/" in nxt[:9]:  # the next log record (Spark's "yy/MM/dd HH:mm:ss")
                    break
                if nxt.startswith("Caused by") or (len(trace) < 3 and not nxt.startswith("\t")):
                    trace.append(nxt)
            out.append("\n".join(trace))
        return out

    def stderr_tail(self, lines: int = 25) -> str:
        """The last lines the worker wrote to stderr (Spark and Hudi logs)."""
        return "\n".join(list(self._stderr_tail)[-lines:])

    def _died(self, why: str) -> HudiWorkerError:
        self._state.failed = True  # keep its scratch folder (and the log the message points to)
        code = self._proc.poll()
        if code is not None:
            self._threads[1].join(timeout=5)  # let the stderr pump catch up with the last lines
        state = f"exit code {code}" if code is not None else "still running"
        return HudiWorkerError(
            f"Hudi worker {self.installation.name} (setup {self.setup.name}) {why} ({state}); full log: "
            f"{self._log_path}\n"
            f"--- stderr tail ---\n{self.stderr_tail()}"
        )

    def _await_reply(self, op: str, req_id: Any, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                error = self._died(f"did not answer {op!r} within {timeout:.0f} s")
                self.kill()
                raise error
            try:
                line = self._replies.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if line is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=10)
                raise self._died(f"exited while serving {op!r}")
            try:
                reply = json.loads(line)
            except json.JSONDecodeError as exc:
                raise self._died(f"wrote a non-JSON line on stdout: {line[:200]!r}") from exc
            if reply.get("id") != req_id:
                raise self._died(f"answered request {reply.get('id')!r} while {req_id!r} was awaited")
            if not reply.get("ok"):
                if op == "startup":
                    raise self._died(f"failed to start Spark: {reply.get('error', {}).get('message')}")
                raise HudiRequestError(op, reply.get("error") or {})
            result = reply.get("result")
            return result if isinstance(result, dict) else {}

    def request(self, op: str, timeout: float = _DEFAULT_TIMEOUT_S, **args: Any) -> dict[str, Any]:
        """Send one request and wait for its reply."""
        with self._lock:
            if self._proc.poll() is not None or self._proc.stdin is None:
                raise self._died(f"is not running (request {op!r})")
            req_id = next(self._ids)
            try:
                self._proc.stdin.write(json.dumps({"id": req_id, "op": op, **args}) + "\n")
                self._proc.stdin.flush()
            except OSError as exc:
                raise self._died(f"could not take request {op!r}") from exc
            return self._await_reply(op, req_id, timeout)

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def kill(self) -> None:
        """Stop the worker at once (its JVM child goes with it when its stdin closes)."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=30)

    def close(self, timeout: float = 60.0) -> None:
        """Ask the worker to stop its streams and Spark; kill it if it does not exit in time."""
        try:
            if self.alive:
                with contextlib.suppress(HudiWorkerError, HudiRequestError):
                    self.request("stop", timeout=timeout)
                if self._proc.stdin is not None:
                    self._proc.stdin.close()
                try:
                    self._proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.kill()
        finally:
            self._release()
            if self._own_scratch and not self._state.failed:
                shutil.rmtree(self.scratch, ignore_errors=True)

    def _release(self) -> None:
        for thread in self._threads:
            thread.join(timeout=5)
        for stream in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def __enter__(self) -> HudiWorker:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- operations ---------------------------------------------------------------------------------------------

    def ping(self) -> dict[str, Any]:
        return self.request("ping", timeout=60)

    def write_parquet(
        self, source: Path, base_path: Path | str, options: Mapping[str, str], mode: str = "append"
    ) -> list[str]:
        """Write the parquet at ``source`` through Hudi; returns the completed instants it created."""
        return list(self.write_parquet_result(source, base_path, options, mode)["instants"])

    def write_parquet_result(
        self, source: Path, base_path: Path | str, options: Mapping[str, str], mode: str = "append"
    ) -> dict[str, Any]:
        """:meth:`write_parquet`'s whole reply: ``rows``, ``instants`` (the completed instants the write created),
        ``timeline`` (every completed instant after it) and ``seconds`` (how long Hudi's ``save`` took)."""
        return self.request("write", source=str(source), path=str(base_path), options=dict(options), mode=mode)

    def write(
        self,
        rows: pa.Table | Sequence[Mapping[str, Any]],
        base_path: Path | str,
        options: Mapping[str, str],
        *,
        mode: str = "append",
        schema: pa.Schema | None = None,
    ) -> list[str]:
        """Write rows (a pyarrow table, or dicts typed by ``schema``) through Hudi; returns the new instants."""
        return list(self.write_rows(rows, base_path, options, mode=mode, schema=schema)["instants"])

    def read(
        self,
        base_path: Path | str,
        query: ReadQuery = "snapshot",
        *,
        begin: str | None = None,
        end: str | None = None,
        as_of: str | None = None,
        options: Mapping[str, str] | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """A snapshot, incremental (``begin``/``end`` instants) or time-travel (``as_of``) read, as pyarrow."""
        out = self._scratch_file("out", "")
        self.request(
            "read",
            path=str(base_path),
            output=str(out),
            query=query,
            begin=begin,
            end=end,
            as_of=as_of,
            options=dict(options or {}),
            columns=list(columns) if columns else None,
        )
        try:
            return pq.read_table(out)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def sql(
        self, statement: str, *, limit: int | None = None, timeout: float = _DEFAULT_TIMEOUT_S
    ) -> list[dict[str, Any]]:
        """Run one Spark SQL statement; its rows as dicts."""
        return list(self.request("sql", timeout=timeout, statement=statement, limit=limit)["rows"])

    def register_table(self, name: str, base_path: Path | str) -> None:
        """Make ``name`` refer to the Hudi table at ``base_path`` (``show_commits`` takes a table, never a path).

        Names live as long as the worker, which the setups of a bundle share: a name registered before fails
        (``TableAlreadyExistsException``) rather than go on meaning another table; use a fresh name per table."""
        self.sql(f"CREATE TABLE {name} USING hudi LOCATION '{base_path}'")

    def run_clustering(
        self,
        base_path: Path | str,
        op: Literal["schedule", "execute", "scheduleAndExecute"] = "scheduleAndExecute",
        *,
        options: Mapping[str, str] | None = None,
        instants: Sequence[str] | None = None,
        order: Sequence[str] | None = None,
        timeout: float = _DEFAULT_TIMEOUT_S,
    ) -> list[dict[str, Any]]:
        """Hudi's own clustering through ``CALL run_clustering``; pass the writer settings as ``options``.

        Without them the procedure runs with Hudi's defaults, among them ``hoodie.metadata.enable=true``, and
        creates ``.hoodie/metadata`` on the table. ``order``: the sort columns (the procedure's ``order``, which
        sets ``hoodie.clustering.plan.strategy.sort.columns``: a list cannot pass through ``options``).
        """
        args = [f"path => '{base_path}'", f"op => '{op}'"]
        if order:
            args.append(f"order => '{','.join(order)}'")
        if options:
            args.append(f"options => '{procedure_options(options)}'")
        if instants:
            args.append(f"instants => '{','.join(instants)}'")
        return self.sql(f"CALL run_clustering({', '.join(args)})", timeout=timeout)

    def stream_start(
        self,
        name: str,
        *,
        source_dir: Path,
        schema_from: Path,
        base_path: Path | str,
        checkpoint_dir: Path,
        options: Mapping[str, str],
        max_files_per_trigger: int = 1,
        trigger_seconds: float | None = None,
        source_format: Literal["parquet", "json"] = "parquet",
    ) -> dict[str, Any]:
        """Stream files dropped into ``source_dir`` (parquet, or JSON lines typed by the parquet ``schema_from``)
        into the Hudi table at ``base_path``."""
        return self.request(
            "stream_start",
            name=name,
            source=str(source_dir),
            schema_from=str(schema_from),
            path=str(base_path),
            checkpoint=str(checkpoint_dir),
            options=dict(options),
            max_files_per_trigger=max_files_per_trigger,
            trigger_seconds=trigger_seconds,
            source_format=source_format,
        )

    def stream_status(self, name: str, *, wait_for_batches: int | None = None, timeout: float = 120) -> dict[str, Any]:
        """Batches done, activity and the exception if the query died; optionally wait for a batch count first."""
        return self.request(
            "stream_status", timeout=timeout + 60, name=name, wait_for_batches=wait_for_batches, wait_seconds=timeout
        )

    def stream_stop(self, name: str) -> dict[str, Any]:
        return self.request("stream_stop", name=name)

    def write_rows(
        self,
        rows: pa.Table | Sequence[Mapping[str, Any]],
        base_path: Path | str,
        options: Mapping[str, str],
        *,
        mode: str = "append",
        schema: pa.Schema | None = None,
        timeout: float = _DEFAULT_TIMEOUT_S,
    ) -> dict[str, Any]:
        """:meth:`write`, returning the worker's whole reply (see :meth:`write_parquet_result`)."""
        table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(list(rows), schema=schema)
        source = self._scratch_file("in", ".parquet")
        pq.write_table(table, source)
        try:
            return self.request("write", timeout=timeout, source=str(source), path=str(base_path),
                                options=dict(options), mode=mode)
        finally:
            source.unlink(missing_ok=True)

    # -- Hudi's lock providers, in the worker's JVM -------------------------------------------------------------

    def lock_try(self, props: Mapping[str, str], timeout_ms: int, *, hold: bool = False,
                 name: str = "default") -> dict[str, Any]:
        """A new instance of the lock provider ``props`` name (a writer's options, with ``hoodie.table.name`` and
        ``hoodie.base.path``), built as Hudi's ``LockManager`` builds it, calls ``tryLock(timeout_ms)``:
        ``{"acquired": bool, "waited_s": float, "reason": str | None, "built_s", "started_at", "returned_at"}``
        (the last two: the worker's ``time.monotonic()`` around ``tryLock``, a clock this process shares on Linux).
        Acquired, the lock is given back at once, or with ``hold`` kept under ``name`` until :meth:`lock_release`."""
        return self.request("lock_try", timeout=timeout_ms / 1000 + 120, props=dict(props), timeout_ms=timeout_ms,
                            hold=hold, name=name)

    def lock_acquire(self, props: Mapping[str, str], *, timeout_ms: int = 60000,
                     name: str = "default") -> dict[str, Any]:
        """Take the lock ``props`` name and hold it across requests (:class:`HudiRequestError` when it is not had
        within ``timeout_ms``): :meth:`lock_try`'s reply plus ``"lock"`` (the provider's lock object, as text)."""
        return self.request("lock_acquire", timeout=timeout_ms / 1000 + 120, props=dict(props),
                            timeout_ms=timeout_ms, name=name)

    def lock_release(self, name: str = "default") -> dict[str, Any]:
        """Give back the lock held under ``name`` (Hudi's ``unlock`` then ``close``): ``{"held_s", "started_at",
        "unlocked_at"}`` (the worker's ``time.monotonic()`` before and after ``unlock``)."""
        return self.request("lock_release", timeout=120, name=name)

    def _scratch_file(self, prefix: str, suffix: str) -> Path:
        folder = self.scratch / "exchange"
        folder.mkdir(exist_ok=True)
        return folder / f"{prefix}-{uuid.uuid4().hex}{suffix}"

    def read_stats(
        self,
        base_path: Path,
        *,
        predicate: str | None = None,
        options: Mapping[str, str] | None = None,
        columns: Sequence[str] | None = None,
    ) -> tuple[pa.Table, dict[str, Any]]:
        """A snapshot read filtered by the SQL ``predicate``, as pyarrow, and what it scanned: ``scans`` (each
        file scan's metrics, ``numFiles`` = Spark's "number of files read", after Hudi's pruning and data skipping)
        and ``input_files`` (the files of the latest snapshot the read listed, before any filter)."""
        out = self._scratch_file("out", "")
        stats = self.request("read_stats", path=str(base_path), output=str(out), filter=predicate,
                             options=dict(options or {}), columns=list(columns) if columns else None)
        try:
            return pq.read_table(out), stats
        finally:
            shutil.rmtree(out, ignore_errors=True)


def procedure_options(options: Mapping[str, str]) -> str:
    """Options as Hudi's procedures take them: ``k1=v1,k2=v2`` (no commas or equals signs inside values)."""
    for key, value in options.items():
        if any(c in key + value for c in ",='"):
            raise ValueError(f"procedure option {key}={value!r} cannot carry ',', '=' or quotes")
    return ",".join(f"{key}={value}" for key, value in options.items())


def read_hoodie_properties(base_path: Path | StorageSpec) -> dict[str, str]:
    """``.hoodie/hoodie.properties`` as a dict (Java properties: comments, ``key=value``, backslash escapes), of a
    table in a local folder or, given a ``StorageSpec``, on any storage the daemon opens (an object store)."""
    props: dict[str, str] = {}
    if isinstance(base_path, Path):
        text = (base_path / ".hoodie" / "hoodie.properties").read_text(encoding="utf-8")
    else:
        text = open_storage(base_path).read_bytes(".hoodie/hoodie.properties").decode("utf-8")
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, _, value = line.partition("=")
        props[_unescape(key.strip())] = _unescape(value.strip())
    return props


def _unescape(text: str) -> str:
    out: list[str] = []
    chars = iter(text)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        else:
            out.append(ch)
    return "".join(out)


def hudi_write_options(
    setup: HudiSetup,
    table_name: str,
    *,
    record_key: str,
    partition_path: str | None,
    precombine: str | None,
    operation: str = "upsert",
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Datasource options for a shared copy-on-write table: the project's writer settings plus key fields."""
    options = shared_table_writer_options(setup)
    options["hoodie.table.name"] = table_name
    options["hoodie.datasource.write.recordkey.field"] = record_key
    options["hoodie.datasource.write.operation"] = operation
    if partition_path:
        options["hoodie.datasource.write.partitionpath.field"] = partition_path
    else:
        options["hoodie.datasource.write.keygenerator.class"] = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    if precombine:
        options["hoodie.datasource.write.precombine.field"] = precombine
    options.update(extra or {})
    return options


def events_writer_options(setup: HudiSetup, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Writer options of the interop tests' events table (rows of ``tests.builders.event_rows``: key ``id``,
    partition ``part``, ordering ``ts``), with ``hoodie.parquet.small.file.limit=0`` so that every insert makes new
    file groups for clustering to merge, and ``extra``."""
    return hudi_write_options(setup, "events", record_key="id", partition_path="part", precombine="ts",
                              extra={"hoodie.parquet.small.file.limit": "0", **(extra or {})})


class HudiWorkers:
    """The workers of a test session, one per bundle (and interpreter), shared by every setup of that bundle, and
    at most one running at a time: asking for a setup of another bundle stops the running worker first (two more
    Spark JVMs beside the tests' own would not fit a 2-core CI machine). Tests grouped by setup, with the setups of
    a bundle next to each other (as :data:`tests.harness.hudi_versions.SETUPS` lists them), start each worker once.
    """

    def __init__(self, scratch: Callable[[str], Path]) -> None:
        self._scratch = scratch  # a fresh folder for a worker, given its name
        self._running: HudiWorker | None = None
        self.started: list[str] = []  # the installations started, in order (a restart shows as a repeat)

    def for_setup(self, setup: HudiSetup, profile: WorkerProfile | None = None) -> HudiWorker:
        """A running worker for ``setup`` (a view of the bundle's worker) with ``profile``; skip or fail as
        :func:`require_installation` does when the setup is not installed. A worker that died is started again, and
        so is one of another bundle or profile (after the running one stopped)."""
        installation = require_installation(setup)
        running = self._running
        if running is not None and (running.installation.key != installation.key or running.profile != profile
                                    or not running.alive):
            self._running = None
            running.close()
            running = None
        if running is None:
            name = installation.name + (f"-{profile.name}" if profile else "")
            running = HudiWorker(installation, scratch=self._scratch(name), profile=profile)
            self._running = running
            self.started.append(name)
        return running.for_setup(setup)

    def close(self) -> None:
        if self._running is not None:
            running, self._running = self._running, None
            running.close()
