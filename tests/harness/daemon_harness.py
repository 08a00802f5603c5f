"""Start and observe a real ``hudi-clusterd run`` process for tests, and read a table's timeline as the tests
check it, in either timeline layout (the one place that knows where instant files live and how they are encoded).

Layout 1 (table version 6): instant files directly in ``.hoodie/``, ``<T>.<action>[.<state>]``, completed commit
metadata as JSON. Layout 2 (table versions 8 and 9): instant files in ``.hoodie/<hoodie.timeline.path>/``
(``timeline``), completed ones named ``<T>_<completion time>.<action>`` and written, like every non-empty instant
file there, as an Avro container file; a clustering is pending as ``<T>.clustering.{requested,inflight}`` and
completes as ``<T>_<C>.replacecommit``. In both layouts a commit's inflight file is ``<T>.inflight``.

The timeline readers take a table as a local folder (a ``Path``) or as a ``StorageSpec`` (a URI such as
``s3a://hudi/t`` and the options that reach its store), read through the daemon's own ``open_storage``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import fastavro
from prometheus_client.parser import text_string_to_metric_families

from hudi_clusterd.storage import StorageSpec, open_storage
from tests.harness.apache_hudi import read_hoodie_properties
from tests.harness.hudi_versions import HudiSetup


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, proc: subprocess.Popen[bytes] | None = None,
             interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"daemon exited with {proc.returncode} while waiting for {what}")
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


class DaemonProcess:
    """``python -m hudi_clusterd run --props FILE`` with its stderr (JSON log lines) captured to a file; ``env``:
    variables added to this process's environment (e.g. ``S3Server.env()``: an object store's endpoint and keys)."""

    def __init__(self, props: Path, log_file: Path, *extra: str, env: Mapping[str, str] | None = None) -> None:
        self.props = props
        self.log_file = log_file
        env = {**os.environ, **(env or {}), "PYSPARK_PYTHON": sys.executable}
        self._log = open(log_file, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, "-m", "hudi_clusterd", "run", "--props", str(props), *extra],
                                     stdout=self._log, stderr=self._log, env=env)

    def logs(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_file.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return out

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def metric(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def health(port: int) -> int:
    try:
        return int(urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return 0


def write_props(path: Path, base: Path | str, port: int, **policy: str) -> None:
    lines = [
        "clusterd.tables=events",
        f"clusterd.table.events.base.path={base}",
        f"clusterd.metrics.address=127.0.0.1:{port}",
        "clusterd.spark.master=local[2]",
        "clusterd.spark.conf.spark.sql.shuffle.partitions=4",
        "clusterd.poll.interval.seconds=1",
        "clusterd.shutdown.grace.seconds=2",
        "clusterd.log.format=json",
    ]
    lines += [f"{k}={v}" for k, v in policy.items()]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


SESSION_SQL_CONF = ("spark.sql.shuffle.partitions", "spark.sql.session.timeZone",
                    "spark.sql.execution.arrow.pyspark.enabled",
                    "spark.sql.sources.partitionColumnTypeInference.enabled",
                    "spark.sql.execution.rangeExchange.sampleSizePerPartition")
"""Runtime settings a command's ``get_or_create_session`` sets on a session it joins (its defaults and
``--spark-conf``), restored by `clusterd` after an in-process call."""


def clusterd(*args: str) -> str:
    """Run ``hudi-clusterd ARGS`` (``execute``/``cluster`` on Spark with 2 shuffle partitions); returns its stdout,
    fails with its stderr.

    In this process (``hudi_clusterd.cli.main``) when the test session's SparkSession is running (the command
    joins it through ``engine/session.py``'s getOrCreate, and leaves it running; its runtime settings are restored
    after), else in a process of its own on a local[1] Spark. The CLI process itself (argument parsing, exit
    codes, stdout and stderr of a real process) is tested by tests/integration/test_cluster_managers.py,
    tests/integration/test_demo.py and the daemon tests."""
    from hudi_clusterd.engine.session import classic_session_running

    cmd = list(args)
    spark_command = args[0] in ("execute", "cluster")
    if spark_command:
        cmd += ["--spark-master", "local[1]", "--spark-conf", "spark.sql.shuffle.partitions=2"]
    if not spark_command or classic_session_running():
        code, out, err = _clusterd_in_process(cmd)
    else:
        done = subprocess.run([sys.executable, "-m", "hudi_clusterd", *cmd], capture_output=True, text=True,
                              timeout=600)
        code, out, err = done.returncode, done.stdout, done.stderr
    assert code == 0, f"{' '.join(args)} exited {code}:\n{err[-3000:]}"
    return out


@contextlib.contextmanager
def clusterd_environment(env: Mapping[str, str]) -> Iterator[None]:
    """`clusterd` calls inside this block see ``env`` (e.g. ``S3Server.env()``: an object store's endpoint and
    keys) as a daemon process started with it would: in this process's environment, which a command in a process
    of its own inherits, and, when the test session's SparkSession is running, in the environment of the Python
    workers its Spark tasks start (``SparkContext.environment``, given to the tasks of the functions created after
    it changed). Both are restored after."""
    session = _running_session()
    spark_env: dict[str, str] = session.sparkContext.environment if session is not None else {}
    saved = {key: (os.environ.get(key), spark_env.get(key)) for key in env}
    os.environ.update(env)
    spark_env.update(env)
    try:
        yield
    finally:
        for key, (process_value, task_value) in saved.items():
            for where, value in ((os.environ, process_value), (spark_env, task_value)):
                if value is None:
                    where.pop(key, None)
                else:
                    where[key] = value


def _clusterd_in_process(cmd: list[str]) -> tuple[int, str, str]:
    from hudi_clusterd.cli import main

    saved: dict[str, str | None] = {}
    session = _running_session()
    if session is not None:
        saved = {key: session.conf.get(key, None) for key in SESSION_SQL_CONF}
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(cmd)
    finally:
        if session is not None:
            for key, value in saved.items():
                if value is None:
                    session.conf.unset(key)
                else:
                    session.conf.set(key, value)
    return code, out.getvalue(), err.getvalue()


def _running_session() -> Any:
    """The process's active classic SparkSession, or None (importing pyspark only when one may run)."""
    if "pyspark" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() or SparkSession._instantiatedSession


