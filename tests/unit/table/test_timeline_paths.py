"""Paths read from the timeline never lead a write or a delete out of the table: plan slices, markers (see
``test_rollback_hostile``), commit write stats and replaced partitions are checked when decoded, and an instant
naming any other path is refused with an error naming it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.cli import main
from hudi_clusterd.domain.commit import CommitMetadata
from hudi_clusterd.domain.file_group import check_relative_path
from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import RequestedReplaceMetadata
from hudi_clusterd.errors import MetadataDecodeError
from hudi_clusterd.formats.avro import _requested_replace_writer, encode_ocf
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.ops.snapshot import TableSnapshot
from tests.builders import TableGen, make_policy


@pytest.mark.parametrize("path", ["../x", "p1/../../x", "/abs/p1", "/etc/x", "p1//x", "./p1", ".hoodie/x", "p1/..",
                                  "a\\..\\b", "back\\slash", "s3://other-bucket/x", "file:/etc/x", "C:/x",
                                  "p1/\x00x", "p1/tab\tx"])
def test_check_relative_path_refuses_what_leaves_the_table(path: str) -> None:
    with pytest.raises(ValueError, match="is not a path inside the table"):
        check_relative_path(path, "partition")


@pytest.mark.parametrize("path", ["", "p1", "year=2024/month=01", "a b/c:d", "k=12:30", "p1/x_0-1-2_1.parquet"])
def test_check_relative_path_accepts_table_paths(path: str) -> None:
    assert check_relative_path(path, "partition") == path


def _plan_record(gen: TableGen) -> dict[str, Any]:
    plan = schedule(gen.table, make_policy(), force=True, dry_run=True).plan
    assert plan is not None
    return RequestedReplaceMetadata.for_plan(plan).to_avro()


def _save(gen: TableGen, record: dict[str, Any]) -> str:
    text, parsed = _requested_replace_writer()
    t = gen.next_time()
    requested = Instant(t, Action.REPLACE_COMMIT, State.REQUESTED)
    gen.table.timeline_store.create(requested, encode_ocf(text, parsed, record))
    return t


def _table(tmp_path: Path) -> TableGen:
    gen = TableGen(tmp_path / "t")
    for i in range(3):
        gen.commit({"p1": [float(i)]})
    return gen


def test_a_plan_whose_slice_partition_escapes_is_refused_and_can_be_purged(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # Given a requested plan whose slices name partition ../../escape (a plan that wrote above the table)
    gen = _table(tmp_path)
    record = _plan_record(gen)
    for s in record["clusteringPlan"]["inputGroups"][0]["slices"]:
        s["partitionPath"] = "../../escape"
    t = _save(gen, record)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    # Then reading the pending plans refuses it, naming the field and the instant's file
    with pytest.raises(MetadataDecodeError, match=rf"{t}\.replacecommit\.requested: .*'\.\./\.\./escape' is not a "
                                                  "path inside the table"):
        TableSnapshot.load(gen.table)
    # And execute refuses it with one line, writing nothing anywhere
    capsys.readouterr()
    assert main(["execute", "--base-path", str(gen.base), "--instant", t]) != 0
    err = capsys.readouterr().err
    assert err.startswith("error: ") and t in err and "escape" in err, err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    # And an operator can remove it
    assert main(["rollback", "--base-path", str(gen.base), "--instant", t, "--purge"]) != 0
    assert "--force rolls back an instant whose plan cannot be read" in capsys.readouterr().err
    assert main(["rollback", "--base-path", str(gen.base), "--instant", t, "--purge", "--force"]) == 0
    assert TableSnapshot.load(gen.table).pending == ()
    assert not list(tmp_path.glob("escape*")) and not (tmp_path.parent / "escape").exists()


@pytest.mark.parametrize(("where", "says"), [
    ("outside", r"path 'file:.*/elsewhere/p1/.*' is outside the table's storage .*/t"),
    ("other-partition", r"names base file 'file:.*/t/p2/.*', which is not in the table's partition 'p1'"),
])
def test_a_plan_whose_base_file_lies_outside_its_partition_is_refused(tmp_path: Path, where: str, says: str) -> None:
    gen = _table(tmp_path)
    record = _plan_record(gen)
    folder = tmp_path / "elsewhere" / "p1" if where == "outside" else gen.base / "p2"
    slice0 = record["clusteringPlan"]["inputGroups"][0]["slices"][0]
    slice0["dataFilePath"] = f"file:{folder}/{slice0['dataFilePath'].rsplit('/', 1)[-1]}"
    t = _save(gen, record)
    with pytest.raises(MetadataDecodeError, match=rf"{t}\.replacecommit\.requested: slice [^:]*: {says}; the plan "
                                                  "is refused"):
        gen.table.pending_clustering_plans()


@pytest.mark.parametrize(("field", "value"), [("path", "../outside/f_0-1-2_1.parquet"), ("partitionPath", "/etc"),
                                              ("partitionToReplaceFileIds", {"../p": ["f"]}),
                                              ("partitionToWriteStats", {"p1/..": []})])
def test_commit_metadata_naming_paths_outside_the_table_is_refused(field: str, value: Any) -> None:
    doc: dict[str, Any] = {"partitionToWriteStats": {"p1": [{"fileId": "f", "path": "p1/f_0-1-2_1.parquet",
                                                             "partitionPath": "p1"}]}, "operationType": "UPSERT"}
    if field in ("path", "partitionPath"):
        doc["partitionToWriteStats"]["p1"][0][field] = value
    else:
        doc[field] = value
    with pytest.raises(MetadataDecodeError, match=r"x\.commit: malformed commit metadata .*is not a path inside"):
        CommitMetadata.from_json_bytes(json.dumps(doc).encode(), "x.commit")
