"""Consumer group membership of Kafka-protocol clients: Kafka's JoinGroup, SyncGroup, Heartbeat and
LeaveGroup, and the group-level DescribeGroups, ListGroups and DeleteGroups, with their authorization.

Each membership operation checks Read on the group (Kafka's ``KafkaApis.handleJoinGroupRequest`` and
siblings), then runs on the group's coordinator
(:class:`~lakelog.consumer_groups.classic_coordinator.ClassicGroupCoordinator`; another broker answers
NotCoordinatorError). DescribeGroups needs Describe on the group, DeleteGroups Delete on it; ListGroups
answers the groups this broker coordinates that the principal may Describe (Kafka's admin client asks
every broker), whichever kind of members they have (:mod:`lakelog.requests.group_views`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lakelog.consumer_groups.classic_coordinator import ClassicGroupCoordinator, GroupSummary
from lakelog.consumer_groups.classic_group import JoinResult
from lakelog.consumer_groups.errors import GroupNotEmptyError, GroupSubscribedToTopicError, UnknownGroupError
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.requests.group_views import GroupViews
from lakelog.requests.groups import GroupOffsets
from lakelog.security.acls import Operation, ResourceType
from lakelog.security.authorizer import Authorizer

__all__ = ["GroupListing", "GroupMembershipOperations", "JoinGroupRequest", "SyncGroupRequest"]

#: Kafka's state names of the group views' states (Confluent's ``ConsumerGroupState``)
KAFKA_STATES = {"EMPTY": "Empty", "STABLE": "Stable", "PREPARING_REBALANCE": "PreparingRebalance",
                "COMPLETING_REBALANCE": "CompletingRebalance", "DEAD": "Dead"}


@dataclass(frozen=True, kw_only=True)
class JoinGroupRequest:
    """Kafka's JoinGroup.

    Attributes:
        group: the group id. member_id: "" for a new member. group_instance_id: a static member's id.
        session_timeout_ms, rebalance_timeout_ms: the member's ``session.timeout.ms`` and
            ``max.poll.interval.ms`` (-1: the session timeout, JoinGroup v0).
        protocol_type: ``consumer`` for consumers. protocols: ``(assignor name, metadata)`` by preference.
        require_known_member_id: JoinGroup v4+ (KIP-394): a new member first gets its id (MEMBER_ID_REQUIRED).
    """

    group: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Sequence[tuple[str, bytes]]
    require_known_member_id: bool


@dataclass(frozen=True, kw_only=True)
class SyncGroupRequest:
    """Kafka's SyncGroup: ``assignments`` (member id -> bytes) from the leader, empty from the others;
    ``protocol_type`` and ``protocol_name`` (v5+, else None) must be the group's; ``group_instance_id``: a
    static member's."""

    group: str
    member_id: str
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupListing:
    """A group in ListGroups: its id, Kafka state name and protocol type (``consumer``; "" for a group with
    only committed offsets)."""

    group: str
    state: str
    protocol_type: str


