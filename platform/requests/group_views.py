"""Consumer groups as a whole: Kafka's ListGroups and DescribeGroups and the lag views of
``kafka-consumer-groups --describe`` (REST Proxy v3's consumer groups, consumers, assignments, lags and
lag summary; lakelog's members of a group), with their authorization.

Each view of one group checks Describe on it first (AuthorizationError: 403 / 40301), whatever a front
door checked before; a lag view of one partition also Describe on its topic, and a list of lags leaves
out the topics the principal may not Describe (as Kafka filters OffsetFetch); a list of groups holds only
those the principal may Describe (Kafka's ListGroups). Any broker answers for any group: the data is
assembled by :mod:`lakelog.consumer_groups.group_views` from the group coordinator (committed offsets),
the partitions' leaders (high watermarks) and ZooKeeper (live members, the current assignment).
"""

from __future__ import annotations

from lakelog.consumer_groups import group_views as views
from lakelog.consumer_groups.broker_api import OffsetsAdminBroker
from lakelog.consumer_groups.describe import DescribedMember, GroupDescription
from lakelog.consumer_groups.group_views import AssignmentView, GroupView, LagSummaryView, PartitionLagView
from lakelog.consumer_groups.manager import ConsumerManager
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.security.acls import Operation, ResourceType
from lakelog.security.authorizer import Authorizer

__all__ = ["GroupViews"]


class GroupViews:
    """The views of consumer groups (see the module docstring).

    Args:
        manager: the broker's consumer instances (group membership in ZooKeeper).
        broker: what the views use of the broker (the group coordinator, partition offsets).
        authorizer: the broker's ACLs (``authorizer.enabled``).
    """

    def __init__(self, *, manager: ConsumerManager, broker: OffsetsAdminBroker, authorizer: Authorizer) -> None:
        self.manager = manager
        self.broker = broker
        self.authorizer = authorizer

    def _permissions(self, context: RequestContext, group: str | None = None) -> RequestPermissions:
        """The caller's permissions, after Describe on ``group`` when given (AuthorizationError)."""
        permissions = RequestPermissions.of(self.authorizer, context)
        if group is not None:
            permissions.require(Operation.DESCRIBE, ResourceType.GROUP, group)
        return permissions

    def _visible(self, permissions: RequestPermissions, lags: list[PartitionLagView]) -> list[PartitionLagView]:
        """The lags of the topics the principal may Describe."""
        topics = set(permissions.filter(Operation.DESCRIBE, ResourceType.TOPIC, {lag.topic for lag in lags}))
        return [lag for lag in lags if lag.topic in topics]

    async def list_groups(self, *, context: RequestContext) -> list[GroupView]:
        """Every group with committed offsets or live members that the principal may Describe, by id (see
        :func:`~lakelog.consumer_groups.group_views.list_group_views`; LeaderNotAvailableError, 404 / 40404)."""
        permissions = self._permissions(context)
        groups = await views.list_group_views(consumers=self.manager, broker=self.broker)
        visible = set(permissions.filter(Operation.DESCRIBE, ResourceType.GROUP, [v.group for v in groups]))
        return [v for v in groups if v.group in visible]

    async def describe_group(self, group: str, *, context: RequestContext) -> GroupView:
        """The group's state, assignor, coordinator and live members (Kafka's DescribeGroups).

        Raises:
            AuthorizationError (403 / 40301); UnknownGroupError: neither committed offsets nor live members
            (404 / 40405); InvalidGroupIdError (400 / 40008).
        """
        self._permissions(context, group)
        return await views.get_group_view(consumers=self.manager, broker=self.broker, group=group)

    async def describe_member(self, group: str, member_id: str, *, context: RequestContext) -> DescribedMember:
        """One live member of the group.

        Raises:
            those of :meth:`describe_group`; ConsumerInstanceNotFoundError: no live member of that id (404 / 40403).
        """
        return (await self.describe_group(group, context=context)).member(member_id)

    async def group_members(self, group: str, *, context: RequestContext) -> GroupDescription:
        """The group's live members cluster-wide, its generation and each member's partitions (an empty
        group is no error: ``kafka-consumer-groups --describe --members``).

        Raises:
            AuthorizationError (403 / 40301); InvalidGroupIdError (400 / 40008).
        """
        self._permissions(context, group)
        return await self.manager.describe(group)

    async def member_assignments(self, group: str, member_id: str, *, context: RequestContext) -> list[AssignmentView]:
        """The partitions member ``member_id`` owns in the group's current generation, by topic then partition.

        Raises:
            AuthorizationError (403 / 40301); UnknownGroupError (404 / 40405);
            ConsumerInstanceNotFoundError: no live member of that id (404 / 40403).
        """
        self._permissions(context, group)
        return await views.member_assignments(consumers=self.manager, broker=self.broker, group=group,
                                              member_id=member_id)

    async def member_assignment(self, group: str, member_id: str, *, topic: str, partition: int,
                                context: RequestContext) -> AssignmentView:
        """One partition member ``member_id`` owns.

        Raises:
            those of :meth:`member_assignments`; UnknownGroupError: the member does not own that partition
            (404 / 40405).
        """
        assignments = await self.member_assignments(group, member_id, context=context)
        return views.find_assignment(assignments, member_id=member_id, topic=topic, partition=partition)

    async def group_lags(self, group: str, *, context: RequestContext) -> list[PartitionLagView]:
        """The group's lag per partition it committed an offset for, of the topics the principal may
        Describe, by topic then partition (see :func:`~lakelog.consumer_groups.group_views.group_lags`).

        Raises:
            AuthorizationError (403 / 40301); UnknownGroupError: no committed offsets (404 / 40405).
        """
        permissions = self._permissions(context, group)
        return self._visible(permissions, await views.group_lags(consumers=self.manager, broker=self.broker,
                                                                 group=group))

    async def partition_lag(self, group: str, *, topic: str, partition: int,
                            context: RequestContext) -> PartitionLagView:
        """The group's lag on one partition; Describe on the group, then on the topic.

        Raises:
            AuthorizationError (403 / 40301); UnknownGroupError: no committed offset for that partition
            (404 / 40405).
        """
        self._permissions(context, group).require(Operation.DESCRIBE, ResourceType.TOPIC, topic)
        lags = await views.group_lags(consumers=self.manager, broker=self.broker, group=group)
        return views.find_lag(lags, group=group, topic=topic, partition=partition)

    async def lag_summary(self, group: str, *, context: RequestContext) -> LagSummaryView:
        """The group's largest and total lag over the topics the principal may Describe (Confluent's
        ``ConsumerGroupLagSummary``).

        Raises:
            AuthorizationError (403 / 40301); UnknownGroupError: no committed offsets (404 / 40405).
        """
        return views.summarize_lags(await self.group_lags(group, context=context), group=group)
