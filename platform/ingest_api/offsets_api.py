"""Consumer group offsets over HTTP: commit, read, lag and reset (REST Proxy v2 shapes where they exist).

- ``POST /consumers/{group}/offsets``: commit (REST Proxy's body, plus lakelog's optional
  ``generation_id`` and ``transaction`` for fenced, idempotent commits);
- ``GET /consumers/{group}/offsets``: the group's committed offsets;
- ``GET /consumers``: groups with committed offsets (lakelog);
- ``GET /consumers/{group}/lag``: committed offset, log end offset, high watermark and lag per partition;
- ``POST /consumers/{group}/offsets/reset``: move a group with no active members to earliest,
  latest, a timestamp or an offset (``kafka-consumer-groups --reset-offsets``);
- ``POST /consumers/{group}/offsets/delete``: delete a group's committed offsets of a topic's partitions
  (``kafka-consumer-groups --delete-offsets``, lakelog).

Offsets live in the internal topic ``__consumer_offsets``; any broker answers, asking the group's
coordinator (:mod:`lakelog.consumer_groups.coordinator`): 503 / 50320 (retriable) when none answered
within ``request.timeout.ms``. The routes call the request layer's
:class:`~lakelog.requests.groups.GroupOffsets` (every check is there); the group's permission is also
checked before the body is read.
"""

from __future__ import annotations

from typing import Optional

from fastapi import APIRouter, Query

from lakelog.consumer_groups.offsets_admin import PartitionOffset
from lakelog.ingest_api.consumers_api import GroupName
from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.openapi_docs import error_responses
from lakelog.ingest_api.permissions import group_permission
from lakelog.ingest_api.models import (
    CommitOffsetsRequest,
    CommitOffsetsResponse,
    CommittedOffsetInfo,
    DeletedOffsetsResponse,
    DeleteOffsetsRequest,
    GroupLag,
    OffsetsResponse,
    PartitionLag,
    ResetOffsetsRequest,
    TopicPartitionOffset,
    TopicPartitionRef,
)
from lakelog.requests import OffsetCommitRequest
from lakelog.requests import ResetOffsetsRequest as ResetRequest
from lakelog.security.acls import Operation

#: Every route's error answers: 400 covers 40008 (a group id ZooKeeper cannot hold), 404 40401/40402
#: (topic, partition) and 40405 (a group with no committed offsets: lag, reset), 409 a stale
#: generation (40904).
router = APIRouter(tags=["consumer offsets"], responses=error_responses(400, 404, 408, 409, 422, 500, 503))


def _answer(offsets: list[PartitionOffset]) -> list[TopicPartitionOffset]:
    return [TopicPartitionOffset(topic=o.topic, partition=o.partition, offset=o.offset, metadata=o.metadata)
            for o in offsets]


@router.post("/consumers/{group}/offsets", response_model=CommitOffsetsResponse,
             summary="Commit offsets for a group (one append through its coordinator)",
             dependencies=[group_permission(Operation.READ)])
async def commit_offsets(group: GroupName, body: CommitOffsetsRequest, broker: BrokerDep,
                         context: ContextDep) -> CommitOffsetsResponse:
    """Read on the group and on each topic (Kafka's OffsetCommit)."""
    txn = body.transaction
    written = await broker.requests.groups.commit_offsets(OffsetCommitRequest(
        group=group, offsets=[PartitionOffset(o.topic, o.partition, o.offset, o.metadata) for o in body.offsets],
        generation_id=body.generation_id, app_id=txn.app_id if txn else None, version=txn.version if txn else None),
        context=context)
    return CommitOffsetsResponse(committed=written, offsets=body.offsets)


@router.get("/consumers/{group}/offsets", response_model=OffsetsResponse, summary="A group's committed offsets",
            dependencies=[group_permission(Operation.DESCRIBE)])
async def get_offsets(group: GroupName, broker: BrokerDep, context: ContextDep,
                      topic: Optional[str] = Query(None, description="Only this topic.")) -> OffsetsResponse:
    """Describe on the group; topics the principal may not Describe are left out (Kafka's OffsetFetch)."""
    committed = await broker.requests.groups.committed_offsets(group, topic=topic, context=context)
    return OffsetsResponse(offsets=[
        CommittedOffsetInfo(topic=c.topic, partition=c.partition, offset=c.offset, metadata=c.metadata,
                            generation_id=c.generation, commit_timestamp=c.commit_timestamp_ms)
        for c in committed])


@router.get("/consumers", response_model=list[str], summary="Groups with committed offsets")
async def list_groups(broker: BrokerDep, context: ContextDep) -> list[str]:
    """Only the groups the principal may Describe (Kafka's ListGroups)."""
    return await broker.requests.groups.list_groups(context=context)


@router.get("/consumers/{group}/lag", response_model=GroupLag, summary="Committed offset, log end and lag per partition",
            dependencies=[group_permission(Operation.DESCRIBE)])
async def group_lag(group: GroupName, broker: BrokerDep, context: ContextDep) -> GroupLag:
    """Describe on the group; only the topics the principal may Describe (their lag in ``total_lag``)."""
    lag = await broker.requests.groups.group_lag(group, context=context)
    return GroupLag(group=lag.group, total_lag=lag.total_lag, partitions=[
        PartitionLag(topic=p.topic, partition=p.partition, committed_offset=p.committed_offset,
                     log_end_offset=p.log_end_offset, high_watermark=p.high_watermark, lag=p.lag)
        for p in lag.partitions])


@router.post("/consumers/{group}/offsets/reset", response_model=CommitOffsetsResponse,
             summary="Reset a group's offsets (no active members)", dependencies=[group_permission(Operation.READ)])
async def reset_offsets(group: GroupName, body: ResetOffsetsRequest, broker: BrokerDep,
                        context: ContextDep) -> CommitOffsetsResponse:
    """Read on the group and on each topic reset (Kafka's OffsetCommit, which kafka-consumer-groups
    --reset-offsets sends): with ACLs checked, the reset is planned first (a dry run) to learn its topics."""
    offsets = await broker.requests.groups.reset_offsets(ResetRequest(
        group=group, to=body.to, value=body.value, topics=body.topics, dry_run=body.dry_run,
        partitions=[(p.topic, p.partition) for p in body.partitions] if body.partitions else None),
        context=context)
    return CommitOffsetsResponse(committed=not body.dry_run, offsets=_answer(offsets))


@router.post("/consumers/{group}/offsets/delete", response_model=DeletedOffsetsResponse,
             summary="Delete a group's committed offsets of a topic (no active members)",
             dependencies=[group_permission(Operation.DELETE)])
async def delete_offsets(group: GroupName, body: DeleteOffsetsRequest, broker: BrokerDep,
                         context: ContextDep) -> DeletedOffsetsResponse:
    """Delete on the group and Read on the topic (Kafka's OffsetDelete)."""
    deleted = await broker.requests.groups.delete_offsets(group, topic=body.topic, partitions=body.partitions,
                                                          context=context)
    return DeletedOffsetsResponse(deleted=[TopicPartitionRef(topic=t, partition=p) for t, p in deleted])
