"""Version-8 tables whose metadata table Hudi has compacted, clustered by the daemon: Hudi and hudi-rs still read.

Hudi 1.0.x writes its own ``HoodieMetadataRecord`` schema (``ColumnStatsMetadata`` of 10 fields: no ``valueType``;
no ``ArrayWrapper`` in the min/max unions) and its compactions put it into the metadata table's base HFiles. The
daemon's log blocks join those file slices with the record schema the slice already carries, so that every reader
merging the slice sees one schema (hudi-rs refuses a slice whose base and log blocks differ: ``reconcile: column
'ColumnStatsMetadata' ... source had 10 children but target expects 11``). Hudi 1.2 writing version 8 carries its
own schema (11 fields), which the daemon keeps for that table in turn.

Each run: the release writes five commits compacting the metadata table after every deltacommit
(``hoodie.metadata.compact.max.delta.commits=1``), the daemon clusters, Hudi reads exactly and lists through its
metadata table, hudi-rs reads the same rows; then the release upserts (compacting over the daemon's log blocks)
and both read exactly again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hudi_clusterd.formats.hfile import SCHEMA_KEY, read_hfile
from hudi_clusterd.formats.log import HeaderKey, LogFileName, decode_log_file
from tests.builders import EVENTS_SCHEMA, event_rows, events_by_key, expected_events
from tests.harness.apache_hudi import HudiWorker, HudiWorkers, events_writer_options
from tests.harness.daemon_harness import clusterd, clusterings
from tests.harness.hudi_rs_checks import hudi_rs_rows
from tests.harness.hudi_versions import HUDI_1_0_2, HUDI_1_2_V8
from tests.harness.metadata_checks import mdt_compactions, metadata_partitions, validate_files

pytestmark = [pytest.mark.hudi, pytest.mark.integration]

RUNS = (HUDI_1_0_2, HUDI_1_2_V8)
MDT_COMPACTING = {"hoodie.metadata.enable": "true", "hoodie.metadata.compact.max.delta.commits": "1"}
COMMITS = 5
LAYOUT = {"hoodie.clustering.plan.strategy.sort.columns": "val",
          "hoodie.clustering.plan.strategy.target.file.max.bytes": "3000"}


@pytest.fixture(scope="module")
def apache_hudi(request: pytest.FixtureRequest, hudi_workers: HudiWorkers) -> HudiWorker:
    """The worker of one release writing version 8 (each test parametrizes it); module-scoped, so that each
    release's tests run together."""
    return hudi_workers.for_setup(request.param)


def _name(worker: HudiWorker, what: str) -> str:
    return f"{what}_{worker.setup.name.replace('.', '_').replace('-', '_')}"


def _column_stats_fields(schema: str) -> list[str]:
    node = json.loads(schema)
    body = next(f for f in node["fields"] if f["name"] == "ColumnStatsMetadata")["type"][1]
    return [f["name"] for f in body["fields"]]


def _slice_schemas(base: Path, partition: str) -> dict[str, list[list[str]]]:
    """Per file in metadata ``partition``: the ``ColumnStatsMetadata`` fields of the schema of its base HFile, or of
    each data block of its log file."""
    out: dict[str, list[list[str]]] = {}
    for path in sorted((base / ".hoodie" / "metadata" / partition).iterdir()):
        if path.name.endswith(".hfile"):
            info = read_hfile(path.read_bytes(), source=str(path)).file_info
            out[path.name] = [_column_stats_fields(info[SCHEMA_KEY].decode("utf-8"))]
        elif LogFileName.parse(path.name) is not None:
            blocks = decode_log_file(path.read_bytes(), source=str(path))
            out[path.name] = [_column_stats_fields(b.header[HeaderKey.SCHEMA]) for b in blocks
                              if HeaderKey.SCHEMA in b.header]
    return out


def _rows(worker: HudiWorker, base: Path) -> dict[int, tuple[str, float, int]]:
    return {int(k): v for k, v in events_by_key(worker.read(base)).items()}


def _hudi_rs(base: Path) -> dict[int, tuple[str, float, int]]:
    return {int(r["id"]): (r["part"], r["val"], r["ts"]) for r in hudi_rs_rows(base, ["id", "part", "val", "ts"], "id")}


@pytest.mark.parametrize("apache_hudi", RUNS, indirect=True, scope="module", ids=[s.name for s in RUNS])
def test_clustering_a_version_8_table_whose_metadata_table_hudi_compacted(apache_hudi: HudiWorker,
                                                                          tmp_path: Path) -> None:
    # Given a version-8 table the release wrote in five commits, compacting its metadata table after each
    base = tmp_path / "v8"
    name = _name(apache_hudi, "v8")
    options = events_writer_options(apache_hudi.setup, MDT_COMPACTING)
    batches = [event_rows(b) for b in range(COMMITS)]
    for batch in batches:
        apache_hudi.write(batch, base, {**options, "hoodie.datasource.write.operation": "insert"},
                          schema=EVENTS_SCHEMA)
    props = (base / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.version=8" in props
    assert "column_stats" in metadata_partitions(base)
    assert mdt_compactions(base), "the release did not compact its metadata table"
    before = _slice_schemas(base, "column_stats")
    theirs = {tuple(f) for fields in before.values() for f in fields}
    assert len(theirs) == 1, before  # the release writes one schema
    # When the daemon clusters it
    props_file = tmp_path / "clustering.properties"
    props_file.write_text("".join(f"{k}={v}\n" for k, v in LAYOUT.items()))
    clusterd("cluster", "--force", "--base-path", str(base), "--props", str(props_file))
    [t] = clusterings(base)
    # Then Hudi lists exactly the files on storage and reads every row once; hudi-rs reads the same rows
    validate_files(apache_hudi, base, name).assert_clean()
    expected = expected_events(batches)
    assert _rows(apache_hudi, base) == expected
    assert _hudi_rs(base) == expected
    # and the daemon's log blocks carry the schema the release's slices carry
    after = _slice_schemas(base, "column_stats")
    ours = {n: f for n, f in after.items() if n not in before}
    assert ours, after
    assert {tuple(f) for fields in ours.values() for f in fields} == theirs, ours
    # When the release upserts again, compacting its metadata table over our log blocks
    update = [{**r, "val": r["val"] + 100.0, "ts": 10} for r in batches[0][:5]]
    apache_hudi.write(update, base, options, schema=EVENTS_SCHEMA)
    assert any(c > t for c in mdt_compactions(base)), mdt_compactions(base)
    # Then both still read exactly
    expected = expected_events([*batches, update])
    validate_files(apache_hudi, base, name).assert_clean()
    assert _rows(apache_hudi, base) == expected
    assert _hudi_rs(base) == expected
