"""REST Proxy v3: consumer groups, their consumers and assignments, lags and lag summary (read only).

Confluent REST Proxy v3's ``ConsumerGroupsResource``, ``ConsumersResource``,
``ConsumerAssignmentsResource``, ``ConsumerLagsResource`` and ``ConsumerGroupLagSummariesResource``
(confluentinc/kafka-rest, ``api/v3/openapi.yaml``); the shapes are in
:mod:`~lakelog.ingest_api.v3_group_models`, the data (and every check) comes from the request layer's
:class:`~lakelog.requests.group_views.GroupViews`:

- ``GET /v3/clusters/{cluster_id}/consumer-groups[/{consumer_group_id}]``: groups with committed offsets
  or live members: state, assignor, links to the coordinator, consumers and lag summary;
- ``GET .../consumer-groups/{g}/consumers[/{consumer_id}]``: the live members;
- ``GET .../consumers/{consumer_id}/assignments[/{topic_name}/partitions/{partition_id}]``: a member's
  partitions in the current generation;
- ``GET .../consumer-groups/{g}/lags[/{topic_name}/partitions/{partition_id}]``: committed offset, high
  watermark (as ``log_end_offset``: lakelog's consumers read below it) and lag per partition, with the
  owning member;
- ``GET .../consumer-groups/{g}/lag-summary``: the largest lag and the total lag.

Any broker answers for any group. Every ``related`` link and ``self`` URL answers 200 while the
resource exists (links that would not are ``null``, see :mod:`~lakelog.ingest_api.v3_group_models`).
Errors: 400 / 40008 a group id ZooKeeper cannot hold; 404 with 40409 (not this cluster's id), 40405 (a
group with neither committed offsets nor members; lags or a lag summary of a group without committed
offsets, the lag of a partition without one, an assignment the member does not have), 40403 (no live
member with that id), 40404 (a ``__consumer_offsets`` partition without a leader, retriable).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Request

from lakelog.consumer_groups import group_views as views
from lakelog.consumer_groups.instances import validate_group_id
from lakelog.ingest_api import v3_group_models as m
from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.errors import check_cluster
from lakelog.ingest_api.models import CONSUMER_NAME_PATTERN, Related, ResourceMetadata
from lakelog.ingest_api.openapi_docs import v3_read_errors
from lakelog.ingest_api.permissions import group_permission
from lakelog.ingest_api.topics_api import PartitionId, TopicName
from lakelog.ingest_api.v3_models import ResourceCollectionMetadata
from lakelog.security.acls import Operation

router = APIRouter(tags=["v3 consumer groups"])


async def _group_id(consumer_group_id: Annotated[str, Path(
        description="Consumer group id: any non-empty string ZooKeeper can hold as one znode name; else "
                    "400 / 40008.", min_length=1)]) -> str:
    validate_group_id(consumer_group_id)
    return consumer_group_id


GroupId = Annotated[str, Depends(_group_id)]
ConsumerId = Annotated[str, Path(description="A member's id (its consumer instance name).",
                                 pattern=CONSUMER_NAME_PATTERN)]


def _errors(not_found: str) -> dict[int | str, dict[str, Any]]:
    """:func:`v3_read_errors` with the codes every group route may give (400 / 40008 a group id)."""
    return v3_read_errors(f"cluster (40409), {not_found}, no leader of a __consumer_offsets partition (40404)")


LIST_ERRORS = _errors("no group")
GROUP_ERRORS = _errors("a group with neither committed offsets nor live members (40405)")
CONSUMER_ERRORS = _errors("group (40405), no live member with that id (40403)")
ASSIGNMENT_ERRORS = _errors("group, or a partition the member does not own (40405), no live member with "
                            "that id (40403)")
LAG_ERRORS = _errors("group, or no committed offset of the group (for the partition) (40405)")


# -- URLs ------------------------------------------------------------------------------------------

def _q(segment: str) -> str:
    return quote(segment, safe="")


def _cluster_url(request: Request, cluster_id: str) -> str:
    return f"{str(request.base_url).rstrip('/')}/v3/clusters/{_q(cluster_id)}"


def _group_url(request: Request, cluster_id: str, group: str) -> str:
    return f"{_cluster_url(request, cluster_id)}/consumer-groups/{_q(group)}"


def _meta(url: str, crn: str) -> ResourceMetadata:
    return ResourceMetadata(self=url, resource_name=crn)


def _crn(cluster_id: str, group: str) -> str:
    return f"crn:///kafka={cluster_id}/consumer-group={group}"


def _partition_link(request: Request, cluster_id: str, topic: str, partition: int) -> Related:
    return Related(related=f"{_cluster_url(request, cluster_id)}/topics/{_q(topic)}/partitions/{partition}")


# -- bodies ----------------------------------------------------------------------------------------

def _group_data(request: Request, cluster_id: str, v: views.GroupView) -> m.ConsumerGroupData:
    url = _group_url(request, cluster_id, v.group)
    return m.ConsumerGroupData(
        metadata=_meta(url, _crn(cluster_id, v.group)), cluster_id=cluster_id, consumer_group_id=v.group,
        is_simple=v.is_simple, partition_assignor=v.assignor, state=v.state,
        coordinator=None if v.coordinator is None else Related(
            related=f"{_cluster_url(request, cluster_id)}/brokers/{v.coordinator}"),
        consumers=Related(related=f"{url}/consumers"),
        lag_summary=Related(related=f"{url}/lag-summary") if v.has_offsets else None)


def _consumer_url(request: Request, cluster_id: str, group: str, member_id: str) -> str:
    return f"{_group_url(request, cluster_id, group)}/consumers/{_q(member_id)}"


def _consumer_data(request: Request, cluster_id: str, group: str, member_id: str, client_id: str = "",
                   instance_id: str | None = None) -> m.ConsumerData:
    url = _consumer_url(request, cluster_id, group, member_id)
    return m.ConsumerData(
        metadata=_meta(url, f"{_crn(cluster_id, group)}/consumer={member_id}"), cluster_id=cluster_id,
        consumer_group_id=group, consumer_id=member_id, instance_id=instance_id, client_id=client_id or member_id,
        assignments=Related(related=f"{url}/assignments"))


def _lag_url(request: Request, cluster_id: str, group: str, topic: str, partition: int) -> str:
    return f"{_group_url(request, cluster_id, group)}/lags/{_q(topic)}/partitions/{partition}"


def _assignment_data(request: Request, cluster_id: str, group: str, member_id: str,
                     a: views.AssignmentView) -> m.ConsumerAssignmentData:
    url = f"{_consumer_url(request, cluster_id, group, member_id)}/assignments/{_q(a.topic)}/partitions/{a.partition}"
    return m.ConsumerAssignmentData(
        metadata=_meta(url, f"{_crn(cluster_id, group)}/consumer={member_id}/assignment={a.topic}"
                            f"/partition={a.partition}"),
        cluster_id=cluster_id, consumer_group_id=group, consumer_id=member_id, topic_name=a.topic,
        partition_id=a.partition, partition=_partition_link(request, cluster_id, a.topic, a.partition),
        lag=Related(related=_lag_url(request, cluster_id, group, a.topic, a.partition)) if a.has_offset else None)


def _lag_data(request: Request, cluster_id: str, group: str, lag: views.PartitionLagView) -> m.ConsumerLagData:
    return m.ConsumerLagData(
        metadata=_meta(_lag_url(request, cluster_id, group, lag.topic, lag.partition),
                       f"{_crn(cluster_id, group)}/lag={lag.topic}/partition={lag.partition}"),
        cluster_id=cluster_id, consumer_group_id=group, topic_name=lag.topic, partition_id=lag.partition,
        current_offset=lag.current_offset, log_end_offset=lag.log_end_offset, lag=lag.lag,
        consumer_id=lag.consumer_id, instance_id=None, client_id=lag.consumer_id)


#: Every route of one group: Describe on it (Kafka's DescribeGroups, OffsetFetch).
DESCRIBE_GROUP = group_permission(Operation.DESCRIBE)


# -- groups ----------------------------------------------------------------------------------------

@router.get("/v3/clusters/{cluster_id}/consumer-groups", response_model=m.ConsumerGroupDataList,
            responses=LIST_ERRORS, summary="Consumer groups: those with committed offsets or live members")
async def list_consumer_groups(cluster_id: str, request: Request, broker: BrokerDep,
                               context: ContextDep) -> m.ConsumerGroupDataList:
    """Only the groups the principal may Describe (Kafka's ListGroups)."""
    check_cluster(broker, cluster_id)
    groups = await broker.requests.group_views.list_groups(context=context)
    return m.ConsumerGroupDataList(
        metadata=ResourceCollectionMetadata(self=f"{_cluster_url(request, cluster_id)}/consumer-groups"),
        data=[_group_data(request, cluster_id, v) for v in groups])


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}", response_model=m.ConsumerGroupData,
            responses=GROUP_ERRORS, summary="A consumer group: state, assignor, coordinator",
            dependencies=[DESCRIBE_GROUP])
