"""Crash harness: a daemon process tree that can be frozen and SIGKILLed at a chosen moment, an ingestion thread
that knows the exact expected rows, a classifier of what a kill interrupted (read from disk and the daemon's JSON
log), and the checks a recovered table must pass.

Crash model: a kill is SIGKILL of the daemon's whole process tree (Python driver, Spark JVM, Python workers at
once, as when a container or host dies) or of the driver alone (the JVM and its workers notice and exit by
themselves; recovery starts once they are gone). Just before the kill the tree is frozen with SIGSTOP, so the
state recorded is exactly the state the kill leaves. The moment is anchored to the daemon's own JSON log
events and timeline files (``Cycle``, ``kill_at``); tight moments (a plan only requested, a file half written,
the commit under the lock) are checked again with the tree frozen, and the completion is approached by letting
the daemon run in slices of a few milliseconds.

The timeline helpers read either layout: layout 2 (table versions 8 and 9, ``.hoodie/timeline/``) is seen through
layout 1's names (``hoodie_names``), so the classifier and the checks work on both. For a table with a metadata
table (MDT) the classifier also knows the phase ``metadata_committed`` (the clustering's MDT deltacommit is
completed, its data replacecommit not yet), and ``HudiStreamIngestor`` runs Apache Hudi's streaming writer as
the ingestion beside the daemon.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from hudi_clusterd.domain.file_group import FileGroupId
from hudi_clusterd.domain.policy import ClusteringPolicy
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.errors import CommitConflictError
from hudi_clusterd.formats.avro import decode_requested_replace
from hudi_clusterd.formats.bloom import BloomSettings
from hudi_clusterd.lock import LOCK_FILE, FileSystemLockProvider, LockOptions
from hudi_clusterd.storage import open_storage
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import make_policy
from tests.harness.apache_hudi import HudiWorker
from tests.harness.daemon_harness import decode_instant, instant_files, instant_metadata, write_props
from tests.harness.hudi_rs_checks import assert_meta_consistent, assert_no_orphan_files, hudi_rs_rows
from tests.harness.metadata_checks import validate_files

LOCK_STALE_S = 4.0
POLL_INTERVAL_S = 1
COLUMNS = ["id", "v", "x", "part"]
HOT_KEYS = 600  # the first commit's keys (files above the small-file limit): most upserts update some of them
POLICY: dict[str, str] = {
    "hoodie.clustering.async.max.commits": "2",
    "hoodie.clustering.plan.strategy.sort.columns": "x",
    "hoodie.clustering.plan.strategy.small.file.limit": "6000",  # ingestion files are ~4.4 KB
    "hoodie.clustering.plan.strategy.target.file.max.bytes": "8000",  # clustered files end above the limit
    "hoodie.clustering.plan.strategy.max.bytes.per.group": "24000",  # ~5 small files per group
    # bloom filters sized for these tiny files (Hudi's default one is a fixed 431 KB per file)
    "hoodie.index.bloom.num_entries": "100",
    "hoodie.index.bloom.fpp": "0.01",
}
TINY_BLOOM = BloomSettings(num_entries=100, fpp=0.01)

Event = dict[str, Any]


def crash_policy(parallelism: int = 2) -> ClusteringPolicy:
    return make_policy(**POLICY, **{"hoodie.clustering.max.parallelism": str(parallelism)})


def write_crash_props(path: Path, base: Path, port: int, *, parallelism: int = 2, **extra: str) -> None:
    write_props(path, base, port, **{
        **POLICY,
        "hoodie.clustering.max.parallelism": str(parallelism),
        "clusterd.lock.stale.seconds": str(LOCK_STALE_S),
        "clusterd.lock.timeout.seconds": "60",
        "clusterd.poll.interval.seconds": str(POLL_INTERVAL_S),
        "clusterd.spark.conf.spark.ui.enabled": "false",
        **extra,
    })


# --- the daemon process tree ----------------------------------------------------------------------------------


def _processes() -> dict[int, int]:
    """pid -> parent pid of every live (not zombie) process, from /proc."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[0] not in ("Z", "X"):
            out[int(entry)] = int(fields[1])
    return out


def process_tree(root: int) -> set[int]:
    """``root`` and its live descendants (Spark's Python worker daemon puts itself in a process group of its
    own, so the group of the driver is not the whole tree)."""
    children: dict[int, list[int]] = {}
    live = _processes()
    for pid, ppid in live.items():
        children.setdefault(ppid, []).append(pid)
    out: set[int] = set()
    todo = [root] if root in live else []
    while todo:
        pid = todo.pop()
        out.add(pid)
        todo.extend(children.get(pid, []))
    return out


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


