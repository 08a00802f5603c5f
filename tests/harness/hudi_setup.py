"""Fetch what the interop tests need to run real Apache Hudi: ``python -m tests.harness.hudi_setup [--check]``.

Creates, under ``<repo>/.cache/hudi/`` (or ``$CLUSTERD_HUDI_CACHE``):

- ``venv-pyspark-<version>/``: a virtual environment with the pinned PySpark, made with the Python running this
  script (one per PySpark version the setups pin; today every setup shares one);
- ``jars/<artifact>-<version>.jar``: each setup's Hudi Spark bundle, copied from Maven Central by ``mvn`` (every
  setup of ``hudi_versions.ALL_SETUPS``, also those only single tests run).

Idempotent: finished steps are recognised (a stamp in the venv, the jar files) and skipped. ``--check`` only
reports what is present or missing. Exit status 0 when everything is in place, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.harness.hudi_versions import ALL_SETUPS, HudiSetup, MavenArtifact

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_ENV = "CLUSTERD_HUDI_CACHE"
SETUP_COMMAND = "python -m tests.harness.hudi_setup"
_STAMP = ".clusterd-hudi-stamp"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class SetupError(Exception):
    """A step that could not be done; the message is the one line to print."""


def cache_root() -> Path:
    """``$CLUSTERD_HUDI_CACHE`` if set, else ``<repo>/.cache/hudi``."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser().resolve() if configured else REPO_ROOT / ".cache" / "hudi"


def jars_dir(root: Path | None = None) -> Path:
    return (root or cache_root()) / "jars"


def jar_path(artifact: MavenArtifact, root: Path | None = None) -> Path:
    """Where the cache keeps ``artifact``'s jar."""
    return jars_dir(root) / artifact.jar_name


def venv_dir(pyspark_version: str, root: Path | None = None) -> Path:
    return (root or cache_root()) / f"venv-pyspark-{pyspark_version}"


def venv_python(pyspark_version: str, root: Path | None = None) -> Path:
    """The interpreter of the venv that has ``pyspark==pyspark_version``."""
    return venv_dir(pyspark_version, root) / "bin" / "python"


def venv_ready(pyspark_version: str, root: Path | None = None) -> bool:
    """True once the venv was fully set up (its stamp names the PySpark version)."""
    stamp = venv_dir(pyspark_version, root) / _STAMP
    try:
        stamped = stamp.read_text(encoding="utf-8").strip()
    except OSError:
        return False
    return stamped == f"pyspark=={pyspark_version}" and venv_python(pyspark_version, root).exists()


def jar_ready(artifact: MavenArtifact, root: Path | None = None) -> bool:
    path = jar_path(artifact, root)
    return path.is_file() and path.stat().st_size > 0


@dataclass(frozen=True, slots=True)
class Missing:
    """One thing the cache lacks, and what provides it."""

    what: str
    detail: str


def missing_for(setup: HudiSetup, root: Path | None = None) -> list[Missing]:
    """What ``setup`` still needs in the cache (empty when it is ready)."""
    missing: list[Missing] = []
    if not venv_ready(setup.pyspark_version, root):
        missing.append(
            Missing("venv", f"venv with pyspark=={setup.pyspark_version} at {venv_dir(setup.pyspark_version, root)}")
        )
    if not jar_ready(setup.bundle, root):
        missing.append(Missing("jar", f"jar {setup.bundle.coordinates} at {jar_path(setup.bundle, root)}"))
    return missing


def _say(message: str) -> None:
    print(f"[hudi-setup] {message}", flush=True)


def make_venv(pyspark_version: str, root: Path) -> None:
    """Create the venv with ``pyspark==pyspark_version`` under ``root`` unless its stamp says it is done."""
    if venv_ready(pyspark_version, root):
        _say(f"venv pyspark=={pyspark_version}: present ({venv_dir(pyspark_version, root)})")
        return
    target = venv_dir(pyspark_version, root)
    if target.exists():
        _say(f"venv pyspark=={pyspark_version}: incomplete, recreating {target}")
        shutil.rmtree(target)
    started = time.monotonic()
    _say(f"venv pyspark=={pyspark_version}: creating {target} with {sys.executable}")
    _run([sys.executable, "-m", "venv", str(target)], f"creating the venv {target}")
    python = str(venv_python(pyspark_version, root))
    _say(f"venv pyspark=={pyspark_version}: pip install pyspark=={pyspark_version} (a few minutes the first time)")
    _run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", f"pyspark=={pyspark_version}"],
        f"pip install pyspark=={pyspark_version} into {target}",
    )
    (target / _STAMP).write_text(f"pyspark=={pyspark_version}\n", encoding="utf-8")
    _say(f"venv pyspark=={pyspark_version}: ready in {time.monotonic() - started:.0f} s")


