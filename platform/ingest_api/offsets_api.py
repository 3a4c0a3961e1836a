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
within ``request.timeout.ms``.
"""

from __future__ import annotations

from typing import Optional

from fastapi import APIRouter, Query

from lakelog.consumer_groups import offsets_admin
from lakelog.consumer_groups.offsets_admin import PartitionOffset
from lakelog.ingest_api.consumers_api import GroupName
from lakelog.ingest_api.deps import CoordinatorDep, OffsetsAdminBrokerDep
from lakelog.ingest_api.openapi_docs import error_responses
from lakelog.ingest_api.permissions import PermissionsDep, group_permission
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
from lakelog.security.acls import Operation, ResourceType

#: Every route's error answers: 400 covers 40008 (a group id ZooKeeper cannot hold), 404 40401/40402
#: (topic, partition) and 40407 (a group with no committed offsets: lag, reset), 409 a stale
#: generation (40904).
router = APIRouter(tags=["consumer offsets"], responses=error_responses(400, 404, 408, 409, 422, 500, 503))


def _answer(offsets: list[PartitionOffset]) -> list[TopicPartitionOffset]:
    return [TopicPartitionOffset(topic=o.topic, partition=o.partition, offset=o.offset, metadata=o.metadata)
            for o in offsets]


@router.post("/consumers/{group}/offsets", response_model=CommitOffsetsResponse,
             summary="Commit offsets for a group (one append through its coordinator)",
             dependencies=[group_permission(Operation.READ)])
async def commit_offsets(group: GroupName, body: CommitOffsetsRequest, broker: OffsetsAdminBrokerDep,
                         permissions: PermissionsDep) -> CommitOffsetsResponse:
    """Read on the group and on each topic (Kafka's OffsetCommit)."""
    permissions.require_all(Operation.READ, ResourceType.TOPIC, (o.topic for o in body.offsets))
    txn = body.transaction
    written = await offsets_admin.commit_offsets(
        broker, group, [PartitionOffset(o.topic, o.partition, o.offset, o.metadata) for o in body.offsets],
        generation=body.generation_id, app_id=txn.app_id if txn else None, version=txn.version if txn else None)
    return CommitOffsetsResponse(committed=written, offsets=body.offsets)


@router.get("/consumers/{group}/offsets", response_model=OffsetsResponse, summary="A group's committed offsets",
            dependencies=[group_permission(Operation.DESCRIBE)])
async def get_offsets(group: GroupName, coordinator: CoordinatorDep, permissions: PermissionsDep,
                      topic: Optional[str] = Query(None, description="Only this topic.")) -> OffsetsResponse:
    """Describe on the group; topics the principal may not Describe are left out (Kafka's OffsetFetch)."""
    committed = await coordinator.committed(group, topic)
    visible = set(permissions.filter(Operation.DESCRIBE, ResourceType.TOPIC, {c.topic for c in committed}))
    return OffsetsResponse(offsets=[
        CommittedOffsetInfo(topic=c.topic, partition=c.partition, offset=c.offset, metadata=c.metadata,
                            generation_id=c.generation, commit_timestamp=c.commit_timestamp_ms)
        for c in committed if c.topic in visible])


@router.get("/consumers", response_model=list[str], summary="Groups with committed offsets")
async def list_groups(coordinator: CoordinatorDep, permissions: PermissionsDep) -> list[str]:
    """Only the groups the principal may Describe (Kafka's ListGroups)."""
    return permissions.filter(Operation.DESCRIBE, ResourceType.GROUP, await coordinator.groups())


@router.get("/consumers/{group}/lag", response_model=GroupLag, summary="Committed offset, log end and lag per partition",
            dependencies=[group_permission(Operation.DESCRIBE)])
async def group_lag(group: GroupName, broker: OffsetsAdminBrokerDep, permissions: PermissionsDep) -> GroupLag:
    """Describe on the group; only the topics the principal may Describe (their lag in ``total_lag``)."""
    lag = await offsets_admin.group_lag(broker, group)
    visible = set(permissions.filter(Operation.DESCRIBE, ResourceType.TOPIC, {p.topic for p in lag.partitions}))
    partitions = [p for p in lag.partitions if p.topic in visible]
    return GroupLag(group=lag.group, total_lag=sum(p.lag for p in partitions), partitions=[
        PartitionLag(topic=p.topic, partition=p.partition, committed_offset=p.committed_offset,
                     log_end_offset=p.log_end_offset, high_watermark=p.high_watermark, lag=p.lag)
        for p in partitions])


@router.post("/consumers/{group}/offsets/reset", response_model=CommitOffsetsResponse,
             summary="Reset a group's offsets (no active members)", dependencies=[group_permission(Operation.READ)])
async def reset_offsets(group: GroupName, body: ResetOffsetsRequest, broker: OffsetsAdminBrokerDep,
                        permissions: PermissionsDep) -> CommitOffsetsResponse:
    """Read on the group and on each topic reset (Kafka's OffsetCommit, which kafka-consumer-groups
    --reset-offsets sends): with ACLs checked, the reset is planned first (a dry run) to learn its topics."""
    partitions = [(p.topic, p.partition) for p in body.partitions] if body.partitions else None
    if permissions.enabled:
        planned = await offsets_admin.reset_offsets(broker, group, to=body.to, value=body.value, topics=body.topics,
                                                    dry_run=True, partitions=partitions)
        permissions.require_all(Operation.READ, ResourceType.TOPIC, (o.topic for o in planned))
    offsets = await offsets_admin.reset_offsets(
        broker, group, to=body.to, value=body.value, topics=body.topics, dry_run=body.dry_run, partitions=partitions)
    return CommitOffsetsResponse(committed=not body.dry_run, offsets=_answer(offsets))


@router.post("/consumers/{group}/offsets/delete", response_model=DeletedOffsetsResponse,
             summary="Delete a group's committed offsets of a topic (no active members)",
             dependencies=[group_permission(Operation.DELETE)])
async def delete_offsets(group: GroupName, body: DeleteOffsetsRequest, broker: OffsetsAdminBrokerDep,
                         permissions: PermissionsDep) -> DeletedOffsetsResponse:
    """Delete on the group and Read on the topic (Kafka's OffsetDelete)."""
    permissions.require(Operation.READ, ResourceType.TOPIC, body.topic)
    deleted = await offsets_admin.delete_offsets(broker, group, topic=body.topic, partitions=body.partitions)
    return DeletedOffsetsResponse(deleted=[TopicPartitionRef(topic=t, partition=p) for t, p in deleted])