async def get_consumer_group(cluster_id: str, consumer_group_id: GroupId, request: Request,
                             broker: BrokerDep, context: ContextDep) -> m.ConsumerGroupData:
    check_cluster(broker, cluster_id)
    view = await broker.requests.group_views.describe_group(consumer_group_id, context=context)
    return _group_data(request, cluster_id, view)


# -- consumers and assignments ---------------------------------------------------------------------

@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers",
            response_model=m.ConsumerDataList, responses=GROUP_ERRORS, summary="A group's live members",
            dependencies=[DESCRIBE_GROUP])
async def list_consumers(cluster_id: str, consumer_group_id: GroupId, request: Request,
                         broker: BrokerDep, context: ContextDep) -> m.ConsumerDataList:
    check_cluster(broker, cluster_id)
    view = await broker.requests.group_views.describe_group(consumer_group_id, context=context)
    return m.ConsumerDataList(
        metadata=ResourceCollectionMetadata(self=f"{_group_url(request, cluster_id, consumer_group_id)}/consumers"),
        data=[_consumer_data(request, cluster_id, consumer_group_id, x.member_id, x.client_id, x.group_instance_id)
              for x in view.members])


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}",
            response_model=m.ConsumerData, responses=CONSUMER_ERRORS, summary="One live member of a group",
            dependencies=[DESCRIBE_GROUP])
