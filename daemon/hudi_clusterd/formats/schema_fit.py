"""Whether data can be written into a table as it is: the table's schema against the data's (no evolution)."""

from __future__ import annotations

import pyarrow as pa

from hudi_clusterd.errors import TableError
from hudi_clusterd.formats.avro_schema import normalize_arrow_type


def check_writable_as(source: pa.Schema, target: pa.Schema) -> None:
    """Raise ``TableError`` unless data of ``source`` can be cast losslessly to the table schema ``target``.

    Columns are matched by name at every level. Every target column must be present and no extra column is
    allowed (no schema evolution); types may widen as Avro promotes them (int → long → float → double,
    float → double, a decimal into one with as many integer and fraction digits), and time zones of
    timestamps are converted."""
    problems: list[str] = []
    _check_struct(list(source), list(target), "", problems)
    if problems:
        raise TableError("the data does not fit the table's schema: " + "; ".join(problems))


def _check_struct(src: list[pa.Field], tgt: list[pa.Field], prefix: str, problems: list[str]) -> None:
    by_name = {f.name: f for f in src}
    wanted = {f.name for f in tgt}
    for f in tgt:
        path = f"{prefix}{f.name}"
        s = by_name.get(f.name)
        if s is None:
            problems.append(f"column {path!r} ({f.type}) is missing from the data")
            continue
        _check_type(s.type, f.type, path, problems)
    for f in src:
        if f.name not in wanted:
            problems.append(f"column {prefix + f.name!r} is not in the table's schema (schema evolution is not "
                            "supported; drop the column or add it to the table with Hudi)")


_INT_RANK = {32: 1, 64: 2}


def _check_type(s: pa.DataType, t: pa.DataType, path: str, problems: list[str]) -> None:
    s = normalize_arrow_type(s, path)
    if s == t:
        return
    ok = False
    if pa.types.is_struct(s) and pa.types.is_struct(t):
        _check_struct([s.field(i) for i in range(s.num_fields)], [t.field(i) for i in range(t.num_fields)],
                      path + ".", problems)
        return
    if pa.types.is_list(s) and pa.types.is_list(t):
        _check_type(s.value_type, t.value_type, path + ".element", problems)
        return
    if pa.types.is_map(s) and pa.types.is_map(t):
        _check_type(s.item_type, t.item_type, path + ".value", problems)
        return
    if pa.types.is_integer(s) and pa.types.is_integer(t):
        ok = _INT_RANK[s.bit_width] <= _INT_RANK[t.bit_width]
    elif (pa.types.is_integer(s) and pa.types.is_floating(t)) or (pa.types.is_float32(s) and pa.types.is_float64(t)):
        ok = True
    elif pa.types.is_decimal(s) and pa.types.is_decimal(t):
        ok = t.scale >= s.scale and t.precision - t.scale >= s.precision - s.scale
    elif pa.types.is_timestamp(s) and pa.types.is_timestamp(t):
        ok = True
    if not ok:
        problems.append(f"column {path!r} is {s} in the data but {t} in the table")
