"""REST Proxy v2 produce and fetch: the HTTP adapter of the request layer's produce and fetch
(:mod:`lakelog.requests`). A route parses the request (media type, acks, producer headers, the body into
one Arrow table), calls the operation and encodes its answer; the rules of a produce or fetch are the
operation's.

- ``POST /topics/{topic}``: records are placed by their ``partition``, else murmur2 of the key, else
  spread; a share whose partition another broker leads is forwarded to it;
- ``POST /topics/{topic}/partitions/{p}`` and ``.../records``: one partition (the latter also takes an
  Arrow IPC stream);
- ``GET /topics/{topic}/partitions/{p}/records``: records from an offset below the high watermark
  (``isolation_level=read_committed``: below the last stable offset, no aborted records; never transaction
  markers), long-polling up to ``max_wait_ms``; JSON forms or Arrow IPC by ``Accept``; the header
  ``X-Lakelog-Next-Offset`` says where the next fetch starts (past markers the answer skipped).

``acks`` comes from the query parameter ``acks`` or the header ``X-Lakelog-Acks``
(:mod:`lakelog.replication.acks`).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import orjson
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask

from lakelog.ingest_api import codecs, embedded_produce, models
from lakelog.ingest_api.deps import BrokerDep, PrincipalDep
from lakelog.ingest_api.openapi_docs import KafkaV2JSONResponse, error_responses
from lakelog.ingest_api.permissions import TopicReadContextDep, produce_context
from lakelog.ingest_api.error_handlers import error_response
from lakelog.ingest_api.memory_release import DECODE_RELEASE_MIN_BYTES, RELEASE_MIN_BYTES, release_unused_memory
from lakelog.ingest_api.topics_api import ERRORS, PartitionId, TopicName
from lakelog.ingest_api.v2_media import V2_ANSWERS, require_acceptable
from lakelog.protocol.errors import (
    InvalidBodyFieldError,
    ProduceQueueFullError,
    RequestTooLargeError,
    UnsupportedMediaTypeError,
)
from lakelog.protocol.media_types import ARROW_STREAM, BINARY_V2, JSON_V2, V2
from lakelog.protocol.producer_headers import (
    MAX_PRODUCER_EPOCH,
    MAX_PRODUCER_ID,
    MAX_SEQUENCE,
    PRODUCER_EPOCH_HEADER,
    PRODUCER_ID_HEADER,
    SEQUENCE_HEADER,
    ProducerBatch,
    producer_batch_from_headers,
)
from lakelog.protocol.fetch_requests import NEXT_OFFSET_HEADER, IsolationLevel
from lakelog.replication.acks import ACKS_HEADER, parse_acks
from lakelog.requests import FetchRequest, ProduceRequest, RequestContext
from lakelog.requests.fetch import DEFAULT_FETCH_MAX_BYTES, FETCH_MAX_BYTES_LIMIT, FETCH_MAX_WAIT_MS_LIMIT

router = APIRouter(default_response_class=KafkaV2JSONResponse)


async def _v2_produce_context(request: Request, principal: PrincipalDep) -> RequestContext:
    require_acceptable(request, V2_ANSWERS)
    return produce_context(request, principal)


#: A v2 produce route's one dependency, in this order: its answer, application/vnd.kafka.v2+json (REST
#: Proxy's ``@Produces``), must be one the ``Accept`` header allows (else 406 / 40602); then Write on the
#: topic (and the transactional id), else 403 / 40301 (:func:`~lakelog.ingest_api.permissions.produce_context`);
#: then the request's :class:`~lakelog.requests.context.RequestContext`. One node, not three (accept check,
#: broker, context): FastAPI's cost per dependency is most of a one-record produce's routing.
V2ProduceContextDep = Annotated[RequestContext, Depends(_v2_produce_context)]


#: Error answers of the produce routes: REST Proxy's error body as application/json (the routes' own
#: answers are application/vnd.kafka.v2+json, so the body is referenced, not filed under that type).
_PRODUCE_ERRORS = error_responses(400, 404, 406, 408, 409, 413, 415, 421, 422, 429, 500, 503, 504,
                                  by_reference=True)

#: The idempotent producer's headers (:mod:`lakelog.protocol.producer_headers`), on every produce route.
PRODUCER_HEADER_PARAMETERS = [
    {"name": name, "in": "header", "required": False, "schema": {"type": "integer", "minimum": 0, "maximum": high},
     "description": text} for name, high, text in (
        (PRODUCER_ID_HEADER, MAX_PRODUCER_ID, "Idempotent produce: the producer id from "
                                              "POST /v3/clusters/{cluster_id}/producers (all three headers or none)."),
        (PRODUCER_EPOCH_HEADER, MAX_PRODUCER_EPOCH, "Idempotent produce: the producer epoch (an older one is "
                                                    "fenced: 409 / 40915)."),
        (SEQUENCE_HEADER, MAX_SEQUENCE, "Idempotent produce: the producer's number for this request, 0, 1, 2, ...; "
                                        "a retry repeats it and is answered with the original offsets, "
                                        "nothing written twice."))]

_PRODUCE_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            BINARY_V2: {"schema": {"$ref": "#/components/schemas/BinaryProduceRequest"}},
            JSON_V2: {"schema": {"$ref": "#/components/schemas/JsonProduceRequest"}},
        },
    },
    "parameters": PRODUCER_HEADER_PARAMETERS,
}
_ARROW_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            ARROW_STREAM: {"schema": {"type": "string", "format": "binary",
                                      "description": "Arrow IPC stream: key, value (binary or string), "
                                                     "optional headers, timestamp (ms)."}},
            **_PRODUCE_BODY["requestBody"]["content"],
        },
    },
    "parameters": PRODUCER_HEADER_PARAMETERS,
}
_ISOLATION_LEVEL = ("Kafka's isolation.level: read_uncommitted (default) returns records below the high watermark, "
                    "open and aborted transactions included; read_committed returns records below the last stable "
                    "offset (the first offset of a still-open transaction) and no aborted record. Neither returns "
                    "transaction markers.")
_FETCH_RESPONSES = {
    200: {
        "description": "Records from `offset`, below the high watermark (read_committed: below the last stable "
                       "offset, without aborted records), in offset order; never transaction markers.",
        "headers": {
            NEXT_OFFSET_HEADER: {"description": "Where the next fetch of the partition starts: the last record's "
                                                "offset + 1, or past transaction markers and aborted records the "
                                                "answer skipped.", "schema": {"type": "integer", "minimum": 0}},
            "X-Lakelog-High-Watermark": {"description": "The partition's high watermark.",
                                         "schema": {"type": "integer", "minimum": 0}},
            "X-Lakelog-Log-Start-Offset": {"description": "The partition's log start offset.",
                                           "schema": {"type": "integer", "minimum": 0}},
        },
        "content": {
            BINARY_V2: {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/ConsumerRecord"}}},
            JSON_V2: {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/ConsumerRecord"}}},
            ARROW_STREAM: {"schema": {"type": "string", "format": "binary"}},
        },
    },
    **ERRORS,
}
_FETCH_MEDIA = {"arrow": ARROW_STREAM, "binary": BINARY_V2, "json": JSON_V2}


def kafka_json(payload) -> Response:
    """A REST Proxy v2 JSON answer (``application/vnd.kafka.v2+json``)."""
    return Response(orjson.dumps(payload), media_type=V2)


class InFlightBytes:
    """Kafka's ``queued.max.request.bytes`` for produce: bytes of request bodies held by this broker
    (being read, decoded or appended). A request that would pass the cap is refused with 429 and
    ``Retry-After`` instead of growing memory; one request is always admitted when none is held."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.held = 0

    def take(self, n: int, *, mine: int = 0) -> None:
        """Hold ``n`` more bytes for a request already holding ``mine``. Raises
        :class:`ProduceQueueFullError` past the cap while other requests hold bytes (nothing taken then)."""
        if self.cap >= 0 and self.held > mine and self.held + n > self.cap:
            raise ProduceQueueFullError(
                f"Produce requests holding {self.held} bytes are in flight on this broker, and {n} more would pass "
                f"queued.max.request.bytes={self.cap}; retry after {ProduceQueueFullError.retry_after_s} s.")
        self.held += n

    def give(self, n: int) -> None:
        self.held -= n