async def get_consumer(cluster_id: str, consumer_group_id: GroupId, consumer_id: ConsumerId, request: Request,
                       broker: BrokerDep, context: ContextDep) -> m.ConsumerData:
    check_cluster(broker, cluster_id)
    member = await broker.requests.group_views.describe_member(consumer_group_id, consumer_id, context=context)
    return _consumer_data(request, cluster_id, consumer_group_id, member.member_id, member.client_id,
                          member.group_instance_id)


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}/assignments",
            response_model=m.ConsumerAssignmentDataList, responses=CONSUMER_ERRORS,
            summary="A member's partitions in the group's current generation",
            dependencies=[DESCRIBE_GROUP])
async def list_assignments(cluster_id: str, consumer_group_id: GroupId, consumer_id: ConsumerId, request: Request,
                           broker: BrokerDep, context: ContextDep) -> m.ConsumerAssignmentDataList:
    check_cluster(broker, cluster_id)
    assignments = await broker.requests.group_views.member_assignments(consumer_group_id, consumer_id,
                                                                       context=context)
    url = f"{_consumer_url(request, cluster_id, consumer_group_id, consumer_id)}/assignments"
    return m.ConsumerAssignmentDataList(
        metadata=ResourceCollectionMetadata(self=url),
        data=[_assignment_data(request, cluster_id, consumer_group_id, consumer_id, a) for a in assignments])


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}/assignments/"
            "{topic_name}/partitions/{partition_id}", response_model=m.ConsumerAssignmentData,
            responses=ASSIGNMENT_ERRORS, summary="One partition a member owns",
            dependencies=[DESCRIBE_GROUP])
