"""A table's `TableRef`: what a data engine gets of it."""

from __future__ import annotations

from pathlib import Path

from tests.builders import small_table


def test_a_tables_ref_names_it_and_opens_its_storage(tmp_path: Path) -> None:
    gen = small_table(tmp_path, commits=1)
    ref = gen.table.ref
    assert (ref.name, ref.storage, ref.config) == (gen.table.name, gen.table.storage.spec, gen.table.config)
    assert ref.base_uri == gen.table.storage.spec.uri
    storage = ref.open_storage()
    assert storage.full_path("p1") == gen.table.storage.full_path("p1")
    assert [b.file_name for b in gen.table.list_base_files(["p1"])] == \
        [e.name for e in storage.list_dir("p1") if e.name.endswith(".parquet")]
