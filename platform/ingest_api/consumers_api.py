"""Confluent REST Proxy v2 consumer instances over HTTP (same paths, bodies, content types and errors).

- ``POST /consumers/{group}``: create an instance (``name``, ``format`` binary|json|avro|jsonschema|protobuf
  (the last three: keys and values in Confluent's wire format, answered as their JSON), ``auto.offset.reset``,
  ``auto.commit.enable``, ``fetch.min.bytes``, ``consumer.request.timeout.ms``, Kafka's ``isolation.level``
  read_uncommitted|read_committed; lakelog also takes ``partition.assignment.strategy``
  range|roundrobin|sticky) -> ``{"instance_id", "base_uri"}``;
- ``DELETE /consumers/{group}/instances/{instance}``: close it (204);
- ``POST|GET|DELETE .../subscription``: ``{"topics": [...]}`` or ``{"topic_pattern": "regex"}``;
- ``POST|GET .../assignments``: manual assignment ``{"partitions": [{"topic", "partition"}]}``;
- ``POST .../positions`` (``{"offsets": [{"topic", "partition", "offset"}]}``),
  ``.../positions/beginning`` and ``.../positions/end`` (``{"partitions": [...]}``): seek;
- ``GET .../records?timeout=&max_bytes=``: records of the owned partitions; the ``Accept`` header must
  be the instance's format (``application/vnd.kafka.binary.v2+json`` or ``...json.v2+json``);
- ``POST .../offsets``: commit the given offsets (each the offset of the last record processed, as
  REST Proxy: the group resumes after it) or, with an empty body, everything fetched;
  ``GET .../offsets`` (body ``{"partitions": [...]}``): the group's committed offsets;
- ``GET /lakelog/v1/consumers/{group}/members`` (lakelog): members, generation and assignment.

Errors are REST Proxy's: 40403 unknown instance, 40601 ``Accept`` not the instance's format, 40901
already subscribed to other topics, 40902 instance name taken, 40903 illegal state (subscription and
manual assignment mixed, seek of an unassigned partition, read without subscription), 40904 commit
from a stale generation, 42204 invalid consumer configuration, 408 / 40801 a ``json`` instance meeting bytes
that are not JSON; and lakelog's 40008 (a group id that ZooKeeper cannot hold as a znode name: ``.``, ``..``,
``/``, control characters, over 249 characters; Kafka takes any other string), 42209 (an instance name ``.``
or ``..``), 42227 (a subscription that is not one of ``topics`` / ``topic_pattern``) and 40004 (a topic name
outside Kafka's rule). A body needs a ``Content-Type`` the routes take (415 / 41501), an ``Accept`` must
allow an answer (406 / 40602); a commit answers REST Proxy's ``[]``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Annotated, Optional, Union
from urllib.parse import quote

from fastapi import APIRouter, Depends, Header, Path, Query, Request
from fastapi.responses import Response
import pyarrow as pa

from lakelog.consumer_groups.errors import ConsumerFormatMismatchError, RecordDeserializationError
from lakelog.consumer_groups.instances import EmbeddedFormat, validate_group_id
from lakelog.consumer_groups.poller import DEFAULT_MAX_BYTES, PollResult
from lakelog.ingest_api import codecs
from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.openapi_docs import KafkaV2JSONResponse, error_responses
from lakelog.ingest_api.permissions import group_permission
from lakelog.protocol.media_types import AVRO_V2, JSONSCHEMA_V2, PROTOBUF_V2
from lakelog.ingest_api.v2_media import CONSUMER_ANSWERS, CONSUMER_BODIES, accepts, content_types
from lakelog.ingest_api.models import (
    CONSUMER_NAME_PATTERN,
    GROUP_ID_SCHEMA,
    MAX_NAME_LENGTH,
    CommitRequest,
    CommittedOffsetsResponse,
    CreateConsumerRequest,
    CreateConsumerResponse,
    GroupMembers,
    PartitionsRequest,
    SeekRequest,
    SubscriptionRequest,
    TopicsResponse,
)
from lakelog.requests import CreateConsumerInstanceRequest, SubscribeRequest
from lakelog.requests.consumer_instances import ConsumerInstanceInfo
from lakelog.security.acls import Operation

router = APIRouter(tags=["v2 consumers"])


async def _group_id(group: Annotated[str, Path(
        description="Consumer group id: any string of 1 to 249 characters that ZooKeeper can hold as one znode "
                    "name (Kafka takes any string): not '.' or '..', no '/', no control characters (U+0000-U+001F, "
                    "U+007F-U+009F), nothing in U+D800-U+F8FF or from U+FFF0 on; else 400 / 40008.",
        min_length=1, json_schema_extra=GROUP_ID_SCHEMA)]) -> str:
    validate_group_id(group)
    return group


#: A consumer group id in a path, refused with 400 / 40008 when ZooKeeper cannot hold it.
GroupName = Annotated[str, Depends(_group_id)]
InstanceName = Annotated[str, Path(description="Consumer instance name (its instance_id)",
                                   pattern=CONSUMER_NAME_PATTERN, max_length=MAX_NAME_LENGTH)]


async def _owned_instance(group: GroupName, instance: InstanceName, broker: BrokerDep,
                          context: ContextDep) -> ConsumerInstanceInfo:
    return broker.requests.consumers.describe_instance(group, instance, context=context)


#: The path's consumer instance (404 / 40403 when it does not live here), which only the principal that
#: created it may use (403 / 40301 for any other): checked before the body is read, and again by the operation.
OwnedInstance = Annotated[ConsumerInstanceInfo, Depends(_owned_instance)]
#: Consumer instances join their group: Read on it (Kafka's JoinGroup, SyncGroup, Heartbeat, OffsetCommit).
READ_GROUP = group_permission(Operation.READ)
#: What the consumer routes answer and take (REST Proxy's ``ConsumersResource`` ``@Produces`` /
#: ``@Consumes``): 406 / 40602 for an Accept that allows none of the answers, 415 / 41501 for a body
#: without one of the request types.
ACCEPTS = accepts(*CONSUMER_ANSWERS)
BODY = content_types(*CONSUMER_BODIES)

#: A records answer with more records than this is encoded off the event loop (one thread hop).
ENCODE_INLINE_MAX_ROWS = 500


#: JSON with REST Proxy's ``application/vnd.kafka.v2+json`` content type.
KafkaV2Response = KafkaV2JSONResponse

_CONSUMER_RESPONSES = error_responses(400, 404, 406, 408, 409, 415, 422, 500, 503, by_reference=True)
_CONSUMER_RESPONSES[400] = {**_CONSUMER_RESPONSES[400], "description": (
    "40001 a parameter fails validation or the body is not JSON, 40004 a topic name outside Kafka's rule, "
    "40008 a group id ZooKeeper cannot hold")}
_CONSUMER_RESPONSES[404] = {**_CONSUMER_RESPONSES[404], "description": "40403 consumer instance not found"}
_CONSUMER_RESPONSES[406] = {**_CONSUMER_RESPONSES[406], "description": (
    "40601 format mismatch (records), 40602 an Accept that allows none of the answers")}
_CONSUMER_RESPONSES[408] = {**_CONSUMER_RESPONSES[408], "description": (
    "40801 a json instance met a key or value that is not JSON (REST Proxy's SerializationException), 40802 "
    "the request's headers or body too slow")}
_CONSUMER_RESPONSES[409] = {**_CONSUMER_RESPONSES[409], "description": (
    "40901 already subscribed, 40902 instance exists, 40903 illegal state, 40904 stale generation")}
_CONSUMER_RESPONSES[422] = {**_CONSUMER_RESPONSES[422], "description": (
    "42204 invalid consumer configuration, 42209 invalid instance name ('.', '..'), 42227 a subscription "
    "that is not one of topics / topic_pattern; 42222 a body field "
    "fails validation")}


def _partitions(body: PartitionsRequest) -> list[tuple[str, int]]:
    return [(p.topic, p.partition) for p in body.partitions]


# -- instances ----------------------------------------------------------------------------------

@router.post("/consumers/{group}", response_model=CreateConsumerResponse, response_class=KafkaV2Response,
             responses=_CONSUMER_RESPONSES, summary="Create a consumer instance in a group",
             dependencies=[ACCEPTS, BODY, READ_GROUP])
async def create_instance(group: GroupName, body: CreateConsumerRequest, request: Request,
                          broker: BrokerDep, context: ContextDep) -> KafkaV2Response:
    """The instance belongs to the request's principal; a topic pattern it subscribes to matches only the
    topics that principal may Read."""
    name = await broker.requests.consumers.create_instance(CreateConsumerInstanceRequest(
        group=group, name=body.id or body.name, format=body.format, auto_offset_reset=body.auto_offset_reset,
        auto_commit=body.auto_commit_enable, fetch_min_bytes=body.fetch_min_bytes,
        request_timeout_ms=body.consumer_request_timeout_ms, assignor=body.partition_assignment_strategy,
        isolation_level=body.isolation_level), context=context)
    base = str(request.base_url).rstrip("/")
    path = f"/consumers/{quote(group, safe='')}/instances/{quote(name, safe=':@')}"  # any group id: quoted
    return KafkaV2Response({"instance_id": name, "base_uri": base + path})


@router.delete("/consumers/{group}/instances/{instance}", status_code=204, response_class=Response,
               responses=_CONSUMER_RESPONSES, summary="Delete a consumer instance (commits with auto commit)",
            dependencies=[ACCEPTS, READ_GROUP])
async def delete_instance(inst: OwnedInstance, broker: BrokerDep, context: ContextDep) -> Response:
    await broker.requests.consumers.delete_instance(inst.group, inst.name, context=context)
    return Response(status_code=204)


# -- subscription -------------------------------------------------------------------------------

@router.post("/consumers/{group}/instances/{instance}/subscription", status_code=204, response_class=Response,
             responses=_CONSUMER_RESPONSES, summary="Subscribe to topics or a topic pattern",
            dependencies=[ACCEPTS, BODY, READ_GROUP])
async def subscribe(inst: OwnedInstance, body: SubscriptionRequest, broker: BrokerDep,
                    context: ContextDep) -> Response:
    """A topic list needs Read on each topic; a pattern matches the topics the principal may Read."""
    await broker.requests.consumers.subscribe(inst.group, inst.name, SubscribeRequest(
        topics=body.topics, topic_pattern=body.topic_pattern), context=context)
    return Response(status_code=204)


@router.get("/consumers/{group}/instances/{instance}/subscription", response_model=TopicsResponse,
            response_class=KafkaV2Response, responses=_CONSUMER_RESPONSES, summary="The subscribed topics",
            dependencies=[ACCEPTS, READ_GROUP])
async def get_subscription(inst: OwnedInstance, broker: BrokerDep, context: ContextDep) -> KafkaV2Response:
    topics = await broker.requests.consumers.subscription(inst.group, inst.name, context=context)
    return KafkaV2Response({"topics": topics})


@router.delete("/consumers/{group}/instances/{instance}/subscription", status_code=204, response_class=Response,
               responses=_CONSUMER_RESPONSES, summary="Unsubscribe (and drop a manual assignment)",
            dependencies=[ACCEPTS, READ_GROUP])
async def unsubscribe(inst: OwnedInstance, broker: BrokerDep, context: ContextDep) -> Response:
    await broker.requests.consumers.unsubscribe(inst.group, inst.name, context=context)
    return Response(status_code=204)


# -- manual assignment --------------------------------------------------------------------------

@router.post("/consumers/{group}/instances/{instance}/assignments", status_code=204, response_class=Response,
             responses=_CONSUMER_RESPONSES, summary="Assign partitions manually (no group membership)",
            dependencies=[ACCEPTS, BODY, READ_GROUP])
async def assign(inst: OwnedInstance, body: PartitionsRequest, broker: BrokerDep,
                 context: ContextDep) -> Response:
    """Read on each topic assigned."""
    await broker.requests.consumers.assign(inst.group, inst.name, _partitions(body), context=context)
    return Response(status_code=204)


@router.get("/consumers/{group}/instances/{instance}/assignments", response_model=PartitionsRequest,
            response_class=KafkaV2Response, responses=_CONSUMER_RESPONSES,
            summary="The partitions the instance reads now",
            dependencies=[ACCEPTS, READ_GROUP])
async def get_assignments(inst: OwnedInstance, broker: BrokerDep, context: ContextDep) -> KafkaV2Response:
    owned = broker.requests.consumers.assignment(inst.group, inst.name, context=context)
    return KafkaV2Response({"partitions": [{"topic": t, "partition": p} for t, p in owned]})


# -- positions ----------------------------------------------------------------------------------

@router.post("/consumers/{group}/instances/{instance}/positions", status_code=204, response_class=Response,
             responses=_CONSUMER_RESPONSES, summary="Seek to offsets",
            dependencies=[ACCEPTS, BODY, READ_GROUP])
async def seek(inst: OwnedInstance, body: SeekRequest, broker: BrokerDep,
               context: ContextDep) -> Response:
    offsets = {(o.topic, o.partition): o.offset for o in body.offsets}
    await broker.requests.consumers.seek(inst.group, inst.name, offsets, context=context)
    return Response(status_code=204)


@router.post("/consumers/{group}/instances/{instance}/positions/beginning", status_code=204,
             response_class=Response, responses=_CONSUMER_RESPONSES, summary="Seek to the log start offsets",
            dependencies=[ACCEPTS, BODY, READ_GROUP])
async def seek_to_beginning(inst: OwnedInstance, body: PartitionsRequest, broker: BrokerDep,
                            context: ContextDep) -> Response:
    await broker.requests.consumers.seek_to_beginning(inst.group, inst.name, _partitions(body), context=context)
    return Response(status_code=204)


@router.post("/consumers/{group}/instances/{instance}/positions/end", status_code=204, response_class=Response,
             responses=_CONSUMER_RESPONSES, summary="Seek to the high watermarks",
            dependencies=[ACCEPTS, BODY, READ_GROUP])
async def seek_to_end(inst: OwnedInstance, body: PartitionsRequest, broker: BrokerDep,
                      context: ContextDep) -> Response:
    await broker.requests.consumers.seek_to_end(inst.group, inst.name, _partitions(body), context=context)
    return Response(status_code=204)


# -- records ------------------------------------------------------------------------------------

_MEDIA = {"binary": codecs.BINARY_V2, "json": codecs.JSON_V2, "avro": AVRO_V2, "jsonschema": JSONSCHEMA_V2,
          "protobuf": PROTOBUF_V2}
#: the schema'd formats: the registry's schema type their records are decoded with
_SCHEMA_TYPES = {"avro": "AVRO", "jsonschema": "JSON", "protobuf": "PROTOBUF"}


def _check_accept(accept: str | None, fmt: str) -> None:
    """The Accept header must allow the instance's format (REST Proxy: 406 / 40601 otherwise)."""
    if not accept:
        return
    allowed = {_MEDIA[fmt], "*/*", "application/*"} | ({codecs.JSON} if fmt == "json" else set())
    if not any(codecs.media_type(entry) in allowed for entry in accept.split(",")):
        raise ConsumerFormatMismatchError(
            f"The requested embedded data format does not match the deserializer for this consumer instance: "
            f"Accept {accept!r}, but the instance's format is {fmt} ({_MEDIA[fmt]}).")


