"""Golden tables written by Apache Hudi read through our file-system view exactly as hudi-rs reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from hudi_clusterd.domain.instant import Action
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.support import V6_TABLES, V8_V9_TABLES


def _theirs(base: Path, as_of: str | None = None) -> list[tuple[str, str, str]]:
    from hudi import HudiReadOptions, HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(str(base)).build()
    opts = HudiReadOptions() if as_of is None else HudiReadOptions().with_as_of_timestamp(as_of)
    return sorted((s.partition_path, s.file_id, s.base_file_name) for s in table.get_file_slices(opts))


@pytest.mark.parametrize("name", V6_TABLES + V8_V9_TABLES)
def test_golden_latest_and_every_as_of_match_hudi_rs(golden_tables: Path, name: str) -> None:
    base = golden_tables / name
    table = HoodieTable.open(str(base))
    timeline = table.timeline()
    view = table.file_system_view(timeline)
    ours = sorted((b.partition_path, b.file_id, b.file_name) for b in view.latest_base_files())
    assert ours == _theirs(base)
    for inst in timeline.completed():
        as_of = sorted((b.partition_path, b.file_id, b.file_name) for b in view.latest_base_files(as_of=inst.time))
        assert as_of == _theirs(base, inst.time), inst.time


def test_golden_overwrite_table_replacecommit_is_honoured(golden_tables: Path) -> None:
    table = HoodieTable.open(str(golden_tables / "v6_simplekeygen_nonhivestyle_overwritetable"))
    view = table.file_system_view()
    assert [(b.partition_path, b.file_id) for b in view.latest_base_files()] == [
        ("30", "ebcb261d-62d3-4895-90ec-5b3c9622dff4-0")]
    assert len(view.latest_base_files(as_of="20240707001302376")) == 3  # 4 rows in groups of 10, 20, 30
    assert table.commits_since_last_clustering() == 3  # insert-overwrite is not clustering


def test_golden_v9_timeline_has_completion_times_and_a_completed_clustering(golden_tables: Path) -> None:
    table = HoodieTable.open(str(golden_tables / "v9_txns_simple_nometa"))
    assert table.timeline_store.folder == ".hoodie/timeline"
    timeline = table.timeline()
    assert all(i.is_completed and i.completion_time and i.completion_time > i.time for i in timeline)
    clustering = timeline.find("20260307135709297")
    assert clustering is not None and clustering.action is Action.REPLACE_COMMIT
    assert clustering.completion_time == "20260307135709818"
    assert table.is_clustering_instant(clustering)
    assert table.last_clustering_time(timeline) == "20260307135709297"
    assert table.commits_since_last_clustering(timeline) == 1
    overwrite = timeline.find("20260307135707243")
    assert overwrite is not None and not table.is_clustering_instant(overwrite)
    meta = table.timeline_store.commit_metadata(clustering)
    assert meta.operation_type == "CLUSTER"
    assert sorted(meta.partition_to_replace_file_ids or {}) == ["region=apac", "region=eu", "region=us"]
    assert timeline.last_time() == "20260307135710097"  # the newest completion time


def test_golden_v8_overwrite_table_reads_like_its_v6_twin(golden_tables: Path) -> None:
    v8 = HoodieTable.open(str(golden_tables / "v8_simplekeygen_nonhivestyle_overwritetable"))
    v6 = HoodieTable.open(str(golden_tables / "v6_simplekeygen_nonhivestyle_overwritetable"))
    assert v8.config.version == 8 and v8.config.precombine_field == v6.config.precombine_field
    assert v8.config.partition_fields == v6.config.partition_fields
    assert len(v8.file_system_view().latest_base_files()) == len(v6.file_system_view().latest_base_files()) == 1
    assert v8.commits_since_last_clustering() == v6.commits_since_last_clustering() == 3


def test_golden_empty_table_is_empty_not_an_error(golden_tables: Path) -> None:
    table = HoodieTable.open(str(golden_tables / "v6_empty"))
    assert len(table.timeline()) == 0
    assert table.file_system_view().latest_base_files() == []


def test_golden_table_config_typed_view(golden_tables: Path) -> None:
    cfg = HoodieTable.open(str(golden_tables / "v6_complexkeygen_hivestyle")).config
    assert cfg.record_key_fields == ("id", "name")
    assert cfg.partition_fields == ("byteField", "shortField")
    assert cfg.hive_style_partitioning and cfg.precombine_field == "longField"
    nonpart = HoodieTable.open(str(golden_tables / "v6_nonpartitioned")).config
    assert nonpart.partition_fields == ()
