"""Arrow schemas ↔ the Avro schema JSON Hudi records in ``extraMetadata.schema`` and ``parquet.avro.schema``.

Hudi derives a table's Avro schema from the Spark schema of the written data and then makes every nullable
field ``["null", T]`` with ``"default": null``. Naming, observed in the golden tables:

- the top-level record is ``<table>_record`` in namespace ``hoodie.<table>`` (table name sanitised for Avro);
- a nested record (struct field, or the struct inside an array/map field) is named after its field and lives
  in the namespace of the enclosing record's full name;
- decimals are ``fixed`` of the smallest size that holds the precision, named ``fixed`` in namespace
  ``<enclosing record full name>.<field>``, with logicalType ``decimal``;
- dates are ``int``/``date``; timestamps are ``long``/``timestamp-micros`` (``local-timestamp-*`` written by
  other tools is read back as a timestamp without zone); byte and short columns are ``int`` (Avro has nothing
  smaller).

``normalize_arrow_schema`` maps what Spark hands to Python (int8, int16, any timestamp time zone, large types)
onto the types a Hudi parquet file holds for that schema, so the file schema, the Avro schema and the data agree.
Timestamps without a time zone (Spark's ``TIMESTAMP_NTZ``, e.g. parquet written by pandas) are stored as UTC
timestamps holding the same wall-clock value: Hudi 0.14 writers store ``timestamp-micros``, and readers such as
hudi-rs 0.5 do not implement ``local-timestamp-micros``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from hudi_clusterd.errors import MetadataDecodeError, TableError

META_FIELDS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
               "_hoodie_file_name")
COMMIT_TIME_FIELD, COMMIT_SEQNO_FIELD, RECORD_KEY_FIELD, PARTITION_PATH_FIELD, FILE_NAME_FIELD = META_FIELDS

_AVRO_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_INVALID_CHAR_RE = re.compile(r"[^A-Za-z0-9_]")
_SANITIZE_MASK = "__"  # hoodie.avro.schema.sanitize.invalid.char.mask default


# --- names ---------------------------------------------------------------------------------------------------

def sanitize_name(name: str) -> str:
    """An Avro-valid name: invalid characters become ``__``, and a leading digit gets a ``__`` prefix."""
    out = _INVALID_CHAR_RE.sub(_SANITIZE_MASK, name)
    if not out or not (out[0].isalpha() or out[0] == "_"):
        out = _SANITIZE_MASK + out
    return out


def record_name_and_namespace(table_name: str) -> tuple[str, str]:
    """``(<table>_record, hoodie.<table>)`` as Hudi names a table's top-level record."""
    clean = sanitize_name(table_name)
    return f"{clean}_record", f"hoodie.{clean}"


def meta_arrow_fields() -> list[pa.Field]:
    """The five meta columns as Arrow fields (nullable strings), in Hudi's order."""
    return [pa.field(name, pa.string(), nullable=True) for name in META_FIELDS]


def strip_meta_fields(schema: pa.Schema) -> pa.Schema:
    """The schema without the ``_hoodie_*`` meta columns (anywhere in it)."""
    return pa.schema([f for f in schema if f.name not in META_FIELDS])


# --- Arrow normalisation ---------------------------------------------------------------------------------------

def normalize_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """The schema a Hudi base file has for data of this schema (metadata dropped)."""
    return pa.schema([normalize_arrow_field(f, f.name) for f in schema])


def normalize_arrow_field(field: pa.Field, path: str) -> pa.Field:
    return pa.field(field.name, normalize_arrow_type(field.type, path), nullable=field.nullable)


def normalize_arrow_type(t: pa.DataType, path: str) -> pa.DataType:
    """Map a type onto one Avro can describe; raise ``TableError`` naming ``path`` when none fits."""
    if pa.types.is_dictionary(t):
        return normalize_arrow_type(t.value_type, path)
    if pa.types.is_boolean(t) or pa.types.is_float32(t) or pa.types.is_float64(t):
        return t
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_integer(t):
        small = t.bit_width < 32 or (t.bit_width == 32 and pa.types.is_signed_integer(t))
        return pa.int32() if small else pa.int64()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or _is(t, "is_string_view"):
        return pa.string()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or _is(t, "is_binary_view"):
        return pa.binary()
    if pa.types.is_fixed_size_binary(t) and not pa.types.is_decimal(t):
        return t
    if pa.types.is_decimal(t):
        if t.precision > 38:
            return pa.decimal256(t.precision, t.scale)
        return pa.decimal128(t.precision, t.scale)
    if pa.types.is_date(t):
        return pa.date32()
    if pa.types.is_timestamp(t):
        return pa.timestamp("ms" if t.unit in ("s", "ms") else "us", tz="UTC")
    if pa.types.is_time(t):
        return pa.time32("ms") if t.unit in ("s", "ms") else pa.time64("us")
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or _is(t, "is_list_view"):
        item = t.value_field
        return pa.list_(pa.field("element", normalize_arrow_type(item.type, f"{path}.element"), item.nullable))
    if pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise TableError(f"column {path!r}: map keys must be strings to be written (Avro maps have string "
                             f"keys), got {t.key_type}")
        item = t.item_field
        return pa.map_(pa.string(), pa.field("value", normalize_arrow_type(item.type, f"{path}.value"),
                                             item.nullable))
    if pa.types.is_struct(t):
        return pa.struct([normalize_arrow_field(t.field(i), f"{path}.{t.field(i).name}")
                          for i in range(t.num_fields)])
    if pa.types.is_null(t):
        raise TableError(f"column {path!r} has no type (all values null, Spark's void); cast it to a concrete "
                         "type before writing")
    raise TableError(f"column {path!r}: type {t} cannot be stored in a Hudi table")