# --- the timeline, in either layout ------------------------------------------------------------------------------

InstantState = Literal["requested", "inflight", "completed"]
Table = Path | StorageSpec
"""A table the readers below read: a local folder, or a URI and its store's options."""

# <requested time>[_<completion time>].<action>[.requested|.inflight], or <requested time>.inflight (a commit)
_INSTANT_FILE = re.compile(r"^(\d+)(?:_(\d+))?\.([a-z]+)(?:\.(requested|inflight))?$")
_AVRO_MAGIC = b"Obj\x01"


@dataclass(frozen=True, slots=True)
class InstantFile:
    """One instant file of the active timeline."""

    time: str  # the requested time, which names the instant (and the data files it writes)
    action: str  # as the file names it: "clustering" for a pending clustering in layout 2
    state: InstantState
    completion: str | None  # layout 2's completion time (None in layout 1 and for pending instants)
    path: Path | str  # the file (a local table), or its URI (a table on a storage of the daemon's)
    folder: StorageSpec | None = field(default=None, compare=False, repr=False)  # where a URI's file is read

    def read_bytes(self) -> bytes:
        if isinstance(self.path, Path):
            return self.path.read_bytes()
        assert self.folder is not None, self.path
        return open_storage(self.folder).read_bytes(self.name)

    @property
    def name(self) -> str:
        return self.path.name if isinstance(self.path, Path) else self.path.rsplit("/", 1)[-1]

    @property
    def kind(self) -> str:
        """The action instants are grouped by: a pending ``clustering`` is a ``replacecommit`` (as Hudi compares
        them: layout 2 completes ``<T>.clustering.requested`` as ``<T>_<C>.replacecommit``)."""
        return "replacecommit" if self.action == "clustering" else self.action


