"""CPU time of this process tree, from /proc: shared by the benchmarks (the run's steadier figure on a busy machine)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ProcStat:
    parent: int
    command: str
    cpu_ticks: int  # own user + system time


def proc_table() -> dict[int, ProcStat]:
    """Every process's parent, command name and CPU ticks, from ``/proc/<pid>/stat``."""
    out: dict[int, ProcStat] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        out[int(entry.name)] = ProcStat(int(fields[1]), comm, int(fields[11]) + int(fields[12]))
    return out


class CpuMeter:
    """CPU seconds used by this process and its descendants (the Spark JVM, its Python workers), via /proc.

    A background thread samples every descendant's own user+system time; a process's last sample stands
    after it exits, so totals never go down and nothing is counted twice. Far steadier than wall time
    when other work shares the machine. `seconds()` is None where /proc is unavailable.
    """

    def __init__(self, interval: float = 0.25) -> None:
        self._last: dict[int, int] = {}  # pid -> own utime + stime ticks at its latest sample
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._available = Path("/proc/self/stat").exists()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        if self._available:
            self._thread.start()

    def _sample(self) -> None:
        table = proc_table()
        parents = {pid: p.parent for pid, p in table.items()}
        own = {pid: p.cpu_ticks for pid, p in table.items()}
        me = os.getpid()
        with self._lock:
            for pid, ticks in own.items():
                ancestor = pid
                while ancestor > 1 and ancestor != me:
                    ancestor = parents.get(ancestor, 1)
                if ancestor == me:
                    self._last[pid] = max(ticks, self._last.get(pid, 0))

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self._sample()

    def seconds(self) -> float | None:
        """Total so far (takes a fresh sample first)."""
        if not self._available:
            return None
        self._sample()
        with self._lock:
            return sum(self._last.values()) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self._stop.set()