class GroupMembershipOperations:
    """The membership operations (see the module docstring).

    Args:
        coordinator: the Kafka-protocol groups this broker coordinates.
        views: the group views (ListGroups of every kind of group). offsets: the group offsets (DeleteGroups).
        broker_id: this broker's id. authorizer: the broker's ACLs.
    """

    def __init__(self, *, coordinator: ClassicGroupCoordinator, views: GroupViews, offsets: GroupOffsets,
                 broker_id: int, authorizer: Authorizer) -> None:
        self.coordinator = coordinator
        self.views = views
        self.offsets = offsets
        self.broker_id = broker_id
        self.authorizer = authorizer

    def _require(self, context: RequestContext, operation: Operation, group: str) -> RequestPermissions:
        permissions = RequestPermissions.of(self.authorizer, context)
        permissions.require(operation, ResourceType.GROUP, group)
        return permissions

    async def join_group(self, request: JoinGroupRequest, *, context: RequestContext) -> JoinResult:
        """Kafka's JoinGroup; Read on the group. See :meth:`ClassicGroupCoordinator.join_group` for the wait
        and the errors; AuthorizationError."""
        self._require(context, Operation.READ, request.group)
        return await self.coordinator.join_group(
            request.group, member_id=request.member_id, group_instance_id=request.group_instance_id,
            client_id=context.client_id, client_host=context.host, session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms, protocol_type=request.protocol_type,
            protocols=request.protocols, require_known_member_id=request.require_known_member_id)

    async def sync_group(self, request: SyncGroupRequest, *, context: RequestContext) -> bytes:
        """Kafka's SyncGroup: the member's assignment; Read on the group. See
        :meth:`ClassicGroupCoordinator.sync_group`; AuthorizationError."""
        self._require(context, Operation.READ, request.group)
        return await self.coordinator.sync_group(
            request.group, member_id=request.member_id, generation_id=request.generation_id,
            protocol_type=request.protocol_type, protocol_name=request.protocol_name, assignments=request.assignments,
            group_instance_id=request.group_instance_id)

    async def heartbeat(self, group: str, *, member_id: str, generation_id: int, group_instance_id: str | None = None,
                        context: RequestContext) -> None:
        """Kafka's Heartbeat; Read on the group. See :meth:`ClassicGroupCoordinator.heartbeat`."""
        self._require(context, Operation.READ, group)
        await self.coordinator.heartbeat(group, member_id=member_id, generation_id=generation_id,
                                         group_instance_id=group_instance_id)

    async def leave_group(self, group: str, members: Sequence[tuple[str, str | None]], *,
                          context: RequestContext) -> list[Exception | None]:
        """Kafka's LeaveGroup: each ``(member id, group instance id)``'s error or None; Read on the group. See
        :meth:`ClassicGroupCoordinator.leave_group`."""
        self._require(context, Operation.READ, group)
        return await self.coordinator.leave_group(group, members)

    async def describe_group(self, group: str, *, context: RequestContext) -> GroupSummary:
        """Kafka's DescribeGroups of one group on its coordinator; Describe on the group. A group without
        Kafka-protocol members answers its state from the group views (``Empty`` with committed offsets or
        HTTP members, ``Dead`` when unknown) and no members.

        Raises: AuthorizationError; NotCoordinatorError, CoordinatorLoadInProgressError; InvalidGroupIdError.
        """
        self._require(context, Operation.DESCRIBE, group)
        summary = await self.coordinator.describe(group)
        if summary is not None and summary.state != "Empty":
            return summary
        try:
            view = await self.views.describe_group(group, context=context)
        except UnknownGroupError:
            return GroupSummary(group, "Dead", 0, "", "", "", [])
        generation = summary.generation_id if summary is not None else 0
        return GroupSummary(group, KAFKA_STATES.get(view.state, "Empty"), generation, "", "", "", [])

    async def list_groups(self, *, states: Sequence[str] | None = None,
                          context: RequestContext) -> list[GroupListing]:
        """Kafka's ListGroups on this broker: the groups it coordinates that the principal may Describe
        (``states``: only those in one of these Kafka state names, matched without case, KIP-518)."""
        wanted = {s.lower() for s in states} if states else None
        out = []
        for view in await self.views.list_groups(context=context):
            if view.coordinator != self.broker_id:
                continue
            state = KAFKA_STATES.get(view.state, "Empty")
            if wanted is not None and state.lower() not in wanted:
                continue
            out.append(GroupListing(view.group, state, "" if view.is_simple else "consumer"))
        return out

    async def delete_offsets(self, group: str, *, topic: str, partitions: Sequence[int],
                             context: RequestContext) -> list[tuple[str, int]]:
        """Kafka's OffsetDelete of one topic: :meth:`GroupOffsets.delete_offsets
        <lakelog.requests.groups.GroupOffsets.delete_offsets>` (Delete on the group, Read on the topic),
        refused while a member of the Kafka-protocol group subscribes to the topic.

        Raises: GroupSubscribedToTopicError; those of ``GroupOffsets.delete_offsets``.
        """
        self._require(context, Operation.DELETE, group)
        if await self.coordinator.subscribed_to(group, topic):
            raise GroupSubscribedToTopicError(f"A member of group '{group}' subscribes to topic '{topic}': stop it "
                                              "before deleting the group's offsets of the topic.")
        return await self.offsets.delete_offsets(group, topic=topic, partitions=partitions, context=context)

    async def delete_group(self, group: str, *, context: RequestContext) -> None:
        """Kafka's DeleteGroups of one group: its committed offsets and its Kafka-protocol state go; Delete on
        the group.

        Raises:
            AuthorizationError; GroupNotEmptyError: the group has members (NON_EMPTY_GROUP);
            UnknownGroupError: neither members nor committed offsets (GROUP_ID_NOT_FOUND);
            NotCoordinatorError, CoordinatorLoadInProgressError.
        """
        self._require(context, Operation.DELETE, group)
        summary = await self.coordinator.describe(group)
        if (summary is not None and summary.members) or await self.coordinator.has_http_members(group):
            raise GroupNotEmptyError(f"Group '{group}' has members: stop them before deleting it.")
        committed = await self.offsets.coordinator.committed(group)
        if summary is None and not committed:
            raise UnknownGroupError(f"Consumer group '{group}' not found: it has no committed offsets and no members.")
        if committed:
            await self.offsets.coordinator.delete_offsets(group, [(c.topic, c.partition) for c in committed])
        await self.coordinator.delete(group)