async def get_assignment(cluster_id: str, consumer_group_id: GroupId, consumer_id: ConsumerId, topic_name: TopicName,
                         partition_id: PartitionId, request: Request, broker: BrokerDep,
                         context: ContextDep) -> m.ConsumerAssignmentData:
    check_cluster(broker, cluster_id)
    a = await broker.requests.group_views.member_assignment(consumer_group_id, consumer_id, topic=topic_name,
                                                            partition=partition_id, context=context)
    return _assignment_data(request, cluster_id, consumer_group_id, consumer_id, a)


# -- lags ------------------------------------------------------------------------------------------

@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags", response_model=m.ConsumerLagDataList,
            responses=LAG_ERRORS, summary="The group's lag per partition it committed an offset for",
            dependencies=[DESCRIBE_GROUP])
async def list_lags(cluster_id: str, consumer_group_id: GroupId, request: Request, broker: BrokerDep,
                    context: ContextDep) -> m.ConsumerLagDataList:
    """``log_end_offset`` is the partition's high watermark (lakelog's consumers read below it). Topics the
    principal may not Describe are left out (Kafka's OffsetFetch)."""
    check_cluster(broker, cluster_id)
    lags = await broker.requests.group_views.group_lags(consumer_group_id, context=context)
    return m.ConsumerLagDataList(
        metadata=ResourceCollectionMetadata(self=f"{_group_url(request, cluster_id, consumer_group_id)}/lags"),
        data=[_lag_data(request, cluster_id, consumer_group_id, lag) for lag in lags])


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags/{topic_name}/partitions/{partition_id}",
            response_model=m.ConsumerLagData, responses=LAG_ERRORS, summary="The group's lag on one partition",
            dependencies=[DESCRIBE_GROUP])
async def get_lag(cluster_id: str, consumer_group_id: GroupId, topic_name: TopicName, partition_id: PartitionId,
                  request: Request, broker: BrokerDep, context: ContextDep) -> m.ConsumerLagData:
    check_cluster(broker, cluster_id)
    lag = await broker.requests.group_views.partition_lag(consumer_group_id, topic=topic_name, partition=partition_id,
                                                          context=context)
    return _lag_data(request, cluster_id, consumer_group_id, lag)


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lag-summary",
            response_model=m.ConsumerGroupLagSummaryData, responses=LAG_ERRORS,
            summary="The group's largest lag and total lag",
            dependencies=[DESCRIBE_GROUP])
async def get_lag_summary(cluster_id: str, consumer_group_id: GroupId, request: Request,
                          broker: BrokerDep, context: ContextDep) -> m.ConsumerGroupLagSummaryData:
    """Over the topics the principal may Describe."""
    check_cluster(broker, cluster_id)
    s = await broker.requests.group_views.lag_summary(consumer_group_id, context=context)
    url = f"{_group_url(request, cluster_id, consumer_group_id)}/lag-summary"
    return m.ConsumerGroupLagSummaryData(
        metadata=_meta(url, f"{_crn(cluster_id, consumer_group_id)}/lag-summary"), cluster_id=cluster_id,
        consumer_group_id=consumer_group_id, max_lag_consumer_id=s.max_lag_consumer_id, max_lag_instance_id=None,
        max_lag_client_id=s.max_lag_consumer_id, max_lag_topic_name=s.max_lag_topic,
        max_lag_partition_id=s.max_lag_partition, max_lag=s.max_lag, total_lag=s.total_lag,
        max_lag_consumer=Related(related=_consumer_url(request, cluster_id, consumer_group_id, s.max_lag_consumer_id))
        if s.max_lag_consumer_id else None,
        max_lag_partition=_partition_link(request, cluster_id, s.max_lag_topic, s.max_lag_partition))