def in_flight(request: Request, cap: int) -> InFlightBytes:
    """The broker-wide produce byte budget (one per gateway app)."""
    state = request.app.state
    budget = getattr(state, "produce_in_flight", None)
    if budget is None:
        budget = state.produce_in_flight = InFlightBytes(cap)
    return budget


async def read_body(request: Request, *, limit: int, budget: InFlightBytes | None = None) -> bytes:
    """The request body, refused above ``limit`` bytes (``socket.request.max.bytes``) or when empty.

    The body is read as it streams in and refused as soon as it passes ``limit`` (a chunked body with
    no Content-Length is never read whole first). Its bytes are taken from ``budget`` as they arrive;
    the caller gives them back (``budget.give(len(body))``) once done with the body, also on errors
    (what was taken for a refused body is given back here).

    Raises:
        RequestTooLargeError: the declared or actual body is larger than ``limit``.
        ProduceQueueFullError: ``budget`` is exhausted (429, retriable).
        InvalidBodyFieldError: the body is empty (422, as REST Proxy's ``@NotNull`` produce request).
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestTooLargeError(f"The request body is {declared} bytes, more than socket.request.max.bytes="
                                   f"{limit}; split it into smaller requests.")
    size = int(declared) if declared is not None and declared.isdigit() else 0
    taken = 0
    try:
        if budget is not None and size:
            budget.take(size)
            taken = size
        body = bytearray(size)  # filled in place when the length is declared: no reallocating copies
        filled = 0
        async for chunk in request.stream():
            end = filled + len(chunk)
            if end <= size:
                body[filled:end] = chunk
            else:
                del body[filled:]
                body += chunk
            filled = end
            if filled > limit:
                raise RequestTooLargeError(
                    f"The request body is more than socket.request.max.bytes={limit} bytes (read {filled} so "
                    f"far); split it into smaller requests.")
            if budget is not None and filled > taken:
                budget.take(filled - taken, mine=taken)
                taken = filled
        del body[filled:]  # a body shorter than declared
    except BaseException:
        if budget is not None:
            budget.give(taken)
        raise
    if budget is not None and taken > len(body):
        budget.give(taken - len(body))
    if not body:
        raise InvalidBodyFieldError('The request body is empty; send a produce request such as '
                                    '{"records": [{"value": ...}]}. Nothing was written.')
    return body  # type: ignore[return-value]  # a bytearray: no second copy of a large body


async def _produce(request: Request, context: RequestContext, topic: str, partition: int | None, *,
                   allow_arrow: bool) -> Response:
    broker = request.app.state.broker  # not a BrokerDep: one dependency on this path (V2ProduceContextDep)
    schema_type = embedded_produce.embedded_schema_type(request.headers.get("content-type"))
    if schema_type is not None:  # REST Proxy's Avro, JSON Schema and Protobuf embedded formats
        body = await read_body(request, limit=broker.settings.socket_request_max_bytes)
        return await embedded_produce.produce_embedded(request, broker, context, topic, partition, bytes(body),
                                                       schema_type=schema_type)
    fmt = codecs.produce_format(request.headers.get("content-type"))
    if fmt == "arrow" and not allow_arrow:
        raise UnsupportedMediaTypeError(
            f"Arrow produce goes to one partition: POST /topics/{topic}/partitions/{{p}}/records.")
    acks = parse_acks(request.query_params.get("acks", request.headers.get(ACKS_HEADER)))
    producer = producer_batch_from_headers(request.headers)
    budget = in_flight(request, broker.settings.queued_max_request_bytes)
    try:
        body = await read_body(request, limit=broker.settings.socket_request_max_bytes, budget=budget)
    except ProduceQueueFullError as e:
        response = error_response(e)
        response.headers["Retry-After"] = str(e.retry_after_s)
        return response
    size, holder = len(body), [body]
    del body  # the body is freed once decoded, while its bytes stay counted until the append is done
    answered = False
    try:
        response = await _produce_body(broker, context, topic, partition, fmt, holder, acks, producer)
        if size >= RELEASE_MIN_BYTES:  # once the answer is sent (and the burst over), memory goes back
            response.background = BackgroundTask(request.app.state.memory_releaser.request_done)
        answered = True
        return response
    finally:
        budget.give(size)
        if not answered and size >= RELEASE_MIN_BYTES:
            holder.clear()
            await request.app.state.memory_releaser.request_done()


#: Produce bodies from this size on are decoded in a worker thread, off the event loop.
_DECODE_IN_THREAD_MIN_BYTES = 1 << 20


async def _produce_body(broker, context: RequestContext, topic: str, partition: int | None, fmt, holder: list,
                        acks, producer: ProducerBatch | None) -> Response:
    await broker.requests.describe_topic(topic, context=context)  # 40401 before body errors, as REST Proxy
    body = holder.pop()
    size = len(body)
    if size < _DECODE_IN_THREAD_MIN_BYTES:
        batch, parts = codecs.decode_produce(body, fmt, consume=True)
    else:  # seconds for a 100 MB body: other requests go on meanwhile
        batch, parts = await asyncio.to_thread(codecs.decode_produce, body, fmt, consume=True)
    del body
    if fmt == "json" and size >= DECODE_RELEASE_MIN_BYTES:  # the decode's freed temporaries, before the append
        await asyncio.to_thread(release_unused_memory)
    result = await broker.requests.produce(ProduceRequest(
        topic=topic, records=batch, record_partitions=parts, partition=partition, acks=acks, producer=producer,
        layout="batch" if fmt == "arrow" else "records"), context=context)
    if fmt == "arrow":
        base = result.base_offset
        return kafka_json({"partition": partition, "base_offset": base,
                           "last_offset": -1 if acks == "0" else base + batch.num_rows - 1,
                           "record_count": batch.num_rows})
    if len(result.offsets) > codecs.ANSWER_PIECE_RECORDS and not result.errors and not result.dead_letters:
        length, pieces = codecs.produce_response_pieces(result)  # ~60 bytes a record: sent in pieces
        return StreamingResponse(pieces, media_type=V2, headers={"Content-Length": str(length)})
    return Response(codecs.produce_response_body(result), media_type=V2)


@router.post("/topics/{topic}", response_model=models.ProduceResponse, responses=_PRODUCE_ERRORS, tags=["v2 produce"],
             summary="Produce records; partition by record, else murmur2(key), else spread",
             openapi_extra=_PRODUCE_BODY)
async def produce_topic(topic: TopicName, request: Request, context: V2ProduceContextDep) -> Response:
    return await _produce(request, context, topic, None, allow_arrow=False)


@router.post("/topics/{topic}/partitions/{partition}", response_model=models.ProduceResponse, responses=_PRODUCE_ERRORS,
             tags=["v2 produce"], summary="Produce records to one partition", openapi_extra=_PRODUCE_BODY)
async def produce_partition(topic: TopicName, partition: PartitionId, request: Request,
                            context: V2ProduceContextDep) -> Response:
    return await _produce(request, context, topic, partition, allow_arrow=True)


@router.post("/topics/{topic}/partitions/{partition}/records", tags=["v2 produce"],
             response_model=models.ArrowProduceResponse | models.ProduceResponse, responses=_PRODUCE_ERRORS,
             summary="Bulk produce to one partition (Arrow IPC stream, or the JSON forms)",
             openapi_extra=_ARROW_BODY)
async def produce_records(topic: TopicName, partition: PartitionId, request: Request,
                          context: V2ProduceContextDep) -> Response:
    return await _produce(request, context, topic, partition, allow_arrow=True)


@router.get("/topics/{topic}/partitions/{partition}/records", responses=_FETCH_RESPONSES, tags=["fetch"],
            summary="Fetch records from an offset (long-poll up to max_wait_ms)", response_class=Response)
async def fetch(
    topic: TopicName, partition: PartitionId, broker: BrokerDep, context: TopicReadContextDep,
    offset: Annotated[int, Query(ge=0, description="First offset to return.")] = 0,
    max_bytes: Annotated[int, Query(
        gt=0, le=FETCH_MAX_BYTES_LIMIT,
        description="Soft limit on the records' bytes (at least one record is returned). Default: 1 MiB.",
    )] = DEFAULT_FETCH_MAX_BYTES,
    max_wait_ms: Annotated[int | None, Query(ge=0, le=FETCH_MAX_WAIT_MS_LIMIT,
                                             description="Long-poll when nothing is there. Default: fetch.max.wait.ms.")] = None,
    isolation_level: Annotated[IsolationLevel, Query(description=_ISOLATION_LEVEL)] = "read_uncommitted",
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    fmt = codecs.fetch_format(accept)
    result = await broker.requests.fetch(FetchRequest(
        topic=topic, partition=partition, offset=offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms,
        isolation_level=isolation_level, columns=codecs.FETCH_COLUMNS), context=context)
    table = result.records
    body = await asyncio.to_thread(codecs.encode_records, table, fmt, topic=topic, partition=partition) \
        if table.num_rows > 5000 else codecs.encode_records(table, fmt, topic=topic, partition=partition)
    return Response(body, media_type=_FETCH_MEDIA[fmt], headers={
        NEXT_OFFSET_HEADER: str(result.next_offset),
        "X-Lakelog-High-Watermark": str(result.high_watermark),
        "X-Lakelog-Log-Start-Offset": str(result.log_start_offset),
    })