def _is(t: pa.DataType, predicate: str) -> bool:
    fn = getattr(pa.types, predicate, None)
    return bool(fn(t)) if fn is not None else False


# --- Arrow → Avro ----------------------------------------------------------------------------------------------

def decimal_fixed_size(precision: int) -> int:
    """Bytes of the smallest two's-complement integer holding ``precision`` decimal digits."""
    size = 1
    while 2 ** (8 * size - 1) < 10 ** precision:
        size += 1
    return size


def _check_name(name: str, path: str) -> None:
    if not _AVRO_NAME_RE.match(name):
        raise TableError(f"column {path!r}: {name!r} is not a valid Avro field name (letters, digits and "
                         "underscores, not starting with a digit); rename it before writing")


def _avro_type(t: pa.DataType, name: str, namespace: str, path: str) -> Any:
    """Avro type of a non-null Arrow type; ``name``/``namespace`` name any record or fixed it defines."""
    child_ns = f"{namespace}.{name}" if namespace else name
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int32(t):
        return "int"
    if pa.types.is_int64(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t):
        return "string"
    if pa.types.is_binary(t):
        return "bytes"
    if pa.types.is_decimal(t):
        return {"type": "fixed", "name": "fixed", "namespace": child_ns, "size": decimal_fixed_size(t.precision),
                "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if pa.types.is_fixed_size_binary(t):
        return {"type": "fixed", "name": "fixed", "namespace": child_ns, "size": t.byte_width}
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        unit = "millis" if t.unit == "ms" else "micros"
        return {"type": "long", "logicalType": f"timestamp-{unit}" if t.tz else f"local-timestamp-{unit}"}
    if pa.types.is_time32(t):
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_time64(t):
        return {"type": "long", "logicalType": "time-micros"}
    if pa.types.is_list(t):
        item = t.value_field
        return {"type": "array", "items": _nullable(item.type, item.nullable, name, namespace, path + ".element")}
    if pa.types.is_map(t):
        item = t.item_field
        return {"type": "map", "values": _nullable(item.type, item.nullable, name, namespace, path + ".value")}
    if pa.types.is_struct(t):
        fields = [_avro_field(t.field(i), child_ns, f"{path}.{t.field(i).name}") for i in range(t.num_fields)]
        out: dict[str, Any] = {"type": "record", "name": name}
        if namespace:
            out["namespace"] = namespace
        out["fields"] = fields
        return out
    raise TableError(f"column {path!r}: type {t} has no Avro equivalent (normalize the schema first)")


def _nullable(t: pa.DataType, nullable: bool, name: str, namespace: str, path: str) -> Any:
    inner = _avro_type(t, name, namespace, path)
    return ["null", inner] if nullable else inner


def _avro_field(field: pa.Field, namespace: str, path: str) -> dict[str, Any]:
    _check_name(field.name, path)
    out: dict[str, Any] = {"name": field.name,
                           "type": _nullable(field.type, field.nullable, field.name, namespace, path)}
    if field.nullable:
        out["default"] = None
    return out


def _meta_avro_field(name: str) -> dict[str, Any]:
    return {"name": name, "type": ["null", "string"], "doc": "", "default": None}


def arrow_to_avro(schema: pa.Schema, table_name: str, *, with_meta_fields: bool = False) -> dict[str, Any]:
    """The Avro record Hudi writes for data of this (normalised) schema; meta columns in ``schema`` are
    ignored, and with ``with_meta_fields`` the five meta fields come first."""
    name, namespace = record_name_and_namespace(table_name)
    data = [f for f in normalize_arrow_schema(schema) if f.name not in META_FIELDS]
    fields = [_meta_avro_field(m) for m in META_FIELDS] if with_meta_fields else []
    fields += [_avro_field(f, f"{namespace}.{name}", f.name) for f in data]
    return {"type": "record", "name": name, "namespace": namespace, "fields": fields}


def arrow_to_avro_json(schema: pa.Schema, table_name: str, *, with_meta_fields: bool = False) -> str:
    """``arrow_to_avro`` as compact JSON, the way Hudi stores it (no spaces)."""
    return avro_json(arrow_to_avro(schema, table_name, with_meta_fields=with_meta_fields))


def avro_json(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, separators=(",", ":"))


# --- Avro → Arrow ----------------------------------------------------------------------------------------------

def _load(avro_schema: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(avro_schema, Mapping):
        return dict(avro_schema)
    try:
        parsed = json.loads(avro_schema)
    except json.JSONDecodeError as e:
        raise MetadataDecodeError(f"Avro schema is not valid JSON ({e})") from e
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise MetadataDecodeError("Avro schema is not a record schema")
    return parsed


class _AvroReader:
    """Converts one Avro schema, remembering named types so later references resolve."""

    def __init__(self) -> None:
        self.named: dict[str, pa.DataType] = {}

    def _register(self, node: Mapping[str, Any], namespace: str, t: pa.DataType) -> str:
        name = str(node.get("name", ""))
        ns = str(node.get("namespace", namespace) or "")
        full = name if "." in name else (f"{ns}.{name}" if ns else name)
        self.named[full] = t
        self.named.setdefault(full.rsplit(".", 1)[-1], t)
        return full.rsplit(".", 1)[0] if "." in full else ""

    def field_type(self, node: Any, namespace: str, path: str) -> tuple[pa.DataType, bool]:
        """(Arrow type, nullable) of an Avro type node."""
        if isinstance(node, list):
            members = [m for m in node if m != "null"]
            if len(members) != 1:
                raise TableError(f"column {path!r}: Avro union {json.dumps(node)[:200]} is not supported (only "
                                 "a type or null)")
            inner, _ = self.field_type(members[0], namespace, path)
            return inner, len(members) != len(node)
        return self.type_of(node, namespace, path), False

    def type_of(self, node: Any, namespace: str, path: str) -> pa.DataType:
        if isinstance(node, str):
            return self._named_or_primitive(node, namespace, path)
        if not isinstance(node, Mapping):
            raise TableError(f"column {path!r}: unreadable Avro type {node!r}")
        kind = node.get("type")
        logical = node.get("logicalType")
        if kind == "record":
            full = self._full_name(node, namespace)
            child_ns = full.rsplit(".", 1)[0] if "." in full else ""
            fields = []
            for f in node.get("fields", []):
                ft, nullable = self.field_type(f["type"], child_ns, f"{path}.{f['name']}" if path else f["name"])
                fields.append(pa.field(f["name"], ft, nullable=nullable))
            t: pa.DataType = pa.struct(fields)
            self._register(node, namespace, t)
            return t
        if kind == "enum":
            self._register(node, namespace, pa.string())
            return pa.string()
        if kind == "fixed":
            if logical == "decimal":
                t = _decimal(int(node["precision"]), int(node.get("scale", 0)))
            else:
                t = pa.binary(int(node["size"]))
            self._register(node, namespace, t)
            return t
        if kind == "array":
            it, nullable = self.field_type(node["items"], namespace, f"{path}.element")
            return pa.list_(pa.field("element", it, nullable))
        if kind == "map":
            vt, nullable = self.field_type(node["values"], namespace, f"{path}.value")
            return pa.map_(pa.string(), pa.field("value", vt, nullable))
        if isinstance(kind, str):
            return _logical(kind, logical, node, path) or self._named_or_primitive(kind, namespace, path)
        return self.type_of(kind, namespace, path)

    def _full_name(self, node: Mapping[str, Any], namespace: str) -> str:
        name = str(node.get("name", ""))
        ns = str(node.get("namespace", namespace) or "")
        return name if "." in name else (f"{ns}.{name}" if ns else name)

    def _named_or_primitive(self, name: str, namespace: str, path: str) -> pa.DataType:
        primitive = _PRIMITIVES.get(name)
        if primitive is not None:
            return primitive
        for candidate in (f"{namespace}.{name}" if namespace else name, name):
            if candidate in self.named:
                return self.named[candidate]
        raise TableError(f"column {path!r}: unknown Avro type {name!r}")


_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
    "double": pa.float64(), "string": pa.string(), "bytes": pa.binary(),
}


def _decimal(precision: int, scale: int) -> pa.DataType:
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)


