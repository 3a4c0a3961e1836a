"""A registered schema as an Arrow type: the type of a schema'd topic's typed table column.

Each function answers ``(arrow type, convert)``: ``convert`` turns one decoded record (what fastavro's
reader, ``orjson.loads`` or a Protobuf message gives) into the Python value ``pa.array(values, type)``
takes, or is None where the decoded value is taken as it is (most types: then a column is built by Arrow in
one go).

Types are chosen so that compatible registry evolution never changes a column's type, only adds nested
fields (Delta schema merge, metadata only):

- **Avro** (the JSON schema object): ``record`` -> struct; ``int`` and ``long`` -> int64 and ``float`` and
  ``double`` -> float64 (Avro's promotions int -> long, float -> double leave the column as it is);
  ``string``, ``enum``, ``uuid`` -> string; ``bytes``, ``fixed`` -> binary; ``decimal`` -> decimal128;
  ``date`` -> date32; ``timestamp-millis``/``-micros`` -> timestamp(us, UTC); ``local-timestamp-*`` ->
  timestamp(us); ``time-*`` -> string (Delta has no time type); ``array`` -> list; ``map`` -> map<string, _>;
  ``[null, T]`` -> T (nullable); any other union, and a recursive type, -> string holding the JSON.
- **JSON Schema** (``properties`` / ``type``): ``object`` with ``properties`` -> struct; ``integer`` ->
  int64; ``number`` -> float64; ``string``; ``boolean``; ``array`` with ``items`` -> list; ``["T", "null"]``
  -> T; anything else (``$ref``, ``oneOf``, an object without ``properties``) -> string holding the JSON.
- **Protobuf** (the message descriptor): message -> struct; every integer type -> int64 (``uint64`` /
  ``fixed64`` above 2**63 - 1 leaves the record's struct null); ``float``/``double`` -> float64; ``bool``;
  ``string``; ``bytes`` -> binary; enum -> string (the value's name); ``repeated`` -> list; ``map<K, V>`` ->
  map; an unset message field -> null; a recursive message -> string holding its JSON.

Field names Delta refuses in a column name (`` ,;{}()\\n\\t=``) are left out of the struct.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

__all__ = ["Convert", "avro_type", "json_schema_type", "protobuf_message_value", "protobuf_type"]

#: One decoded value -> the Python value Arrow takes (None passes through); None = the value as it is.
Convert = Callable[[Any], Any] | None

_BAD_NAME_CHARS = frozenset(" ,;{}()\n\t=")


def _ok_name(name: str) -> bool:
    return bool(name) and not (_BAD_NAME_CHARS & set(name))


def _as_json(value: Any) -> Any:
    """A value of a union or an untyped part as its JSON text (a string quoted: ``"c"``, ``5``)."""
    if value is None:
        return None
    return json.dumps(value, default=str, ensure_ascii=False)


def _struct(fields: list[tuple[str, pa.DataType, Convert]]) -> tuple[pa.DataType, Convert]:
    arrow = pa.struct([pa.field(name, t) for name, t, _ in fields])
    converters = [(name, c) for name, _, c in fields if c is not None]
    if not converters:
        return arrow, None

    def convert(record: Any) -> Any:
        if record is None:
            return None
        out = dict(record)
        for name, c in converters:
            v = out.get(name)
            if v is not None:
                out[name] = c(v)
        return out
    return arrow, convert


def _list(item: tuple[pa.DataType, Convert]) -> tuple[pa.DataType, Convert]:
    t, c = item
    if c is None:
        return pa.list_(t), None
    return pa.list_(t), lambda xs: None if xs is None else [None if x is None else c(x) for x in xs]


def _map(value: tuple[pa.DataType, Convert]) -> tuple[pa.DataType, Convert]:
    t, c = value
    if c is None:
        return pa.map_(pa.string(), t), None
    return pa.map_(pa.string(), t), lambda m: None if m is None else {k: None if v is None else c(v)
                                                                        for k, v in m.items()}


# -- Avro -------------------------------------------------------------------------------------------

_AVRO_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(), "int": pa.int64(), "long": pa.int64(), "float": pa.float64(),
    "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(),
}


def avro_type(schema: Any, *, named: dict[str, Any] | None = None) -> tuple[pa.DataType, Convert]:
    """The Arrow type of an Avro schema (its JSON object: a dict, list or name) and its ``convert``.

    ``named``: named types defined elsewhere (the schema's references), full name -> JSON object.
    """
    return _avro(schema, dict(named or {}), namespace=None, open_names=frozenset())


def _avro(schema: Any, named: dict[str, Any], *, namespace: str | None,
          open_names: frozenset[str]) -> tuple[pa.DataType, Convert]:
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[schema], None
        if schema == "null":
            return pa.string(), None  # only ever null
        full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
        if full in open_names or schema in open_names:
            return pa.string(), _as_json  # recursive: its JSON
        found = named.get(full, named.get(schema))
        if found is None:
            return pa.string(), _as_json
        return _avro(found, named, namespace=namespace, open_names=open_names)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            return _avro(branches[0], named, namespace=namespace, open_names=open_names)
        return pa.string(), _as_json
    if not isinstance(schema, dict):
        return pa.string(), _as_json
    kind, logical = schema.get("type"), schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed") and int(schema.get("precision", 0)) <= 38:
        return pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0))), None
    if logical == "date" and kind == "int":
        return pa.date32(), None
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return pa.timestamp("us", tz="UTC"), None
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return pa.timestamp("us"), None
    if logical in ("time-millis", "time-micros", "uuid"):
        return pa.string(), lambda v: None if v is None else str(v)
    if kind in ("record", "error", "enum", "fixed"):
        name = schema.get("name", "")
        ns = schema.get("namespace", namespace)
        full = name if "." in name or not ns else f"{ns}.{name}"
        named.setdefault(full, schema)
        named.setdefault(name, schema)
        if kind == "enum":
            return pa.string(), None
        if kind == "fixed":
            return pa.binary(), None
        inner = open_names | {full, name}
        fields = []
        for f in schema.get("fields", []):
            if _ok_name(f.get("name", "")):
                t, c = _avro(f["type"], named, namespace=ns, open_names=inner)
                fields.append((f["name"], t, c))
        if not fields:
            return pa.string(), _as_json
        return _struct(fields)
    if kind == "array":
        return _list(_avro(schema.get("items"), named, namespace=namespace, open_names=open_names))
    if kind == "map":
        return _map(_avro(schema.get("values"), named, namespace=namespace, open_names=open_names))
    return _avro(kind, named, namespace=namespace, open_names=open_names)


# -- JSON Schema ------------------------------------------------------------------------------------

_JSON_PRIMITIVES: dict[str, pa.DataType] = {
    "integer": pa.int64(), "number": pa.float64(), "string": pa.string(), "boolean": pa.bool_(),
}


def json_schema_type(schema: Any) -> tuple[pa.DataType, Convert]:
    """The Arrow type of a JSON Schema document (or sub-schema) and its ``convert``."""
    if not isinstance(schema, dict):
        return pa.string(), _as_json
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind in _JSON_PRIMITIVES and not any(k in schema for k in ("oneOf", "anyOf", "$ref")):
        if kind == "number":
            return pa.float64(), lambda v: None if v is None else float(v)
        return _JSON_PRIMITIVES[kind], None
    if kind == "object" and isinstance(schema.get("properties"), dict) and schema["properties"]:
        fields = [(name, *json_schema_type(sub)) for name, sub in schema["properties"].items() if _ok_name(name)]
        if fields:
            return _struct(fields)
    if kind == "array" and isinstance(schema.get("items"), dict):
        return _list(json_schema_type(schema["items"]))
    return pa.string(), _as_json


# -- Protobuf ---------------------------------------------------------------------------------------

_INTS = {FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
         FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64,
         FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED32,
         FieldDescriptor.TYPE_SFIXED64}


def protobuf_type(descriptor: Descriptor) -> pa.DataType:
    """The Arrow type of a Protobuf message (its descriptor): the struct :func:`protobuf_message_value`
    fills."""
    return _proto_message_type(descriptor, frozenset())


def _proto_message_type(descriptor: Descriptor, open_names: frozenset[str]) -> pa.DataType:
    inner = open_names | {descriptor.full_name}
    fields = [pa.field(f.name, _proto_field_type(f, inner)) for f in descriptor.fields if _ok_name(f.name)]
    return pa.struct(fields) if fields else pa.string()


def _is_map(f: FieldDescriptor) -> bool:
    return f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type.GetOptions().map_entry


def _proto_field_type(f: FieldDescriptor, open_names: frozenset[str]) -> pa.DataType:
    if _is_map(f):
        key, value = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
        return pa.map_(_proto_scalar_type(key, open_names), _proto_scalar_type(value, open_names))
    t = _proto_scalar_type(f, open_names)
    return pa.list_(t) if f.is_repeated else t


def _proto_scalar_type(f: FieldDescriptor, open_names: frozenset[str]) -> pa.DataType:
    if f.type in _INTS:
        return pa.int64()
    if f.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return pa.float64()
    if f.type == FieldDescriptor.TYPE_BOOL:
        return pa.bool_()
    if f.type == FieldDescriptor.TYPE_BYTES:
        return pa.binary()
    if f.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        if f.message_type.full_name in open_names:
            return pa.string()  # recursive: its JSON
        return _proto_message_type(f.message_type, open_names)
    return pa.string()  # string, enum


def protobuf_message_value(message: Any, arrow_type: pa.DataType) -> Any:
    """A decoded Protobuf message as the Python value of ``arrow_type`` (:func:`protobuf_type` of its
    descriptor, or of an older version's: fields the type lacks are left out)."""
    if not pa.types.is_struct(arrow_type):
        return json_format.MessageToJson(message)
    out: dict[str, Any] = {}
    fields = message.DESCRIPTOR.fields_by_name
    for field in arrow_type:
        f = fields.get(field.name)
        if f is None:
            continue
        value = getattr(message, f.name)
        if _is_map(f):
            vt = field.type.item_type
            out[f.name] = [(k, _proto_scalar(f.message_type.fields_by_name["value"], v, vt)) for k, v in value.items()]
        elif f.is_repeated:
            out[f.name] = [_proto_scalar(f, v, field.type.value_type) for v in value]
        elif f.type == FieldDescriptor.TYPE_MESSAGE and not message.HasField(f.name):
            out[f.name] = None
        else:
            out[f.name] = _proto_scalar(f, value, field.type)
    return out


def _proto_scalar(f: FieldDescriptor, value: Any, arrow_type: pa.DataType) -> Any:
    if f.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        return protobuf_message_value(value, arrow_type)
    if f.type == FieldDescriptor.TYPE_ENUM:
        found = f.enum_type.values_by_number.get(value)
        return found.name if found is not None else str(value)
    return value
