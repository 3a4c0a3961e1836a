"""REST Proxy v2's embedded formats in produce: ``POST /topics/{t}[/partitions/{p}]`` with
``Content-Type`` ``application/vnd.kafka.avro.v2+json``, ``application/vnd.kafka.jsonschema.v2+json`` or
``application/vnd.kafka.protobuf.v2+json``.

The body is Confluent's: ``{"key_schema"?, "key_schema_id"?, "value_schema"?, "value_schema_id"?,
"records": [{"key"?, "value", "partition"?}]}``, keys and values as REST Proxy takes them (Avro's JSON
encoding; the JSON document; protobuf's JSON mapping of the schema's first message). A schema given as
text is registered under ``{topic}-key`` / ``{topic}-value`` as the format's type (the same schema again:
its id), an id is looked up; each key and value is validated and written in Confluent's wire format, so
Confluent's deserializers and Kafka clients read the records; the answer's ``key_schema_id`` /
``value_schema_id`` name the schemas used. The rules are the request layer's
(:meth:`~lakelog.requests.schemas.SchemaRegistryOperations.encode_embedded_records`, then the one produce
operation); this module parses the body. Errors: 42201 / 42202 (a key / value without its schema), 42205
(a schema that does not parse, an unknown id), 42203 (a key or value its schema refuses), 42222 (a body of
another shape); nothing is written then.
"""

from __future__ import annotations

import orjson
from fastapi import Request
from fastapi.responses import Response

from lakelog.errors import InvalidBodyFieldError, MalformedBodyError
from lakelog.ingest_api import codecs
from lakelog.protocol.media_types import AVRO_V2, JSONSCHEMA_V2, PROTOBUF_V2, V2, media_type
from lakelog.replication.acks import ACKS_HEADER, parse_acks
from lakelog.requests import ProduceRequest, RequestContext
from lakelog.schemas.schema_types import SchemaType

__all__ = ["EMBEDDED_FORMATS", "embedded_schema_type", "produce_embedded"]

#: media type -> the registry's schema type
EMBEDDED_FORMATS: dict[str, SchemaType] = {AVRO_V2: "AVRO", JSONSCHEMA_V2: "JSON", PROTOBUF_V2: "PROTOBUF"}


def embedded_schema_type(content_type: str | None) -> SchemaType | None:
    """The schema type of a produce body in one of REST Proxy's embedded formats; None for another body."""
    return EMBEDDED_FORMATS.get(media_type(content_type) or "")


def _records(body: bytes) -> tuple[dict, list[dict]]:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise MalformedBodyError(f"The body is not valid JSON: {e}. Nothing was written.") from None
    records = parsed.get("records") if isinstance(parsed, dict) else None
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        raise InvalidBodyFieldError('A produce body in an embedded format is {"value_schema" or "value_schema_id", '
                                    '"records": [{"value": ...}]} with at least one record. Nothing was written.')
    return parsed, records


async def produce_embedded(request: Request, broker, context: RequestContext, topic: str, partition: int | None,
                           body: bytes, *, schema_type: SchemaType) -> Response:
    """Produce a body in an embedded format (see the module docstring); answers REST Proxy's produce answer
    with the schema ids."""
    await broker.requests.describe_topic(topic, context=context)  # 40401 before body errors, as REST Proxy
    parsed, records = _records(body)
    encoded = await broker.requests.schemas.encode_embedded_records(
        topic, schema_type=schema_type, key_schema=parsed.get("key_schema"), key_schema_id=parsed.get("key_schema_id"),
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
