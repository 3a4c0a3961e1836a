"""Consumer instances: Confluent REST Proxy v2's stateful consumers, which live in the broker (Kafka's
JoinGroup / SyncGroup / LeaveGroup through a subscription, a consumer's Fetch, OffsetCommit and
OffsetFetch), with their authorization.

Every operation names its instance by group and instance name and checks, for its caller's
:class:`~lakelog.requests.context.RequestContext`: Read on the group first (an instance joins its group:
Kafka's JoinGroup, SyncGroup, Heartbeat and OffsetCommit need it), then that the instance lives on this
broker (:class:`~lakelog.consumer_groups.errors.ConsumerInstanceNotFoundError`, 404 / 40403) and belongs to
the caller's principal (REST Proxy's instances belong to the principal that created them:
:class:`~lakelog.security.errors.AuthorizationError`, 403 / 40301 for any other), then what it needs of
the topics it names or reads (Read on each topic subscribed, assigned, read or committed; a pattern
matches only the topics the principal may Read; committed offsets leave out the topics it may not
Describe, as Kafka filters OffsetFetch). A front door may check the group's permission early too, before
it reads a body. The instances themselves are the broker's
:class:`~lakelog.consumer_groups.manager.ConsumerManager` (``Broker.consumer_instances``).

What stays with a front door: REST Proxy's wire conventions (the ``Accept`` header against the instance's
embedded format, REST Proxy's committed offset being the last record processed, where Kafka's is the next
offset to read, and the encoding of records).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lakelog.consumer_groups.assignors import TopicPartition
from lakelog.consumer_groups.instances import ConsumerInstance, EmbeddedFormat, IsolationLevel
from lakelog.consumer_groups.manager import ConsumerManager
from lakelog.consumer_groups.offset_records import CommittedOffset
from lakelog.consumer_groups.poller import DEFAULT_MAX_BYTES, PollResult
from lakelog.consumer_groups.positions import OffsetCommits
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.requests.subscriptions import validate_subscription
from lakelog.security.acls import Operation, ResourceType
from lakelog.security.authorizer import Authorizer

__all__ = ["ConsumerInstanceInfo", "ConsumerInstances", "CreateConsumerInstanceRequest", "SubscribeRequest"]


@dataclass(frozen=True, kw_only=True)
class CreateConsumerInstanceRequest:
    """REST Proxy's ``POST /consumers/{group}``: a consumer instance's configuration (Kafka's consumer
    config names).

    Attributes:
        group: the consumer group (any string ZooKeeper can hold as one znode name).
        name: the instance's name, unique in its group cluster-wide; None: ``rest-consumer-{uuid4}``.
        format: the embedded format of its records' keys and values (``binary``: base64, ``json``).
        auto_offset_reset: ``auto.offset.reset`` (``earliest`` | ``latest``).
        auto_commit: ``auto.commit.enable``. fetch_min_bytes: ``fetch.min.bytes``.
        request_timeout_ms: ``consumer.request.timeout.ms``: how long a read waits for records.
        assignor: ``partition.assignment.strategy`` (range | roundrobin | sticky); None: the broker's.
        isolation_level: ``isolation.level``.
    """

    group: str
    name: str | None = None
    format: EmbeddedFormat = "binary"
    auto_offset_reset: str = "latest"
    auto_commit: bool = True
    fetch_min_bytes: int = 1
    request_timeout_ms: int = 1000
    assignor: str | None = None
    isolation_level: IsolationLevel = "read_uncommitted"


@dataclass(frozen=True, kw_only=True)
class SubscribeRequest:
    """Kafka's ``subscribe``: exactly one of a non-empty ``topics`` list and a ``topic_pattern`` (a Python
    regular expression matched against whole topic names, now and as topics are created)."""

    topics: Sequence[str] | None = None
    topic_pattern: str | None = None


@dataclass(frozen=True, kw_only=True)
class ConsumerInstanceInfo:
    """A consumer instance as its owner sees it: ``group``, ``name`` and the embedded ``format`` of its records."""

    group: str
    name: str
    format: EmbeddedFormat


class ConsumerInstances:
    """The operations of consumer instances (see the module docstring).

    Args:
        manager: the broker's consumer instances and their groups.
        authorizer: the broker's ACLs (``authorizer.enabled``).
    """

    def __init__(self, *, manager: ConsumerManager, authorizer: Authorizer) -> None:
        self.manager = manager
        self.authorizer = authorizer

    def _group_permissions(self, group: str, context: RequestContext) -> RequestPermissions:
        """The caller's permissions, after Read on ``group`` (AuthorizationError: 403 / 40301)."""
        permissions = RequestPermissions.of(self.authorizer, context)
        permissions.require(Operation.READ, ResourceType.GROUP, group)
        return permissions

    def _owned(self, group: str, instance: str, context: RequestContext) -> tuple[ConsumerInstance, RequestPermissions]:
        """The caller's instance and permissions: Read on the group (403 / 40301), the instance living here
        (404 / 40403), the caller its owner (403 / 40301). The instance's expiry clock restarts."""
        permissions = self._group_permissions(group, context)
        inst = self.manager.get(group, instance)
        permissions.require_owner(owner=inst.principal, what=f"consumer instance {instance!r} of group {group!r}")
        return inst, permissions

    # -- instances ----------------------------------------------------------------------------------

    async def create_instance(self, request: CreateConsumerInstanceRequest, *, context: RequestContext) -> str:
        """Create a consumer instance owned by the caller's principal; returns its name. With ACLs checked, a
        topic pattern it subscribes to later matches only the topics that principal may Read.

        Raises:
            AuthorizationError: no Read on the group (403 / 40301).
            the errors of :meth:`ConsumerManager.create <lakelog.consumer_groups.manager.ConsumerManager.create>`:
            InvalidGroupIdError (400 / 40008), ConsumerAlreadyExistsError (409 / 40902),
            InvalidConsumerConfigError (422 / 42204), InvalidConsumerInstanceNameError (422 / 42209).
        """
        permissions = self._group_permissions(request.group, context)
        name = request.name or f"rest-consumer-{uuid.uuid4()}"
        await self.manager.create(
            request.group, name=name, format=request.format, auto_offset_reset=request.auto_offset_reset,
            auto_commit=request.auto_commit, fetch_min_bytes=request.fetch_min_bytes,
            request_timeout_ms=request.request_timeout_ms, assignor=request.assignor,
            isolation_level=request.isolation_level, principal=permissions.principal,
            topic_filter=permissions.topic_filter(Operation.READ) if permissions.enabled else None)
        return name

    async def delete_instance(self, group: str, instance: str, *, context: RequestContext) -> None:
        """Close the instance: with auto commit its positions are committed, it leaves its group and its
        name is free again (Kafka's ``close``). Raises: see the module docstring."""
        inst, _ = self._owned(group, instance, context)
        await self.manager.delete(inst.group, inst.name)

    def describe_instance(self, group: str, instance: str, *, context: RequestContext) -> ConsumerInstanceInfo:
        """The caller's instance: its name and the embedded format its records are answered in. Checks what
        every operation on it checks, so a front door may call it early, before it reads a body.
        Raises: see the module docstring."""
        inst, _ = self._owned(group, instance, context)
        return ConsumerInstanceInfo(group=inst.group, name=inst.name, format=inst.format)

    # -- subscription and assignment -----------------------------------------------------------------

    async def subscribe(self, group: str, instance: str, request: SubscribeRequest, *,
                        context: RequestContext) -> None:
        """Subscribe to topics or a topic pattern (Kafka's ``subscribe``); subscribing again to the same is
        a no-op. A topic list needs Read on each topic.

        Raises:
            InvalidSubscriptionError: neither or both of a non-empty list and a pattern, or a pattern
                that is not a regular expression (422 / 42227); InvalidTopicError: a listed topic name outside
                Kafka's rule (400 / 40004); nothing changes.
            AuthorizationError (403 / 40301); the errors of :meth:`ConsumerManager.subscribe
            <lakelog.consumer_groups.manager.ConsumerManager.subscribe>` (409 / 40901, 409 / 40903).
        """
        inst, permissions = self._owned(group, instance, context)
        topics, topic_pattern = request.topics, request.topic_pattern
        pattern = validate_subscription(topics=topics, topic_pattern=topic_pattern)
        if topics is not None:
            permissions.require_all(Operation.READ, ResourceType.TOPIC, topics)
        await self.manager.subscribe(inst, topics=list(topics) if topics is not None else None, pattern=pattern)

    async def subscription(self, group: str, instance: str, *, context: RequestContext) -> list[str]:
        """The subscribed topics (a pattern: the existing topics it matches). Raises: see the module docstring."""
        inst, _ = self._owned(group, instance, context)
        return await self.manager.subscription_topics(inst)

    async def unsubscribe(self, group: str, instance: str, *, context: RequestContext) -> None:
        """Drop the subscription or manual assignment (Kafka's ``unsubscribe``), committing first with auto
        commit. Raises: see the module docstring."""
        inst, _ = self._owned(group, instance, context)
        await self.manager.unsubscribe(inst)

    async def assign(self, group: str, instance: str, partitions: Sequence[TopicPartition], *,
                     context: RequestContext) -> None:
        """Manual assignment (Kafka's ``assign``): read exactly ``partitions``, outside group membership;
        Read on each topic.

        Raises:
            AuthorizationError (403 / 40301); the errors of :meth:`ConsumerManager.assign
            <lakelog.consumer_groups.manager.ConsumerManager.assign>` (409 / 40903 when subscribed, 404 /
            40401 or 40402 for a partition that does not exist).
        """
        inst, permissions = self._owned(group, instance, context)
        permissions.require_all(Operation.READ, ResourceType.TOPIC, (t for t, _ in partitions))
        await self.manager.assign(inst, list(partitions))

    def assignment(self, group: str, instance: str, *, context: RequestContext) -> list[TopicPartition]:
        """The partitions the instance reads now, sorted (Kafka's ``assignment``). Raises: see the module docstring."""
        inst, _ = self._owned(group, instance, context)
        return sorted(inst.owned)

    # -- positions ------------------------------------------------------------------------------------

    async def seek(self, group: str, instance: str, offsets: Mapping[TopicPartition, int], *,
                   context: RequestContext) -> None:
        """Set the next offset to read of owned partitions (Kafka's ``seek``).

        Raises:
            IllegalConsumerStateError: a partition the instance does not own (409 / 40903); see the module docstring.
        """
        inst, _ = self._owned(group, instance, context)
        await self.manager.seek(inst, dict(offsets))

    async def seek_to_beginning(self, group: str, instance: str, partitions: Sequence[TopicPartition], *,
                                context: RequestContext) -> None:
        """Seek owned partitions to their log start offsets (Kafka's ``seekToBeginning``).

        Raises:
            IllegalConsumerStateError (409 / 40903); LeaderNotAvailableError; see the module docstring.
        """
        inst, _ = self._owned(group, instance, context)
        await self.manager.seek_to(inst, list(partitions), end=False)

    async def seek_to_end(self, group: str, instance: str, partitions: Sequence[TopicPartition], *,
                          context: RequestContext) -> None:
        """Seek owned partitions to their ends (Kafka's ``seekToEnd``: the high watermarks; with
        ``read_committed`` the last stable offsets).

        Raises:
            IllegalConsumerStateError (409 / 40903); LeaderNotAvailableError; see the module docstring.
        """
        inst, _ = self._owned(group, instance, context)
        await self.manager.seek_to(inst, list(partitions), end=True)

    # -- records and offsets --------------------------------------------------------------------------

    async def poll(self, group: str, instance: str, *, timeout_ms: int | None = None,
                   max_bytes: int = DEFAULT_MAX_BYTES, context: RequestContext) -> PollResult:
        """Records of the owned partitions (Kafka's ``poll``): Arrow tables per partition and the group
        generation they were read in; Read on each topic of the owned partitions, checked on every read
        (as Kafka's Fetch: a revoked ACL stops the next read).

        Args:
            timeout_ms: how long to wait for records; None: the instance's ``consumer.request.timeout.ms``.
            max_bytes: the most bytes of keys and values (at least one record).

        Raises:
            AuthorizationError (403 / 40301); IllegalConsumerStateError: neither subscribed nor assigned
            (409 / 40903); see :meth:`RecordPoller.poll <lakelog.consumer_groups.poller.RecordPoller.poll>`.
        """
        inst, permissions = self._owned(group, instance, context)
        permissions.require_all(Operation.READ, ResourceType.TOPIC, (t for t, _ in inst.owned))
        return await self.manager.records(inst, timeout_ms=timeout_ms, max_bytes=max_bytes)

    def unread(self, group: str, instance: str, result: PollResult, *, context: RequestContext) -> None:
        """Undo a :meth:`poll` whose answer could not be given (a ``json`` instance met bytes that are not
        JSON): the next poll returns the same records (REST Proxy's consumer keeps the record that failed).
        Raises: see the module docstring."""
        inst, _ = self._owned(group, instance, context)
        self.manager.unread(inst, result)

    async def commit_offsets(self, group: str, instance: str, offsets: OffsetCommits | None = None, *,
                             context: RequestContext) -> None:
        """Commit offsets for the instance's group (Kafka's ``commitSync``): ``offsets`` maps partitions to
        ``(the next offset to read, metadata)``; None commits the positions of the owned partitions (what
        was fetched). Read on each topic committed.

        Raises:
            AuthorizationError (403 / 40301); IllegalGenerationError: the instance's generation is older
            than the group's (409 / 40904); UnknownTopicError, UnknownPartitionError.
        """
        inst, permissions = self._owned(group, instance, context)
        topics: Iterable[str] = (t for t, _ in offsets) if offsets else (t for t, _ in inst.owned)
        permissions.require_all(Operation.READ, ResourceType.TOPIC, topics)
        await self.manager.commit(inst, dict(offsets) if offsets else None)

    async def committed_offsets(self, group: str, instance: str, partitions: Sequence[TopicPartition] | None = None,
                                *, context: RequestContext) -> list[CommittedOffset]:
        """The group's committed offsets of ``partitions`` (None: the owned ones; partitions without a
        commit are left out), without the topics the principal may not Describe (Kafka's OffsetFetch).
        Raises: see the module docstring."""
        inst, permissions = self._owned(group, instance, context)
        committed = await self.manager.committed(inst, list(partitions) if partitions is not None else None)
        visible = set(permissions.filter(Operation.DESCRIBE, ResourceType.TOPIC, {c.topic for c in committed}))
        return [c for c in committed if c.topic in visible]
