"""The group scan's pure parts: how files are spread over tasks, and how each file's batches are conformed to the
group's merged schema (no JVM)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.engine.clustering.scan import (
    SPLIT_BYTES,
    assign_files,
    conform,
    merged_tasks,
    read_conformed,
    scan_tasks,
)
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.storage import open_storage

MIB = 1024 * 1024


def test_scan_tasks_keep_every_core_busy_split_large_inputs_and_never_exceed_the_files() -> None:
    assert scan_tasks([MIB] * 200, parallelism=2) == 4  # two per core
    assert scan_tasks([MIB] * 3, parallelism=2) == 3  # never more tasks than files
    assert scan_tasks([100 * MIB] * 20, parallelism=2) == -(-2000 * MIB // SPLIT_BYTES)  # under 128 MiB each
    assert scan_tasks([], parallelism=8) == 1  # an empty group still makes a (empty) DataFrame


@given(st.lists(st.integers(0, 10**9), max_size=60), st.integers(1, 12))
def test_assign_files_assigns_each_file_once_in_order_and_balances(sizes: list[int], tasks: int) -> None:
    assigned = assign_files(sizes, tasks)
    assert len(assigned) == tasks
    flat = [i for files in assigned for i in files]
    assert sorted(flat) == list(range(len(sizes)))
    assert all(files == sorted(files) for files in assigned)
    loads = [sum(sizes[i] for i in files) for files in assigned]
    if sizes:  # greedy largest-first: no task exceeds the lightest by more than the largest file
        assert max(loads) - min(loads) <= max(sizes)


@given(st.integers(min_value=0, max_value=60), st.integers(min_value=1, max_value=8))
def test_merged_tasks_deal_each_slice_once_in_order_at_most_two_tasks_per_core(slices: int, cores: int) -> None:
    tasks = merged_tasks(slices, cores)
    assert len(tasks) == min(slices, 2 * cores)
    assert sorted(i for t in tasks for i in t) == list(range(slices))
    assert all(t == sorted(t) and t for t in tasks)
    assert max(map(len, tasks), default=0) - min(map(len, tasks), default=0) <= 1


def test_assign_files_refuses_zero_tasks() -> None:
    with pytest.raises(ValueError, match="tasks must be >= 1"):
        assign_files([1, 2], 0)


TARGET = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us", tz="UTC")),
                    ("added", pa.float64())])


def test_conform_orders_columns_fills_missing_with_nulls_and_casts() -> None:
    batch = pa.RecordBatch.from_pydict({
        "name": ["a", "b"], "id": pa.array([1, 2], pa.int32()), "ts": pa.array([0, 1_000_000], pa.timestamp("us")),
    })
    out = conform(batch, TARGET, "/t/f.parquet")
    assert out.schema == TARGET
    assert out.column("id").to_pylist() == [1, 2]
    assert out.column("added").to_pylist() == [None, None]
    assert out.column("ts").to_pylist()[1] == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)


def test_conform_names_file_and_column_when_a_type_cannot_be_read() -> None:
    batch = pa.RecordBatch.from_pydict({"id": ["not a number"], "name": ["a"]})
    with pytest.raises(ExecutionError, match=r"/t/f\.parquet: column 'id' of type string cannot be read as int64"):
        conform(batch, TARGET, "/t/f.parquet")


def test_read_conformed_reads_int96_as_microseconds_in_batches(tmp_path: Path) -> None:
    ts = [dt.datetime(2024, 1, 1, 12, 0, 0, 123456), None, dt.datetime(1999, 12, 31)]
    table = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "ts": pa.array(ts, pa.timestamp("us"))})
    pq.write_table(table, tmp_path / "f.parquet", use_deprecated_int96_timestamps=True)
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])

    batches = list(read_conformed(open_storage(str(tmp_path)), "f.parquet", schema, batch_rows=2))

    assert [b.num_rows for b in batches] == [2, 1]
    assert pa.Table.from_batches(batches).column("ts").to_pylist() == [
        t.replace(tzinfo=dt.UTC) if t else None for t in ts]


def test_read_conformed_names_a_damaged_file(tmp_path: Path) -> None:
    (tmp_path / "bad.parquet").write_bytes(b"PAR1" + b"\0" * 64 + b"PAR1")
    with pytest.raises(ExecutionError, match=r"bad\.parquet: cannot read the base file"):
        list(read_conformed(open_storage(str(tmp_path)), "bad.parquet", TARGET))
