from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from hudi_clusterd.storage import open_storage
from hudi_clusterd.table.partition_metadata import (
    PARTITION_METAFILE,
    ensure_partition_metadata,
    format_partition_metadata,
    partition_depth,
    read_partition_metadata,
)


@pytest.mark.parametrize(("partition", "depth"), [("", 0), ("10", 1), ("a=1/b=2", 2), ("2023/04/01/12", 4)])
def test_partition_depth_counts_folders(partition: str, depth: int) -> None:
    assert partition_depth(partition) == depth


def test_format_partition_metadata_matches_hudi_layout() -> None:
    text = format_partition_metadata("20240707001301554", 1, datetime(2024, 7, 7, 0, 13, 1)).decode()
    lines = text.splitlines()
    assert lines[0] == "#partition metadata"
    assert lines[1].startswith("#Sun Jul 07 00:13:01 ") and lines[1].endswith(" 2024")
    assert lines[2:] == ["commitTime=20240707001301554", "partitionDepth=1"]


def test_ensure_partition_metadata_writes_once(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path))
    # When two instants ensure the same partition
    assert ensure_partition_metadata(storage, "a=1/b=2", "20240101000000001") is True
    assert ensure_partition_metadata(storage, "a=1/b=2", "20240101000000002") is False
    # Then the first one wins and no temporary file is left behind
    assert read_partition_metadata(storage, "a=1/b=2") == {"commitTime": "20240101000000001",
                                                           "partitionDepth": "2"}
    assert [p.name for p in (tmp_path / "a=1/b=2").iterdir()] == [PARTITION_METAFILE]


def test_ensure_partition_metadata_non_partitioned_writes_at_root(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path))
    ensure_partition_metadata(storage, "", "20240101000000001")
    assert read_partition_metadata(storage, "") == {"commitTime": "20240101000000001", "partitionDepth": "0"}


def test_ensure_partition_metadata_base_format_variant_counts(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / f"{PARTITION_METAFILE}.parquet").write_bytes(b"PAR1")
    assert ensure_partition_metadata(open_storage(str(tmp_path)), "p", "20240101000000001") is False
    assert not (tmp_path / "p" / PARTITION_METAFILE).exists()


def test_read_partition_metadata_golden_file(golden_tables: Path) -> None:
    storage = open_storage(str(golden_tables / "v6_simplekeygen_nonhivestyle_overwritetable"))
    assert read_partition_metadata(storage, "10") == {"commitTime": "20240707001301554", "partitionDepth": "1"}
