"""Hadoop's S3A connector for the Spark side: its jars, where the set-up puts them, and the session's settings.

PySpark ships Hadoop's client (``hadoop-client-api-<version>.jar`` in ``pyspark/jars``) without the S3A
connector. The connector must match that Hadoop version exactly: `S3A_ARTIFACTS` lists, per Hadoop version,
``hadoop-aws`` and the AWS SDK v2 bundle (and the analytics accelerator) that its pom declares. The set-up command
(`SETUP_COMMAND`, this module run as a program) copies them from Maven Central with ``mvn dependency:copy`` into
`jars_dir` (``$CLUSTERD_S3A_JARS``, else ``~/.cache/hudi-clusterd/s3a-<hadoop version>``); a session set to read
through S3A puts them on its class path (`s3a_session_conf`), and a jar missing there is a one-line `ConfigError`
naming the coordinates and the command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from hudi_clusterd.errors import ConfigError
from hudi_clusterd.storage.object_config import S3_SCHEME_KEY, S3A_FILE_SYSTEM

SETUP_COMMAND = "python -m hudi_clusterd.engine.s3a"
JARS_ENV = "CLUSTERD_S3A_JARS"
S3A_ARTIFACTS: Mapping[str, tuple[str, ...]] = {
    "3.5.0": ("org.apache.hadoop:hadoop-aws:3.5.0", "software.amazon.awssdk:bundle:2.35.4",
              "software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1"),
}
"""Per Hadoop version: ``hadoop-aws`` and the compile-scope dependencies its pom declares (the AWS SDK v2 bundle,
the S3 analytics accelerator); Hadoop itself is PySpark's."""
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
_HADOOP_JAR = re.compile(r"hadoop-client-api-(\d+\.\d+\.\d+)\.jar")


def hadoop_version() -> str:
    """The Hadoop version inside the installed PySpark (from its ``hadoop-client-api`` jar)."""
    import pyspark

    folder = Path(pyspark.__file__).parent / "jars"
    for jar in sorted(folder.glob("hadoop-client-api-*.jar")):
        match = _HADOOP_JAR.fullmatch(jar.name)
        if match:
            return match.group(1)
    raise ConfigError(f"no hadoop-client-api jar in {folder}: cannot tell which S3A connector matches this PySpark")


def artifacts(version: str) -> tuple[str, ...]:
    """The Maven coordinates of the S3A connector for Hadoop ``version``; `ConfigError` for a version not known."""
    found = S3A_ARTIFACTS.get(version)
    if found is None:
        raise ConfigError(f"PySpark's Hadoop is {version}; the S3A reader knows the connector of Hadoop "
                          f"{', '.join(sorted(S3A_ARTIFACTS))} only: use clusterd.spark.object.store.reader=python")
    return found


def jar_name(coordinates: str) -> str:
    _, artifact, version = coordinates.split(":")
    return f"{artifact}-{version}.jar"


def jars_dir(version: str) -> Path:
    """Where the set-up puts the connector of Hadoop ``version`` (``$CLUSTERD_S3A_JARS`` when set)."""
    configured = os.environ.get(JARS_ENV)
    if configured:
        return Path(configured).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "hudi-clusterd" / f"s3a-{version}"


def s3a_jars() -> list[Path]:
    """The connector's jars for PySpark's Hadoop, in `jars_dir`; `ConfigError` naming the first one missing, its
    coordinates and the set-up command."""
    version = hadoop_version()
    folder = jars_dir(version)
    jars = []
    for coordinates in artifacts(version):
        path = folder / jar_name(coordinates)
        if not path.is_file() or path.stat().st_size == 0:
            raise ConfigError(f"Spark's S3A reader needs {coordinates} at {path}: run `{SETUP_COMMAND}` (or use "
                              "clusterd.spark.object.store.reader=python)")
        jars.append(path)
    return jars


def s3a_session_conf(conf: Mapping[str, str], master: str = "local[*]") -> dict[str, str]:
    """``conf`` with the connector's jars on the session's class path and ``s3://`` served by S3A too (a value
    the user set for ``spark.hadoop.fs.s3.impl`` wins). A local master runs its tasks in the driver's JVM: the
    jars join ``spark.driver.extraClassPath`` there (``spark.jars`` would copy the 700 MB of them into the
    session's work folder at every start); a cluster's executors get them through ``spark.jars``."""
    out = dict(conf)
    jars = [str(p) for p in s3a_jars()]
    key, sep = ("spark.driver.extraClassPath", os.pathsep) if master.startswith("local") else ("spark.jars", ",")
    given = [j for j in out.get(key, "").split(sep) if j.strip()]
    out[key] = sep.join([*given, *(j for j in jars if j not in given)])
    out.setdefault(S3_SCHEME_KEY, S3A_FILE_SYSTEM)
    return out


def fetch(version: str, dest: Path) -> list[Path]:
    """Copy the connector of Hadoop ``version`` from Maven Central (``mvn dependency:copy``) into ``dest``,
    skipping jars already there; each jar appears whole or not at all."""
    mvn = shutil.which("mvn")
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for coordinates in artifacts(version):
        path = dest / jar_name(coordinates)
        out.append(path)
        if path.is_file() and path.stat().st_size > 0:
            continue
        if mvn is None:
            raise ConfigError(f"mvn not found on PATH: it copies {coordinates} from Maven Central")
        with tempfile.TemporaryDirectory(prefix=".s3a-", dir=dest) as tmp:
            done = subprocess.run([mvn, "-B", "-q", f"{_DEPENDENCY_PLUGIN}:copy", f"-Dartifact={coordinates}:jar",
                                   f"-DoutputDirectory={tmp}"], capture_output=True, text=True, check=False)
            fetched = Path(tmp) / path.name
            if done.returncode != 0 or not fetched.is_file():
                tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
                raise ConfigError(f"mvn could not copy {coordinates}: {tail[0][:300]}")
            os.replace(fetched, path)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hudi_clusterd.engine.s3a [--check]``: fetch (or check) the S3A connector of PySpark's Hadoop."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    try:
        version = hadoop_version()
        if check:
            jars = s3a_jars()
        else:
            jars = fetch(version, jars_dir(version))
    except ConfigError as e:
        sys.stderr.write(f"s3a: error: {e}\n")
        return 1
    sys.stdout.write(f"s3a: Hadoop {version} S3A connector ready in {jars[0].parent} "
                     f"({', '.join(p.name for p in jars)})\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