def encode_poll(result: PollResult, fmt: EmbeddedFormat, *, decode: Callable[..., pa.Table] | None = None) -> bytes:
    """A records answer as one JSON array of REST Proxy v2 consumer records (plus ``timestamp`` and
    ``headers``; see :func:`lakelog.ingest_api.codecs.encode_records`), in the order read. A ``json``
    instance's key or value that is not JSON raises :class:`RecordDeserializationError` (408 / 40801, as
    REST Proxy's JSON consumer). ``decode`` (the schema'd formats: the request layer's
    :meth:`~lakelog.requests.schemas.SchemaRegistryOperations.decode_records`) turns each partition's
    framed keys and values into their JSON first; it raises the same error for a record it cannot read."""
    if decode is not None:
        chunks = [codecs.encode_records(decode(p.records, topic=p.topic, partition=p.partition), "json",
                                        topic=p.topic, partition=p.partition, json_only=True)
                  for p in result.partitions]
    else:
        chunks = [codecs.encode_records(p.records, fmt, topic=p.topic, partition=p.partition,
                                        json_only=fmt == "json") for p in result.partitions]
    return b"[" + b",".join(c[1:-1] for c in chunks if len(c) > 2) + b"]"


@router.get("/consumers/{group}/instances/{instance}/records", response_class=Response,
            responses={200: {"description": "JSON array of {topic, key, value, partition, offset, timestamp, "
                                            "headers}; binary keys and values are base64; avro, "
                                            "jsonschema and protobuf ones decoded to JSON. Header "
                                            "X-Lakelog-Generation: the group generation they were read in.",
                             "content": {codecs.BINARY_V2: {}, codecs.JSON_V2: {}, AVRO_V2: {}, JSONSCHEMA_V2: {},
                                         PROTOBUF_V2: {}}}, **_CONSUMER_RESPONSES},
            summary="Read records of the instance's partitions (long-poll up to timeout ms)",
            dependencies=[READ_GROUP])
