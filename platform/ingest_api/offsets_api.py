"""Consumer group offsets over HTTP: commit, read, lag and reset (REST Proxy v2 shapes where they exist).

- ``POST /consumers/{group}/offsets``: commit (REST Proxy's body, plus lakelog's optional
  ``generation_id`` and ``transaction`` for fenced, idempotent commits);
- ``GET /consumers/{group}/offsets``: the group's committed offsets;
- ``GET /consumers``: groups with committed offsets (lakelog);
- ``GET /consumers/{group}/lag``: committed offset, log end offset, high watermark and lag per partition;
- ``POST /consumers/{group}/offsets/reset``: move a group with no active members to earliest,
  latest, a timestamp or an offset (``kafka-consumer-groups --reset-offsets``).
"""

from __future__ import annotations

import asyncio
from typing import Literal, Optional

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from lakelog.consumer_groups.errors import GroupNotEmptyError, InvalidCommitError, UnknownGroupError
from lakelog.replication.errors import UnknownTopicError

router = APIRouter(tags=["consumer offsets"])


class TopicPartitionOffset(BaseModel):
    topic: str
    partition: int = Field(ge=0)
    offset: int = Field(ge=0, description="The next offset the group will read (Kafka's committed offset).")
    metadata: Optional[str] = None


class Transaction(BaseModel):
    """Makes a commit idempotent: a replayed (app_id, version) is a no-op (Delta ``txn`` action)."""

    app_id: str = Field(min_length=1)
    version: int = Field(ge=0)


class CommitOffsetsRequest(BaseModel):
    offsets: list[TopicPartitionOffset]
    generation_id: Optional[int] = Field(None, description="The member's generation; older than the group's is refused.")
    transaction: Optional[Transaction] = None


class CommitOffsetsResponse(BaseModel):
    committed: bool = Field(description="False when the transaction was a replay and nothing was written.")
    offsets: list[TopicPartitionOffset]


class CommittedOffsetInfo(TopicPartitionOffset):
    generation_id: Optional[int] = None
    commit_timestamp: int = Field(description="ms since the epoch")


class OffsetsResponse(BaseModel):
    offsets: list[CommittedOffsetInfo]


class PartitionLag(BaseModel):
    topic: str
    partition: int
    committed_offset: Optional[int]
    log_end_offset: int
    high_watermark: int
    lag: int = Field(description="high_watermark - committed offset (all of it when nothing is committed)")


class GroupLag(BaseModel):
    group: str
    partitions: list[PartitionLag]
    total_lag: int


class ResetOffsetsRequest(BaseModel):
    to: Literal["earliest", "latest", "timestamp", "offset"]
    value: Optional[int] = Field(None, description="ms since the epoch for `timestamp`; the offset for `offset`.")
    topics: Optional[list[str]] = Field(None, description="Default: every topic the group has committed.")


def _broker(request: Request):
    return request.app.state.broker


async def _check_partitions(broker, offsets: list[TopicPartitionOffset]) -> None:
    for o in offsets:
        meta = await broker.topic_fresh(o.topic)
        if o.partition not in meta.replicas:
            raise InvalidCommitError(f"Cannot commit {o.topic}-{o.partition}: topic '{o.topic}' has partitions "
                                     f"0 to {meta.partitions_count - 1}.")


@router.post("/consumers/{group}/offsets", response_model=CommitOffsetsResponse,
             summary="Commit offsets for a group (one Delta transaction)")
async def commit_offsets(group: str, body: CommitOffsetsRequest, request: Request) -> CommitOffsetsResponse:
    broker = _broker(request)
    await _check_partitions(broker, body.offsets)
    txn = body.transaction
    written = await asyncio.to_thread(
        broker.offset_store.commit, group, [o.model_dump() for o in body.offsets], generation=body.generation_id,
        current_generation=await broker.group_generation(group),
        app_id=txn.app_id if txn else None, version=txn.version if txn else None)
    return CommitOffsetsResponse(committed=written, offsets=body.offsets)


