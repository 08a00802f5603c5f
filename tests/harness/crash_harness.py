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
the ingestion beside the daemon (``tests/harness/crash_stream.py``).

The functions that poll or check a table while a daemon runs (``classify``, ``Cycle``, ``kill_at``,
``pending_work``, ``wait_at_rest``, ``check_recovered``...) take it as a local folder or as a
``tests.harness.crash_table.WatchedTable`` (a table on S3 seen through a mirror refreshed at every poll, and its
lock read from its own store); the lower readers (``hoodie_names``, ``marker_files``...) read a local folder,
the watched table's ``root``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pyarrow.parquet as pq

from hudi_clusterd.domain.file_group import FileGroupId
from hudi_clusterd.domain.policy import ClusteringPolicy
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.errors import CommitConflictError
from hudi_clusterd.formats.avro import decode_requested_replace
from hudi_clusterd.formats.bloom import BloomSettings
from hudi_clusterd.lock import FileSystemLockProvider, LockOptions
from hudi_clusterd.storage import open_storage
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.builders import make_policy
from tests.harness.crash_table import LOCK_STALE_S as LOCK_STALE_S
from tests.harness.crash_table import WatchedTable as WatchedTable
from tests.harness.crash_table import as_watched, pid_identity
from tests.harness.crash_table import lock_owner_pid as lock_owner_pid
from tests.harness.crash_table import process_alive as process_alive
from tests.harness.daemon_harness import decode_instant, write_props
from tests.harness.hudi_rs_checks import assert_meta_consistent, assert_no_orphan_files, hudi_rs_rows

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


def write_crash_props(path: Path, base: Path | str, port: int, *, parallelism: int = 2, **extra: str) -> None:
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
    incrementally. ``freeze`` stops the whole process tree; ``kill`` SIGKILLs what was frozen.

    ``env``: variables added to the daemon's environment (an object store's AWS variables); ``lock_identity``: how
    the table's ``LockWatch`` names this daemon when it holds the lock (by default its pid, as the file-system
    lock's owner names it)."""

    def __init__(self, props: Path, log_file: Path, *, env: Mapping[str, str] | None = None,
                 lock_identity: str | None = None) -> None:
        self.log_file = log_file
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})}
        self._log = open(log_file, "ab")  # noqa: SIM115 - closed in close()
        self._offset = log_file.stat().st_size
        self._partial = b""
        self.events: list[Event] = []
        self.proc = subprocess.Popen([sys.executable, "-m", "hudi_clusterd", "run", "--props", str(props)],
                                     stdout=self._log, stderr=self._log, env=env, start_new_session=True)
        self.pid = self.proc.pid
        self.lock_identity = lock_identity or pid_identity(self.pid)
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


def listdir(folder: Path) -> list[str]:
    """The names in ``folder``, or none once it is gone."""
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
        return _as_layout1(listdir(layout2))
    return sorted(os.listdir(base / ".hoodie"))


