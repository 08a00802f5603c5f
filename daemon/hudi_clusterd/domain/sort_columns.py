"""Sort columns of a clustering: one rule, applied where the columns come from and again against the schema.

The rule: a comma-separated list of distinct top-level column names. Nested (dotted) names are refused, because
clustering orders rows by scalar columns only. It is applied when the configuration is parsed
(``hoodie.clustering.plan.strategy.sort.columns``), when a plan's strategy parameters are decoded, and, at
scheduling, against the table's schema: every column must exist and hold scalar values. A plan that passes at
scheduling therefore cannot fail these checks when it is executed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any


class ColumnKind(Enum):
    """What a column holds, as far as sorting is concerned."""

    SCALAR = "scalar"
    NESTED = "nested"  # record/struct, array/list, map
    UNSUPPORTED = "unsupported"  # null-only or unknown


def parse_sort_columns(raw: str) -> tuple[str, ...]:
    """Column names of a comma-separated list; ``""`` is no columns.

    Raises ``ValueError`` ("must ..., got ...") for an empty item between commas, a repeated column or a
    dotted name."""
    if not raw.strip():
        return ()
    parts = [part.strip() for part in raw.split(",")]
    out: list[str] = []
    for part in parts:
        if not part:
            raise ValueError(f"must be comma-separated column names without empty items, got {raw!r}")
        if "." in part:
            raise ValueError(f"must name top-level columns only; {part!r} is a nested field, got {raw!r}")
        if part in out:
            raise ValueError(f"must not repeat a column; {part!r} appears twice, got {raw!r}")
        out.append(part)
    return tuple(out)


def sort_column_problems(columns: Sequence[str], kinds: Mapping[str, ColumnKind], *, key: str) -> list[str]:
    """Why ``columns`` cannot order rows of a schema whose top-level columns are ``kinds``; empty when they can.

    Each problem names ``key`` (the configuration key the columns came from) and the column."""
    problems: list[str] = []
    try:
        parse_sort_columns(",".join(columns))
    except ValueError as e:
        problems.append(f"{key}: {e}")
    for column in columns:
        kind = kinds.get(column)
        if kind is None:
            near = [c for c in sorted(kinds) if c.lower() == column.lower()]
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            problems.append(f"{key}: column {column!r} is not in the table schema{hint}; columns are "
                            f"{', '.join(sorted(kinds)) or '(none)'}")
        elif kind is ColumnKind.NESTED:
            problems.append(f"{key}: column {column!r} holds nested values (a struct, list or map); only scalar "
                            "columns can order rows")
        elif kind is ColumnKind.UNSUPPORTED:
            problems.append(f"{key}: column {column!r} has a type rows cannot be ordered by")
    return problems


_AVRO_SCALARS = frozenset({"string", "bytes", "int", "long", "float", "double", "boolean", "enum", "fixed"})
_AVRO_NESTED = frozenset({"record", "array", "map"})


def _avro_kind(node: Any) -> ColumnKind:
    if isinstance(node, list):  # a union: nullable columns are ["null", T]
        branches = [b for b in node if b != "null"]
        if len(branches) != 1:
            return ColumnKind.UNSUPPORTED
        return _avro_kind(branches[0])
    if isinstance(node, dict):
        return _avro_kind(node.get("type"))
    if node in _AVRO_NESTED:
        return ColumnKind.NESTED
    if node in _AVRO_SCALARS:
        return ColumnKind.SCALAR
    return ColumnKind.UNSUPPORTED


def avro_column_kinds(schema_json: str) -> dict[str, ColumnKind] | None:
    """Top-level column kinds of an Avro record schema (JSON text); None when it is not one."""
    try:
        schema = json.loads(schema_json)
    except ValueError:
        return None
    fields = schema.get("fields") if isinstance(schema, dict) else None
    if not isinstance(fields, list):
        return None
    out: dict[str, ColumnKind] = {}
    for field in fields:
        if isinstance(field, dict) and isinstance(field.get("name"), str):
            out[field["name"]] = _avro_kind(field.get("type"))
    return out
