"""Confluent's wire format of a schema'd key or value: magic byte 0, the schema id as 4 bytes big-endian,
then the serialized data (Avro's binary encoding here), as Confluent's serializers frame records
(``confluent_kafka.schema_registry`` and the Java ``AbstractKafkaSchemaSerDe``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence

import fastavro

from lakelog.errors import InvalidEncodingError

__all__ = ["MAGIC_BYTE", "avro_frames", "frame"]

#: The first byte of every framed record.
MAGIC_BYTE = 0


def frame(schema_id: int, payload: bytes) -> bytes:
    """``payload`` framed: magic byte 0, ``schema_id`` (4 bytes, big-endian), ``payload``."""
    return bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big") + payload


def avro_frames(schema: str, referenced: Sequence[str], schema_id: int, values: Sequence[object], *,
                what: str) -> list[bytes | None]:
    """Each of ``values`` (Avro's JSON encoding, as REST Proxy's ``application/vnd.kafka.avro.v2+json``
    bodies carry them: a union's branch as ``{"type": value}``) in Avro's binary encoding, framed; None
    stays None (a tombstone).

    Args:
        schema: the Avro schema (JSON). referenced: the schemas of its references, dependencies first.
        schema_id: its id, in every frame.
        values: the records' keys or values.
        what: ``key`` or ``value``, for the error's message.

    Raises:
        InvalidEncodingError: 422 / 42203 (REST Proxy's JSON conversion failure) naming the record.
    """
    named: dict = {}
    for text in referenced:
        fastavro.parse_schema(json.loads(text), named_schemas=named)
    parsed = fastavro.parse_schema(json.loads(schema), named_schemas=named)
    out: list[bytes | None] = []
    for i, value in enumerate(values):
        if value is None:
            out.append(None)
            continue
        try:
            record = next(iter(fastavro.json_reader(io.StringIO(json.dumps(value)), parsed)))
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, parsed, record)
        except Exception as e:  # noqa: BLE001 - fastavro's many ways of saying the datum is not of the schema
            raise InvalidEncodingError(f"Record {i}'s {what} does not match its Avro schema (id {schema_id}): "
                                       f"{type(e).__name__}: {e}. Nothing was written.") from None
        out.append(frame(schema_id, buf.getvalue()))
    return out