def copy_jar(artifact: MavenArtifact, root: Path) -> None:
    """Copy ``artifact``'s jar from Maven Central (through ``mvn``) into the cache unless it is there."""
    dest = jar_path(artifact, root)
    if jar_ready(artifact, root):
        _say(f"jar {artifact.coordinates}: present ({dest})")
        return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SetupError(f"mvn not found on PATH: it is needed to fetch {artifact.coordinates} (install Maven)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    _say(f"jar {artifact.coordinates}: mvn dependency:copy into {dest.parent}")
    partial = dest.parent / ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    try:
        cmd = [
            mvn,
            "-B",
            "-q",
            "-Dstyle.color=never",
            "dependency:copy",
            f"-Dartifact={artifact.coordinates}:jar",
            f"-DoutputDirectory={partial}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=partial)
        fetched = partial / artifact.jar_name
        if proc.returncode != 0 or not fetched.is_file():
            detail = _first_error(proc.stdout + proc.stderr)
            raise SetupError(f"Maven could not provide {artifact.coordinates}" + (f": {detail}" if detail else ""))
        os.replace(fetched, dest)  # the jar appears whole or not at all
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    size_mb = dest.stat().st_size / 1e6
    _say(f"jar {artifact.coordinates}: ready ({size_mb:.0f} MB) in {time.monotonic() - started:.0f} s")


def _first_error(output: str) -> str:
    """The gist of Maven's first ``[ERROR]`` line (colour codes and the goal preamble removed)."""
    for line in _ANSI.sub("", output).splitlines():
        _, marker, text = line.partition("[ERROR]")
        text = text.strip()
        if marker and text:
            gist = re.search(r"on project [^:]+: (.*)", text)
            return (gist.group(1) if gist else text)[:300]
    return ""


def _run(cmd: Sequence[str], doing: str) -> None:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SetupError(f"{doing} failed (exit {proc.returncode}): {tail[0][:300]}")


def check(setups: Iterable[HudiSetup], root: Path) -> bool:
    """Print what is present and missing; True when every setup is ready."""
    ready = True
    for setup in setups:
        missing = missing_for(setup, root)
        if missing:
            ready = False
            for item in missing:
                _say(f"{setup.name}: MISSING {item.detail}")
        else:
            _say(f"{setup.name}: ready (hudi {setup.hudi_version}, pyspark {setup.pyspark_version})")
    if not ready:
        _say(f"run `{SETUP_COMMAND}` to fetch what is missing")
    return ready


def ensure(setups: Iterable[HudiSetup], root: Path) -> None:
    """Create the venvs and copy the jars the setups need, skipping what is already there."""
    chosen = list(setups)
    root.mkdir(parents=True, exist_ok=True)
    for version in sorted({s.pyspark_version for s in chosen}):
        make_venv(version, root)
    for artifact in sorted({s.bundle for s in chosen}, key=lambda a: a.coordinates):
        copy_jar(artifact, root)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=SETUP_COMMAND, description="Fetch the Hudi bundles and the PySpark venv the interop tests run."
    )
    parser.add_argument("--check", action="store_true", help="report what is present or missing; fetch nothing")
    parser.add_argument(
        "--setup",
        action="append",
        choices=[s.name for s in ALL_SETUPS],
        help="only this setup (repeatable; default: all)",
    )
    parser.add_argument("--optional", action="store_true",
                        help="on failure (no mvn, no network) say so and exit 0: the Hudi tests then skip, naming "
                             "what is missing (CI runs without it, so a missing jar fails there)")
    args = parser.parse_args(argv)
    chosen = [s for s in ALL_SETUPS if not args.setup or s.name in args.setup]
    root = cache_root()
    _say(f"cache: {root}")
    if args.check:
        return 0 if check(chosen, root) else 1
    try:
        ensure(chosen, root)
    except SetupError as exc:
        print(f"hudi_setup: error: {exc}", file=sys.stderr, flush=True)
        if args.optional:
            print("hudi_setup: the Apache Hudi tests will skip", file=sys.stderr, flush=True)
            return 0
        return 1
    return 0 if check(chosen, root) or args.optional else 1


if __name__ == "__main__":
    sys.exit(main())
