"""Start and observe a real ``hudi-clusterd run`` process for tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families


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
    """``python -m hudi_clusterd run --props FILE`` with its stderr (JSON log lines) captured to a file."""

    def __init__(self, props: Path, log_file: Path, *extra: str) -> None:
        self.props = props
        self.log_file = log_file
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
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


def write_props(path: Path, base: Path, port: int, **policy: str) -> None:
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


def clusterd(*args: str) -> str:
    """Run ``hudi-clusterd ARGS`` in its own process (``execute``/``cluster`` on a local[1] Spark); returns its
    stdout, fails with its stderr."""
    cmd = [sys.executable, "-m", "hudi_clusterd", *args]
    if args[0] in ("execute", "cluster"):
        cmd += ["--spark-master", "local[1]", "--spark-conf", "spark.sql.shuffle.partitions=2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def replacecommits(base: Path) -> dict[str, dict[str, Any]]:
    """Every completed replacecommit of the table: instant time -> its commit JSON."""
    return {p.name.split(".")[0]: json.loads(p.read_text()) for p in (base / ".hoodie").glob("*.replacecommit")}