async def records(
    inst: OwnedInstance, broker: BrokerDep, context: ContextDep,
    timeout: Annotated[Optional[int], Query(ge=0, le=60_000, description="Max ms to wait for records. "
                                            "Default: the instance's consumer.request.timeout.ms.")] = None,
    max_bytes: Annotated[int, Query(gt=0, le=256 * 1024 * 1024, description="Max bytes of keys and values "
                                    "(at least one record). Default: 64 MiB.")] = DEFAULT_MAX_BYTES,
    accept: Annotated[Optional[str], Header()] = None,
) -> Response:
    """Read on the group and on each topic of the instance's partitions (checked on every read, as Kafka's
    Fetch: a revoked ACL stops the next read)."""
    _check_accept(accept, inst.format)
    result = await broker.requests.consumers.poll(inst.group, inst.name, timeout_ms=timeout, max_bytes=max_bytes,
                                                  context=context)
    schema_type = _SCHEMA_TYPES.get(inst.format)
    try:
        if schema_type is not None:  # schema'd records: decoded off the event loop, each partition as a batch
            decode = functools.partial(broker.requests.schemas.decode_records, schema_type=schema_type)
            body = await asyncio.to_thread(encode_poll, result, inst.format, decode=decode)
        elif result.record_count > ENCODE_INLINE_MAX_ROWS:  # keep large rounds' JSON encoding off the event loop
            body = await asyncio.to_thread(encode_poll, result, inst.format)
        else:
            body = encode_poll(result, inst.format)
    except RecordDeserializationError:
        # nothing was answered: the next read starts at the same records
        broker.requests.consumers.unread(inst.group, inst.name, result, context=context)
        raise
    headers = {} if result.generation is None else {"X-Lakelog-Generation": str(result.generation)}
    return Response(body, media_type=_MEDIA[inst.format], headers=headers)


