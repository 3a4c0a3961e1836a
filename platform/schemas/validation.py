"""Broker-side schema validation of produced keys and values (Confluent Server's
``confluent.value.schema.validation``), one column at a time.

A topic whose value (or key) subject is set (:meth:`TopicConfig.value_subject
<lakelog.config.TopicConfig.value_subject>`) takes a record only when its value is in Confluent's wire format
(:mod:`lakelog.schemas.wire_format`: magic byte 0, a 4-byte schema id) with an id that is a version of that
subject (not soft-deleted), and its payload decodes against that schema:

============  ===============================================================================================
type          the payload must be
============  ===============================================================================================
``AVRO``      Avro's binary encoding of the schema (fastavro's compiled reader, the schema parsed once:
              :class:`~lakelog.schemas.avro_datums.AvroDatumReader`)
``JSON``      a JSON document valid against the JSON Schema (orjson, then jsonschema-rs' compiled validator;
              jsonschema's for a schema with references)
``PROTOBUF``  message indexes naming a message of the schema, then that message's binary encoding (protobuf)
============  ===============================================================================================

A null (a tombstone) passes. Confluent Server checks the id only; lakelog decodes too, so a table's typed
columns never meet bytes their schema does not read.

:class:`SubjectValidator` holds one subject's compiled readers (one per schema id, built on first use and
kept while the subject's versions are the same); :meth:`SubjectValidator.failures` checks a whole column:
the magic byte and id of every record with numpy over the column's Arrow buffers, then each schema id's
records with that id's reader. Blocking: call it off the event loop.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import jsonschema
import jsonschema_rs
import numpy as np
import orjson
import pyarrow as pa

from lakelog.schemas.avro_datums import AvroDatumReader
from lakelog.schemas.protobuf_schemas import decode_message_indexes, message_class
from lakelog.schemas.registry_state import RegistryView, SchemaVersion
from lakelog.schemas.wire_format import MAGIC_BYTE, _json_validator

__all__ = ["FramedColumn", "RecordField", "SubjectValidator", "framed_column", "wire_format_failures"]

#: which part of a record a subject validates
RecordField = Literal["key", "value"]

#: a compiled check of one schema's payloads: ``check(data, stream, start, end)`` checks ``data[start:end]``
#: (``stream``: an ``io.BytesIO`` over ``data``, for Avro's reader); raises ValueError (or any exception)
#: naming what is wrong
PayloadCheck = Callable[[bytes, io.BytesIO, int, int], None]


def wire_format_failures(values: pa.Array | pa.ChunkedArray) -> tuple[dict[int, str], np.ndarray, np.ndarray]:
    """The records of a binary column not in Confluent's wire format, and the schema id of the others.

    Returns:
        ``(failures, rows, ids)``: record index -> reason (to follow "its value ...") for each non-null value
        shorter than 5 bytes or whose first byte is not 0; ``rows`` (int64) the indexes of the framed values
        and ``ids`` (int64) their schema ids, in order. Nulls are in neither.
    """
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if arr.type != pa.binary():
        arr = arr.cast(pa.binary())
    n = len(arr)
    if n == 0:
        return {}, np.zeros(0, np.int64), np.zeros(0, np.int64)
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32)[arr.offset: arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    starts, lengths = offsets[:-1], np.diff(offsets)
    long_enough = valid & (lengths >= 5)
    rows = np.flatnonzero(long_enough)
    at = starts[rows]
    magic = data[at] if len(at) else np.zeros(0, np.uint8)
    failures = {int(i): f"is {int(lengths[i])} bytes, too short for Confluent's wire format (magic byte 0 and a "
                        "4-byte schema id)" for i in np.flatnonzero(valid & (lengths < 5))}
    bad_magic = magic != MAGIC_BYTE
    for i, m in zip(rows[bad_magic].tolist(), magic[bad_magic].tolist()):
        failures[i] = f"starts with byte {m}, not Confluent's wire format's magic byte 0"
    rows, at = rows[~bad_magic], at[~bad_magic]
    ids = ((data[at + 1].astype(np.int64) << 24) | (data[at + 2].astype(np.int64) << 16)
           | (data[at + 3].astype(np.int64) << 8) | data[at + 4].astype(np.int64))
    return failures, rows, ids


@dataclass(frozen=True)
class FramedColumn:
    """A binary column of records in Confluent's wire format, grouped by schema id for decoding
    (:func:`framed_column`).

    Attributes:
        failures: record index -> why it is not in the wire format (as :func:`wire_format_failures`).
        data: the column's data buffer; stream: an ``io.BytesIO`` over ``data`` (for Avro's reader).
        groups: per schema id, in id order: ``(schema id, record indexes, payload starts, payload ends)``,
            a record's payload (after the magic byte and id) being ``data[start:end]``.
    """

    failures: dict[int, str]
    data: bytes
    stream: io.BytesIO
    groups: list[tuple[int, list[int], list[int], list[int]]]


def framed_column(values: pa.Array | pa.ChunkedArray) -> FramedColumn:
    """``values`` (binary) as a :class:`FramedColumn`: magic byte and id read with numpy over the Arrow
    buffers, one copy of the data buffer, no bytes object per record."""
    failures, rows, ids = wire_format_failures(values)
    if not len(rows):
        return FramedColumn(failures, b"", io.BytesIO(), [])
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if arr.type != pa.binary():
        arr = arr.cast(pa.binary())
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32)[arr.offset: arr.offset + len(arr) + 1]
    data = data_buf.to_pybytes()
    unique = np.unique(ids)
    groups = []
    for schema_id in unique.tolist():
        sel = rows if len(unique) == 1 else rows[ids == schema_id]
        groups.append((schema_id, sel.tolist(), (offsets[sel] + 5).tolist(), offsets[sel + 1].tolist()))
    return FramedColumn(failures, data, io.BytesIO(data), groups)


def _payload_check(version: SchemaVersion, referenced: Sequence[tuple[str, str]]) -> PayloadCheck:
    """A compiled check of payloads (after the 5 bytes of magic and id) written with ``version``'s schema."""
    if version.schema_type == "AVRO":
        read = AvroDatumReader(version.schema, referenced).read

        def check_avro(data: bytes, stream: io.BytesIO, start: int, end: int) -> None:
            stream.seek(start)
            read(stream)
            if stream.tell() != end:
                raise ValueError(f"the Avro datum is {stream.tell() - start} bytes, the payload {end - start}")
        return check_avro
    if version.schema_type == "JSON":
        if referenced:  # $refs to other subjects' schemas by their reference names: jsonschema's registry
            slow = _json_validator(version.schema, referenced)

            def check_json_referencing(data: bytes, stream: io.BytesIO, start: int, end: int) -> None:
                error = jsonschema.exceptions.best_match(slow.iter_errors(orjson.loads(memoryview(data)[start:end])))
                if error is not None:
                    where = "/".join(str(p) for p in error.absolute_path) or "(the document)"
                    raise ValueError(f"not valid at {where}: {error.message}")
            return check_json_referencing
        validator = jsonschema_rs.validator_for(orjson.loads(version.schema))

        def check_json(data: bytes, stream: io.BytesIO, start: int, end: int) -> None:
            document = orjson.loads(memoryview(data)[start:end])
            if not validator.is_valid(document):
                error = next(iter(validator.iter_errors(document)))
                where = "/".join(str(p) for p in error.instance_path) or "(the document)"
                raise ValueError(f"not valid at {where}: {error.message}")
        return check_json
    classes: dict[tuple[int, ...], type] = {}

    def check_protobuf(data: bytes, stream: io.BytesIO, start: int, end: int) -> None:
        payload = data[start:end]
        indexes, pos = decode_message_indexes(payload[:64], 0)
        key = tuple(indexes)
        cls = classes.get(key)
        if cls is None:
            cls = classes[key] = message_class(version.schema, indexes, imports=referenced)
        cls().ParseFromString(payload[pos:])
    return check_protobuf


