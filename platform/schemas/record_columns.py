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
   anything else is null (the raw bytes stay the truth). An id above every id the view holds was most
   likely registered through another broker a moment ago: with ``unknown_id_wait_s`` the column is not
   built (:class:`~lakelog.errors.TypedColumnsNotReadyError`, the flush commits nothing and tries again)
   until the view holds it or that many seconds passed since the id was first seen;
3. Arrow builds the column in one go; when a value does not fit the type (a JSON document the schema
   allowed but the column cannot hold), the records are built one by one and those are null.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from lakelog.errors import TypedColumnsNotReadyError
from lakelog.schemas.arrow_types import (Convert, avro_type, json_schema_type, protobuf_message_value,
                                         protobuf_type)
from lakelog.schemas.avro_datums import AvroDatumReader
from lakelog.schemas.protobuf_schemas import decode_message_indexes, message_class
from lakelog.schemas.registry_state import RegistryView, SchemaVersion
from lakelog.schemas.validation import framed_column, wire_format_failures

log = logging.getLogger(__name__)

__all__ = ["TYPED_COLUMN_UNKNOWN_ID_WAIT_S", "RegistryColumns", "column_type"]

#: Seconds a broker's flush waits for a schema id above every id its registry view holds (registered
#: through another broker a moment ago) before its records' typed value is null: five flush rounds at the
#: default ``lake.commit.interval.ms``; a view normally holds a new id within milliseconds.
TYPED_COLUMN_UNKNOWN_ID_WAIT_S = 5.0

#: ``read(data, stream, start, end)``: the record whose payload (after magic byte and schema id) is
#: ``data[start:end]`` (``stream``: an ``io.BytesIO`` over ``data``); raises when it does not decode, or
#: does not end at ``end``.
Reader = Callable[[bytes, io.BytesIO, int, int], Any]


class RegistryColumns:
    """Typed columns from the registry (see the module docstring).

    Args:
        view_of: the registry view to read (``lambda: registry.view``); read from flushers' worker threads.
        ready: whether the view can be trusted yet (``lambda: registry.caught_up``: it has caught up with
            ``_schemas`` since the broker started). Default: always.
        unknown_id_wait_s: how long a schema id above the view's largest is waited for (step 2). Default
            0: such a record is null at once.
        monotonic: the clock of that wait (seconds). Default: ``time.monotonic``.
    """

    def __init__(self, view_of: Callable[[], RegistryView], *, ready: Callable[[], bool] = lambda: True,
                 unknown_id_wait_s: float = 0.0, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._view_of = view_of
        self._ready = ready
        self._unknown_id_wait_s = unknown_id_wait_s
        self._monotonic = monotonic
        self._first_seen: dict[int, float] = {}  # schema id above the view's largest -> when first seen
        self._types: dict[int, tuple[pa.DataType, Convert]] = {}  # latest schema id -> its column type
        self._readers: dict[tuple[int, int], Reader] = {}         # (schema id, latest id) -> reader

    def check(self, *, subject: str, data: pa.Array | pa.ChunkedArray) -> RegistryView | None:
        """What :meth:`__call__` checks before decoding (step 1 and the waits, from the records' schema ids
        alone): the registry view to decode ``data`` with, or None when ``subject`` has no schema.

        Raises:
            TypedColumnsNotReadyError: the registry view has not caught up since the broker started, or a record
                names a schema id above the view's largest, first seen less than ``unknown_id_wait_s`` ago (a
                schema not read yet would make its records null for good).
        """
        if not self._ready():
            raise TypedColumnsNotReadyError(f"The typed columns of subject '{subject}' wait for this broker's schema "
                                            "registry view, not read since the broker started; retry.")
        view = self._view_of()
        if not view.versions(subject):
            return None
        if self._unknown_id_wait_s > 0:
            _, _, ids = wire_format_failures(data)
            known = {v.schema_id for v in view.versions(subject, deleted=True)}
            self._wait_for_newer_ids(view, subject, [i for i in np.unique(ids).tolist() if i not in known])
        return view

    def __call__(self, *, subject: str, data: pa.Array | pa.ChunkedArray) -> pa.Array | None:
        """The typed column of ``data`` (framed keys or values) against ``subject``; None when the subject has
        no schema. Never raises for a record's bytes.

        Raises:
            TypedColumnsNotReadyError: as :meth:`check`.
        """
        view = self.check(subject=subject, data=data)
        if view is None:
            return None
        # 1. the subject's versions; the column's type is the latest's
        current = view.versions(subject)
        if not current:  # every version deleted since the check
            return None
        latest = current[-1]
        versions = {v.schema_id: v for v in view.versions(subject, deleted=True)}
        arrow_type, convert = self._column_type(view, latest)
        # 2. each record decoded with its own version's schema: magic byte and id read with numpy over the
        #    column's buffers, then each id's records by one reader from one stream over the data buffer
        column = framed_column(data)
        values: list[Any] = [None] * len(data)
        for schema_id, indexes, starts, ends in column.groups:
            version = versions.get(schema_id)
            if version is None:
                continue
            read = self._reader(view, version, latest.schema_id, arrow_type)
            raw, stream = column.data, column.stream
            for i, start, end in zip(indexes, starts, ends):
                try:
                    value = read(raw, stream, start, end)
                except Exception:  # noqa: BLE001 - not of its schema (each library has its own errors): null
                    continue
                values[i] = value if convert is None or value is None else convert(value)
        # 3. one Arrow build; one by one when a value does not fit
        return _build(values, arrow_type)

    def _wait_for_newer_ids(self, view: RegistryView, subject: str, missing: list[int]) -> None:
        """Raise TypedColumnsNotReadyError while one of ``missing`` (ids not a version of ``subject``) is above
        the view's largest id and was first seen less than ``unknown_id_wait_s`` ago (step 2)."""
        newer = [i for i in missing if i > view.max_id]
        if not newer or self._unknown_id_wait_s <= 0:
            return
        now = self._monotonic()
        if len(self._first_seen) > 10_000:  # ids of bytes that only look framed: forget the old ones
            self._first_seen = {i: t for i, t in self._first_seen.items() if now - t < self._unknown_id_wait_s}
        waiting = [i for i in newer if now - self._first_seen.setdefault(i, now) < self._unknown_id_wait_s]
        if waiting:
            raise TypedColumnsNotReadyError(
                f"The typed columns of subject '{subject}' wait for schema id(s) {waiting[:5]}, above every id this "
                f"broker's schema registry view holds ({view.max_id}); retry.")

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
        avro = AvroDatumReader(version.schema, referenced).read

        def read_avro(data: bytes, stream: io.BytesIO, start: int, end: int) -> Any:
            stream.seek(start)
            value = avro(stream)
            if stream.tell() != end:
                raise ValueError("the Avro datum does not end where the payload does")
            return value
        return read_avro
    if version.schema_type == "JSON":
        return lambda data, stream, start, end: orjson.loads(memoryview(data)[start:end])

    classes: dict[tuple[int, ...], Any] = {}

    def read_protobuf(data: bytes, stream: io.BytesIO, start: int, end: int) -> Any:
        indexes, pos = decode_message_indexes(data[start:min(end, start + 64)], 0)
        cls = classes.get(tuple(indexes))
        if cls is None:
            cls = classes[tuple(indexes)] = message_class(version.schema, indexes, imports=referenced)
        message = cls()
        message.ParseFromString(data[start + pos:end])
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
