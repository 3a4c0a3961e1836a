"""REST Proxy v2's Avro produce: ``POST /topics/{t}[/partitions/{p}]`` with
``Content-Type: application/vnd.kafka.avro.v2+json``.

The body is Confluent's: ``{"key_schema"?, "key_schema_id"?, "value_schema"?, "value_schema_id"?,
"records": [{"key"?, "value", "partition"?}]}``, keys and values in Avro's JSON encoding. A schema given
as text is registered under ``{topic}-key`` / ``{topic}-value`` (the same schema again: its id), an id is
looked up; each key and value is written in Confluent's wire format (magic byte 0, the 4-byte schema id,
Avro's binary encoding), so Confluent's deserializers and Kafka clients read the records; the answer's
``key_schema_id`` / ``value_schema_id`` name the schemas used. The rules are the request layer's
(:meth:`~lakelog.requests.schemas.SchemaRegistryOperations.encode_avro_records`, then the one produce
operation); this module parses and encodes. Errors: 42201 / 42202 (a key / value without its schema), 42205 (a schema
that does not parse, an unknown id), 42203 (a key or value that does not match its schema), 42222 (a body
of another shape); nothing is written then.
"""

from __future__ import annotations

import orjson
from fastapi import Request
from fastapi.responses import Response

from lakelog.errors import InvalidBodyFieldError, MalformedBodyError
from lakelog.ingest_api import codecs
from lakelog.protocol.media_types import V2, media_type
from lakelog.replication.acks import ACKS_HEADER, parse_acks
from lakelog.requests import ProduceRequest, RequestContext

__all__ = ["AVRO_V2", "is_avro", "produce_avro"]

#: REST Proxy v2's Avro embedded format.
AVRO_V2 = "application/vnd.kafka.avro.v2+json"


def is_avro(content_type: str | None) -> bool:
    """Whether a produce body is REST Proxy's Avro embedded format."""
    return media_type(content_type) == AVRO_V2


def _records(body: bytes) -> tuple[dict, list[dict]]:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise MalformedBodyError(f"The body is not valid JSON: {e}. Nothing was written.") from None
    records = parsed.get("records") if isinstance(parsed, dict) else None
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        raise InvalidBodyFieldError('An Avro produce body is {"value_schema" or "value_schema_id", "records": '
                                    '[{"value": ...}]} with at least one record. Nothing was written.')
    return parsed, records


async def produce_avro(request: Request, broker, context: RequestContext, topic: str, partition: int | None,
                       body: bytes) -> Response:
    """Produce an Avro body (see the module docstring); answers REST Proxy's produce answer with the
    schema ids."""
    await broker.requests.describe_topic(topic, context=context)  # 40401 before body errors, as REST Proxy
    parsed, records = _records(body)
    encoded = await broker.requests.schemas.encode_avro_records(
        topic, key_schema=parsed.get("key_schema"), key_schema_id=parsed.get("key_schema_id"),
        value_schema=parsed.get("value_schema"), value_schema_id=parsed.get("value_schema_id"),
        keys=[r.get("key") for r in records], values=[r.get("value") for r in records],
        partitions=[r.get("partition") for r in records], context=context)
    acks = parse_acks(request.query_params.get("acks", request.headers.get(ACKS_HEADER)))
    result = await broker.requests.produce(ProduceRequest(
        topic=topic, records=encoded.records, record_partitions=encoded.record_partitions, partition=partition,
        acks=acks), context=context)
    answer = orjson.loads(codecs.produce_response_body(result))
    answer["key_schema_id"], answer["value_schema_id"] = encoded.key_schema_id, encoded.value_schema_id
    return Response(orjson.dumps(answer), media_type=V2)