def table_version(base: Table) -> int:
    """``hoodie.table.version`` of the table at ``base``."""
    return int(read_hoodie_properties(base)["hoodie.table.version"])


def timeline_layout(base: Table) -> int:
    """``hoodie.timeline.layout.version``: 1 (table version 6) or 2 (table versions 8 and 9)."""
    props = read_hoodie_properties(base)
    return int(props.get("hoodie.timeline.layout.version") or (2 if int(props["hoodie.table.version"]) >= 8 else 1))


def timeline_dir(base: Path) -> Path:
    """Where the table's active timeline keeps its instant files: ``.hoodie/`` or ``.hoodie/timeline/``."""
    return base / _timeline_rel(base)


def _timeline_rel(base: Table) -> str:
    if timeline_layout(base) < 2:
        return ".hoodie"
    return ".hoodie/" + (read_hoodie_properties(base).get("hoodie.timeline.path") or "timeline")


def _timeline_entries(base: Table) -> list[tuple[str, Path | str, StorageSpec | None]]:
    """(name, path or URI, folder spec) of every file in the timeline's folder."""
    rel = _timeline_rel(base)
    if isinstance(base, Path):
        return [(p.name, p, None) for p in (base / rel).iterdir() if p.is_file()]
    folder = base.child(rel)
    storage = open_storage(folder)
    return [(f.name, storage.uri(f.name), folder) for f in storage.list_dir() if not f.is_dir]


def instant_files(base: Table) -> list[InstantFile]:
    """Every instant file of the active timeline, by requested time, then requested, inflight, completed."""
    out: list[InstantFile] = []
    for name, path, folder in _timeline_entries(base):
        m = _INSTANT_FILE.match(name)
        if m is None:
            continue  # hoodie.properties, .crc files and the like
        time_, completion, action, state = m.groups()
        if action == "inflight":  # <T>.inflight: a commit's inflight file
            action, state = "commit", "inflight"
        out.append(InstantFile(time_, action, state or "completed", completion, path, folder))
    order = {"requested": 0, "inflight": 1, "completed": 2}
    return sorted(out, key=lambda f: (f.time, order[f.state], f.action))


def instant_names(base: Table) -> list[str]:
    """The instant files' names (for messages)."""
    return [f.name for f in instant_files(base)]


def completed(base: Table, action: str) -> list[str]:
    """Requested times of the completed instants of ``action`` (``commit``, ``replacecommit``, ``clean``...)."""
    return sorted(f.time for f in instant_files(base) if f.state == "completed" and f.action == action)


def completed_file(base: Table, instant: str, action: str) -> InstantFile:
    """The completed file of ``instant``; fails when there is none, or more than one."""
    found = [f for f in instant_files(base) if f.time == instant and f.state == "completed" and f.action == action]
    assert len(found) == 1, (instant, action, instant_names(base))
    return found[0]


def pending(base: Table, kind: str) -> list[str]:
    """Requested times of the instants of ``kind`` with no completed file (``replacecommit``: pending
    replacecommits and clusterings, whatever the layout calls them)."""
    files = [f for f in instant_files(base) if f.kind == kind]
    done = {f.time for f in files if f.state == "completed"}
    return sorted({f.time for f in files if f.time not in done})


def pending_clusterings(base: Table) -> list[str]:
    """Pending replacecommits or clusterings (plans, whether Hudi's or ours, not yet completed or rolled back)."""
    return pending(base, "replacecommit")


def clustering_plan_path(base: Path, instant: str) -> Path:
    """Where the layout keeps the plan of clustering ``instant``: ``.hoodie/<T>.replacecommit.requested`` (layout
    1), ``.hoodie/timeline/<T>.clustering.requested`` (layout 2, since Hudi 1.0 for every clustering; Hudi reads
    a ``replacecommit.requested`` plan there but cannot execute, complete or roll it back)."""
    action = "clustering" if timeline_layout(base) >= 2 else "replacecommit"
    return timeline_dir(base) / f"{instant}.{action}.requested"


