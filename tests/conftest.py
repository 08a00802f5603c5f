"""Test-wide fixtures: the ../shared folder, golden Hudi tables, a hermetic hudi-rs configuration, and the session's
SparkSession (used by the integration and the Apache Hudi tests). Spark driver JVMs started from here on use the
class-data archive of ``tests/harness/jvm_archive.py`` when it was made."""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

from tests.harness.jvm_archive import use_archive
from tests.support import require_shared

use_archive(os.environ)


def _unzipped(archives: list[Path], out: Path) -> Path:
    """``archives`` extracted into ``out``, without the macOS side files some of them carry."""
    for archive in archives:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(out)
    shutil.rmtree(out / "__MACOSX", ignore_errors=True)
    for junk in list(out.rglob("._*")) + list(out.rglob(".DS_Store")):
        junk.unlink()
    return out


@pytest.fixture(scope="session")
def golden_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every golden copy-on-write table (versions 6, 8 and 9), unzipped once per session (read-only use: copy
    before writing)."""
    src = require_shared("reference", "hudi-tables", "cow")
    return _unzipped(sorted(src.glob("v*.zip")), tmp_path_factory.mktemp("golden"))


@pytest.fixture(scope="session")
def golden_mor_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every golden merge-on-read table (version 6 with parquet log blocks, version 9 with Avro ones), unzipped
    once per session (read-only use: copy before writing)."""
    src = require_shared("reference", "hudi-tables", "mor")
    return _unzipped(sorted(src.glob("*/v*.zip")), tmp_path_factory.mktemp("golden-mor"))


@pytest.fixture
def golden_copy(golden_tables: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Factory: a private, writable copy of one golden table; returns its base path."""

    def _copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(golden_tables / name, dest)
        return dest

    return _copy


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] SparkSession (the daemon's PySpark) for the whole test session."""
    from hudi_clusterd.engine.session import get_or_create_session

    session = get_or_create_session(
        "local[2]",
        app_name="hudi-clusterd-tests",
        conf={"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2"},
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(autouse=True, scope="session")
def _session_log_stream() -> TextIO:
    """Library code logs through structlog to the stderr of the session's start, never to stdout."""
    from hudi_clusterd.runtime.logging import configure_logging

    configure_logging("INFO", "console", sys.stderr)
    return sys.stderr


@pytest.fixture(autouse=True)
def _logging_restored(_session_log_stream: TextIO) -> Iterator[None]:
    """A test that runs a command (which configures logging for itself) leaves the session's setup behind it."""
    yield
    from hudi_clusterd.runtime.logging import configure_logging

    configure_logging("INFO", "console", _session_log_stream)


@pytest.fixture(autouse=True)
def _hermetic_hudi_rs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """hudi-rs reads $HUDI_CONF_DIR/hudi-defaults.conf; point it at an empty folder."""
    monkeypatch.setenv("HUDI_CONF_DIR", str(tmp_path_factory.mktemp("hudi-conf")))


# --- object-store servers (tests/harness/servers.py): each started once per session, on first use -------------


def _serve(start: str, root: Path, gaps: list[str], what: str) -> Iterator[Any]:
    """The server ``tests.harness.servers.<start>`` starts under ``root``, until the session ends; skip (fail
    under ``CLUSTERD_REQUIRE_HUDI=1``) naming ``gaps`` when something it needs is missing."""
    from tests.harness import servers

    if gaps:
        message = f"{what} cannot start; missing: {', '.join(gaps)}"
        if os.environ.get("CLUSTERD_REQUIRE_HUDI") == "1":
            pytest.fail(message)
        pytest.skip(message)
    server, proc = getattr(servers, start)(root)
    try:
        yield server
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def _servers_root() -> Iterator[Path]:
    """The servers' data, under a short path: SeaweedFS's Unix sockets live there."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="clusterd-srv-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_server(_servers_root: Path) -> Iterator[Any]:
    """SeaweedFS serving S3 on 127.0.0.1 (bucket ``hudi``): a ``tests.harness.servers.S3Server``."""
    from tests.harness.servers import missing

    yield from _serve("start_seaweedfs", _servers_root, missing(), "the S3 test server")


@pytest.fixture(scope="session")
def dynamodb_server(_servers_root: Path) -> Iterator[Any]:
    """moto's server, for DynamoDB, on 127.0.0.1: a ``tests.harness.servers.DynamoServer``."""
    from tests.harness.servers import missing

    yield from _serve("start_moto", _servers_root, missing(), "the DynamoDB test server")


@pytest.fixture(scope="session")
def zookeeper_server(_servers_root: Path) -> Iterator[Any]:
    """ZooKeeper 3.8.4 on 127.0.0.1: a ``tests.harness.servers.ZooKeeperServer``."""
    from tests.harness.servers import missing

    yield from _serve("start_zookeeper", _servers_root, missing(), "the ZooKeeper test server")


@pytest.fixture(scope="session")
def azurite_server(_servers_root: Path) -> Iterator[Any]:
    """Azurite serving Azure Blob Storage on 127.0.0.1 (container ``hudi``): a
    ``tests.harness.servers.AzureServer``."""
    from tests.harness.servers import missing_azurite

    yield from _serve("start_azurite", _servers_root, missing_azurite(), "the Azure emulator")