def completed_replace_file(base: Path, instant: str) -> Path | None:
    """The completed replacecommit file of ``instant`` (``<T>.replacecommit``, or ``<T>_<C>.replacecommit`` in
    layout 2), or None."""
    folder = timeline_folder(base)
    if folder.name == "timeline":
        return next((folder / n for n in listdir(folder) if n.startswith(f"{instant}_")
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
    return _as_layout1(listdir(metadata_timeline_folder(base)))


def mdt_deltacommit_state(base: Path, instant: str) -> str | None:
    """``completed``, ``inflight`` or ``requested``: how far the metadata deltacommit of data instant ``instant``
    got; None when the metadata table has none."""
    states = {n.rsplit(".", 1)[-1] if n.count(".") == 2 else "completed"
              for n in mdt_names(base) if n.startswith(f"{instant}.deltacommit")}
    return next((s for s in ("completed", "inflight", "requested") if s in states), None)


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


def classify(table: Path | WatchedTable, daemon: CrashableDaemon, known: set[str]) -> KillState:
    """The phase of the clustering cycle the (frozen or dead) daemon was in, from the disk and its log.

    ``known`` are the instant times on the timeline before this daemon run started. With no plan pending the
    daemon is before a plan: its first of this run, or the next one after a cycle it completed and cleaned up
    (the two leave the same state behind; ``cycles_done`` tells them apart). On a table with a metadata table, a
    pending plan whose metadata deltacommit is completed is ``metadata_committed``."""
    watched = as_watched(table)
    base = watched.refresh()
    names = hoodie_names(base)
    events = daemon.poll_events()
    last = str(events[-1].get("event")) if events else None
    held = watched.lock.holder() == daemon.lock_identity
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
    elif partial and finished < groups:  # after the last group, a marker without its file is a failed attempt's
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


# what a table service's instant completes as (merge-on-read tables): a compaction as a commit
_COMPLETES_AS = {"compaction": "commit", "logcompaction": "deltacommit"}


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
        if f"{parts[0]}.{_COMPLETES_AS.get(action, action)}" not in present:
            out.append(n)
    return out


def folder_entries(folder: Path, recursive: bool = False) -> list[Path]:
    """The folder's entries, or none once it is gone: a live daemon may delete it while we look (recovery
    removes a finished instant's markers and heartbeat), which is not an error of the table."""
    try:
        return list(folder.rglob("*") if recursive else folder.iterdir())
    except FileNotFoundError:
        return []


def pending_work(table: Path | WatchedTable) -> list[str]:
    """Everything that says a write or a clustering is unfinished: pending instants, markers, heartbeats, a lock
    held by a process that may still use it (``LockWatch.pending``), as of the table's last refresh. Empty on a
    table at rest (a lock file of a dead process is not work: the next writer takes it over once stale)."""
    watched = as_watched(table)
    base = watched.root
    out = pending_instants(hoodie_names(base))
    temp = base / ".hoodie" / ".temp"
    for marker_dir in folder_entries(temp):
        if folder_entries(marker_dir, recursive=True):
            out.append(f"markers of {marker_dir.name}")
    out += [f"heartbeat {p.name}" for p in folder_entries(base / ".hoodie" / ".heartbeat")]
    return out + watched.lock.pending()


_T = TypeVar("_T")

LOCK_HOLD_WAIT_S = 15.0
"""How long a check waits for a live process to release the table lock it holds for a moment: a daemon that
takes it to save a plan, or to roll back an abandoned one, as the check reads the table."""


Pending = Callable[[WatchedTable], list[str]]
"""What is unfinished on a watched table (``pending_work``, or ``stream_pending_work`` with the metadata table)."""


def left_behind(table: Path | WatchedTable, pending: Pending = pending_work) -> list[str]:
    """``pending(table)`` once no live process holds the table lock only for a moment: the lock entry counts only
    when it is still held after ``LOCK_HOLD_WAIT_S`` (every other entry counts at once). Refreshes the table at
    each look."""
    watched = as_watched(table)
    deadline = time.monotonic() + LOCK_HOLD_WAIT_S
    while True:
        watched.refresh()
        left = pending(watched)
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
    as_watched(base).lock.assert_takeable(what)
    assert_plans_disjoint(base)
    return leftover_tmp_files(base)


def wait_at_rest(table: Path | WatchedTable, daemon: CrashableDaemon, *, quiet_s: float = 2.5, timeout: float = 240,
                 pending: Pending | None = None) -> None:
    """Until the running daemon has nothing pending on the table (``pending``, default `pending_work`) for
    ``quiet_s`` in a row (the table refreshed at each look)."""
    pending = pending or pending_work
    watched = as_watched(table)
    deadline = time.monotonic() + timeout
    quiet_since: float | None = None
    while True:
        daemon.poll_events()
        if daemon.proc.poll() is not None:
            raise AssertionError(f"daemon exited with {daemon.proc.returncode}; see {daemon.log_file}")
        watched.refresh()
        busy = pending(watched)
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

    def __init__(self, table: Path | WatchedTable, daemon: CrashableDaemon, known: set[str]) -> None:
        self.table = as_watched(table)
        self.base = self.table.root  # read as of the table's last refresh (``kill_at`` refreshes at every poll)
        self.daemon = daemon
        self.known = known
        self.first_event = len(daemon.poll_events())  # the first of this daemon's events since the point began
        self._complete: set[Path] = set()

    def plan(self) -> tuple[str, int] | None:
        """The instant and group count of the last plan this daemon started since the point began."""
        started = [e for e in self.daemon.events[self.first_event:] if e.get("event") == "plan started"
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

    def look_at(self) -> None:
        """Refresh what the completion of the running plan changes (its timeline files, markers and heartbeat),
        or the whole table before a plan."""
        p = self.plan()
        if p is None:
            self.table.refresh()
            return
        timeline = timeline_folder(self.base).relative_to(self.base).as_posix()
        for under in (f"{timeline}/{p[0]}", f".hoodie/.temp/{p[0]}/", f".hoodie/.heartbeat/{p[0]}"):
            self.table.refresh(under)

    def completion_step(self) -> str | None:
        """Inside ``complete``: ``pre_commit`` (the daemon holds the lock after its last group, no replacecommit
        yet) or ``post_commit`` (the replacecommit is written, its markers or heartbeat not removed yet)."""
        p = self.plan()
        if p is None or not self.all_groups_finished():
            return None
        if completed_replace_file(self.base, p[0]) is not None:
            leftovers = marker_files(self.base, p[0]) or (self.base / ".hoodie" / ".heartbeat" / p[0]).exists()
            return "post_commit" if leftovers else None
        return "pre_commit" if self.table.lock.holder() == self.daemon.lock_identity else None

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
    False when that step went by. Returns with the daemon frozen. A slice lasts at least as long as the look
    between two slices, so the daemon runs about half the time: its lock heartbeat or ZooKeeper ping comes late,
    never near the staleness limit or session timeout. Each look refreshes only the plan's own timeline files,
    markers and heartbeat (`Cycle.look_at`: three short listings on S3), which keeps it, and so the slices, short
    enough to land between the replacecommit and the clean-up of its markers (`classify` then refreshes the whole
    table, the daemon frozen)."""
    daemon.freeze()
    deadline = time.monotonic() + STEP_BUDGET_S
    while time.monotonic() < deadline:
        looking = time.monotonic()
        daemon.poll_events()
        cycle.look_at()
        step = cycle.completion_step()
        if step == want:
            return True
        p = cycle.plan()
        if p is not None and completed_replace_file(cycle.base, p[0]) is not None and step is None:
            return False  # committed and cleaned up
        if want == "pre_commit" and step == "post_commit":
            return False
        daemon.step(max(random.uniform(0.0005, 0.003), time.monotonic() - looking))
    return False


def step_into_writing(daemon: CrashableDaemon, cycle: Cycle) -> bool:
    """On a table whose files appear whole once written (an object store), from a running group of the plan: run
    the daemon in slices until a marker of the plan names a file not in the table yet (True: a file is being
    written), or one more group finished (False). Each look lists only the plan's markers and asks for the files
    they name, so the slices stay short (`classify` then refreshes the whole table). Returns with the
    daemon frozen."""
    p = cycle.plan()
    assert p is not None
    instant = p[0]
    finished = daemon.count("group finished", instant)
    written: set[str] = set()
    daemon.freeze()
    deadline = time.monotonic() + STEP_BUDGET_S
    while time.monotonic() < deadline:
        looking = time.monotonic()
        daemon.poll_events()
        base = cycle.table.refresh(f".hoodie/.temp/{instant}/")
        for f in marker_files(base, instant):
            rel = f.relative_to(base).as_posix()
            if rel in written:
                continue
            if not cycle.table.exists(rel):
                return True
            written.add(rel)
        if daemon.count("group finished", instant) > finished:
            return False
        daemon.step(max(random.uniform(0.0005, 0.003), time.monotonic() - looking))
    return False


def _group_running(daemon: CrashableDaemon, cycle: Cycle) -> bool:
    p = cycle.plan()
    return p is not None and daemon.count("group started", p[0]) > daemon.count("group finished", p[0])


def kill_at(table: Path | WatchedTable, daemon: CrashableDaemon, plan: KillPlan, known: set[str], *,
            timeout: float = 150) -> tuple[KillState, bool]:
    """Wait for the plan's moment, freeze the daemon, record what it was doing, SIGKILL it. Returns the state and
    whether the anchor fired (False: the moment went by, or the timeout came first). The table is refreshed at
    every poll.

    On an object store three moments are shorter than a refresh of the whole table: a plan only requested (between
    its requested and inflight files), a file being written (its marker there, the file not yet, as an object
    appears whole) and the metadata deltacommit completed before the replacecommit. Those are approached from the
    daemon's log instead (``LOG_APPROACHED``): the daemon is frozen as soon as it logs the plan's metadata table
    updated (or a new plan saved) and the table then checked, or run in short slices from the start of a group
    (``step_into_writing``). A plan only requested is the shortest of them: the daemon logs the plan saved and
    claims it at once, in the same lock hold, so the freeze does not always come before the claim's writes."""
    watched = as_watched(table)
    cycle = Cycle(watched, daemon, known)
    start = time.monotonic()
    fire_at: float | None = start + plan.delay_s if plan.anchor in ("uniform", "before_plan") else None
    tight = plan.anchor in TIGHT_ANCHORS
    by_log = not watched.local and plan.anchor in LOG_APPROACHED
    tried: set[str] = set()  # plans saved (requested) or groups started (writing) already tried
    fired = False
    while True:
        now = time.monotonic()
        daemon.poll_events()
        if not by_log:
            watched.refresh()
        if daemon.proc.poll() is not None:
            raise AssertionError(f"daemon exited with {daemon.proc.returncode} before the kill; see {daemon.log_file}")
        if now - start > timeout:
            break
        if by_log:
            if _log_moment(daemon, cycle, plan.anchor, tried):
                fired = True
                break
            time.sleep(0.001)
            continue
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
            watched.refresh()
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
    state = classify(watched, daemon, known)
    daemon.kill(plan.mode)
    return state, fired


LOG_APPROACHED = {"requested": "clustering plan saved", "metadata_committed": "metadata table updated",
                  "writing": "group started"}
"""Anchors approached from the daemon's log on an object store (see ``kill_at``), and the event each waits for."""


def _log_moment(daemon: CrashableDaemon, cycle: Cycle, anchor: str, tried: set[str]) -> bool:
    """``kill_at``'s approach of an anchor of ``LOG_APPROACHED`` from the daemon's log (see there). True with the
    daemon frozen at the moment; False with it running."""
    if anchor != "writing":
        logged = [str(e.get("instant")) for e in daemon.events[cycle.first_event:]
                  if e.get("event") == LOG_APPROACHED[anchor] and str(e.get("instant")) not in cycle.known]
        if not logged or logged[-1] in tried:
            return False
        tried.add(logged[-1])
        daemon.freeze()
        cycle.table.refresh()
        if cycle.armed(anchor, 0):
            return True
        daemon.thaw()
        return False
    p = cycle.plan()
    if p is None or not _group_running(daemon, cycle):
        return False
    key = f"{p[0]}:{daemon.count('group started', p[0])}:{daemon.count('group finished', p[0])}"
    if key in tried:
        return False
    tried.add(key)
    if step_into_writing(daemon, cycle):
        return True
    daemon.thaw()
    return False


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
