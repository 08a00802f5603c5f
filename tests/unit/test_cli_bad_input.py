"""Bad input gets one clear line naming the file or key, and a non-zero exit code; never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from hudi_clusterd.cli import main
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.errors import TableError, UnsupportedTableError
from hudi_clusterd.exit_codes import EXIT_CONFIG
from tests.builders import TableGen

OVERWRITE = "v6_simplekeygen_nonhivestyle_overwritetable"


def _status_error(capsys: pytest.CaptureFixture[str], base: Path) -> str:
    code = main(["status", "--base-path", str(base)])
    err = capsys.readouterr().err
    assert code != 0
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize("content", [b'{\n  "partitionToWriteStats" : {\n    "30" : [ {', b"this is not json"])
def test_status_truncated_or_non_json_commit_names_the_file(golden_copy, capsys, content: bytes) -> None:  # type: ignore[no-untyped-def]
    base = golden_copy(OVERWRITE)
    (base / ".hoodie/20240707001302376.commit").write_bytes(content)
    assert "20240707001302376.commit" in _status_error(capsys, base)


def test_status_non_avro_requested_plan_names_the_file(golden_copy, capsys) -> None:  # type: ignore[no-untyped-def]
    base = golden_copy(OVERWRITE)
    (base / ".hoodie/20240707001304000.replacecommit.requested").write_bytes(b"definitely not avro")
    assert "20240707001304000.replacecommit.requested" in _status_error(capsys, base)


def test_status_missing_properties_names_the_file(golden_copy, capsys) -> None:  # type: ignore[no-untyped-def]
    base = golden_copy(OVERWRITE)
    (base / ".hoodie/hoodie.properties").unlink()
    line = _status_error(capsys, base)
    assert "hoodie.properties" in line and "missing" in line


def test_status_not_a_table(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert "not a Hudi table" in _status_error(capsys, tmp_path)


@pytest.mark.parametrize("version", ["7", "10", "x"])
def test_status_unknown_table_version_refused_clearly(golden_copy, capsys, version: str) -> None:  # type: ignore[no-untyped-def]
    base = golden_copy(OVERWRITE)
    props = base / ".hoodie/hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.table.version=6", f"hoodie.table.version={version}"))
    line = _status_error(capsys, base)
    assert f"hoodie.table.version={version} is not supported" in line and "6" in line and "9" in line


def test_status_layout_not_matching_the_version_refused_clearly(golden_copy, capsys) -> None:  # type: ignore[no-untyped-def]
    base = golden_copy("v9_txns_simple_nometa")
    props = base / ".hoodie/hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.timeline.layout.version=2", "hoodie.timeline.layout.version=1"))
    line = _status_error(capsys, base)
    assert "hoodie.timeline.layout.version='1'" in line and "layout 2" in line


def test_status_other_table_format_refused_clearly(golden_copy, capsys) -> None:  # type: ignore[no-untyped-def]
    base = golden_copy("v9_txns_simple_nometa")
    props = base / ".hoodie/hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.table.format=native", "hoodie.table.format=iceberg"))
    assert "hoodie.table.format=iceberg is not supported" in _status_error(capsys, base)


def test_own_writer_refuses_a_table_with_a_metadata_table_and_clustering_a_missing_one(golden_copy) -> None:  # type: ignore[no-untyped-def]
    base = golden_copy(OVERWRITE)
    props = base / ".hoodie/hoodie.properties"
    props.write_text(props.read_text() + "hoodie.table.metadata.partitions=files\n")
    from hudi_clusterd.table.hoodie_table import HoodieTable

    table = HoodieTable.open(str(base))  # reading is fine
    # our ingestion does not keep a metadata table: it refuses, naming the key and what to do
    with pytest.raises(UnsupportedTableError, match=r"hoodie\.table\.metadata\.partitions=files.*Apache Hudi's writer"):
        table.config.check_writable(str(props))
    # clustering keeps one, but this table declares a metadata table that is not there
    with pytest.raises(TableError, match=r"\.hoodie/metadata/\.hoodie/hoodie\.properties: missing"):
        table.check_clusterable()


def test_for_new_table_checksum_matches_hudi() -> None:
    cfg = TableConfig.for_new_table(name="v6_empty", record_key_fields=["id"])
    assert cfg.raw["hoodie.table.checksum"] == "1980710965"  # the value Apache Hudi wrote for this name


@pytest.mark.parametrize("columns", ["x,x", "x,nested.y"])
def test_cli_sort_columns_repeated_or_nested_are_refused_at_load_naming_the_key_and_nothing_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], columns: str) -> None:
    gen = TableGen(tmp_path / "t")
    for i in range(4):
        gen.commit({"p1": [float(i)]})
    before = sorted(p.name for p in (tmp_path / "t" / ".hoodie").iterdir())
    props = tmp_path / "bad.properties"
    props.write_text(f"hoodie.clustering.plan.strategy.sort.columns={columns}\n")
    daemon_props = tmp_path / "daemon.properties"
    daemon_props.write_text(f"clusterd.tables=t\nclusterd.table.t.base.path={tmp_path / 't'}\n"
                            f"clusterd.table.t.hoodie.clustering.plan.strategy.sort.columns={columns}\n"
                            "clusterd.metrics.address=off\n")
    for argv in (["schedule", "--base-path", str(tmp_path / "t"), "--props", str(props), "--force"],
                 ["cluster", "--base-path", str(tmp_path / "t"), "--props", str(props), "--force"],
                 ["run", "--once", "--props", str(daemon_props)]):
        assert main(argv) == EXIT_CONFIG, argv
        err = capsys.readouterr().err
        assert "hoodie.clustering.plan.strategy.sort.columns" in err and columns in err, err
    assert sorted(p.name for p in (tmp_path / "t" / ".hoodie").iterdir()) == before
