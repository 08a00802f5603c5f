"""The daemon (``run --once``) beside a table whose timeline names a hostile path (``../x``, ``/etc/x``,
``a\\..\\b``, ``s3://other-bucket/x``, NUL) in a clustering plan, a commit's write stats, a rollback plan or a
marker of a clustering left inflight: that table's tick fails with one log line naming the file and the path,
nothing beside it changes, and the healthy table beside it is clustered."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from hudi_clusterd.ops.events import NoObserver
from hudi_clusterd.runtime.reload import SettingsHolder
from hudi_clusterd.runtime.service import Daemon
from hudi_clusterd.settings import settings_from_properties
from tests.builders import TableGen
from tests.harness.fault_storage import ArrowGroupRunner
from tests.harness.hostile_paths import CANARY, HOSTILE_PATHS, PLACES, plant


def _files(root: Path, leave_out: tuple[Path, ...]) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
            if p.is_file() and not any(t in p.parents for t in leave_out)}


def _table(base: Path) -> TableGen:
    gen = TableGen(base)
    for i in range(4):
        gen.commit({"p1": [float(i), i + 0.5], "p2": [float(i)]})
    return gen


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", sorted(HOSTILE_PATHS))
def test_the_daemon_refuses_a_table_naming_a_hostile_path_and_serves_the_other(tmp_path: Path, place: str,
                                                                              name: str) -> None:
    # Given a table naming a hostile path, the canary x beside it, and a healthy table
    path = HOSTILE_PATHS[name]
    hostile, healthy = _table(tmp_path / "t"), _table(tmp_path / "healthy")
    (tmp_path / CANARY).write_bytes(b"canary")
    props = tmp_path / "cluster.properties"
    props.write_text("hoodie.clustering.plan.strategy.sort.columns=x\n")
    planted = plant(hostile, place, path, str(props))
    before = _files(tmp_path, (hostile.base, healthy.base))
    data = {k: v for k, v in _files(hostile.base, ()).items() if k.endswith(".parquet")}
    settings = settings_from_properties({
        "clusterd.tables": "a,b", "clusterd.metrics.address": "off", "hoodie.clustering.async.max.commits": "4",
        "hoodie.clustering.plan.strategy.sort.columns": "x",
        "clusterd.table.a.base.path": str(hostile.base), "clusterd.table.b.base.path": str(healthy.base)},
        source="test")[0]
    daemon = Daemon(SettingsHolder(settings), ArrowGroupRunner(), NoObserver())
    # When the daemon ticks once over both
    with capture_logs() as logs:
        failed = daemon.run_once()
    # Then the hostile table's tick failed with one line naming the file and the path
    assert failed == ["a"]
    errors = [e for e in logs if e.get("log_level") == "error"]
    assert [e["event"] for e in errors] == ["tick failed"], errors
    line = errors[0]["error"]
    assert "\n" not in line and planted.file in line and repr(path)[1:-1] in line, line
    # And nothing beside the tables, nor a data file of the hostile one, changed; the healthy one was clustered
    assert _files(tmp_path, (hostile.base, healthy.base)) == before
    assert {k: v for k, v in _files(hostile.base, ()).items() if k.endswith(".parquet")} == data
    assert list(healthy.base.glob(".hoodie/*.replacecommit"))
