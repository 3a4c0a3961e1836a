"""Consumer group offsets: Kafka's OffsetCommit, OffsetFetch, ListGroups, OffsetDelete and the offsets
administration of ``kafka-consumer-groups`` (lag, ``--reset-offsets``), with their per-topic
authorization.

Each operation checks, for its caller's :class:`~lakelog.requests.context.RequestContext`, the group's own
permission first (Read to commit or reset, Describe to read offsets or lag, Delete to delete offsets; a
front door may check it early too, before it reads the body), then what it needs of the topics named in
the request or found in the answer (Read on each topic committed, reset or deleted; Describe to see a
topic in an answer: topics the principal may not Describe are left out, as Kafka filters OffsetFetch).
The offsets are written and read through the group's coordinator (:mod:`lakelog.consumer_groups.offsets_admin`,
:class:`~lakelog.consumer_groups.coordinator.GroupCoordinator`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from lakelog.consumer_groups import offsets_admin
from lakelog.consumer_groups.broker_api import OffsetsAdminBroker
from lakelog.consumer_groups.classic_coordinator import ClassicGroupCoordinator
from lakelog.consumer_groups.coordinator import GroupCoordinator
from lakelog.consumer_groups.offset_records import CommittedOffset
from lakelog.consumer_groups.offsets_admin import GroupLagInfo, PartitionOffset, ResetTarget
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.security.acls import Operation, ResourceType
from lakelog.security.authorizer import Authorizer

__all__ = ["GroupOffsets", "OffsetCommitRequest", "ResetOffsetsRequest"]


@dataclass(frozen=True, kw_only=True)
class OffsetCommitRequest:
    """Kafka's OffsetCommit.

    Attributes:
        group: the consumer group. offsets: the next offset to read per partition (with metadata).
        generation_id: the committer's group generation; None outside group membership.
        member_id: a Kafka client's member id ("" outside membership; None for an HTTP commit, fenced by
            the ZooKeeper generation): the commit is fenced by the Kafka-protocol group's member and
            generation (Kafka's ``handleCommitOffsets``).
        app_id, version: an idempotent commit (Delta's ``txn``): a replayed or older ``version`` for
            ``app_id`` writes nothing. Both or neither.
    """

    group: str
    offsets: Sequence[PartitionOffset]
    generation_id: int | None = None
    member_id: str | None = None
    group_instance_id: str | None = None
    app_id: str | None = None
    version: int | None = None


@dataclass(frozen=True, kw_only=True)
class ResetOffsetsRequest:
    """``kafka-consumer-groups --reset-offsets`` of a group without active members.

    Attributes:
        group: the consumer group. to: the target (:data:`~lakelog.consumer_groups.offsets_admin.ResetTarget`).
        value: the target's number (a time in ms, an offset, a shift, a duration in ms), where it takes one.
        topics: only these topics (None: every topic the group committed).
        partitions: only these ``(topic, partition)`` pairs (None: all of the topics').
        dry_run: plan only, commit nothing.
    """

    group: str
    to: ResetTarget
    value: int | None = None
    topics: Sequence[str] | None = None
    partitions: Sequence[tuple[str, int]] | None = field(default=None)
    dry_run: bool = False


class GroupOffsets:
    """The offset operations of consumer groups.

    Args:
        broker: what the offsets administration uses of the broker (topics, offsets, the coordinator).
        coordinator: the group coordinator (committed offsets, wherever a group's coordinator is).
        authorizer: the broker's ACLs (``authorizer.enabled``).
        classic: the Kafka-protocol groups this broker coordinates (a Kafka member's commit is fenced there).
    """

    def __init__(self, *, broker: OffsetsAdminBroker, coordinator: GroupCoordinator, authorizer: Authorizer,
                 classic: ClassicGroupCoordinator | None = None) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self.authorizer = authorizer
        self.classic = classic

    def _permissions(self, context: RequestContext, operation: Operation | None = None,
                     group: str | None = None) -> RequestPermissions:
        """The caller's permissions, after ``operation`` on ``group`` when given (AuthorizationError)."""
        permissions = RequestPermissions.of(self.authorizer, context)
        if operation is not None and group is not None:
            permissions.require(operation, ResourceType.GROUP, group)
        return permissions

    async def commit_offsets(self, request: OffsetCommitRequest, *, context: RequestContext) -> bool:
        """Commit ``request.offsets`` in one append through the group's coordinator; False when an
        idempotent commit was a replay (nothing written).

        Raises:
            AuthorizationError (Read on the group, then on each topic: 403 / 40301); the errors of
            :func:`~lakelog.consumer_groups.offsets_admin.commit_offsets` (unknown topic or partition,
            a stale generation: 409 / 40904); with ``member_id``, those of
            :meth:`~lakelog.consumer_groups.classic_coordinator.ClassicGroupCoordinator.check_commit`
            (UnknownMemberIdError, IllegalGenerationError, RebalanceInProgressError, NotCoordinatorError).
        """
        permissions = self._permissions(context, Operation.READ, request.group)
        permissions.require_all(Operation.READ, ResourceType.TOPIC, (o.topic for o in request.offsets))
        generation = request.generation_id
        if request.member_id is not None and self.classic is not None:
            kafka_generation = await self.classic.check_commit(
                request.group, member_id=request.member_id, generation_id=-1 if generation is None else generation,
                group_instance_id=request.group_instance_id)
            if kafka_generation is None:
                generation = None  # outside a Kafka-protocol group: a simple consumer's commit
        return await offsets_admin.commit_offsets(self.broker, request.group, request.offsets,
                                                  generation=generation, app_id=request.app_id,
                                                  version=request.version)

    async def committed_offsets(self, group: str, *, topic: str | None = None,
                                context: RequestContext) -> list[CommittedOffset]:
        """The group's committed offsets (``topic``: of that topic only), without the topics the principal
        may not Describe (Kafka's OffsetFetch). Raises AuthorizationError: no Describe on the group."""
        permissions = self._permissions(context, Operation.DESCRIBE, group)
        committed = await self.coordinator.committed(group, topic)
        visible = set(permissions.filter(Operation.DESCRIBE, ResourceType.TOPIC, {c.topic for c in committed}))
        return [c for c in committed if c.topic in visible]

    async def find_coordinator(self, group: str, *, context: RequestContext) -> int | None:
        """The broker id of ``group``'s coordinator (the leader of its ``__consumer_offsets`` partition), or
        None before any group committed or while that partition has no leader: then any broker takes the
        group's requests and forwards them (Kafka's FindCoordinator).

        Raises:
            AuthorizationError: no Describe on the group (403 / 40301).
        """
        self._permissions(context, Operation.DESCRIBE, group)
        return await self.coordinator.coordinator_id(group)

    async def list_groups(self, *, context: RequestContext) -> list[str]:
        """The groups with committed offsets that the principal may Describe (Kafka's ListGroups)."""
        groups = await self.coordinator.groups()
        return self._permissions(context).filter(Operation.DESCRIBE, ResourceType.GROUP, groups)

    async def group_lag(self, group: str, *, context: RequestContext) -> GroupLagInfo:
        """The group's lag per partition of the topics it committed, only those the principal may Describe
        (their lag makes ``total_lag``).

        Raises:
            AuthorizationError: no Describe on the group (403 / 40301);
            the errors of :func:`~lakelog.consumer_groups.offsets_admin.group_lag` (404 / 40405: no committed offsets).
        """
        permissions = self._permissions(context, Operation.DESCRIBE, group)
        lag = await offsets_admin.group_lag(self.broker, group)
        visible = set(permissions.filter(Operation.DESCRIBE, ResourceType.TOPIC, {p.topic for p in lag.partitions}))
        return GroupLagInfo(lag.group, [p for p in lag.partitions if p.topic in visible])

    async def reset_offsets(self, request: ResetOffsetsRequest, *,
                            context: RequestContext) -> list[PartitionOffset]:
        """Reset the group's offsets (:func:`~lakelog.consumer_groups.offsets_admin.reset_offsets`); with
        ACLs checked the reset needs Read on the group and is planned first (a dry run) to learn its topics,
        each needing Read.

        Raises:
            AuthorizationError; the errors of :func:`~lakelog.consumer_groups.offsets_admin.reset_offsets`.
        """
        permissions = self._permissions(context, Operation.READ, request.group)

        def reset(dry_run: bool):
            return offsets_admin.reset_offsets(self.broker, request.group, to=request.to, value=request.value,
                                               topics=request.topics, dry_run=dry_run, partitions=request.partitions)

        if permissions.enabled:
            planned = await reset(True)
            permissions.require_all(Operation.READ, ResourceType.TOPIC, (o.topic for o in planned))
        return await reset(request.dry_run)

    async def delete_offsets(self, group: str, *, topic: str, partitions: Sequence[int] | None = None,
                             context: RequestContext) -> list[tuple[str, int]]:
        """Delete the group's committed offsets of ``topic`` (Kafka's OffsetDelete); Delete on the group,
        Read on the topic.

        Raises:
            AuthorizationError; the errors of :func:`~lakelog.consumer_groups.offsets_admin.delete_offsets`.
        """
        self._permissions(context, Operation.DELETE, group).require(Operation.READ, ResourceType.TOPIC, topic)
        return await offsets_admin.delete_offsets(self.broker, group, topic=topic, partitions=partitions)
