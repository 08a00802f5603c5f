"""Rollback deletes only inside the table and only files of the instant that markers or a rollback plan name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.errors import MetadataDecodeError
from hudi_clusterd.formats.avro import encode_record
from hudi_clusterd.table.markers import marker_dir
from hudi_clusterd.table.rollback import rollback_pending
from tests.builders import TableGen, small_table


def _pending_commit(gen: TableGen) -> str:
    t = gen.next_time()
    store = gen.table.timeline_store
    store.create(Instant(t, Action.COMMIT, State.REQUESTED))
    store.create(Instant(t, Action.COMMIT, State.INFLIGHT), b"")
    return t


def _victims(tmp_path: Path, base: Path, t: str) -> list[Path]:
    """Files a hostile marker or plan names: outside the table, in ``.hoodie``, and of another instant."""
    name = f"ffff-0_0-1-2_{t}.parquet"
    paths = [tmp_path / "outside" / name, tmp_path / "t-evil" / "p1" / name, base / ".hoodie" / name,
             base / "p1" / "aaaa-0_0-1-2_20200101000000000.parquet"]
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"keep me")
    return paths


def test_rollback_timeline_server_markers_naming_outside_files_delete_nothing_outside(tmp_path: Path) -> None:
    gen = small_table(tmp_path, commits=1)
    t = _pending_commit(gen)
    victims = _victims(tmp_path, gen.base, t)
    own = gen.base / "p1" / f"own-0_0-1-2_{t}.parquet"
    own.write_bytes(b"written by the failed commit")
    folder = gen.base / marker_dir(t)
    folder.mkdir(parents=True)
    (folder / "MARKERS.type").write_text("TIMELINE_SERVER_BASED")
    (folder / "MARKERS0").write_text("\n".join([
        f"../outside/{victims[0].name}.marker.CREATE",
        f"../t-evil/p1/{victims[1].name}.marker.CREATE",
        f"p1/../../outside/{victims[0].name}.marker.CREATE",
        f".hoodie/{victims[2].name}.marker.CREATE",
        f"p1/{victims[3].name}.marker.CREATE",
        f"p1/{own.name}.marker.CREATE",
    ]))
    before = sorted(p.name for p in (gen.base / ".hoodie").iterdir())
    with pytest.raises(MetadataDecodeError, match=f"MARKERS0: marker .* is not a path inside the table "
                                                  rf"\(.*\); the markers of instant {t} are refused"):
        rollback_pending(gen.table, t, delete_requested=True)
    assert own.exists()  # the instant is refused as a whole: nothing deleted, nothing written
    assert all(v.read_bytes() == b"keep me" for v in victims)
    assert sorted(p.name for p in (gen.base / ".hoodie").iterdir()) == before


def _resumable_rollback(gen: TableGen, t: str, files: list[str]) -> str:
    plan = {"instantToRollback": {"commitTime": t, "action": "commit"},
            "RollbackRequests": [{"partitionPath": "p1", "fileId": "x", "latestBaseInstant": t,
                                  "filesToBeDeleted": files, "logBlocksToBeDeleted": None}],
            "version": 1}
    r = gen.next_time()  # an interrupted rollback: requested plan only
    gen.table.timeline_store.create(Instant(r, Action.ROLLBACK, State.REQUESTED),
                                    encode_record("HoodieRollbackPlan", plan))
    return r


def test_rollback_resumed_plan_deletes_only_files_of_the_instant(tmp_path: Path) -> None:
    gen = small_table(tmp_path, commits=1)
    t = _pending_commit(gen)
    victims = _victims(tmp_path, gen.base, t)[2:]  # in .hoodie, and another instant's file
    own = gen.base / "p1" / f"own-0_0-1-2_{t}.parquet"
    own.write_bytes(b"written by the failed commit")
    r = _resumable_rollback(gen, t, [f"file:{v}" for v in victims] + [f"file:{own}"])
    result = rollback_pending(gen.table, t, delete_requested=True)
    assert result is not None and result.resumed and result.rollback_time == r
    assert result.deleted_files == (f"p1/{own.name}",)
    assert all(v.read_bytes() == b"keep me" for v in victims)


@pytest.mark.parametrize("where", ["outside", "sibling", "dotdot", "plain-absolute"])
def test_rollback_resumed_plan_naming_outside_files_is_refused_and_deletes_nothing(tmp_path: Path,
                                                                                  where: str) -> None:
    gen = small_table(tmp_path, commits=1)
    t = _pending_commit(gen)
    victims = _victims(tmp_path, gen.base, t)
    own = gen.base / "p1" / f"own-0_0-1-2_{t}.parquet"
    own.write_bytes(b"written by the failed commit")
    bad = {"outside": f"file:{victims[0]}", "sibling": f"file:{victims[1]}",
           "dotdot": f"file:{gen.base}/p1/../../outside/{victims[0].name}", "plain-absolute": str(victims[0])}[where]
    r = _resumable_rollback(gen, t, [f"file:{own}", bad])
    before = sorted(p.name for p in (gen.base / ".hoodie").iterdir())
    with pytest.raises(MetadataDecodeError, match=rf"{r}\.rollback\.requested: filesToBeDeleted: path "
                                                  rf"'{re.escape(bad)}' is outside the table's storage"):
        rollback_pending(gen.table, t, delete_requested=True)
    assert own.exists() and all(v.read_bytes() == b"keep me" for v in victims)
    assert sorted(p.name for p in (gen.base / ".hoodie").iterdir()) == before
