"""Fetch what the interop tests need to run real Apache Hudi: ``python -m tests.harness.hudi_setup [--check]``.

Creates, under ``<repo>/.cache/hudi/`` (or ``$CLUSTERD_HUDI_CACHE``):

- ``venv-pyspark-<version>/``: a virtual environment with the pinned PySpark, made with the Python running this
  script (one per PySpark version the setups pin; today every setup shares one);
- ``jars/<artifact>-<version>.jar``: each setup's Hudi Spark bundle, copied from Maven Central by ``mvn`` (every
  setup of ``hudi_versions.ALL_SETUPS``, also those only single tests run);
- ``runtimes/<name>/``: the jars a worker adds to reach tables on S3 (``HudiSetup.s3_runtimes``: Hadoop's S3A
  connector, and Hudi 0.15.0's DynamoDB lock runtime), resolved by ``mvn`` from a throw-away pom written to a
  temporary folder (``maven-dependency-plugin:build-classpath``) and copied here, with a ``runtime.txt`` listing them.

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
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.harness.hudi_versions import ALL_SETUPS, HudiSetup, MavenArtifact, MavenRuntime

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_ENV = "CLUSTERD_HUDI_CACHE"
SETUP_COMMAND = "python -m tests.harness.hudi_setup"
_STAMP = ".clusterd-hudi-stamp"
_RUNTIME_LIST = "runtime.txt"
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
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


def runtime_dir(runtime: MavenRuntime, root: Path | None = None) -> Path:
    """Where the cache keeps ``runtime``'s jars."""
    return (root or cache_root()) / "runtimes" / runtime.name


def runtime_jars(runtime: MavenRuntime, root: Path | None = None) -> list[Path] | None:
    """``runtime``'s jars in the cache, in Maven's class-path order; None unless all of them are there."""
    folder = runtime_dir(runtime, root)
    try:
        names = [n for n in (folder / _RUNTIME_LIST).read_text(encoding="utf-8").splitlines() if n.strip()]
    except OSError:
        return None
    jars = [folder / name for name in names]
    return jars if jars and all(j.is_file() and j.stat().st_size > 0 for j in jars) else None


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


def missing_s3_for(setup: HudiSetup, root: Path | None = None) -> list[Missing]:
    """What ``setup`` still needs in the cache to run on S3, beyond :func:`missing_for` (empty when ready)."""
    return [
        Missing("runtime", f"{runtime.purpose or runtime.name}: {', '.join(_coordinates(runtime))} at "
                           f"{runtime_dir(runtime, root)}")
        for runtime in setup.s3_runtimes if runtime_jars(runtime, root) is None
    ]


def _coordinates(runtime: MavenRuntime) -> list[str]:
    return [d.artifact.coordinates for d in runtime.dependencies]


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


def _runtime_pom(runtime: MavenRuntime) -> str:
    """A pom whose dependencies are ``runtime``'s (nothing is built from it: Maven only resolves them)."""
    deps = []
    for dep in runtime.dependencies:
        exclusions = "".join(
            f"<exclusion><groupId>{group}</groupId><artifactId>{artifact}</artifactId></exclusion>"
            for group, _, artifact in (pattern.partition(":") for pattern in dep.exclusions)
        )
        if not dep.transitive and not exclusions:
            exclusions = "<exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion>"
        a = dep.artifact
        deps.append(f"<dependency><groupId>{a.group_id}</groupId><artifactId>{a.artifact_id}</artifactId>"
                    f"<version>{a.version}</version><exclusions>{exclusions}</exclusions></dependency>")
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            f"<groupId>local.clusterd.tests</groupId><artifactId>{runtime.name}</artifactId><version>1</version>"
            f"<dependencies>{''.join(deps)}</dependencies></project>")


def resolve_runtime(runtime: MavenRuntime, root: Path) -> None:
    """Resolve ``runtime`` with ``mvn`` (a throw-away pom in a temporary folder, ``build-classpath``) and copy its
    jars into the cache, unless they are all there. The folder appears whole or not at all."""
    if runtime_jars(runtime, root) is not None:
        _say(f"runtime {runtime.name}: present ({runtime_dir(runtime, root)})")
        return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SetupError(f"mvn not found on PATH: it is needed to resolve {', '.join(_coordinates(runtime))} "
                         "(install Maven)")
    started = time.monotonic()
    _say(f"runtime {runtime.name}: mvn build-classpath of {', '.join(_coordinates(runtime))}")
    dest = runtime_dir(runtime, root)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{runtime.name}-", dir=dest.parent) as tmp:
        work = Path(tmp)
        (work / "pom.xml").write_text(_runtime_pom(runtime), encoding="utf-8")
        listing = work / "classpath.txt"
        cmd = [mvn, "-B", "-q", "-Dstyle.color=never", f"{_DEPENDENCY_PLUGIN}:build-classpath",
               f"-Dmdep.outputFile={listing}", f"-Dmdep.pathSeparator={os.pathsep}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=work)
        if proc.returncode != 0 or not listing.is_file():
            detail = _first_error(proc.stdout + proc.stderr)
            raise SetupError(f"Maven could not resolve {', '.join(_coordinates(runtime))}"
                             + (f": {detail}" if detail else ""))
        sources = [Path(p) for p in listing.read_text(encoding="utf-8").strip().split(os.pathsep) if p]
        if not sources:
            raise SetupError(f"Maven resolved no jar for {', '.join(_coordinates(runtime))}")
        staged = work / "jars"
        staged.mkdir()
        for source in sources:
            if (staged / source.name).exists():
                raise SetupError(f"two jars of {runtime.name} are both named {source.name}")
            shutil.copy2(source, staged / source.name)
        (staged / _RUNTIME_LIST).write_text("".join(f"{s.name}\n" for s in sources), encoding="utf-8")
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(staged, dest)
    size_mb = sum(j.stat().st_size for j in runtime_jars(runtime, root) or []) / 1e6
    _say(f"runtime {runtime.name}: ready ({len(sources)} jars, {size_mb:.0f} MB) in "
         f"{time.monotonic() - started:.0f} s")


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
        missing = missing_for(setup, root) + missing_s3_for(setup, root)
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
    for runtime in sorted({r for s in chosen for r in s.s3_runtimes}, key=lambda r: r.name):
        resolve_runtime(runtime, root)


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