class CrashableDaemon:
    """``python -m hudi_clusterd run --props FILE`` (driver, Spark JVM, Python workers), its JSON log tailed
    incrementally. ``freeze`` stops the whole process tree; ``kill`` SIGKILLs what was frozen. ``env``: variables
    added to this process's environment (an object store's, ``S3Server.env()``)."""

    def __init__(self, props: Path, log_file: Path, *, env: Mapping[str, str] | None = None) -> None:
        self.log_file = log_file
        env = {**os.environ, **(env or {}), "PYSPARK_PYTHON": sys.executable}
        self._log = open(log_file, "ab")  # noqa: SIM115 - closed in close()
        self._offset = log_file.stat().st_size
        self._partial = b""
        self.events: list[Event] = []
        self.proc = subprocess.Popen([sys.executable, "-m", "hudi_clusterd", "run", "--props", str(props)],
                                     stdout=self._log, stderr=self._log, env=env, start_new_session=True)
        self.pid = self.proc.pid
        self.frozen: set[int] = set()
        self._tree: set[int] = set()

    def poll_events(self) -> list[Event]:
        with open(self.log_file, "rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if line.startswith(b"{"):
                try:
                    self.events.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return self.events

    def count(self, event: str, instant: str | None = None) -> int:
        return sum(1 for e in self.events
                   if e.get("event") == event and (instant is None or e.get("instant") == instant))

    def wait_event(self, event: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.count(event) == 0:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode} before {event!r}; see {self.log_file}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {event!r} from the daemon within {timeout:.0f}s; see {self.log_file}")
            time.sleep(0.05)
            self.poll_events()

    def freeze(self) -> None:
        """SIGSTOP the driver and every descendant (repeated until no new process shows up)."""
        while True:
            new = process_tree(self.pid) - self.frozen
            if not new:
                return
            _signal_all(new, signal.SIGSTOP)
            self.frozen |= new

    def thaw(self) -> None:
        _signal_all(self.frozen, signal.SIGCONT)
        self.frozen = set()

    def step(self, seconds: float) -> None:
        """Let the frozen tree run for about ``seconds``, then stop the same processes again."""
        _signal_all(self.frozen, signal.SIGCONT)
        time.sleep(seconds)
        _signal_all(self.frozen, signal.SIGSTOP)

    def kill(self, mode: str) -> set[int]:
        """SIGKILL the frozen tree (``tree``: driver, JVM and workers at once, as when a host dies) or the driver
        alone (``driver``: the JVM and workers are let go on and exit once they notice). Returns the pids that
        were part of the daemon."""
        tree = self.frozen or process_tree(self.pid)
        if mode == "tree":
            _signal_all(tree, signal.SIGKILL)
        else:
            os.kill(self.pid, signal.SIGKILL)
        _signal_all(tree, signal.SIGCONT)
        self.frozen = set()
        self.proc.wait(30)
        self._tree = tree
        return tree

    def wait_tree_gone(self, timeout: float) -> float:
        """Seconds until no process of the killed daemon is left (the JVM and workers outlive a dead driver)."""
        start = time.monotonic()
        tree = self._tree
        while left := tree & set(_processes()):
            if time.monotonic() - start > timeout:
                raise AssertionError(f"processes {sorted(left)} of the killed daemon still run after {timeout:.0f}s")
            time.sleep(0.05)
        return time.monotonic() - start

    def signal_term(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def terminate(self, timeout: float) -> int:
        self.signal_term()
        return self.proc.wait(timeout)

    def close(self) -> None:
        tree = process_tree(self.pid) | self._tree
        _signal_all(tree & set(_processes()), signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._log.close()


# --- ingestion ------------------------------------------------------------------------------------------------


@dataclass
class IngestStats:
    commits: int = 0
    inserts: int = 0
    upserts: int = 0
    updated_keys: int = 0
    conflict_retries: int = 0
    failures: list[str] = field(default_factory=list)


class Ingestor:
    """Commits batches through the project's writer API (insert / upsert) and keeps ``key -> latest row``.

    Upserts update some of the first commit's keys (their file groups stay hot, so plans leave them out) and
    now and then keys anywhere (which can collide with clustering: ingestion wins, or, when a clustering
    replaced a group between the upsert's read and its commit, the upsert is rolled back and retried, as
    documented)."""

    MAX_RETRIES = 5

    def __init__(self, spark: Any, base: Path, seed: int) -> None:
        self.spark = spark
        self.base = base
        self.rng = random.Random(seed)
        self.expected: dict[int, tuple[int, float, str]] = {}
        self.stats = IngestStats()
        self._next_id = 0
        self._version = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        HoodieTable.create(str(base), TableConfig.for_new_table(
            name="events", record_key_fields=["id"], partition_fields=["part"]))
        self.table = HoodieTable.open(str(base), lock_provider=FileSystemLockProvider(
            open_storage(str(base)), LockOptions(timeout_s=120, stale_s=LOCK_STALE_S)))
        self._write(list(range(HOT_KEYS)), upsert=False)

    def _write(self, ids: list[int], *, upsert: bool) -> str:
        from hudi_clusterd.engine.ingest.upsert import upsert as do_upsert
        from hudi_clusterd.engine.ingest.writer import insert

        self._version += 1
        rows = [(i, self._version, round(self.rng.uniform(0, 100), 6), f"p{i % 2}") for i in ids]
        self._next_id = max(self._next_id, max(ids) + 1)
        for attempt in range(self.MAX_RETRIES + 1):
            df = self.spark.createDataFrame(rows, "id long, v long, x double, part string")
            try:
                instant = (do_upsert(self.spark, self.table, df, bloom=TINY_BLOOM) if upsert
                           else insert(self.spark, self.table, df, bloom=TINY_BLOOM))
            except CommitConflictError:
                if attempt == self.MAX_RETRIES:
                    raise
                self.stats.conflict_retries += 1
                continue
            for i, v, x, part in rows:
                self.expected[i] = (v, x, part)
            self.stats.commits += 1
            return str(instant)
        raise AssertionError("unreachable")

    def commit_once(self) -> str:
        new = list(range(self._next_id, self._next_id + (160 if self.rng.random() < 0.6 else 60)))
        if len(new) == 160:
            self.stats.inserts += 1
            return self._write(new, upsert=False)
        updates = set(self.rng.sample(range(HOT_KEYS), 30))
        if self.rng.random() < 0.1:
            updates |= set(self.rng.sample(range(self._next_id), 3))
        self.stats.upserts += 1
        self.stats.updated_keys += len(updates)
        return self._write(new + sorted(updates), upsert=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.rng.uniform(0.2, 1.2)):  # paced: a commit every 1.5-10 s
            try:
                self.commit_once()
            except Exception as e:  # ingestion must never fail because of the daemon: recorded, asserted on
                self.stats.failures.append(f"{type(e).__name__}: {e}")
                return

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="ingestion", daemon=True)
        self._thread.start()

    def pause(self, *, check: bool = True) -> None:
        """Stop after the commit in progress (which completes); with ``check``, fail if ingestion failed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(300)
            assert not self._thread.is_alive(), "ingestion commit did not finish within 300s"
            self._thread = None
        assert not check or not self.stats.failures, f"ingestion failed: {self.stats.failures}"

    def expected_rows(self) -> list[dict[str, Any]]:
        return [{"id": i, "v": v, "x": x, "part": p} for i, (v, x, p) in sorted(self.expected.items())]


# --- what is on disk ------------------------------------------------------------------------------------------


# <requested time>[_<completion time>].<action>[.requested|.inflight], or <requested time>.inflight (a commit)
_INSTANT_NAME = re.compile(r"^(\d+)(?:_(\d+))?\.([a-z]+)(?:\.(requested|inflight))?$")


def _listdir(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []


def _as_layout1(names: Iterable[str]) -> list[str]:
    """Layout-2 instant file names as layout 1 names them: a completed ``<T>_<C>.<action>`` as ``<T>.<action>``,
    a pending ``<T>.clustering.<state>`` as ``<T>.replacecommit.<state>``; other files left out."""
    out = []
    for n in names:
        m = _INSTANT_NAME.match(n)
        if m is None:
            continue
        t, _completion, action, state = m.groups()
        if action == "inflight":  # <T>.inflight: a commit's inflight file
            out.append(n)
            continue
        action = "replacecommit" if action == "clustering" else action
        out.append(f"{t}.{action}.{state}" if state else f"{t}.{action}")
    return sorted(out)


def timeline_folder(base: Path) -> Path:
    """Where the instant files are: ``.hoodie/timeline`` (layout 2, table versions 8 and 9) or ``.hoodie``."""
    layout2 = base / ".hoodie" / "timeline"
    return layout2 if layout2.is_dir() else base / ".hoodie"


def hoodie_names(base: Path) -> list[str]:
    """The file names in ``.hoodie`` (layout 1), or the instant files of layout 2 named as layout 1 names them
    (see ``_as_layout1``), so that the helpers below read either layout."""
    layout2 = base / ".hoodie" / "timeline"
    if layout2.is_dir():
        return _as_layout1(_listdir(layout2))
    return sorted(os.listdir(base / ".hoodie"))


def completed_replace_file(base: Path, instant: str) -> Path | None:
    """The completed replacecommit file of ``instant`` (``<T>.replacecommit``, or ``<T>_<C>.replacecommit`` in
    layout 2), or None."""
    folder = timeline_folder(base)
    if folder.name == "timeline":
        return next((folder / n for n in _listdir(folder) if n.startswith(f"{instant}_")
                     and n.endswith(".replacecommit")), None)
    path = folder / f"{instant}.replacecommit"
    return path if path.exists() else None


def completed_replace_files(base: Path) -> list[Path]:
    """Every completed replacecommit file, by instant time."""
    folder = timeline_folder(base)
    pattern = "*_*.replacecommit" if folder.name == "timeline" else "*.replacecommit"
    return sorted(folder.glob(pattern))


def plan_file(base: Path, instant: str) -> Path:
    """The requested file of clustering ``instant`` (its plan): ``<T>.replacecommit.requested``, or in layout 2
    ``<T>.clustering.requested`` (a ``<T>.replacecommit.requested`` there too when that is the one present)."""
    folder = timeline_folder(base)
    if folder.name == "timeline":
        clustering = folder / f"{instant}.clustering.requested"
        if clustering.exists() or not (folder / f"{instant}.replacecommit.requested").exists():
            return clustering
    return folder / f"{instant}.replacecommit.requested"


def plan_files(base: Path) -> list[Path]:
    """The requested files of every replacecommit and clustering on the timeline, by instant time."""
    folder = timeline_folder(base)
    found = list(folder.glob("*.replacecommit.requested"))
    if folder.name == "timeline":
        found += folder.glob("*.clustering.requested")
    return sorted(found, key=lambda f: f.name)


def instant_times(base: Path) -> set[str]:
    return {n.split(".", 1)[0] for n in hoodie_names(base) if n[:1].isdigit()}


def replace_states(names: list[str]) -> dict[str, set[str]]:
    """replacecommit instant time -> {"requested", "inflight", "completed"} present."""
    out: dict[str, set[str]] = {}
    for n in names:
        parts = n.split(".")
        if len(parts) >= 2 and parts[1] == "replacecommit" and parts[0].isdigit():
            out.setdefault(parts[0], set()).add(parts[2] if len(parts) > 2 else "completed")
    return out


def metadata_timeline_folder(base: Path) -> Path:
    """Where the metadata table's instant files are (``.hoodie/metadata/.hoodie[/timeline]``)."""
    meta = base / ".hoodie" / "metadata" / ".hoodie"
    return meta / "timeline" if (meta / "timeline").is_dir() else meta


def mdt_names(base: Path) -> list[str]:
    """The metadata table's instant files, named as layout 1 names them (none without a metadata table)."""
    return _as_layout1(_listdir(metadata_timeline_folder(base)))


def mdt_deltacommit_state(base: Path, instant: str) -> str | None:
    """``completed``, ``inflight`` or ``requested``: how far the metadata deltacommit of data instant ``instant``
    got; None when the metadata table has none."""
    states = {n.rsplit(".", 1)[-1] if n.count(".") == 2 else "completed"
              for n in mdt_names(base) if n.startswith(f"{instant}.deltacommit")}
    return next((s for s in ("completed", "inflight", "requested") if s in states), None)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def lock_owner_pid(base: Path) -> int | None:
    """The pid named by ``.hoodie/lock`` when it is held by a process of this host, else None."""
    try:
        owner = str(json.loads((base / LOCK_FILE).read_bytes()).get("owner", ""))
    except (OSError, ValueError, AttributeError):
        return None
    host, pid, *_ = [*owner.split(":"), "", ""]
    return int(pid) if host == socket.gethostname() and pid.isdigit() else None


def marker_files(base: Path, instant: str) -> list[Path]:
    """Data files (existing or not) named by the instant's DIRECT markers."""
    root = base / ".hoodie" / ".temp" / instant
    out: list[Path] = []
    try:
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                if ".marker." in f:
                    rel = Path(dirpath).relative_to(root) / f.split(".marker.", 1)[0]
                    out.append(base / rel)
    except OSError:
        pass
    return out


def is_complete_parquet(path: Path) -> bool:
    try:
        pq.read_metadata(path)
        return True
    except (OSError, ValueError, Exception):  # pyarrow raises ArrowInvalid (a ValueError) on a truncated file
        return False


def plan_groups(base: Path, instant: str) -> int:
    f = plan_file(base, instant)
    meta = decode_requested_replace(f.read_bytes(), str(f))
    return len(meta.clustering_plan.input_groups) if meta and meta.clustering_plan else 0


@dataclass(frozen=True, slots=True)
class KillState:
    """What a kill interrupted."""

    phase: str
    instant: str | None
    states: tuple[str, ...]
    markers: int
    partial_files: int
    groups: int
    groups_finished: int
    lock_held_by_daemon: bool
    cycles_done: int  # clusterings this daemon run had completed
    last_event: str | None
    mdt: str | None = None  # the state of the instant's metadata deltacommit (tables with a metadata table)


PHASES = ("before_plan", "requested", "claimed", "writing", "between_files", "before_completion",
          "during_completion", "metadata_committed", "rolling_back")
# the phases issue #6 names; each must be hit at least once in the long run
REQUIRED_PHASES = ("before_plan", "requested", "writing", "between_files", "before_completion", "during_completion")
# on a table with a metadata table, also: its deltacommit completed, the data replacecommit not yet
MDT_REQUIRED_PHASES = (*REQUIRED_PHASES, "metadata_committed")


def classify(base: Path, daemon: CrashableDaemon, known: set[str]) -> KillState:
    """The phase of the clustering cycle the (frozen or dead) daemon was in, from the disk and its log.

    ``known`` are the instant times on the timeline before this daemon run started. With no plan pending the
    daemon is before a plan: its first of this run, or the next one after a cycle it completed and cleaned up
    (the two leave the same state behind; ``cycles_done`` tells them apart). On a table with a metadata table, a
    pending plan whose metadata deltacommit is completed is ``metadata_committed``."""
    names = hoodie_names(base)
    events = daemon.poll_events()
    last = str(events[-1].get("event")) if events else None
    held = lock_owner_pid(base) == daemon.pid
    rolling_back = any(".rollback." in n and n.split(".", 1)[0] not in known for n in pending_instants(names))
    plans = {t: s for t, s in replace_states(names).items() if t not in known}
    done = sorted(t for t, s in plans.items() if "completed" in s)
    pending = sorted(t for t, s in plans.items() if "completed" not in s)
    instant = pending[-1] if pending else (done[-1] if done else None)
    if instant is None:
        phase = "rolling_back" if rolling_back else "before_plan"
        return KillState(phase, None, (), 0, 0, 0, 0, held, 0, last)
    states = plans[instant]
    files = marker_files(base, instant)
    partial = sum(1 for f in files if not is_complete_parquet(f))
    groups = plan_groups(base, instant) if "requested" in states else 0
    finished = daemon.count("group finished", instant)
    heartbeat = (base / ".hoodie" / ".heartbeat" / instant).exists()
    mdt = mdt_deltacommit_state(base, instant)
    if "completed" in states:  # the last plan of this run is done; in its clean-up, or before the next plan
        phase = "during_completion" if files or heartbeat else ("rolling_back" if rolling_back else "before_plan")
    elif rolling_back:
        phase = "rolling_back"
    elif mdt == "completed":
        phase = "metadata_committed"
    elif "inflight" not in states:
        phase = "requested"
    elif not files:
        phase = "claimed"
    elif partial:
        phase = "writing"
    elif finished < groups:
        phase = "between_files"
    else:
        phase = "during_completion" if held else "before_completion"
    return KillState(phase, instant, tuple(sorted(states)), len(files), partial, groups, finished, held, len(done),
                     last, mdt)


def pending_plan(base: Path) -> bool:
    """A clustering plan requested or inflight on the timeline."""
    return any("completed" not in s for s in replace_states(hoodie_names(base)).values())


# --- checks ---------------------------------------------------------------------------------------------------


def clustering_plans(base: Path) -> dict[str, list[FileGroupId]]:
    """Every clustering plan on the timeline (its requested file), decoded with the project's Avro reader."""
    out: dict[str, list[FileGroupId]] = {}
    for f in plan_files(base):
        meta = decode_requested_replace(f.read_bytes(), str(f))
        if meta is not None and meta.clustering_plan is not None:
            out[f.name.split(".", 1)[0]] = meta.clustering_plan.group_ids()
    return out


def assert_plans_disjoint(base: Path) -> int:
    """No file group in two plans on the timeline (a completed plan holds only the file groups its commit
    replaced, since groups whose input moved are left out; one that lost every group to ingestion holds none);
    no file group replaced by two completed replacecommits. Returns the number of plans."""
    owner: dict[FileGroupId, str] = {}
    plans = clustering_plans(base)
    for t, gids in sorted(plans.items()):
        completed = completed_replace_file(base, t)
        if completed is not None:
            committed = decode_instant(completed.read_bytes(), str(completed)).get("partitionToReplaceFileIds") or {}
            gids = [(p, f) for p, fids in committed.items() for f in fids]
        for gid in gids:
            assert gid not in owner, f"file group {gid} is in plans {owner[gid]} and {t}"
            owner[gid] = t
    replaced: dict[tuple[str, str], str] = {}
    for f in completed_replace_files(base):
        for p, fids in (decode_instant(f.read_bytes(), str(f)).get("partitionToReplaceFileIds") or {}).items():
            for fid in fids:
                assert (p, fid) not in replaced, f"file group {fid} ({p}) replaced by {replaced[(p, fid)]} and {f.name}"
                replaced[(p, fid)] = f.name
    return len(plans)


def pending_instants(names: list[str]) -> list[str]:
    """Requested or inflight state files whose instant has no completed file."""
    present = set(names)
    out: list[str] = []
    for n in names:
        parts = n.split(".")
        if not parts[0].isdigit():
            continue
        if len(parts) == 2 and parts[1] == "inflight":
            action = "commit"
        elif len(parts) == 3 and parts[2] in ("requested", "inflight"):
            action = parts[1]
        else:
            continue
        if f"{parts[0]}.{action}" not in present:
            out.append(n)
    return out


def _entries(folder: Path, recursive: bool = False) -> list[Path]:
    """The folder's entries, or none once it is gone: a live daemon may delete it while we look (recovery
    removes a finished instant's markers and heartbeat), which is not an error of the table."""
    try:
        return list(folder.rglob("*") if recursive else folder.iterdir())
    except FileNotFoundError:
        return []


def pending_work(base: Path) -> list[str]:
    """Everything that says a write or a clustering is unfinished: pending instants, markers, heartbeats, a lock
    held by a live process. Empty on a table at rest (a lock file of a dead process is not work: the next writer
    takes it over once stale)."""
    out = pending_instants(hoodie_names(base))
    temp = base / ".hoodie" / ".temp"
    for marker_dir in _entries(temp):
        if _entries(marker_dir, recursive=True):
            out.append(f"markers of {marker_dir.name}")
    out += [f"heartbeat {p.name}" for p in _entries(base / ".hoodie" / ".heartbeat")]
    if (base / LOCK_FILE).exists():
        pid = lock_owner_pid(base)
        if pid is None or process_alive(pid):
            out.append(f"lock held by {'another host' if pid is None else pid}")
    return out


_T = TypeVar("_T")

LOCK_HOLD_WAIT_S = 15.0
"""How long a check waits for a live process to release the table lock it holds for a moment: a daemon that
takes it to save a plan, or to roll back an abandoned one, as the check reads the table."""


def left_behind(base: Path, pending: Callable[[Path], list[str]] = pending_work) -> list[str]:
    """``pending(base)`` once no live process holds the table lock only for a moment: the lock entry counts only
    when it is still held after ``LOCK_HOLD_WAIT_S`` (every other entry counts at once)."""
    deadline = time.monotonic() + LOCK_HOLD_WAIT_S
    while True:
        left = pending(base)
        if not left or any(not entry.startswith("lock held by ") for entry in left) or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def leftover_tmp_files(base: Path) -> list[str]:
    """Temporary files of interrupted atomic writes (``.<uuid>.tmp``): harmless, but counted."""
    found = []
    for folder, _, files in os.walk(base):  # os.walk skips folders that vanish while it runs
        found += [str((Path(folder) / f).relative_to(base)) for f in files if f.startswith(".") and f.endswith(".tmp")]
    return sorted(found)


def assert_rows(base: Path, expected: list[dict[str, Any]], what: str) -> None:
    rows = hudi_rs_rows(base, COLUMNS, "id")
    if rows != expected:
        got = {r["id"]: r for r in rows}
        want = {r["id"]: r for r in expected}
        missing = sorted(set(want) - set(got))[:5]
        extra = sorted(set(got) - set(want))[:5]
        changed = sorted(k for k in set(want) & set(got) if want[k] != got[k])[:5]
        raise AssertionError(f"{what}: hudi-rs snapshot differs from the expected rows ({len(rows)} vs "
                             f"{len(expected)} rows; missing {missing}, unexpected {extra}, stale {changed})")


def check_recovered(base: Path, expected: list[dict[str, Any]], what: str) -> list[str]:
    """The table after recovery: exact rows, unique keys, no orphan data file, nothing pending, the lock takeable,
    no file group in two plans. Returns the temporary files of interrupted atomic writes left (hidden, ignored
    by readers)."""
    assert_rows(base, expected, what)
    assert assert_meta_consistent(base) == len(expected), f"{what}: duplicate or missing record keys"
    assert_no_orphan_files(base)
    left = left_behind(base)
    assert not left, f"{what}: left behind after recovery: {left}"
    options = LockOptions(timeout_s=LOCK_STALE_S + 10, stale_s=LOCK_STALE_S)
    lock = FileSystemLockProvider(HoodieTable.open(str(base)).storage, options)
    with lock.held():
        pass
    assert_plans_disjoint(base)
    return leftover_tmp_files(base)


def wait_at_rest(base: Path, daemon: CrashableDaemon, *, quiet_s: float = 2.5, timeout: float = 240,
                 pending: Callable[[Path], list[str]] | None = None) -> None:
    """Until the running daemon has nothing pending on the table (``pending``, default `pending_work`) for
    ``quiet_s`` in a row."""
    pending = pending or pending_work
    deadline = time.monotonic() + timeout
    quiet_since: float | None = None
    while True:
        daemon.poll_events()
        if daemon.proc.poll() is not None:
            raise AssertionError(f"daemon exited with {daemon.proc.returncode}; see {daemon.log_file}")
        busy = pending(base)
        now = time.monotonic()
        if busy:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= quiet_s:
            return
        if now > deadline:
            raise AssertionError(f"table not at rest after {timeout:.0f}s: {busy}; see {daemon.log_file}")
        time.sleep(0.1)


def check_when_idle(wait: Callable[[], None], names: Callable[[], list[str]], check: Callable[[], _T],
                    what: str) -> _T:
    """``check()`` once the running daemon is idle (``wait()``), again when it started something during the check
    (``names()``, the instant files, changed), at most five times."""
    for _ in range(5):
        wait()
        before = names()
        try:
            result = check()
        except AssertionError:
            if names() != before:
                continue  # the daemon started something during the check: check again once it is idle
            raise
        if names() == before:
            return result
    raise AssertionError(f"{what}: the daemon never stayed idle long enough to check the table")


def check_at_rest(base: Path, daemon: CrashableDaemon, expected: list[dict[str, Any]], what: str) -> list[str]:
    """``check_recovered`` while a daemon runs (see `check_when_idle`)."""
    return check_when_idle(lambda: wait_at_rest(base, daemon), lambda: hoodie_names(base),
                           lambda: check_recovered(base, expected, what), what)


def recover_with_execute(spark: Any, base: Path, policy: ClusteringPolicy) -> list[str]:
    """What ``hudi-clusterd execute`` does, on the test's SparkSession: roll back what a dead executor left and
    run every pending plan. Returns the outcomes."""
    from hudi_clusterd.engine.clustering.runner import SparkGroupRunner
    from hudi_clusterd.ops.execute import execute_pending
    from hudi_clusterd.ordering.figures import clustering_figures

    table = HoodieTable.open(str(base), lock_provider=FileSystemLockProvider(
        open_storage(str(base)), LockOptions(timeout_s=120, stale_s=LOCK_STALE_S)))
    runner = SparkGroupRunner(spark, owns_session=False)
    outcomes: list[str] = []
    for _ in range(10):
        result = execute_pending(table, runner, parallelism=policy.max_parallelism, figures=clustering_figures)
        if result.outcome == "skipped":
            break
        outcomes.append(result.outcome)
    return outcomes


# --- choosing the moment --------------------------------------------------------------------------------------


ANCHORS = ("uniform", "before_plan", "requested", "writing", "between_files", "before_completion",
           "during_completion")
# tables with a metadata table: also right after the clustering's metadata deltacommit completed
MDT_ANCHORS = (*ANCHORS, "metadata_committed")


@dataclass(frozen=True, slots=True)
class KillPlan:
    """Where to kill: an anchor, a delay after it, which finished group (``between_files``), which side of the
    commit point (``during_completion``), and the kill mode."""

    anchor: str
    delay_s: float
    kth_group: int
    mode: str  # tree | driver
    completion_step: str  # pre_commit | post_commit

    @staticmethod
    def draw(rng: random.Random, anchor: str) -> KillPlan:
        delay = {"uniform": rng.uniform(0, 30), "before_plan": rng.uniform(0, 3), "requested": 0.0,
                 "writing": 0.0, "between_files": rng.uniform(0, 0.3), "before_completion": rng.uniform(0, 0.08),
                 "during_completion": 0.0, "metadata_committed": 0.0}[anchor]
        return KillPlan(anchor, round(delay, 3), rng.randint(1, 8), "driver" if rng.random() < 0.25 else "tree",
                        rng.choice(["pre_commit", "post_commit"]))


class Cycle:
    """The current clustering of this daemon run, as far as the log and the timeline tell."""

    def __init__(self, base: Path, daemon: CrashableDaemon, known: set[str]) -> None:
        self.base = base
        self.daemon = daemon
        self.known = known
        self._first = len(daemon.poll_events())
        self._complete: set[Path] = set()

    def plan(self) -> tuple[str, int] | None:
        """The instant and group count of the last plan this daemon started since the point began."""
        started = [e for e in self.daemon.events[self._first:] if e.get("event") == "plan started"
                   and str(e.get("instant")) not in self.known]
        return (str(started[-1]["instant"]), int(started[-1]["groups"])) if started else None

    def last_group_running(self) -> bool:
        p = self.plan()
        return p is not None and self.daemon.count("group finished", p[0]) >= p[1] - 1

    def all_groups_finished(self) -> bool:
        p = self.plan()
        return p is not None and self.daemon.count("group finished", p[0]) >= p[1]

    def new_requested_only(self) -> bool:
        states = replace_states(hoodie_names(self.base))
        return any(s == {"requested"} for t, s in states.items() if t not in self.known)

    def partly_written(self) -> bool:
        """A file of the running plan has its marker but is missing or has no footer yet."""
        p = self.plan()
        if p is None:
            return False
        for f in marker_files(self.base, p[0]):
            if f not in self._complete:
                if not is_complete_parquet(f):
                    return True
                self._complete.add(f)
        return False

    def completion_step(self) -> str | None:
        """Inside ``complete``: ``pre_commit`` (the daemon holds the lock after its last group, no replacecommit
        yet) or ``post_commit`` (the replacecommit is written, its markers or heartbeat not removed yet)."""
        p = self.plan()
        if p is None or not self.all_groups_finished():
            return None
        if completed_replace_file(self.base, p[0]) is not None:
            leftovers = marker_files(self.base, p[0]) or (self.base / ".hoodie" / ".heartbeat" / p[0]).exists()
            return "post_commit" if leftovers else None
        return "pre_commit" if lock_owner_pid(self.base) == self.daemon.pid else None

    def completing(self) -> bool:
        return self.completion_step() is not None

    def metadata_committed(self) -> bool:
        """The plan's metadata deltacommit is completed (the daemon logged it) and its replacecommit not yet."""
        p = self.plan()
        return (p is not None and self.daemon.count("metadata table updated", p[0]) > 0
                and mdt_deltacommit_state(self.base, p[0]) == "completed"
                and completed_replace_file(self.base, p[0]) is None)

    def armed(self, anchor: str, kth_group: int) -> bool:
        """Whether the anchor's moment has come (the delay is added after)."""
        if anchor == "uniform":
            return True
        if anchor == "before_plan":
            return not pending_plan(self.base)
        if anchor == "requested":
            return self.new_requested_only()
        if anchor == "writing":
            return self.partly_written()
        if anchor == "during_completion":
            return self.completing()
        if anchor == "metadata_committed":
            return self.metadata_committed()
        p = self.plan()
        if p is None:
            return False
        finished = self.daemon.count("group finished", p[0])
        if anchor == "between_files":
            return finished >= max(1, min(kth_group, p[1] - 1))
        return finished >= p[1]  # before_completion

    def missed(self, anchor: str) -> bool:
        """The moment of a tight anchor went by for the running plan (the kill then lands where it lands)."""
        p = self.plan()
        if anchor == "writing":
            return self.all_groups_finished()
        if anchor in ("during_completion", "metadata_committed") and p is not None:
            return completed_replace_file(self.base, p[0]) is not None
        return False


TIGHT_ANCHORS = ("before_plan", "requested", "writing", "during_completion",
                 "metadata_committed")  # checked again, frozen
STEP_BUDGET_S = 20.0


def step_into_completion(daemon: CrashableDaemon, cycle: Cycle, want: str = "pre_commit") -> bool:
    """From the start of the plan's last running group, run the daemon in slices of a few milliseconds until it
    is inside its completion at step ``want`` (see ``Cycle.completion_step``); True when it was caught there,
    False when that step went by. Returns with the daemon frozen. (Running about half the time, its lock
    heartbeat comes late, never near the staleness limit.)"""
    daemon.freeze()
    deadline = time.monotonic() + STEP_BUDGET_S
    while time.monotonic() < deadline:
        daemon.poll_events()
        step = cycle.completion_step()
        if step == want:
            return True
        p = cycle.plan()
        if p is not None and completed_replace_file(cycle.base, p[0]) is not None and step is None:
            return False  # committed and cleaned up
        if want == "pre_commit" and step == "post_commit":
            return False
        daemon.step(random.uniform(0.0005, 0.003))
    return False


def kill_at(base: Path, daemon: CrashableDaemon, plan: KillPlan, known: set[str], *,
            timeout: float = 150) -> tuple[KillState, bool]:
    """Wait for the plan's moment, freeze the daemon, record what it was doing, SIGKILL it. Returns the state and
    whether the anchor fired (False: the moment went by, or the timeout came first)."""
    cycle = Cycle(base, daemon, known)
    start = time.monotonic()
    fire_at: float | None = start + plan.delay_s if plan.anchor in ("uniform", "before_plan") else None
    tight = plan.anchor in TIGHT_ANCHORS
    fired = False
    while True:
        now = time.monotonic()
        daemon.poll_events()
        if daemon.proc.poll() is not None:
            raise AssertionError(f"daemon exited with {daemon.proc.returncode} before the kill; see {daemon.log_file}")
        if now - start > timeout:
            break
        if plan.anchor == "during_completion" and cycle.last_group_running():
            fired = step_into_completion(daemon, cycle, plan.completion_step)
            break
        if fire_at is None and cycle.armed(plan.anchor, plan.kth_group):
            fire_at = now + plan.delay_s
        if fire_at is not None and now >= fire_at:
            if not tight:
                fired = True
                break
            daemon.freeze()
            time.sleep(0.005)
            daemon.poll_events()
            if cycle.armed(plan.anchor, plan.kth_group):
                fired = True
                break
            daemon.thaw()
            fire_at = None
            if cycle.missed(plan.anchor):
                break
        time.sleep(0.001 if tight or fire_at is not None else 0.005)
    if not daemon.frozen:
        daemon.freeze()
    time.sleep(0.05)  # let the stop reach every thread before reading the disk
    state = classify(base, daemon, known)
    daemon.kill(plan.mode)
    return state, fired


def summarize(records: Sequence[Mapping[str, Any]], key: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        out[str(r[key])] = out.get(str(r[key]), 0) + 1
    return dict(sorted(out.items()))


def crash_seed() -> int:
    """``CLUSTERD_CRASH_SEED`` (to replay a run), else a fresh random seed."""
    raw = os.environ.get("CLUSTERD_CRASH_SEED")
    return int(raw) if raw else random.SystemRandom().randrange(2**31)


def crash_points(default: int) -> int:
    """``CLUSTERD_CRASH_POINTS``, else ``default``."""
    raw = os.environ.get("CLUSTERD_CRASH_POINTS")
    return int(raw) if raw else default


def crash_anchors(known: Sequence[str]) -> list[str]:
    """``CLUSTERD_CRASH_ANCHORS`` (a comma-separated subset of ``known``), else every anchor of ``known``."""
    raw = os.environ.get("CLUSTERD_CRASH_ANCHORS")
    chosen = [a.strip() for a in raw.split(",") if a.strip()] if raw else list(known)
    unknown = set(chosen) - set(known)
    assert not unknown, f"CLUSTERD_CRASH_ANCHORS: unknown anchors {sorted(unknown)} (known: {', '.join(known)})"
    return chosen


def count_events(logs: Iterable[Path], names: Sequence[str]) -> dict[str, int]:
    """How often each event of ``names`` appears in the JSON logs ``logs`` (the daemons' stderr)."""
    counts = dict.fromkeys(names, 0)
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    event = json.loads(line).get("event")
                except json.JSONDecodeError:
                    continue
                if event in counts:
                    counts[event] += 1
    return counts


# --- Apache Hudi's streaming writer as the ingestion (a table of version 8 or 9 with a metadata table) ---------


STREAM_SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("val", pa.int64()), ("ts", pa.int64())])
STREAM_COLUMNS = ["id", "part", "val", "ts"]
STREAM_PARTS = ("p0", "p1", "p2")
STREAM_CHECKPOINT_KEY = "_hudi_streaming_sink_checkpoint"  # extraMetadata of a commit of Hudi's streaming sink
StreamRow = tuple[str, int, int]  # part, val, ts


@dataclass
class StreamStats:
    batches: int = 0
    insert_batches: int = 0  # new keys only
    upsert_batches: int = 0  # new keys and updates of earlier ones
    updated_keys: int = 0
    batch_seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


class HudiStreamIngestor:
    """Apache Hudi's streaming writer (``writeStream.format("hudi")`` in a ``HudiWorker``, one micro-batch per
    JSON-lines file dropped into its source folder) fed by a thread; keeps every batch, so the expected snapshot
    (key -> latest row) after any number of committed batches is exact.

    Batch 0 inserts ``HOT_KEYS`` keys (files above the clustering's small-file limit, so plans leave them out);
    every later batch inserts new keys in every partition, and about half of them also update hot keys and now
    and then a key of any earlier batch, whose small file a clustering may be rewriting (Hudi's ordering field
    ``ts`` is the batch number). The feeder drops the next file once the previous batch committed (a short random
    pause between), so batch ``n`` is Spark's micro-batch ``n``."""

    HOT_KEYS = 600
    INSERTS = 9

    def __init__(self, worker: HudiWorker, folder: Path, base: Path, seed: int, options: Mapping[str, str],
                 name: str = "events") -> None:
        self.worker = worker
        self.base = base
        self.name = name
        self.identifier = options["hoodie.datasource.write.streaming.checkpoint.identifier"]
        self.rng = random.Random(seed)
        self.batches: list[list[dict[str, Any]]] = []
        self.stats = StreamStats()
        self.source, self.staging = folder / "source", folder / "staging"
        self.source.mkdir(parents=True)
        self.staging.mkdir()
        schema = folder / "schema.parquet"
        pq.write_table(pa.Table.from_pylist([], schema=STREAM_SCHEMA), schema)
        self._log_start = worker.log_offset()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        worker.stream_start(name, source_dir=self.source, schema_from=schema, base_path=base,
                            checkpoint_dir=folder / "checkpoint", options=dict(options), source_format="json")

    # -- batches --

    def _make_batch(self, n: int) -> list[dict[str, Any]]:
        if n == 0:
            ids = list(range(self.HOT_KEYS))
            self.stats.insert_batches += 1
            return [{"id": i, "part": STREAM_PARTS[i % len(STREAM_PARTS)], "val": i, "ts": 0} for i in ids]
        first = self.HOT_KEYS + (n - 1) * self.INSERTS
        ids = list(range(first, first + self.INSERTS))
        if self.rng.random() < 0.5:
            updates = set(self.rng.sample(range(self.HOT_KEYS), 3))
            if first > self.HOT_KEYS and self.rng.random() < 0.25:
                updates.add(self.rng.randrange(self.HOT_KEYS, first))
            ids += sorted(updates)
            self.stats.upsert_batches += 1
            self.stats.updated_keys += len(updates)
        else:
            self.stats.insert_batches += 1
        return [{"id": i, "part": STREAM_PARTS[i % len(STREAM_PARTS)], "val": n * 1000 + i, "ts": n} for i in ids]

    def _drop(self) -> int:
        """Write the next batch beside the source folder and move it in whole; returns the batch count."""
        n = len(self.batches)
        rows = self._make_batch(n)
        self.batches.append(rows)
        staged = self.staging / f"batch-{n:04d}.json"
        staged.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.replace(staged, self.source / staged.name)
        return n + 1

    def expected(self, batches: int | None = None) -> dict[int, StreamRow]:
        """Key -> (part, val, ts) after the first ``batches`` batches (all fed batches by default)."""
        out: dict[int, StreamRow] = {}
        for rows in self.batches[:batches]:
            for r in rows:
                out[int(r["id"])] = (r["part"], r["val"], r["ts"])
        return out

    # -- the stream --

    def status(self) -> dict[str, Any]:
        """The query's status; a failure (an exception, or the query no longer active) is recorded and raised."""
        status = self.worker.stream_status(self.name)
        self._check(status)
        return status

    def _check(self, status: Mapping[str, Any]) -> None:
        if status.get("exception") is not None or not status.get("active"):
            failure = f"streaming query stopped: {str(status.get('exception'))[:2000]}"
            if failure not in self.stats.failures:
                self.stats.failures.append(failure)
            raise AssertionError(failure)

    def _wait(self, batches: int, timeout: float, stop: threading.Event | None) -> bool:
        """Until the query has run ``batches`` micro-batches (True), ``stop`` is set (False) or it failed. Asks
        in short requests, so that other requests to the worker interleave."""
        started = time.monotonic()
        while True:
            status = self.worker.stream_status(self.name, wait_for_batches=batches, timeout=1.0)
            self._check(status)
            if int(status["batches"]) >= batches:
                self.stats.batches = int(status["batches"])
                return True
            if stop is not None and stop.is_set():
                return False
            if time.monotonic() - started > timeout:
                failure = f"micro-batch {batches - 1} not committed within {timeout:.0f}s"
                self.stats.failures.append(failure)
                raise AssertionError(failure)

    def feed_once(self, timeout: float = 300) -> None:
        """Drop one batch and wait until it is committed (the feeder thread must not run)."""
        assert self._thread is None
        started = time.monotonic()
        self._wait(self._drop(), timeout, None)
        self.stats.batch_seconds.append(round(time.monotonic() - started, 1))

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                if not self._wait(self._drop(), 600, self._stop):
                    return
                self.stats.batch_seconds.append(round(time.monotonic() - started, 1))
                if self._stop.wait(self.rng.uniform(0.0, 1.0)):
                    return
        except Exception as e:  # recorded; pause() and the test assert on it
            if not self.stats.failures:
                self.stats.failures.append(f"{type(e).__name__}: {e}")

    def start(self) -> None:
        assert self._thread is None
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="hudi-stream-feeder", daemon=True)
        self._thread.start()

    def halt(self) -> None:
        """Drop no more files; a batch in flight goes on (it may wait for the table lock a killed daemon left)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(120)
            assert not self._thread.is_alive(), "the feeder did not stop within 120s"
            self._thread = None

    def pause(self, timeout: float = 400, *, check: bool = True) -> None:
        """Drop no more files and wait until every dropped batch is committed; with ``check``, fail if a batch
        failed for good."""
        self.halt()
        try:
            self._wait(len(self.batches), timeout, None)
        except AssertionError:
            if check:
                raise
        assert not check or not self.stats.failures, f"streaming ingestion failed: {self.stats.failures}"

    def stop(self) -> dict[str, Any]:
        """Stop the query (``pause`` first); returns its last status."""
        self.halt()
        return self.worker.stream_stop(self.name)

    def committed_batches(self) -> int:
        """How many batches the timeline holds completed commits of (from the streaming sink's checkpoint in each
        commit's metadata): the batches readers must see, even while one waits for a lock."""
        done = -1
        for f in instant_files(self.base):
            if f.state == "completed" and f.action == "commit":
                raw = (instant_metadata(f).get("extraMetadata") or {}).get(STREAM_CHECKPOINT_KEY)
                if raw:
                    done = max(done, int(json.loads(raw).get(self.identifier, -1)))
        return done + 1

    def check_readers(self, what: str, attempts: int = 5) -> int:
        """While the stream runs: Hudi's snapshot read and hudi-rs each read exactly the batches the timeline holds
        (read again when a batch committed during the read). Returns that batch count."""
        readers = (("Hudi's snapshot read", lambda: self.worker.read(self.base, columns=STREAM_COLUMNS).to_pylist()),
                   ("hudi-rs", lambda: hudi_rs_rows(self.base, STREAM_COLUMNS, "id")))
        done = 0
        for reader, read in readers:
            for _ in range(attempts):
                done = self.committed_batches()
                rows = read()
                if self.committed_batches() == done:
                    _assert_same(stream_rows(rows, f"{what}, {reader}"), self.expected(done), f"{what}: {reader}")
                    break
            else:
                raise AssertionError(f"{what}: a batch committed during each of {attempts} reads by {reader}")
        return done

    def retried_batches(self) -> list[str]:
        """What Hudi's streaming sink logged about micro-batches that failed (and were retried) since the start."""
        return self.worker.failed_micro_batches(since=self._log_start)


def stream_rows(rows: Iterable[Mapping[str, Any]], what: str) -> dict[int, StreamRow]:
    """Rows read back as key -> (part, val, ts); a key read twice fails."""
    out: dict[int, StreamRow] = {}
    for r in rows:
        assert int(r["id"]) not in out, f"{what}: key {r['id']} read twice"
        out[int(r["id"])] = (r["part"], r["val"], r["ts"])
    return out


def _assert_same(got: Mapping[int, StreamRow], expected: Mapping[int, StreamRow], what: str) -> None:
    if got != expected:
        missing = sorted(set(expected) - set(got))[:5]
        extra = sorted(set(got) - set(expected))[:5]
        stale = sorted(k for k in set(expected) & set(got) if expected[k] != got[k])[:5]
        raise AssertionError(f"{what} differs from the expected rows ({len(got)} vs {len(expected)} keys; missing "
                             f"{missing}, unexpected {extra}, stale {stale})")


def assert_stream_rows(worker: HudiWorker, base: Path, expected: Mapping[int, StreamRow], what: str) -> None:
    """Hudi's snapshot read (listing through the metadata table) and hudi-rs both read exactly ``expected``."""
    for reader, rows in (("Hudi's snapshot read", lambda: worker.read(base, columns=STREAM_COLUMNS).to_pylist()),
                         ("hudi-rs", lambda: hudi_rs_rows(base, STREAM_COLUMNS, "id"))):
        _assert_same(stream_rows(rows(), f"{what}, {reader}"), expected, f"{what}: {reader}")


_MDT_LOG = re.compile(r"^\.(.+)_(\d+)\.log\.(\d+)_(.+)$")
_MDT_BASE = re.compile(r"^(.+)_(\d+-\d+-\d+)_(\d+)\.hfile$")


def mdt_orphan_files(base: Path) -> list[str]:
    """Files of the metadata table (layout 2: a log file is named after its deltacommit, an HFile after its
    compaction) whose instant is neither completed in the metadata timeline nor older than its first instant
    (archived). Written by an attempt that never completed or was rolled back, they should be gone."""
    names = mdt_names(base)
    done = {n.split(".", 1)[0] for n in names if n.count(".") == 1}
    active = sorted(n.split(".", 1)[0] for n in names if not n.startswith("0000000000000"))
    first = active[0] if active else None
    out = []
    root = base / ".hoodie" / "metadata"
    for folder in (d for d in _listdir(root) if not d.startswith(".")):
        for n in _listdir(root / folder):
            m = _MDT_LOG.match(n) or _MDT_BASE.match(n)
            if m is None:
                continue
            instant = m.group(2) if m.re is _MDT_LOG else m.group(3)
            if instant not in done and (first is None or instant >= first):
                out.append(f"{folder}/{n}")
    return sorted(out)


def mdt_pending_instants(base: Path) -> list[str]:
    """The metadata table's requested or inflight instant files whose instant has no completed file (by time: a
    compaction completes as a ``commit``)."""
    names = mdt_names(base)
    done = {n.split(".", 1)[0] for n in names if n.count(".") == 1}
    return [n for n in names if n.count(".") == 2 and n.split(".", 1)[0] not in done]


def stream_pending_work(base: Path) -> list[str]:
    """``pending_work`` plus the metadata table's pending instants, markers and heartbeats."""
    out = pending_work(base)
    out += [f"metadata table: {n}" for n in mdt_pending_instants(base)]
    meta = base / ".hoodie" / "metadata" / ".hoodie"
    out += [f"metadata table: markers of {d.name}" for d in _entries(meta / ".temp") if _entries(d, recursive=True)]
    out += [f"metadata table: heartbeat {p.name}" for p in _entries(meta / ".heartbeat")]
    return out


def check_stream_recovered(worker: HudiWorker, base: Path, table_name: str, expected: Mapping[int, StreamRow],
                           what: str) -> dict[str, Any]:
    """A table Hudi's stream writes, at rest (stream paused, daemon idle): exact rows through Hudi (listing
    through the metadata table) and hudi-rs, unique keys, no orphan data file and no metadata-table file of an
    instant that did not complete, nothing pending (data table and metadata table), the lock takeable, no file
    group in two plans, and the metadata table listing exactly the data files in storage (``validate_files``).
    Returns what the checks counted."""
    assert_stream_rows(worker, base, expected, what)
    assert assert_meta_consistent(base) == len(expected), f"{what}: duplicate or missing record keys"
    referenced = assert_no_orphan_files(base)
    orphans = mdt_orphan_files(base)
    assert not orphans, f"{what}: metadata-table files of instants that never completed: {orphans[:5]}"
    left = left_behind(base, stream_pending_work)
    assert not left, f"{what}: left behind after recovery: {left}"
    options = LockOptions(timeout_s=LOCK_STALE_S + 10, stale_s=LOCK_STALE_S)
    lock = FileSystemLockProvider(HoodieTable.open(str(base)).storage, options)
    with lock.held():
        pass
    plans = assert_plans_disjoint(base)
    validation = validate_files(worker, base, table_name)
    try:
        validation.assert_clean()
    except AssertionError as e:
        raise AssertionError(f"{what}: {e}") from None
    return {"files_referenced": referenced, "mdt_files_checked": len(validation.rows), "plans": plans,
            "tmp_left": len(leftover_tmp_files(base))}


def check_stream_at_rest(worker: HudiWorker, base: Path, daemon: CrashableDaemon, table_name: str,
                         expected: Mapping[int, StreamRow], what: str) -> dict[str, Any]:
    """``check_stream_recovered`` while a daemon runs, the stream paused (see `check_when_idle`; the metadata
    table's pending work and instant files included)."""
    return check_when_idle(lambda: wait_at_rest(base, daemon, pending=stream_pending_work, timeout=300),
                           lambda: hoodie_names(base) + mdt_names(base),
                           lambda: check_stream_recovered(worker, base, table_name, expected, what), what)
