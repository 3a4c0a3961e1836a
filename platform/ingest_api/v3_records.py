"""REST Proxy v3 produce bodies: one record, or a stream of records, and the answer to each.

Confluent's ``POST /v3/clusters/{cluster_id}/topics/{topic_name}/records`` (kafka-rest's ``ProduceAction``)
reads its body as a stream of JSON objects, one record each, written one after another ("concatenated
JSON", optionally separated by whitespace), and answers, for each record in order, a delivery report
(``{"error_code": 200, "cluster_id", "topic_name", "partition_id", "offset", "timestamp", ...}``) or an
error (``{"error_code": ..., "message": ...}``), each followed by ``\\r\\n`` (kafka-rest's
``ChunkedOutputFactory``), with HTTP 200: a bad record gets its own error and the stream goes on; a body
that stops being JSON gets one error for the rest and the stream ends there.

A body of one record is answered as before: its delivery report alone, or its error as the HTTP answer.

:func:`parse_records` splits a body into records (each validated as :class:`V3ProduceRequest
<lakelog.ingest_api.models.V3ProduceRequest>`, or its error); :func:`records_batch` turns the valid ones into
one produce batch (the route produces them as one request: the request layer's
:meth:`~lakelog.requests.handler.RequestHandler.produce_each`); :func:`answer_lines` encodes the outcomes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import orjson
import pyarrow as pa
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from lakelog.errors import LakelogError
from lakelog.ingest_api import codecs, models
from lakelog.protocol.errors import InvalidBodyFieldError, MalformedBodyError

#: what follows each answer of a stream (kafka-rest's ChunkedOutput separator)
ANSWER_SEPARATOR = b"\r\n"
_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


def parse_records(body: bytes | bytearray) -> list[models.V3ProduceRequest | LakelogError]:
    """The records of a v3 produce body, in order: each a validated request, or the error that record
    answers (:class:`InvalidBodyFieldError`, 422 / 42222, worded as a one-record body's). Where the body stops
    being JSON the last item is a :class:`MalformedBodyError` (400 / 40001) and nothing after it is read.

    A body that is one record and fails is raised instead, as FastAPI answered it:
    :class:`RequestValidationError` (the gateway's validation answer).
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MalformedBodyError(f"The body is not UTF-8 text (byte {e.start}); send JSON records.") from None
    items: list[models.V3ProduceRequest | LakelogError] = []
    pos, end = _skip(text, 0), len(text)
    single_errors: list[dict] | None = None
    while pos < end:
        try:
            value, stop = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            single_errors = [{"type": "json_invalid", "loc": ("body", e.pos), "msg": "JSON decode error",
                              "input": {}, "ctx": {"error": e.msg}}]
            items.append(MalformedBodyError(f"Record {len(items)} of the body is not JSON ({e.msg} at character "
                                            f"{e.pos}); the records before it were produced, none after it."))
            break
        pos = _skip(text, stop)
        try:
            items.append(models.V3ProduceRequest.model_validate(value))
        except ValidationError as e:
            single_errors = [{**err, "loc": ("body", *err["loc"])} for err in e.errors(include_url=False)]
            items.append(InvalidBodyFieldError("Invalid request: " + "; ".join(
                f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in single_errors)))
    if not items:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    if len(items) == 1 and single_errors is not None:
        raise RequestValidationError(single_errors)
    return items


async def serialize_schemas(items: list[models.V3ProduceRequest | LakelogError], *, topic: str, schemas: Any,
                            context: Any) -> list[models.V3ProduceRequest | LakelogError]:
    """``items`` with each key or value that names a schema (``schema_id``, ``subject``, ``schema_version``,
    ``subject_name_strategy``, or a ``type`` AVRO / JSONSCHEMA / PROTOBUF) serialized in Confluent's wire
    format by the request layer (:meth:`SchemaRegistryOperations.encode_v3_data
    <lakelog.requests.schemas.SchemaRegistryOperations.encode_v3_data>`); an item whose serialization fails
    becomes its error (InvalidEmbeddedSchemaError 42205, InvalidEncodingError 42203)."""
    out: list[models.V3ProduceRequest | LakelogError] = []
    for item in items:
        if isinstance(item, LakelogError):
            out.append(item)
            continue
        try:
            for field in ("key", "value"):
                data = item.key if field == "key" else item.value
                if data is not None and data.schema_named:
                    data._framed = await schemas.encode_v3_data(
                        topic, field=field, data=data.data, schema_id=data.schema_id, subject=data.subject,
                        schema_version=data.schema_version, type_name=data.type, context=context)
        except LakelogError as e:
            item = e
        out.append(item)
    return out


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos


def records_batch(items: list[models.V3ProduceRequest | LakelogError]
                  ) -> tuple[pa.Table | None, pa.Array | None, list[int], dict[int, LakelogError]]:
    """``(batch, partitions, rows, errors)`` of parsed records: the valid records' produce batch (None when
    there is none) and their ``partition_id`` s (int32, nulls where none; None when no record names one),
    which item each row is, and the error of each other item (its parse error, or a key, value or timestamp
    that does not decode: :func:`~lakelog.ingest_api.codecs.decode_v3_record`'s)."""
    batches, partitions, rows, errors = [], [], [], {}
    for i, item in enumerate(items):
        if isinstance(item, LakelogError):
            errors[i] = item
            continue
        try:
            batches.append(codecs.decode_v3_record(item))
        except LakelogError as e:
            errors[i] = e
            continue
        partitions.append(item.partition_id)
        rows.append(i)
    if not batches:
        return None, None, rows, errors
    named = None if all(p is None for p in partitions) else pa.array(partitions, pa.int32())
    return pa.concat_tables(batches).combine_chunks(), named, rows, errors


def answer_lines(outcomes: list[Any], *, cluster_id: str, topic: str) -> Iterator[bytes]:
    """One answer per record, in order, each followed by :data:`ANSWER_SEPARATOR`: ``(partition, offset)``
    gives a delivery report, an exception its error body (a :class:`~lakelog.errors.LakelogError`'s
    ``to_body()``; anything else 500 / 50001)."""
    now = datetime.now(timezone.utc).isoformat()
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            body = outcome.to_body() if isinstance(outcome, LakelogError) else {
                "error_code": 50001, "message": f"Internal error: {type(outcome).__name__}: {outcome}"}
        else:
            body = models.V3ProduceResponse(cluster_id=cluster_id, topic_name=topic, partition_id=outcome[0],
                                            offset=outcome[1], timestamp=now).model_dump(mode="json")
        yield orjson.dumps(body) + ANSWER_SEPARATOR
