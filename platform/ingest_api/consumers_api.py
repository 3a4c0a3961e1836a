"""Confluent REST Proxy v2 consumer instances over HTTP (same paths, bodies, content types and errors).

- ``POST /consumers/{group}``: create an instance (``name``, ``format`` binary|json, ``auto.offset.reset``,
  ``auto.commit.enable``, ``fetch.min.bytes``, ``consumer.request.timeout.ms``; lakelog also takes
  ``partition.assignment.strategy`` range|roundrobin|sticky) -> ``{"instance_id", "base_uri"}``;
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
from a stale generation, 42204 invalid consumer configuration.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from typing import Annotated, Literal, Optional, Union

from fastapi import APIRouter, FastAPI, Header, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from lakelog.consumer_groups.errors import ConsumerFormatMismatchError, InvalidConsumerConfigError
from lakelog.consumer_groups.manager import ConsumerManager
from lakelog.ingest_api import codecs

router = APIRouter(tags=["v2 consumers"])

_NAME = r"^[A-Za-z0-9._\-:@]+$"
GroupName = Annotated[str, Path(description="Consumer group name", pattern=_NAME)]
InstanceName = Annotated[str, Path(description="Consumer instance name (its instance_id)", pattern=_NAME)]


class KafkaV2Response(JSONResponse):
    """JSON with REST Proxy's ``application/vnd.kafka.v2+json`` content type."""

    media_type = codecs.V2


_CONSUMER_RESPONSES = {s: {"description": d} for s, d in (
    (404, "40403 consumer instance not found"), (406, "40601 format mismatch"),
    (409, "40901 already subscribed, 40902 instance exists, 40903 illegal state, 40904 stale generation"),
    (422, "42204 invalid consumer configuration"))}