# -- offsets ------------------------------------------------------------------------------------

@router.post("/consumers/{group}/instances/{instance}/offsets", status_code=200, response_class=KafkaV2Response,
             responses=_CONSUMER_RESPONSES,
             summary="Commit offsets (each the last processed record's); an empty body commits all fetched",
            dependencies=[ACCEPTS, BODY, READ_GROUP])
async def commit_offsets(inst: OwnedInstance, broker: BrokerDep, context: ContextDep,
                         body: Union[CommitRequest, None] = None) -> Response:
    """Read on the group and on each topic committed (Kafka's OffsetCommit)."""
    offsets = None
    if body is not None and body.offsets:
        # REST Proxy commits offset + 1: the group resumes after the last record processed
        offsets = {(o.topic, o.partition): (o.offset + 1, o.metadata) for o in body.offsets}
    await broker.requests.consumers.commit_offsets(inst.group, inst.name, offsets, context=context)
    return KafkaV2Response([])  # REST Proxy's CommitOffsetsResponse: an empty list


@router.get("/consumers/{group}/instances/{instance}/offsets", response_model=CommittedOffsetsResponse,
            response_class=KafkaV2Response, responses=_CONSUMER_RESPONSES,
            summary="Committed offsets of partitions (body {\"partitions\": [...]}; none: the owned ones)",
            dependencies=[ACCEPTS, BODY, READ_GROUP])