def incremental_start(base: Table, instant: str) -> str:
    """What to give Hudi's incremental query as its (exclusive) begin to read the changes after ``instant``: its
    requested time in layout 1, its completion time in layout 2 (Hudi 1.x reads incremental ranges of a table of
    version 8 or 9 by completion time; time travel, ``as.of.instant``, still takes the requested time)."""
    if timeline_layout(base) < 2:
        return instant
    done = [f for f in instant_files(base) if f.time == instant and f.state == "completed"]
    assert len(done) == 1 and done[0].completion is not None, (instant, instant_names(base))
    return done[0].completion


def decode_instant(data: bytes, source: str = "instant file") -> dict[str, Any]:
    """The content of an instant file: ``{}`` when empty, its single record when an Avro container file (every
    non-empty file of layout 2, plans and rollback plans of layout 1), else JSON (layout 1's completed metadata)."""
    if not data:
        return {}
    if data.startswith(_AVRO_MAGIC):
        records = list(fastavro.reader(io.BytesIO(data)))
        assert len(records) == 1 and isinstance(records[0], dict), (source, len(records))
        return records[0]
    decoded = json.loads(data)
    assert isinstance(decoded, dict), source
    return decoded


def instant_metadata(file: InstantFile) -> dict[str, Any]:
    """The decoded content of one instant file (see :func:`decode_instant`)."""
    return decode_instant(file.read_bytes(), str(file.path))


def commit_metadata(base: Table, instant: str, action: str = "commit") -> dict[str, Any]:
    """The completed metadata of ``instant`` (``partitionToWriteStats``, ``extraMetadata``...), in either layout."""
    return instant_metadata(completed_file(base, instant, action))


def replacecommits(base: Table) -> dict[str, dict[str, Any]]:
    """Every completed replacecommit of the table: instant time -> its commit metadata (JSON in layout 1, Avro in
    layout 2, decoded alike)."""
    return {f.time: instant_metadata(f) for f in instant_files(base)
            if f.state == "completed" and f.action == "replacecommit"}


def clusterings(base: Table, *, replaced: bool | None = None) -> list[str]:
    """Completed replacecommits whose operation is a clustering, in order; ``replaced``: only those that replaced
    file groups (True) or that replaced none, having lost every group to writers (False)."""
    return [t for t, meta in sorted(replacecommits(base).items()) if meta.get("operationType") == "CLUSTER"
            and (replaced is None or bool(meta.get("partitionToReplaceFileIds")) == replaced)]


# --- what an Apache Hudi setup writes ------------------------------------------------------------------------


def assert_layout(base: Path, setup: HudiSetup) -> None:
    """The table has the setup's version and timeline layout, its instant files where that layout keeps them."""
    props = read_hoodie_properties(base)
    assert props["hoodie.table.version"] == str(setup.table_version)
    assert props["hoodie.timeline.layout.version"] == str(setup.timeline_layout_version)
    hoodie = base / ".hoodie"
    in_root = sorted(p.name for p in hoodie.iterdir() if p.is_file() and p.name[0].isdigit())
    if setup.timeline_layout_version == 1:
        assert timeline_dir(base) == hoodie and not (hoodie / "timeline").exists()
    else:
        # layout 2: every instant file under .hoodie/timeline/, none left in .hoodie/ (Hudi would not see it)
        assert props["hoodie.timeline.path"] == "timeline" and timeline_dir(base) == hoodie / "timeline"
        assert not in_root, in_root
        assert props["hoodie.table.initial.version"] == str(setup.table_version)
    assert instant_files(base), sorted(p.name for p in hoodie.iterdir())


def assert_default_metadata_table(base: Path, setup: HudiSetup) -> None:
    """Hudi keeps its metadata table at the project's writer settings (its default): ``files`` on every release,
    and ``column_stats`` (with ``partition_stats`` on a partitioned table) from Hudi 1.x on version 9."""
    partitions = (read_hoodie_properties(base).get("hoodie.table.metadata.partitions") or "").split(",")
    assert "files" in partitions, partitions
    if setup.table_version >= 9:
        assert "column_stats" in partitions, partitions
    assert (base / ".hoodie" / "metadata" / ".hoodie" / "hoodie.properties").is_file()