class CreateConsumerRequest(BaseModel):
    """REST Proxy v2 ``ConsumerInstanceConfig``."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    name: Optional[str] = Field(None, pattern=_NAME, description="Instance name; default rest-consumer-<uuid>.")
    id: Optional[str] = Field(None, pattern=_NAME, description="Deprecated REST Proxy alias of name.")
    format: Literal["binary", "json"] = Field("binary", description="Embedded format of keys and values.")
    auto_offset_reset: Literal["earliest", "latest"] = Field(
        "latest", alias="auto.offset.reset", description="Where to start without a committed offset. Default: latest.")
    auto_commit_enable: bool = Field(
        True, alias="auto.commit.enable",
        description="Commit positions every 5 s on reads, on revocation and on close. Default: true (Kafka's).")
    fetch_min_bytes: int = Field(1, alias="fetch.min.bytes", ge=-1,
                                 description="A read returns once it has this many bytes. Default: 1.")
    consumer_request_timeout_ms: int = Field(1000, alias="consumer.request.timeout.ms", ge=0, le=60_000,
                                             description="Default timeout of a read. Default: 1000.")
    partition_assignment_strategy: Optional[Literal["range", "roundrobin", "sticky"]] = Field(
        None, alias="partition.assignment.strategy",
        description="lakelog: the assignor this member asks for. Default: the broker's.")


class CreateConsumerResponse(BaseModel):
    instance_id: str
    base_uri: str


class SubscriptionRequest(BaseModel):
    topics: Optional[list[str]] = None
    topic_pattern: Optional[str] = None


class TopicsResponse(BaseModel):
    topics: list[str]


class TopicPartitionRef(BaseModel):
    topic: str
    partition: int = Field(ge=0)


class PartitionsRequest(BaseModel):
    partitions: list[TopicPartitionRef]


class PartitionOffsetRef(TopicPartitionRef):
    offset: int = Field(ge=0)


class SeekRequest(BaseModel):
    offsets: list[PartitionOffsetRef]


class CommitOffset(PartitionOffsetRef):
    metadata: Optional[str] = None


class CommitRequest(BaseModel):
    offsets: list[CommitOffset] = Field(default_factory=list)


class CommittedOffsetsResponse(BaseModel):
    offsets: list[CommitOffset]


class MemberDescription(BaseModel):
    member_id: str
    broker_id: int
    base_uri: str
    subscription: list[str]
    assignment: list[TopicPartitionRef]


class GroupMembers(BaseModel):
    group: str
    generation: Optional[int]
    state: Literal["Empty", "Stable", "PreparingRebalance"]
    assignor: Optional[str]
    members: list[MemberDescription]


def _manager(request: Request) -> ConsumerManager:
    return request.app.state.consumers


@contextlib.asynccontextmanager
async def consumer_instances(app: FastAPI, broker, settings):
    """Lifespan part: the broker's :class:`ConsumerManager` on ``app.state.consumers`` (after the
    broker started; closed, with auto commits, before it stops)."""
    manager = ConsumerManager(broker, instance_timeout_ms=settings.consumer_instance_timeout_ms,
                              default_assignor=settings.partition_assignment_strategy)
    await manager.start()
    app.state.consumers = manager
    try:
        yield manager
    finally:
        await manager.stop()


# -- instances ----------------------------------------------------------------------------------

@router.post("/consumers/{group}", response_model=CreateConsumerResponse, response_class=KafkaV2Response,
             responses=_CONSUMER_RESPONSES, summary="Create a consumer instance in a group")
async def create_instance(group: GroupName, body: CreateConsumerRequest, request: Request) -> KafkaV2Response:
    name = body.id or body.name or f"rest-consumer-{uuid.uuid4()}"
    await _manager(request).create(
        group, name=name, format=body.format, auto_offset_reset=body.auto_offset_reset,
        auto_commit=body.auto_commit_enable, fetch_min_bytes=body.fetch_min_bytes,
        request_timeout_ms=body.consumer_request_timeout_ms, assignor=body.partition_assignment_strategy)
    base = str(request.base_url).rstrip("/")
    return KafkaV2Response({"instance_id": name, "base_uri": f"{base}/consumers/{group}/instances/{name}"})


@router.delete("/consumers/{group}/instances/{instance}", status_code=204, response_class=Response,
               responses=_CONSUMER_RESPONSES, summary="Delete a consumer instance (commits with auto commit)")
async def delete_instance(group: GroupName, instance: InstanceName, request: Request) -> Response:
    await _manager(request).delete(group, instance)
    return Response(status_code=204)


# -- subscription -------------------------------------------------------------------------------

@router.post("/consumers/{group}/instances/{instance}/subscription", status_code=204, response_class=Response,
             responses=_CONSUMER_RESPONSES, summary="Subscribe to topics or a topic pattern")
async def subscribe(group: GroupName, instance: InstanceName, body: SubscriptionRequest, request: Request) -> Response:
    manager = _manager(request)
    inst = manager.get(group, instance)
    if (body.topics is None) == (body.topic_pattern is None) or (body.topics is not None and not body.topics):
        raise InvalidConsumerConfigError(
            "A subscription needs either a non-empty 'topics' list or a 'topic_pattern', not both.")
    pattern = None
    if body.topic_pattern is not None:
        try:
            pattern = re.compile(body.topic_pattern)
        except re.error as e:
            raise InvalidConsumerConfigError(f"topic_pattern {body.topic_pattern!r} is not a valid regex: {e}") from None
    await manager.subscribe(inst, topics=body.topics, pattern=pattern)
    return Response(status_code=204)


@router.get("/consumers/{group}/instances/{instance}/subscription", response_model=TopicsResponse,
            response_class=KafkaV2Response, responses=_CONSUMER_RESPONSES, summary="The subscribed topics")
async def get_subscription(group: GroupName, instance: InstanceName, request: Request) -> KafkaV2Response:
    manager = _manager(request)
    inst = manager.get(group, instance)
    return KafkaV2Response({"topics": await manager.subscription_topics(inst)})


@router.delete("/consumers/{group}/instances/{instance}/subscription", status_code=204, response_class=Response,
               responses=_CONSUMER_RESPONSES, summary="Unsubscribe (and drop a manual assignment)")
async def unsubscribe(group: GroupName, instance: InstanceName, request: Request) -> Response:
    manager = _manager(request)
    await manager.unsubscribe(manager.get(group, instance))
    return Response(status_code=204)


# -- manual assignment --------------------------------------------------------------------------

@router.post("/consumers/{group}/instances/{instance}/assignments", status_code=204, response_class=Response,
             responses=_CONSUMER_RESPONSES, summary="Assign partitions manually (no group membership)")
async def assign(group: GroupName, instance: InstanceName, body: PartitionsRequest, request: Request) -> Response:
    manager = _manager(request)
    await manager.assign(manager.get(group, instance), [(p.topic, p.partition) for p in body.partitions])
    return Response(status_code=204)


@router.get("/consumers/{group}/instances/{instance}/assignments", response_model=PartitionsRequest,
            response_class=KafkaV2Response, responses=_CONSUMER_RESPONSES,
            summary="The partitions the instance reads now")
async def get_assignments(group: GroupName, instance: InstanceName, request: Request) -> KafkaV2Response:
    inst = _manager(request).get(group, instance)
    return KafkaV2Response({"partitions": [{"topic": t, "partition": p} for t, p in sorted(inst.owned)]})


# -- positions ----------------------------------------------------------------------------------

@router.post("/consumers/{group}/instances/{instance}/positions", status_code=204, response_class=Response,
             responses=_CONSUMER_RESPONSES, summary="Seek to offsets")
async def seek(group: GroupName, instance: InstanceName, body: SeekRequest, request: Request) -> Response:
    manager = _manager(request)
    await manager.seek(manager.get(group, instance), {(o.topic, o.partition): o.offset for o in body.offsets})
    return Response(status_code=204)


@router.post("/consumers/{group}/instances/{instance}/positions/beginning", status_code=204,
             response_class=Response, responses=_CONSUMER_RESPONSES, summary="Seek to the log start offsets")
async def seek_to_beginning(group: GroupName, instance: InstanceName, body: PartitionsRequest,
                            request: Request) -> Response:
    manager = _manager(request)
    await manager.seek_to(manager.get(group, instance), [(p.topic, p.partition) for p in body.partitions], end=False)
    return Response(status_code=204)


@router.post("/consumers/{group}/instances/{instance}/positions/end", status_code=204, response_class=Response,
             responses=_CONSUMER_RESPONSES, summary="Seek to the high watermarks")
async def seek_to_end(group: GroupName, instance: InstanceName, body: PartitionsRequest, request: Request) -> Response:
    manager = _manager(request)
    await manager.seek_to(manager.get(group, instance), [(p.topic, p.partition) for p in body.partitions], end=True)
    return Response(status_code=204)


# -- records ------------------------------------------------------------------------------------

_MEDIA = {"binary": codecs.BINARY_V2, "json": codecs.JSON_V2}


def _check_accept(accept: str | None, fmt: str) -> None:
    """The Accept header must allow the instance's format (REST Proxy: 406 / 40601 otherwise)."""
    if not accept:
        return
    allowed = {_MEDIA[fmt], "*/*", "application/*"} | ({codecs.JSON} if fmt == "json" else set())
    if not any(codecs.media_type(entry) in allowed for entry in accept.split(",")):
        raise ConsumerFormatMismatchError(
            f"The requested embedded data format does not match the deserializer for this consumer instance: "
            f"Accept {accept!r}, but the instance's format is {fmt} ({_MEDIA[fmt]}).")