@router.get("/consumers/{group}/offsets", response_model=OffsetsResponse, summary="A group's committed offsets")
async def get_offsets(group: str, request: Request,
                      topic: Optional[str] = Query(None, description="Only this topic.")) -> OffsetsResponse:
    rows = _broker(request).offset_store.committed(group, topic)
    return OffsetsResponse(offsets=[
        CommittedOffsetInfo(topic=c.topic, partition=c.partition, offset=c.offset, metadata=c.metadata,
                            generation_id=c.generation, commit_timestamp=c.commit_timestamp_ms) for c in rows])


class OffsetsTable(BaseModel):
    table_uri: str


@router.get("/lakelog/v1/consumer-offsets", response_model=OffsetsTable, tags=["lakelog"],
            summary="Where the __consumer_offsets Delta table is, for SQL")
async def offsets_table(request: Request) -> OffsetsTable:
    return OffsetsTable(table_uri=_broker(request).offset_store.table_uri)


@router.get("/consumers", response_model=list[str], summary="Groups with committed offsets")
async def list_groups(request: Request) -> list[str]:
    return _broker(request).offset_store.groups()


@router.get("/consumers/{group}/lag", response_model=GroupLag, summary="Committed offset, log end and lag per partition")
async def group_lag(group: str, request: Request) -> GroupLag:
    broker = _broker(request)
    committed = {(c.topic, c.partition): c.offset for c in broker.offset_store.committed(group)}
    if not committed:
        raise UnknownGroupError(f"Group '{group}' has no committed offsets.")
    parts = []
    for topic in sorted({t for t, _ in committed}):
        try:
            meta = await broker.topic_fresh(topic)
        except UnknownTopicError:
            continue  # the topic was deleted since
        bounds = await asyncio.gather(*(broker.partition_offsets(topic, p) for p in sorted(meta.replicas)))
        for p, (log_start, log_end, hw) in zip(sorted(meta.replicas), bounds):
            c = committed.get((topic, p))
            parts.append(PartitionLag(topic=topic, partition=p, committed_offset=c,
                                      log_end_offset=log_end, high_watermark=hw,
                                      lag=max(0, hw - (c if c is not None else log_start))))
    return GroupLag(group=group, partitions=parts, total_lag=sum(p.lag for p in parts))


@router.post("/consumers/{group}/offsets/reset", response_model=CommitOffsetsResponse,
             summary="Reset a group's offsets (no active members)")
async def reset_offsets(group: str, body: ResetOffsetsRequest, request: Request) -> CommitOffsetsResponse:
    broker = _broker(request)
    members = await broker.group_members(group)
    if members:
        raise GroupNotEmptyError(f"Group '{group}' has {len(members)} active member(s) ({', '.join(members)}); "
                                 f"stop them before resetting its offsets.")
    if body.to in ("timestamp", "offset") and body.value is None:
        raise InvalidCommitError(f"Reset to {body.to} needs a value.")
    topics = body.topics or sorted({c.topic for c in broker.offset_store.committed(group)})
    if not topics:
        raise UnknownGroupError(f"Group '{group}' has no committed offsets; name the topics to reset.")
    offsets = []
    for topic in topics:
        meta = await broker.topic_fresh(topic)
        for p in sorted(meta.replicas):
            if body.to == "timestamp":  # the time index is the leader's log: reset on the leader
                log = (await broker.leader_partition(topic, p)).log
                target = await asyncio.to_thread(log.offset_for_timestamp, body.value)
            else:  # from the partition's leader, wherever it is
                log_start, _, high_watermark = await broker.partition_offsets(topic, p)
                target = {"earliest": log_start, "latest": high_watermark}.get(
                    body.to, min(max(body.value or 0, log_start), high_watermark))
            offsets.append(TopicPartitionOffset(topic=topic, partition=p, offset=target))
    await asyncio.to_thread(broker.offset_store.commit, group, [o.model_dump() for o in offsets])
    return CommitOffsetsResponse(committed=True, offsets=offsets)
