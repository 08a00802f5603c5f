"""What the daemon does not maintain in a metadata table is refused by every command that would write, with one
line naming the key (or file) and what to change, and nothing is written: the record index, bloom filters,
expression indexes, partitions it does not know, a ``files`` partition of more than one file group, and a metadata
table the data table declares but that is missing. A one-shot command refuses a table a writer is busy with the
same way (partitions still being built, a pending compaction of the metadata table, a metadata table of another
version than the data table's); the daemon waits for such a table (tests/unit/ops/test_busy_metadata_table.py).
Secondary indexes, which a clustering does not change, are accepted (tests/integration/
test_clustering_metadata_table.py clusters a table that has two)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hudi_clusterd.cli import main
from hudi_clusterd.exit_codes import EXIT_FAILURE, EXIT_TABLE

pytestmark = pytest.mark.spark

TABLE = "v9_txns_simple_meta"  # Apache Hudi 1.x's table with files, column_stats, partition_stats, record_index...
PARTITIONS_KEY = "hoodie.table.metadata.partitions"
SUPPORTED = "column_stats,files,partition_stats,secondary_index_merchant_idx,secondary_index_txn_date_idx"


def everything(base: Path) -> list[str]:
    return sorted(str(p.relative_to(base)) for p in base.rglob("*"))


def set_property(props: Path, key: str, value: str) -> None:
    lines = [line for line in props.read_text(encoding="iso-8859-1").splitlines() if not line.startswith(f"{key}=")]
    props.write_text("\n".join([*lines, f"{key}={value}"]) + "\n", encoding="iso-8859-1")


def data_props(base: Path) -> Path:
    return base / ".hoodie" / "hoodie.properties"


def mdt(base: Path) -> Path:
    return base / ".hoodie" / "metadata"


def partitions(value: str) -> Callable[[Path], None]:
    return lambda base: set_property(data_props(base), PARTITIONS_KEY, value)


def building(base: Path) -> None:
    set_property(data_props(base), PARTITIONS_KEY, "files")
    set_property(data_props(base), "hoodie.table.metadata.partitions.inflight", "column_stats")


def two_files_groups(base: Path) -> None:
    partitions(SUPPORTED)(base)
    init = next((mdt(base) / "files").glob(".files-0000-0_*.log.1_0-0-0"))
    (init.parent / init.name.replace("files-0000-0", "files-0001-0")).write_bytes(init.read_bytes())


def pending_compaction(base: Path) -> None:
    partitions(SUPPORTED)(base)
    (mdt(base) / ".hoodie" / "timeline" / "20260307162459000.compaction.requested").write_bytes(b"")


def other_version(base: Path) -> None:
    partitions(SUPPORTED)(base)
    set_property(mdt(base) / ".hoodie" / "hoodie.properties", "hoodie.table.version", "8")


def missing(base: Path) -> None:
    partitions("files")(base)
    for p in sorted(mdt(base).rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    mdt(base).rmdir()


REFUSALS: dict[str, tuple[Callable[[Path], None], str]] = {
    "record_index": (lambda base: None, "record_index"),
    "bloom_filters": (partitions("files,bloom_filters"), "bloom_filters"),
    "expression_index": (partitions("files,expr_index_price"), "expr_index_price"),
    "unknown_partition": (partitions("files,vector_index"), "vector_index"),
    "partitions_being_built": (building, "hoodie.table.metadata.partitions.inflight=column_stats"),
    "files_of_two_file_groups": (two_files_groups, "2 file groups"),
    "pending_compaction": (pending_compaction, "compaction 20260307162459000 is pending"),
    "other_version": (other_version, "hoodie.table.version=8 differs"),
    "missing": (missing, ".hoodie/metadata/.hoodie/hoodie.properties: missing"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_unsupported_metadata_table_is_refused_in_one_line_writing_nothing(
        golden_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str], name: str) -> None:
    base = golden_copy(TABLE)
    make, expected = REFUSALS[name]
    make(base)
    before = everything(base)
    code = main(["schedule", "--force", "--base-path", str(base)])
    err = capsys.readouterr().err
    assert code == EXIT_TABLE, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert expected in err, err
    assert everything(base) == before


@pytest.mark.parametrize("argv", [
    ["schedule", "--force", "--dry-run"], ["execute"], ["cluster", "--force"],
    ["run", "--once", "--metrics-address", "127.0.0.1:0"],
], ids=lambda a: " ".join(a))
def test_every_writing_command_refuses_the_record_index_writing_nothing(
        golden_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    base = golden_copy(TABLE)
    before = everything(base)
    code = main([*argv, "--base-path", str(base)])
    err = capsys.readouterr().err
    # the daemon logs the table's failed tick and exits 1 (its other tables would still be served)
    assert code == (EXIT_FAILURE if argv[0] == "run" else EXIT_TABLE), err
    assert "record_index" in err and PARTITIONS_KEY in err, err
    assert everything(base) == before


def test_our_ingestion_refuses_a_table_with_a_metadata_table_writing_nothing(
        golden_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = golden_copy(TABLE)
    partitions(SUPPORTED)(base)
    source = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"txn_id": ["TXN-900"], "txn_ts": [1], "region": ["eu"]}), source)
    before = everything(base)
    code = main(["ingest", "--base-path", str(base), "--source", str(source), "--spark-master", "local[1]"])
    err = capsys.readouterr().err
    assert code == EXIT_TABLE, err
    assert "metadata table" in err and PARTITIONS_KEY in err and "Apache Hudi's writer" in err, err
    assert everything(base) == before
