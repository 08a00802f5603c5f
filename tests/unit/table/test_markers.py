from __future__ import annotations

from pathlib import Path

from hudi_clusterd.storage import open_storage
from hudi_clusterd.table.markers import (
    IOType,
    Marker,
    create_marker,
    delete_markers,
    list_markers,
    marker_dir,
    parse_marker_name,
)

T = "20240101000000001"
F1 = "f1-0_0-1-2_20240101000000001.parquet"
F2 = "f2-0_1-1-3_20240101000000001.parquet"


def test_create_marker_direct_layout_is_hudis(tmp_path: Path) -> None:
    # Given a table folder; When a marker is created for a file of partition a=1/b=2
    create_marker(open_storage(str(tmp_path)), T, "a=1/b=2", F1)
    # Then it is an empty file under .hoodie/.temp/<instant>/<partition>/
    path = tmp_path / ".hoodie/.temp" / T / "a=1/b=2" / f"{F1}.marker.CREATE"
    assert path.is_file() and path.read_bytes() == b""


def test_list_markers_direct_partitioned_and_root_returns_all(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path))
    create_marker(storage, T, "2024/01/01", F1)
    create_marker(storage, T, "", F2, IOType.MERGE)
    create_marker(storage, T, "2024/01/01", F1)  # idempotent
    assert list_markers(storage, T) == [Marker("", F2, IOType.MERGE), Marker("2024/01/01", F1, IOType.CREATE)]


def test_list_markers_timeline_server_based_reads_markers_files(tmp_path: Path) -> None:
    # Given markers as Hudi's timeline server writes them
    folder = tmp_path / marker_dir(T)
    folder.mkdir(parents=True)
    (folder / "MARKERS.type").write_text("TIMELINE_SERVER_BASED")
    (folder / "MARKERS0").write_text(f"10/{F1}.marker.CREATE\n")
    (folder / "MARKERS1").write_text(f"20/{F2}.marker.MERGE\n\n")
    storage = open_storage(str(tmp_path))
    # Then both files are read
    assert [m.data_file_path for m in list_markers(storage, T)] == [f"10/{F1}", f"20/{F2}"]


def test_list_markers_without_folder_is_empty(tmp_path: Path) -> None:
    assert list_markers(open_storage(str(tmp_path)), T) == []


def test_delete_markers_removes_instant_folder_only(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path))
    create_marker(storage, T, "p", F1)
    create_marker(storage, "20240101000000002", "p", F2)
    delete_markers(storage, T)
    delete_markers(storage, T)  # missing is fine
    assert not (tmp_path / marker_dir(T)).exists()
    assert len(list_markers(storage, "20240101000000002")) == 1


def test_parse_marker_name_rejects_non_markers() -> None:
    assert parse_marker_name(f"p/{F1}.marker.CREATE") == Marker("p", F1, IOType.CREATE)
    assert parse_marker_name(f"p/{F1}.marker.DELETE") is None
    assert parse_marker_name(f"p/{F1}") is None
    assert parse_marker_name("MARKERS.type") is None