_LABELS = {"AVRO": "Avro", "JSON": "JSON Schema", "PROTOBUF": "Protobuf"}


class SubjectValidator:
    """The schema validation of one subject: which ids it takes, and a compiled check per id.

    Args:
        subject: the registry subject. field: ``key`` or ``value`` (for messages).
        versions: the subject's versions that are not soft-deleted (their ids are the ids it takes).
        view: the registry view (referenced schemas).
    """

    def __init__(self, subject: str, *, field: RecordField, versions: Sequence[SchemaVersion],
                 view: RegistryView) -> None:
        self.subject = subject
        self.field = field
        self.versions = {v.schema_id: v for v in versions}
        self.identity = tuple(sorted((v.version, v.schema_id) for v in versions))
        self._view = view
        self._checks: dict[int, PayloadCheck] = {}

    def unknown_ids(self, values: pa.Array | pa.ChunkedArray) -> set[int]:
        """The schema ids of the column's framed records that are not versions of the subject (as this
        validator knows it). Cheap: the ids are read with numpy, nothing is decoded."""
        _, _, ids = wire_format_failures(values)
        return {i for i in np.unique(ids).tolist() if i not in self.versions}

    def failures(self, values: pa.Array | pa.ChunkedArray) -> dict[int, str]:
        """Record index -> why its ``field`` is refused (to follow "its value ..."), for each record of the
        column that fails (empty: every record passes; nulls pass). Blocking (decodes every framed record)."""
        column = framed_column(values)
        failures = column.failures
        for schema_id, indexes, starts, ends in column.groups:
            version = self.versions.get(schema_id)
            if version is None:
                reason = (f"has schema id {schema_id}, which is not a version of subject '{self.subject}' "
                          f"(its ids: {sorted(self.versions) or 'none'})")
                failures.update((i, reason) for i in indexes)
                continue
            check = self._checks.get(schema_id)
            if check is None:
                check = self._checks[schema_id] = _payload_check(
                    version, self._view.referenced_schemas(version.references))
            label = _LABELS[version.schema_type]
            data, stream = column.data, column.stream
            for i, start, end in zip(indexes, starts, ends):
                try:
                    check(data, stream, start, end)
                except Exception as e:  # noqa: BLE001 - each library's many ways of refusing the bytes
                    failures[i] = (f"it does not decode as {label} of schema id {schema_id} (subject "
                                   f"'{self.subject}' version {version.version}): {type(e).__name__}: {e}")
        return failures