def _logical(kind: str, logical: Any, node: Mapping[str, Any], path: str) -> pa.DataType | None:
    if logical is None:
        return None
    if kind == "int" and logical == "date":
        return pa.date32()
    if kind == "int" and logical == "time-millis":
        return pa.time32("ms")
    if kind == "long" and logical == "time-micros":
        return pa.time64("us")
    if kind == "long" and logical in ("timestamp-millis", "timestamp-micros"):
        return pa.timestamp("ms" if logical.endswith("millis") else "us", tz="UTC")
    if kind == "long" and logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return pa.timestamp("ms" if logical.endswith("millis") else "us")
    if kind == "bytes" and logical == "decimal":
        return _decimal(int(node["precision"]), int(node.get("scale", 0)))
    return None  # unknown logical types read as their underlying type, as Avro readers do


def avro_to_arrow(avro_schema: str | Mapping[str, Any], *, drop_meta_fields: bool = True) -> pa.Schema:
    """The Arrow schema of an Avro record schema (a union with null means nullable)."""
    parsed = _load(avro_schema)
    reader = _AvroReader()
    struct = reader.type_of(parsed, "", "")
    fields = [struct.field(i) for i in range(struct.num_fields)]
    if drop_meta_fields:
        fields = [f for f in fields if f.name not in META_FIELDS]
    return pa.schema(fields)
