"""The typed table columns of schema'd topics, decoded from the registry's schemas at flush.

:class:`RegistryColumns` is the :class:`~lakelog.log_tables.typed_columns.RecordDecoder` the broker gives its
log manager: for one column of framed keys or values and a subject it answers the typed column, one value
per record.

Steps of :meth:`RegistryColumns.__call__`:

1. the subject's versions in the registry view: none -> None (no column); the column's type is the latest
   version's (:mod:`~lakelog.schemas.arrow_types`), so compatible evolution adds nested fields;
2. each record: Confluent's wire format (magic byte 0, 4-byte schema id; Protobuf's message indexes
   after it) and a schema id that is a version of the subject (soft-deleted ones too), decoded with *that*
   version's schema (the writer's: :class:`~lakelog.schemas.avro_datums.AvroDatumReader`, ``orjson``, the Protobuf message class);
   anything else is null (the raw bytes stay the truth);
3. Arrow builds the column in one go; when a value does not fit the type (a JSON document the schema
   allowed but the column cannot hold), the records are built one by one and those are null.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pyarrow as pa

from lakelog.schemas.arrow_types import (Convert, avro_type, json_schema_type, protobuf_message_value,
                                         protobuf_type)
from lakelog.schemas.avro_datums import AvroDatumReader
from lakelog.schemas.protobuf_schemas import decode_message_indexes, message_class
from lakelog.schemas.registry_state import RegistryView, SchemaVersion
from lakelog.schemas.wire_format import MAGIC_BYTE

log = logging.getLogger(__name__)

__all__ = ["RegistryColumns", "column_type"]

#: A payload (after magic byte and schema id) -> the decoded record; raises when it does not decode.
Reader = Callable[[memoryview], Any]


class RegistryColumns:
    """Typed columns from the registry (see the module docstring).

    Args:
        view_of: the registry view to read (``lambda: registry.view``); read from flushers' worker threads.
    """

    def __init__(self, view_of: Callable[[], RegistryView]) -> None:
        self._view_of = view_of
        self._types: dict[int, tuple[pa.DataType, Convert]] = {}  # latest schema id -> its column type
        self._readers: dict[tuple[int, int], Reader] = {}         # (schema id, latest id) -> reader

    def __call__(self, *, subject: str, data: pa.Array | pa.ChunkedArray) -> pa.Array | None:
        """The typed column of ``data`` (framed keys or values) against ``subject``; None when the subject has
        no schema. Never raises for a record's bytes."""
        view = self._view_of()
        # 1. the subject's versions; the column's type is the latest's
        current = view.versions(subject)
        if not current:
            return None
        latest = current[-1]
        versions = {v.schema_id: v for v in view.versions(subject, deleted=True)}
        arrow_type, convert = self._column_type(view, latest)
        # 2. each record decoded with its own version's schema
        values: list[Any] = [None] * len(data)
        for i, raw in enumerate(data.to_pylist()):
            if raw is None or len(raw) < 5 or raw[0] != MAGIC_BYTE:
                continue
            version = versions.get(int.from_bytes(raw[1:5], "big"))
            if version is None:
                continue
            try:
                value = self._reader(view, version, latest.schema_id, arrow_type)(memoryview(raw)[5:])
                values[i] = value if convert is None or value is None else convert(value)
            except Exception:  # noqa: BLE001 - not of its schema (each library has its own errors): null
                continue
        # 3. one Arrow build; one by one when a value does not fit
        return _build(values, arrow_type)

    def _column_type(self, view: RegistryView, latest: SchemaVersion) -> tuple[pa.DataType, Convert]:
        found = self._types.get(latest.schema_id)
        if found is None:
            found = self._types[latest.schema_id] = _type_of(view, latest)
        return found

    def _reader(self, view: RegistryView, version: SchemaVersion, latest_id: int, arrow_type: pa.DataType) -> Reader:
        key = (version.schema_id, latest_id)
        found = self._readers.get(key)
        if found is None:
            found = self._readers[key] = _reader_of(view, version, arrow_type)
        return found


def column_type(schema_type: str, schema: str, *,
                referenced: Sequence[tuple[str, str]] = ()) -> tuple[pa.DataType, Convert]:
    """The typed column's Arrow type for a registered schema (``AVRO``, ``JSON`` or ``PROTOBUF``: its first
    message) and its ``convert`` (:mod:`~lakelog.schemas.arrow_types`). ``referenced``: ``(name, schema
    text)`` of its references, dependencies first.

    Raises:
        ValueError, InvalidSchemaError: a schema that does not parse.
    """
    if schema_type == "AVRO":
        named: dict[str, Any] = {}
        for _, text in referenced:
            obj = orjson.loads(text)
            if isinstance(obj, dict) and "name" in obj:
                ns, name = obj.get("namespace"), obj["name"]
                named[name if "." in name or not ns else f"{ns}.{name}"] = obj
        return avro_type(orjson.loads(schema), named=named)
    if schema_type == "JSON":
        return json_schema_type(orjson.loads(schema))
    return protobuf_type(message_class(schema, [0], imports=referenced).DESCRIPTOR), None


def _type_of(view: RegistryView, version: SchemaVersion) -> tuple[pa.DataType, Convert]:
    return column_type(version.schema_type, version.schema, referenced=view.referenced_schemas(version.references))


def _reader_of(view: RegistryView, version: SchemaVersion, arrow_type: pa.DataType) -> Reader:
    referenced = view.referenced_schemas(version.references)
    if version.schema_type == "AVRO":
        return AvroDatumReader(version.schema, referenced).read_payload
    if version.schema_type == "JSON":
        return orjson.loads

    classes: dict[tuple[int, ...], Any] = {}

    def read_protobuf(payload: memoryview) -> Any:
        indexes, pos = decode_message_indexes(bytes(payload[:64]), 0)
        cls = classes.get(tuple(indexes))
        if cls is None:
            cls = classes[tuple(indexes)] = message_class(version.schema, indexes, imports=referenced)
        message = cls()
        message.ParseFromString(bytes(payload[pos:]))
        return protobuf_message_value(message, arrow_type)
    return read_protobuf


def _build(values: list[Any], arrow_type: pa.DataType) -> pa.Array:
    try:
        return pa.array(values, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        pass
    one_by_one = []
    for value in values:
        try:
            one_by_one.append(pa.array([value], type=arrow_type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            one_by_one.append(pa.nulls(1, arrow_type))
    return pa.concat_arrays(one_by_one) if one_by_one else pa.array([], type=arrow_type)
