"""Confluent's wire format of a schema'd key or value: magic byte 0, the schema id as 4 bytes big-endian,
then the serialized data, as Confluent's serializers frame records (``confluent_kafka.schema_registry``
and the Java ``AbstractKafkaSchemaSerDe``):

============  =========================================================================================
type          after the id
============  =========================================================================================
``AVRO``      Avro's binary encoding
``JSON``      the JSON text (UTF-8), validated against the schema first (jsonschema)
``PROTOBUF``  the message indexes (:mod:`lakelog.schemas.protobuf_schemas`; REST Proxy writes the first
              message, ``[0]``: the byte 0), then the message's binary encoding
============  =========================================================================================

The encoders take REST Proxy's JSON of a record (Avro's JSON encoding; the JSON document; protobuf's JSON
mapping) and frame a batch; the decoders give REST Proxy's JSON of framed records back (a consumer
instance of format ``avro``, ``jsonschema`` or ``protobuf``). Each encodes or decodes a whole batch with
one parsed schema, in the caller's thread (callers run them off the event loop).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence

import fastavro
import jsonschema
import jsonschema.validators
import orjson
import referencing
import referencing.exceptions
import referencing.jsonschema
from google.protobuf import json_format

from lakelog.errors import InvalidEncodingError
from lakelog.errors.groups import RecordDeserializationError
from lakelog.schemas.avro_datums import parse_avro
from lakelog.schemas.protobuf_schemas import decode_message_indexes, encode_message_indexes, message_class

__all__ = ["MAGIC_BYTE", "avro_frames", "decode_frames", "frame", "json_frames", "protobuf_frames", "python_frames"]

#: The first byte of every framed record.
MAGIC_BYTE = 0


def frame(schema_id: int, payload: bytes) -> bytes:
    """``payload`` framed: magic byte 0, ``schema_id`` (4 bytes, big-endian), ``payload``."""
    return bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big") + payload


def avro_frames(schema: str, referenced: Sequence[tuple[str, str]], schema_id: int, values: Sequence[object], *,
                what: str) -> list[bytes | None]:
    """Each of ``values`` (Avro's JSON encoding, as REST Proxy's ``application/vnd.kafka.avro.v2+json``
    bodies carry them: a union's branch as ``{"type": value}``) in Avro's binary encoding, framed; None
    stays None (a tombstone).

    Args:
        schema: the Avro schema (JSON). referenced: ``(name, schema)`` of its references, dependencies first.
        schema_id: its id, in every frame.
        values: the records' keys or values.
        what: ``key`` or ``value``, for the error's message.

    Raises:
        InvalidEncodingError: 422 / 42203 (REST Proxy's JSON conversion failure) naming the record.
    """
    parsed = parse_avro(schema, referenced)
    # one reader over every present value, a JSON text a line (a reader per record parses the schema again:
    # about 0.4 ms a record); _frames asks for them in order
    present = "\n".join(json.dumps(v) for v in values if v is not None)
    records = iter(fastavro.json_reader(io.StringIO(present), parsed)) if present else iter(())

    return _frames(schema_id, values, _avro_encoder(parsed, schema_id, what, lambda value: next(records)))


def _avro_encoder(parsed: object, schema_id: int, what: str,
                  datum_of: Callable[[object], object]) -> Callable[[int, object], bytes]:
    """``encode(i, value)`` for :func:`_frames`: ``datum_of(value)`` in Avro's binary encoding of ``parsed``;
    InvalidEncodingError naming record ``i`` when it does not fit."""
    def encode(i: int, value: object) -> bytes:
        buf = io.BytesIO()
        try:
            fastavro.schemaless_writer(buf, parsed, datum_of(value))
        except Exception as e:  # noqa: BLE001 - fastavro's many ways of saying the datum is not of the schema
            raise InvalidEncodingError(f"Record {i}'s {what} does not match its Avro schema (id {schema_id}): "
                                       f"{type(e).__name__}: {e}. Nothing was written.") from None
        return buf.getvalue()
    return encode


def python_frames(schema_type: str, schema: str, referenced: Sequence[tuple[str, str]], schema_id: int,
                  values: Sequence[object], *, what: str) -> list[bytes | None]:
    """Each of ``values`` (plain Python values, as ``pyarrow``'s ``to_pylist`` gives a struct column: dicts,
    lists, str, bytes, numbers, ``datetime``, ``Decimal``) serialized with ``schema`` and framed; None stays
    None. What Confluent's serializers do with a record object, for the Spark sink's ``valueFormat=schema``.

    ``AVRO``: fastavro's ``schemaless_writer`` (a union takes the branch the value fits, a ``datetime`` fits a
    timestamp). ``JSON`` and ``PROTOBUF``: as :func:`json_frames` and :func:`protobuf_frames` (the value is the
    JSON document, or protobuf's JSON mapping of the first message).

    Raises:
        InvalidEncodingError: 422 / 42203 naming the record that does not fit the schema.
    """
    if schema_type == "JSON":
        return json_frames(schema, referenced, schema_id, values, what=what)
    if schema_type == "PROTOBUF":
        return protobuf_frames(schema, referenced, schema_id, values, what=what)
    return _frames(schema_id, values, _avro_encoder(parse_avro(schema, referenced), schema_id, what, lambda value: value))


def _frames(schema_id: int, values: Sequence[object], encode: Callable[[int, object], bytes]) -> list[bytes | None]:
    """``encode(i, value)`` of each of ``values`` framed with ``schema_id``; None stays None (the one loop of
    the three formats; ``encode`` raises InvalidEncodingError naming record ``i``)."""
    return [None if value is None else frame(schema_id, encode(i, value)) for i, value in enumerate(values)]

def _json_validator(schema: str, referenced: Sequence[tuple[str, str]]):
    obj = json.loads(schema)
    cls = jsonschema.validators.validator_for(obj, default=jsonschema.Draft202012Validator)
    registry: referencing.Registry = referencing.Registry()
    for name, text in referenced:  # a $ref to another subject's schema names it by the reference's name
        registry = registry.with_resource(name, referencing.Resource.from_contents(
            json.loads(text), default_specification=referencing.jsonschema.DRAFT202012))
    return cls(obj, registry=registry)


def json_frames(schema: str, referenced: Sequence[tuple[str, str]], schema_id: int, values: Sequence[object], *,
                what: str) -> list[bytes | None]:
    """Each of ``values`` (JSON documents) validated against the JSON Schema ``schema`` and framed as its JSON
    text; None stays None. Args as :func:`avro_frames`.

    Raises:
        InvalidEncodingError: 422 / 42203 naming the record and the first violation (its path and why).
    """
    validator = _json_validator(schema, referenced)

    def encode(i: int, value: object) -> bytes:
        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        except referencing.exceptions.Unresolvable as e:
            raise InvalidEncodingError(f"Record {i}'s {what}: its JSON Schema (id {schema_id}) has a $ref that "
                                       f"resolves to nothing ({e}); register it with that reference.") from None
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(the document)"
            raise InvalidEncodingError(f"Record {i}'s {what} does not validate against its JSON Schema (id "
                                       f"{schema_id}) at {where}: {error.message}. Nothing was written.")
        return orjson.dumps(value)
    return _frames(schema_id, values, encode)

def protobuf_frames(schema: str, referenced: Sequence[tuple[str, str]], schema_id: int, values: Sequence[object],
                    *, what: str) -> list[bytes | None]:
    """Each of ``values`` (protobuf's JSON mapping of the schema's first message, as REST Proxy takes it) as
    that message's binary encoding, framed with the message indexes ``[0]``; None stays None. Args as
    :func:`avro_frames`.

    Raises:
        InvalidEncodingError: 422 / 42203 naming the record and the field protobuf's parser refused.
    """
    cls = message_class(schema, imports=referenced)
    head = encode_message_indexes([0])

    def encode(i: int, value: object) -> bytes:
        try:
            return head + json_format.ParseDict(value, cls()).SerializeToString()
        except (json_format.ParseError, TypeError, ValueError) as e:
            raise InvalidEncodingError(f"Record {i}'s {what} is not a {cls.DESCRIPTOR.full_name} of its Protobuf "
                                       f"schema (id {schema_id}): {e}. Nothing was written.") from None
    return _frames(schema_id, values, encode)

class _NotFramed(ValueError):
    """A record that is not in Confluent's wire format, or does not decode with the schema its id names."""


def _unframe(data: bytes) -> tuple[int, memoryview]:
    if len(data) < 5 or data[0] != MAGIC_BYTE:
        raise _NotFramed("not in Confluent's wire format (magic byte 0 and a 4-byte schema id)")
    return int.from_bytes(data[1:5], "big"), memoryview(data)[5:]


def _reader(schema_type: str, schema: str, referenced: Sequence[tuple[str, str]]) -> Callable[[memoryview], bytes]:
    """A decoder of payloads written with ``schema``, answering REST Proxy's JSON of each as JSON text."""
    if schema_type == "AVRO":
        parsed = parse_avro(schema, referenced)

        def read_avro(payload: memoryview) -> bytes:
            try:
                datum = fastavro.schemaless_reader(io.BytesIO(payload), parsed, None)
                out = io.StringIO()
                fastavro.json_writer(out, parsed, [datum])
            except Exception as e:  # noqa: BLE001 - fastavro's many ways of saying the bytes are not of the schema
                raise _NotFramed(f"not Avro of its schema: {type(e).__name__}: {e}") from None
            return out.getvalue().strip().encode()
        return read_avro
    if schema_type == "JSON":
        def read_json(payload: memoryview) -> bytes:
            try:
                orjson.loads(payload)
            except orjson.JSONDecodeError as e:
                raise _NotFramed(f"not JSON: {e}") from None
            return bytes(payload)
        return read_json

    def read_protobuf(payload: memoryview) -> bytes:
        try:
            indexes, pos = decode_message_indexes(bytes(payload[:64]), 0)
            message = message_class(schema, indexes, imports=referenced)()
            message.ParseFromString(bytes(payload[pos:]))
        except Exception as e:  # noqa: BLE001 - indexes, message or bytes refused (DecodeError, IndexError, ...)
            raise _NotFramed(f"not a message of its Protobuf schema: {e}") from None
        return orjson.dumps(json_format.MessageToDict(message))
    return read_protobuf


def decode_frames(values: Sequence[bytes | None], *, schema_type: str,
                  schema_of: Callable[[int], tuple[str, str, Sequence[tuple[str, str]]] | None],
                  where: Callable[[int], str]) -> list[bytes | None]:
    """Each framed key or value of ``values`` as REST Proxy's JSON of it (JSON text): Avro's JSON encoding,
    the JSON document, protobuf's JSON mapping of the message its indexes name; None stays None. Each
    schema is parsed once per call.

    Args:
        values: the records' keys or values as on the log.
        schema_type: the type every record's schema must be (the consumer instance's format).
        schema_of: ``schema id -> (schema type, schema text, referenced (name, text))``, None when unknown.
        where: ``index -> "the value of t-0 at offset 5"``, for the error's message.

    Raises:
        RecordDeserializationError: 408 / 40801 (REST Proxy's ``SerializationException``): a record not in
            the wire format, whose id names no schema of ``schema_type``, or that its schema does not read.
    """
    readers: dict[int, Callable[[memoryview], bytes]] = {}
    out: list[bytes | None] = []
    for i, raw in enumerate(values):
        if raw is None:
            out.append(None)
            continue
        try:
            schema_id, payload = _unframe(raw)
            read = readers.get(schema_id)
            if read is None:
                found = schema_of(schema_id)
                if found is None or found[0] != schema_type:
                    raise _NotFramed(f"schema id {schema_id} names no {schema_type} schema of the registry")
                read = readers[schema_id] = _reader(*found)
            out.append(read(payload))
        except _NotFramed as e:
            raise RecordDeserializationError(f"Error deserializing {where(i)}: {e}.") from None
    return out
