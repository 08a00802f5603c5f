"""Sorted Arrow runs: cut in the scan tasks, merged back into key order in the writing tasks (no Spark here)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest

from hudi_clusterd.domain.row_order import LayoutStrategy
from hudi_clusterd.engine.clustering.exchange import (
    RangeKeys,
    cut_runs,
    key_names,
    key_order,
    merge_ranges,
    pack_runs,
    ranges_per_partition,
    task_runs,
)
from hudi_clusterd.engine.clustering.sorting import CurvePartitioning, _split_keys, key_words, range_keys
from hudi_clusterd.errors import ExecutionError
from hudi_clusterd.ordering import curves


def test_key_order_is_lexicographic_over_words_and_stable() -> None:
    words = np.array([[2, 0], [1, 5], [1, -3], [2, 0], [-7, 9]], np.int64)
    assert key_order(words).tolist() == [4, 2, 1, 0, 3]  # equal keys (rows 0 and 3) keep their order
    assert key_order(words[:, :1]).tolist() == [4, 1, 2, 0, 3]
    with pytest.raises(ValueError, match="key words must be"):
        key_order(np.zeros((3, 0), np.int64))


def test_ranges_per_partition_keeps_a_range_near_the_budget() -> None:
    assert ranges_per_partition(1_000, 4, 100.0, range_bytes=10_000) == 3  # 25,000 bytes per partition
    assert ranges_per_partition(1_000, 4, 100.0, range_bytes=25_000) == 1
    assert ranges_per_partition(0, 4, 100.0) == 1
    with pytest.raises(ValueError, match="partitions must be >= 1"):
        ranges_per_partition(10, 0, 1.0)


def _rows(rng: np.random.Generator, n: int, start: int) -> pa.RecordBatch:
    ids = np.arange(start, start + n)
    names = pa.array([None if i % 7 == 0 else f"name-{i}" * (i % 3) for i in ids.tolist()], pa.string())
    return pa.RecordBatch.from_arrays([pa.array(ids), names, pa.array(rng.normal(size=n))], names=["id", "s", "x"])


def _keys_by_id(splits: np.ndarray, seed: int) -> RangeKeys:
    """Key words and ranges that depend only on the row's id (as a layout key depends on its values)."""

    def keys(batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        ids = batch.column("id").to_numpy()
        high = (ids * 7919 + seed) % 13 - 6  # few distinct first words: many ties broken by the second
        low = (ids * 104729) % 1_000_003 - 500_000
        words = np.stack([high, low], axis=1).astype(np.int64)
        return np.searchsorted(splits, high, side="left").astype(np.int32), words

    return keys


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("per_partition", [1, 2])
def test_runs_cut_by_tasks_merge_back_into_key_order_every_row_once(seed: int, per_partition: int) -> None:
    # Given three scan tasks' batches, keys with ties, and 6 ranges (3 partitions of 2, or 6 of 1)
    rng = np.random.default_rng(seed)
    splits = np.array([-4, -2, 0, 2, 4], np.int64)
    keys = _keys_by_id(splits, seed)
    tasks = [[_rows(rng, int(rng.integers(0, 400)), 1_000 * t + 400 * b) for b in range(3)] for t in range(3)]
    # When every task cuts its rows into runs (a small flush budget: several flushes per task)
    packed = [b for batches in tasks for b in task_runs(iter(batches), keys, per_partition, flush_bytes=8_000)]
    # Then each packed row's partition is its range's, and every run holds rows of that range only
    by_partition: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for batch in packed:
        for p, r, run in zip(*(batch.column(i).to_pylist() for i in range(3)), strict=True):
            assert p == r // per_partition
            rows = pa.ipc.open_stream(run).read_all()
            assert set(keys(rows.combine_chunks().to_batches()[0])[0].tolist()) == {r}
            by_partition[p].append((r, run))
    # And merging each partition's runs, ordered by range as Spark sorts them, gives its rows in key order
    merged_ids: list[int] = []
    previous: tuple[int, int] | None = None
    for p in sorted(by_partition):
        ordered = sorted(by_partition[p], key=lambda item: item[0])
        batch = pa.RecordBatch.from_arrays(
            [pa.array([r for r, _ in ordered], pa.int32()), pa.array([run for _, run in ordered], pa.binary())],
            names=["range", "run"])
        for rows in merge_ranges([batch.slice(0, 2), batch.slice(2)], 2):  # ranges may span input batches
            assert rows.schema.names == ["id", "s", "x"]
            words = keys(rows)[1]
            for key in map(tuple, words.tolist()):
                assert previous is None or key >= previous
                previous = key
            merged_ids += rows.column("id").to_pylist()
    # And every row arrives exactly once, values intact
    expected = pa.Table.from_batches([b for batches in tasks for b in batches])
    assert sorted(merged_ids) == sorted(expected.column("id").to_pylist())
    got = {r["id"]: r for b in packed for run in b.column("run").to_pylist()
           for r in pa.ipc.open_stream(run).read_all().drop_columns(key_names(2)).to_pylist()}
    assert got == {r["id"]: r for r in expected.to_pylist()}


def test_task_without_rows_sends_nothing() -> None:
    keys = _keys_by_id(np.array([0], np.int64), 0)
    assert list(task_runs(iter([]), keys, 1)) == []
    empty = _rows(np.random.default_rng(0), 0, 0)
    assert list(task_runs(iter([empty]), keys, 1)) == []
    assert cut_runs([], np.zeros(0, np.int32), np.zeros((0, 1), np.int64)) == []


def test_cut_runs_refuses_ranges_that_disagree_with_the_keys() -> None:
    batch = _rows(np.random.default_rng(0), 3, 0)
    with pytest.raises(ExecutionError, match="not contiguous in key order"):
        cut_runs([batch], np.array([1, 0, 1], np.int32), np.array([[1], [2], [3]], np.int64))
    with pytest.raises(ValueError, match="3 rows but 2 ranges"):
        cut_runs([batch], np.array([0, 0], np.int32), np.array([[1], [2], [3]], np.int64))


def test_merge_refuses_runs_out_of_range_order() -> None:
    batch = _rows(np.random.default_rng(0), 4, 0)
    runs = cut_runs([batch], np.array([0, 0, 1, 1], np.int32), np.array([[1], [2], [3], [4]], np.int64))
    packed = pack_runs(list(reversed(runs)), 1)
    with pytest.raises(ExecutionError, match="range 0 after range 1"):
        list(merge_ranges([packed], 1))


def test_merge_names_a_damaged_run() -> None:
    packed = pa.RecordBatch.from_arrays([pa.array([0], pa.int32()), pa.array([b"not arrow"], pa.binary())],
                                        names=["range", "run"])
    with pytest.raises(ExecutionError, match="a run of range 0 cannot be read back"):
        list(merge_ranges([packed], 1))


@pytest.mark.parametrize("strategy", [LayoutStrategy.HILBERT, LayoutStrategy.ZORDER, LayoutStrategy.LINEAR])
def test_range_keys_agree_with_the_partitioning_and_order_by_the_key(strategy: LayoutStrategy) -> None:
    # Given a layout over two columns (one int64 word: sampled curves; two words: linear), split from a sample
    rng = np.random.default_rng(5)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(rng.normal(size=2_000)), pa.array([None if i % 11 == 0 else i % 97 for i in range(2_000)])],
        names=["a", "b"])
    columns = [batch.column(0), batch.column(1)]
    bounds = (None if strategy is LayoutStrategy.LINEAR
              else tuple(curves.sample_boundaries(curves.direct_coordinates(c)) for c in columns))
    keys = curves.curve_keys(columns, strategy, bounds)
    partitioning = CurvePartitioning(strategy, bounds, _split_keys(keys[::7], 9), 0)
    # When the exchange's key function runs
    ranges, words = range_keys(partitioning, ["a", "b"])(batch)
    # Then the ranges are the partitioning's, and the words order rows as the key bytes do
    assert ranges.tolist() == partitioning.partitions(keys).tolist()
    assert words.shape[1] == key_words(2, partitioning)
    by_words = [bytes(keys[i]) for i in key_order(words)]
    assert by_words == sorted(bytes(k) for k in keys)


def test_one_word_keys_find_the_same_ranges_as_a_byte_string_search() -> None:
    # Given 4-byte keys (two sampled dimensions) and split keys among them, ties included
    rng = np.random.default_rng(9)
    keys = rng.integers(0, 256, (3_000, 4), dtype=np.uint8)
    keys[::5] = keys[0]
    splits = tuple(sorted({bytes(k) for k in keys[::97]}))
    partitioning = CurvePartitioning(LayoutStrategy.HILBERT, None, splits, 0)
    # Then the int64 word search places every key where a search among the byte strings does
    expected = np.searchsorted(np.array(splits, dtype="S4"), keys.view("S4").reshape(-1), side="left")
    assert partitioning.partitions(keys).tolist() == expected.tolist()
