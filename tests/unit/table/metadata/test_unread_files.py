"""A metadata-table file the store does not answer for is not a file that is gone: the rollback does not delete a
log file it could not read, and the next commit does not take an older log file's schema for the newest's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hudi_clusterd.errors import TransientStorageError
from hudi_clusterd.storage.local import LocalStorage
from hudi_clusterd.table.metadata.writer import MetadataTable
from tests.unit.table.metadata.test_writer import R, T, clustering, mdt_table

OURS = re.compile(r"^files/\.files-0000-0_.*\.log\.\d+_(?!0-0-0$)")  # not Hudi's initial log file


class _Unanswered(LocalStorage):
    """Reads of our log files time out; everything else is served."""

    def read_bytes(self, rel: str) -> bytes:
        if OURS.search(rel):
            raise TransientStorageError(f"get {self.full_path(rel)}: cannot reach the endpoint (timed out)")
        return super().read_bytes(rel)


def _ours(base: Path) -> list[Path]:
    return [p for p in (base / ".hoodie" / "metadata" / "files").iterdir()
            if OURS.search(f"files/{p.name}")]


def _unanswered(mdt: MetadataTable) -> None:
    mdt.storage.__class__ = _Unanswered


@pytest.mark.parametrize("version", [6, 9])
def test_a_rollback_does_not_delete_a_log_file_it_could_not_read(tmp_path: Path, version: int) -> None:
    mdt = mdt_table(tmp_path, version)
    meta = clustering(tmp_path)
    mdt.commit(T, meta, {"p=a": [meta.write_stats()[0].path or ""]}, [T])
    [log_file] = _ours(tmp_path)
    _unanswered(mdt)
    with pytest.raises(TransientStorageError, match="timed out"):
        mdt.rollback(T, R)
    assert log_file.exists()


def test_a_commit_does_not_take_an_older_schema_for_a_log_file_it_could_not_read(tmp_path: Path) -> None:
    # version 6 appends a new log version to the file group's slice, under the schema its newest block carries
    mdt = mdt_table(tmp_path, 6)
    meta = clustering(tmp_path)
    mdt.commit(T, meta, {"p=a": [meta.write_stats()[0].path or ""]}, [T])
    fresh = MetadataTable(mdt.data_storage, mdt.data_config, before_write=lambda: None,
                          new_time=lambda: "20261126010909000")
    _unanswered(fresh)
    with pytest.raises(TransientStorageError, match="timed out"):
        fresh.commit("20261126020202000", meta, {"p=a": [meta.write_stats()[0].path or ""]}, [T])
    assert len(_ours(tmp_path)) == 1
