from __future__ import annotations

import io
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.engine.clustering.sizing import (
    FILL,
    SampleSize,
    _spread,
    output_file_groups,
    sample_bytes_per_row,
    writing_tasks,
)
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.storage import open_storage

MIB = 1 << 20


def test_output_file_groups_fill_the_target_to_ninety_percent() -> None:
    # 4M rows of 86 bytes each (the reference dataset's output), 8 MiB target: 328 MiB over files 90 % full
    assert output_file_groups(4_000_000, 86.0, 8 * MIB) == 46
    for per_row in (10.0, 86.0, 400.0):
        n = output_file_groups(1_000_000, per_row, 8 * MIB)
        assert 1_000_000 * per_row / n <= 8 * MIB * FILL
        assert n == 1 or 1_000_000 * per_row / (n - 1) > 8 * MIB * FILL  # and no more files than that needs


def test_output_file_groups_small_input_one_file() -> None:
    assert output_file_groups(3, 100.0, 8 * MIB) == 1
    assert output_file_groups(0, 100.0, 8 * MIB) == 1


def test_output_file_groups_bad_target_names_it() -> None:
    with pytest.raises(ExecutionError, match="target file size must be positive, got 0"):
        output_file_groups(10, 1.0, 0)


def test_spread_keeps_first_and_last_evenly() -> None:
    paths = [str(i) for i in range(100)]
    assert _spread(paths, 5) == ["0", "25", "50", "74", "99"]
    assert _spread(paths[:3], 5) == ["0", "1", "2"]


def _append_only_files(base: Path, files: int, rows: int) -> list[str]:
    """Files as an append-only table writes them: one commit time each, sequential keys, random sort column."""
    rng = random.Random(1)
    names = []
    for f in range(files):
        t = f"2024010100{f:07d}"
        ids = range(f * rows, (f + 1) * rows)
        table = pa.table({
            "_hoodie_commit_time": [t] * rows,
            "_hoodie_commit_seqno": [f"{t}_0_{i}" for i in range(rows)],
            "_hoodie_file_name": [f"file-{f}.parquet"] * rows,
            "id": pa.array(ids, pa.int64()),
            "x": [float(rng.randrange(1_000)) for _ in range(rows)],
        })
        names.append(f"f{f}.parquet")
        pq.write_table(table, base / names[-1], compression="gzip")
    return names


def test_sample_is_measured_in_output_order(tmp_path: Path) -> None:
    # Given 8 append-only gzip files: sorting by x scatters their commit times, seqnos and ids
    names = _append_only_files(tmp_path, 8, 2_000)
    storage = open_storage(str(tmp_path))
    # When sampled in output order (sorted by x), with the file name dropped as the runner drops it
    sample = sample_bytes_per_row(storage, names, "gzip", 1 * MIB, ["x"], ["_hoodie_file_name"],
                                  sample_rows=8_000)
    # Then the sample takes the first 1,000 rows of every file
    assert sample.rows == 8_000
    in_order = pa.concat_tables([pq.read_table(tmp_path / n).slice(0, 1_000).drop_columns(["_hoodie_file_name"])
                                 for n in names])
    # And its memory figure is those rows' Arrow bytes
    assert sample.memory == in_order.nbytes

    # And its size is theirs sorted by x (stable: ties keep the input order), not in the input's order
    def size(table: pa.Table) -> int:
        sink = io.BytesIO()
        group_rows = 1 * MIB * table.num_rows // table.nbytes
        pq.write_table(table, sink, compression="gzip", row_group_size=group_rows,
                       use_dictionary=list(sample.dictionary_columns))
        return sink.tell()

    assert sample.disk == size(in_order.sort_by("x")) != size(in_order)


def test_sample_chooses_dictionaries_column_by_column(tmp_path: Path) -> None:
    # Given rows with a repeated commit time, a small set of categories, and unique ids and seqnos
    names = _append_only_files(tmp_path, 4, 3_000)
    # When sampled
    sample = sample_bytes_per_row(open_storage(str(tmp_path)), names, "snappy", 1 * MIB, ["x"], ["_hoodie_file_name"])
    # Then the repeated columns are dictionary-encoded and the unique ones are not
    assert {"_hoodie_commit_time", "x"} <= set(sample.dictionary_columns)
    assert not {"id", "_hoodie_commit_seqno"} & set(sample.dictionary_columns)
    # And the size is that of the chosen encoding: below both all-dictionary and no dictionary at all
    table = pa.concat_tables([pq.read_table(tmp_path / n).slice(0, 5_000).drop_columns(["_hoodie_file_name"])
                              for n in names]).sort_by("x")
    for everywhere in (True, False):
        sink = io.BytesIO()
        pq.write_table(table, sink, compression="snappy", use_dictionary=everywhere)
        assert sample.disk < sink.tell()


def test_sample_merges_files_with_an_added_column(tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": [1, 2]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": [3], "extra": ["x"]}), tmp_path / "b.parquet")
    sample = sample_bytes_per_row(open_storage(str(tmp_path)), ["a.parquet", "b.parquet"], "snappy", MIB, ["id"])
    assert sample.rows == 3 and sample.disk > 0 and sample.memory > 0


def test_sample_of_nothing_is_empty(tmp_path: Path) -> None:
    assert sample_bytes_per_row(open_storage(str(tmp_path)), [], "snappy", MIB, ["id"]) == SampleSize(0, 0, 0)


@pytest.mark.parametrize(("files", "tasks"), [(1, 1), (4, 1), (5, 2), (16, 4), (763, 191), (0, 1)])
def test_writing_tasks_write_several_estimated_files_each(files: int, tasks: int) -> None:
    assert writing_tasks(files) == tasks