async def committed_offsets(inst: OwnedInstance, broker: BrokerDep, context: ContextDep,
                            body: Union[PartitionsRequest, None] = None) -> KafkaV2Response:
    """Topics the principal may not Describe are left out (Kafka's OffsetFetch)."""
    committed = await broker.requests.consumers.committed_offsets(
        inst.group, inst.name, _partitions(body) if body is not None else None, context=context)
    return KafkaV2Response({"offsets": [{"topic": c.topic, "partition": c.partition, "offset": c.offset,
                                         "metadata": c.metadata or ""} for c in committed]})


# -- lakelog: group members ---------------------------------------------------------------------

@router.get("/lakelog/v1/consumers/{group}/members", response_model=GroupMembers, tags=["lakelog"],
            responses=error_responses(400, 408, 422, 500, 503),
            summary="Members of a group (cluster-wide), its generation and each member's partitions",
            dependencies=[group_permission(Operation.DESCRIBE)])
async def group_members(group: GroupName, broker: BrokerDep, context: ContextDep) -> GroupMembers:
    desc = await broker.requests.group_views.group_members(group, context=context)
    return GroupMembers(
        group=desc.group, generation=desc.generation, state=desc.state, assignor=desc.assignor,
        members=[{"member_id": m.member_id, "broker_id": m.broker_id, "base_uri": m.base_uri,
                  "subscription": m.subscription, "client_id": m.client_id, "client_host": m.client_host,
                  "assignment": [{"topic": t, "partition": p} for t, p in m.assignment]} for m in desc.members])