@router.get("/consumers/{group}/instances/{instance}/records", response_class=Response,
            responses={200: {"description": "JSON array of {topic, key, value, partition, offset, timestamp, "
                                            "headers}; binary keys and values are base64. Header "
                                            "X-Lakelog-Generation: the group generation they were read in.",
                             "content": {codecs.BINARY_V2: {}, codecs.JSON_V2: {}}}, **_CONSUMER_RESPONSES},
            summary="Read records of the instance's partitions (long-poll up to timeout ms)")
async def records(
    group: GroupName, instance: InstanceName, request: Request,
    timeout: Annotated[Optional[int], Query(ge=0, le=60_000, description="Max ms to wait for records. "
                                            "Default: the instance's consumer.request.timeout.ms.")] = None,
    max_bytes: Annotated[int, Query(gt=0, le=256 * 1024 * 1024, description="Max bytes of keys and values "
                                    "(at least one record). Default: 64 MiB.")] = 64 * 1024 * 1024,
    accept: Annotated[Optional[str], Header()] = None,
) -> Response:
    manager = _manager(request)
    inst = manager.get(group, instance)
    _check_accept(accept, inst.format)
    body, generation = await manager.records(inst, timeout_ms=timeout, max_bytes=max_bytes)
    headers = {} if generation is None else {"X-Lakelog-Generation": str(generation)}
    return Response(body, media_type=_MEDIA[inst.format], headers=headers)


# -- offsets ------------------------------------------------------------------------------------

@router.post("/consumers/{group}/instances/{instance}/offsets", status_code=200, response_class=Response,
             responses=_CONSUMER_RESPONSES,
             summary="Commit offsets (each the last processed record's); an empty body commits all fetched")
async def commit_offsets(group: GroupName, instance: InstanceName, request: Request,
                         body: Union[CommitRequest, None] = None) -> Response:
    manager = _manager(request)
    inst = manager.get(group, instance)
    offsets = None
    if body is not None and body.offsets:
        # REST Proxy commits offset + 1: the group resumes after the last record processed
        offsets = {(o.topic, o.partition): (o.offset + 1, o.metadata) for o in body.offsets}
    await manager.commit(inst, offsets)
    return Response(status_code=200)


@router.get("/consumers/{group}/instances/{instance}/offsets", response_model=CommittedOffsetsResponse,
            response_class=KafkaV2Response, responses=_CONSUMER_RESPONSES,
            summary="Committed offsets of partitions (body {\"partitions\": [...]}; none: the owned ones)")
async def committed_offsets(group: GroupName, instance: InstanceName, request: Request,
                            body: Union[PartitionsRequest, None] = None) -> KafkaV2Response:
    manager = _manager(request)
    inst = manager.get(group, instance)
    partitions = [(p.topic, p.partition) for p in body.partitions] if body is not None else None
    return KafkaV2Response({"offsets": manager.committed(inst, partitions)})


# -- lakelog: group members ---------------------------------------------------------------------

@router.get("/lakelog/v1/consumers/{group}/members", response_model=GroupMembers, tags=["lakelog"],
            summary="Members of a group (cluster-wide), its generation and each member's partitions")
async def group_members(group: GroupName, request: Request) -> GroupMembers:
    return GroupMembers(**await _manager(request).describe(group))
