"""Our Spark snapshot of every golden v6 table equals what hudi-rs reads, latest and as of each instant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.harness.hudi_rs_checks import hudi_rs_rows
from tests.support import V6_TABLES

pytestmark = pytest.mark.spark


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row.get("id"), row.get("name"))


def _ours(spark: Any, base: Path, as_of: str | None) -> list[dict[str, Any]]:
    from hudi_clusterd.engine.ingest.snapshot import snapshot

    df = snapshot(spark, HoodieTable.open(str(base)), as_of=as_of)
    return sorted(df.toArrow().to_pylist(), key=_key)


def _comparable(rows: list[dict[str, Any]], columns: list[str]) -> list[tuple[Any, ...]]:
    return [tuple(r.get(c) for c in columns) for r in rows]


@pytest.mark.parametrize("name", V6_TABLES)
def test_spark_snapshot_equals_hudi_rs(spark: Any, golden_tables: Path, name: str) -> None:
    base = golden_tables / name
    table = HoodieTable.open(str(base))
    instants = [None, *(i.time for i in table.timeline().completed())]
    for as_of in instants:
        theirs = hudi_rs_rows(base, key=_key, as_of=as_of)
        ours = _ours(spark, base, as_of)
        assert len(ours) == len(theirs), (name, as_of)
        if not theirs:
            continue
        # every column both sides have, compared value by value (nested, decimal, binary and timestamps too)
        columns = [c for c in theirs[0] if c in ours[0]]
        assert {"id", "name"} <= set(columns)
        assert _comparable(ours, columns) == _comparable(theirs, columns), (name, as_of)


def test_spark_snapshot_of_golden_empty_table_is_empty_not_an_error(spark: Any, golden_tables: Path) -> None:
    assert _ours(spark, golden_tables / "v6_empty", None) == []
