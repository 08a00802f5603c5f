"""One rule for sort columns: where they are configured, in a plan's parameters, and against the schema."""

from __future__ import annotations

import json

import pytest

from hudi_clusterd.domain.plan import ClusteringStrategy, WorkOrder
from hudi_clusterd.domain.row_order import CurveBuildMethod, LayoutStrategy
from hudi_clusterd.domain.sort_columns import ColumnKind, avro_column_kinds, parse_sort_columns, sort_column_problems
from hudi_clusterd.errors import PlanError

KEY = "hoodie.clustering.plan.strategy.sort.columns"
SCHEMA = json.dumps({"type": "record", "name": "r", "fields": [
    {"name": "id", "type": "long"},
    {"name": "lat", "type": ["null", "double"]},
    {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]},
    {"name": "amount", "type": {"type": "fixed", "name": "d", "size": 5, "logicalType": "decimal", "precision": 10,
                                "scale": 2}},
    {"name": "tags", "type": ["null", {"type": "array", "items": "string"}]},
    {"name": "attrs", "type": {"type": "map", "values": "string"}},
    {"name": "where", "type": ["null", {"type": "record", "name": "w", "fields": [{"name": "x", "type": "int"}]}]},
    {"name": "odd", "type": ["null", "int", "string"]},
]})


def test_parse_sort_columns_trims_and_keeps_order() -> None:
    assert parse_sort_columns(" lat , lon ") == ("lat", "lon")
    assert parse_sort_columns("") == () and parse_sort_columns("  ") == ()


@pytest.mark.parametrize(("raw", "why"), [("a,a", "'a' appears twice"), ("a.b", "'a.b' is a nested field"),
                                          ("a,", "empty items"), (",a", "empty items")])
def test_parse_sort_columns_refuses_repeats_nested_names_and_empty_items(raw: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_sort_columns(raw)


def test_avro_column_kinds_unwraps_nullable_unions() -> None:
    kinds = avro_column_kinds(SCHEMA)
    assert kinds == {"id": ColumnKind.SCALAR, "lat": ColumnKind.SCALAR, "day": ColumnKind.SCALAR,
                     "amount": ColumnKind.SCALAR, "tags": ColumnKind.NESTED, "attrs": ColumnKind.NESTED,
                     "where": ColumnKind.NESTED, "odd": ColumnKind.UNSUPPORTED}
    assert avro_column_kinds("not json") is None and avro_column_kinds('{"type": "string"}') is None


def test_sort_column_problems_name_the_key_the_column_and_why() -> None:
    kinds = avro_column_kinds(SCHEMA)
    assert kinds is not None
    assert sort_column_problems(("lat", "day", "amount"), kinds, key=KEY) == []
    problems = sort_column_problems(("LAT", "tags", "odd", "missing"), kinds, key=KEY)
    assert len(problems) == 4 and all(p.startswith(f"{KEY}: column ") for p in problems)
    assert "(did you mean 'lat'?)" in problems[0]
    assert "nested values" in problems[1] and "cannot be ordered" in problems[2]
    assert "'missing' is not in the table schema" in problems[3]
    assert "repeat" in sort_column_problems(("id", "id"), kinds, key=KEY)[0]


def test_work_order_round_trips_through_strategy_params() -> None:
    order = WorkOrder(("lat", "lon"), LayoutStrategy.HILBERT, CurveBuildMethod.SAMPLE, 5000, 8 * 1024 * 1024)
    assert WorkOrder.from_params(order.to_params()) == order
    assert ClusteringStrategy("x", order.to_params()).work_order == order


def test_work_order_of_a_plan_with_only_sort_columns_takes_hudi_defaults() -> None:
    order = WorkOrder.from_params({KEY: "a,b"})  # what Apache Hudi writes into its own plans
    assert order == WorkOrder(("a", "b"))
    assert order.layout_strategy is LayoutStrategy.LINEAR and order.target_file_max_bytes == 1024 ** 3


@pytest.mark.parametrize(("params", "why"), [
    ({KEY: "a,a"}, "appears twice"), ({KEY: "a.b"}, "nested field"),
    ({"hoodie.layout.optimize.strategy": "spiral"}, "LINEAR, ZORDER"),
    ({"hoodie.layout.optimize.build.curve.sample.size": "0"}, ">= 1"),
    ({"hoodie.clustering.plan.strategy.target.file.max.bytes": "lots"}, "integer"),
])
def test_work_order_refuses_bad_params_naming_the_key(params: dict[str, str], why: str) -> None:
    with pytest.raises(PlanError, match=why) as info:
        WorkOrder.from_params(params)
    assert str(info.value).startswith(f"strategyParams {next(iter(params))}: ")
