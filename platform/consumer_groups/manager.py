"""The consumer instances of one broker: REST Proxy v2's ``KafkaConsumerManager`` for lakelog.

:class:`ConsumerManager` owns the broker's :class:`~lakelog.consumer_groups.instances.ConsumerInstance`
objects and does, for the HTTP routes of :mod:`lakelog.ingest_api.consumers_api`: instance creation
and deletion, subscription (topics or a pattern) and manual assignment, seeks, reads (long-poll over
the owned partitions, :mod:`lakelog.consumer_groups.poller`), offset commits (to the group's
coordinator, :mod:`lakelog.consumer_groups.coordinator`, fenced by the group generation,
:mod:`lakelog.consumer_groups.positions`) and expiry after ``consumer.instance.timeout.ms`` without
requests. Results are typed (Arrow tables, dataclasses); the HTTP layer encodes them.

Group membership and rebalancing go through ZooKeeper (:mod:`lakelog.consumer_groups.membership`,
whose docstring gives the revoke-before-assign protocol); :class:`~lakelog.consumer_groups.rebalancer.
GroupRebalancer` runs its steps 1-3 for the local members of a group whenever a ZooKeeper watch or a
local change asks for it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterable
from typing import get_args

from lakelog.consumer_groups.assignors import TopicPartition, get_assignor
from lakelog.consumer_groups.broker_api import ConsumerBroker
from lakelog.consumer_groups.describe import GroupDescription, describe_group
from lakelog.consumer_groups.errors import (
    ConsumerAlreadyExistsError,
    ConsumerAlreadySubscribedError,
    ConsumerInstanceNotFoundError,
    IllegalConsumerStateError,
    InconsistentGroupProtocolError,
    InvalidConsumerConfigError,
)
from lakelog.consumer_groups.instances import (ConsumerInstance, EmbeddedFormat, IsolationLevel, TopicFilter,
                                               validate_group_id, validate_instance_name)
from lakelog.consumer_groups.membership import GroupMembership
from lakelog.consumer_groups.offset_records import CommittedOffset
from lakelog.consumer_groups.poller import DEFAULT_MAX_BYTES, PollResult, RecordPoller
from lakelog.consumer_groups.positions import InstanceOffsets, OffsetCommits
from lakelog.consumer_groups.rebalancer import GroupRebalancer
from lakelog.replication.errors import UnknownTopicError
from lakelog.replication.metadata import TOPICS_PATH

log = logging.getLogger(__name__)

class ConsumerManager:
    """The consumer instances of one broker and their groups.

    Args:
        broker: the started broker (see :class:`~lakelog.consumer_groups.broker_api.ConsumerBroker`)
            whose logs, ZooKeeper session and offset store the instances use.
        instance_timeout_ms: ``consumer.instance.timeout.ms``: an instance without requests for this
            long is deleted (its partitions go to the other members).
        default_assignor: ``partition.assignment.strategy`` of instances that name none.

    Call :meth:`start` and :meth:`stop` in the broker's event loop.
    """

    def __init__(self, broker: ConsumerBroker, *, instance_timeout_ms: int = 300_000,
                 default_assignor: str = "range") -> None:
        self.broker = broker
        self.instance_timeout_ms = instance_timeout_ms
        self.default_assignor = get_assignor(default_assignor).name
        self.membership = GroupMembership(broker.zk, partition_counts=self._partition_counts,
                                          default_assignor=self.default_assignor)
        self.offsets = InstanceOffsets(broker)
        self.poller = RecordPoller(broker, self.offsets)
        self.rebalancer = GroupRebalancer(self.membership, self.offsets, self.instances)
        self._instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._expiry_task: asyncio.Task | None = None
        self._stopping = False

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the expiry task, the topic watch (pattern subscriptions) and the partition growth listener."""
        self._loop = asyncio.get_running_loop()
        self.rebalancer.start()
        self._expiry_task = asyncio.create_task(self._expire_loop(), name="consumer-instance-expiry")
        self.broker.zk.ChildrenWatch(TOPICS_PATH, self._on_topics_changed)
        # partitions added to a topic: every group rebalances (its fingerprint has the partition counts)
        self.broker.cache.add_growth_listener(lambda topic: None if self._stopping else self.rebalancer.kick_all())

    async def stop(self) -> None:
        """Close every instance (auto commit, leave its group), stop the background task."""
        self._stopping = True
        self.rebalancer.stop()
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        for inst in list(self._instances.values()):
            try:
                await self.delete(inst.group, inst.name)
            except Exception:
                log.exception("closing consumer instance %s/%s failed", inst.group, inst.name)

    @property
    def base_url(self) -> str:
        """``http://host:port`` of this broker: where its instances live."""
        return self.broker.settings.advertised_url

    # -- instances ------------------------------------------------------------------------------

    async def create(self, group: str, *, name: str, format: str = "binary", auto_offset_reset: str = "latest",
                     auto_commit: bool = True, fetch_min_bytes: int = 1, request_timeout_ms: int = 1000,
                     assignor: str | None = None, isolation_level: IsolationLevel = "read_uncommitted",
                     principal: str = "User:ANONYMOUS", topic_filter: TopicFilter | None = None) -> ConsumerInstance:
        """Create instance ``name`` of ``group`` (REST Proxy ``POST /consumers/{group}``) reading with Kafka's
        ``isolation.level`` ``isolation_level``, owned by ``principal`` (see :class:`ConsumerInstance`).

        Raises:
            ConsumerAlreadyExistsError: the name is taken in the group, on any broker (409 / 40902).
            InvalidConsumerConfigError: a bad format, reset policy, isolation level or assignor (422 / 42204).
            InvalidGroupIdError: a group id ZooKeeper cannot hold (400 / 40008).
            InvalidConsumerInstanceNameError: a name outside REST Proxy's characters, or ``.`` / ``..``
                (422 / 42209).
        """
        validate_group_id(group)
        validate_instance_name(name)
        if format not in get_args(EmbeddedFormat):
            raise InvalidConsumerConfigError(f"Invalid consumer configuration: format {format!r} is not supported; "
                                             f"use one of {', '.join(get_args(EmbeddedFormat))}.")
        if auto_offset_reset not in ("earliest", "latest"):
            raise InvalidConsumerConfigError(f"Invalid consumer configuration: auto.offset.reset "
                                             f"{auto_offset_reset!r}; use earliest or latest.")
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise InvalidConsumerConfigError(f"Invalid consumer configuration: isolation.level {isolation_level!r}; "
                                             f"use read_uncommitted or read_committed.")
        chosen = get_assignor(assignor).name if assignor else self.default_assignor
        if (group, name) in self._instances:
            raise ConsumerAlreadyExistsError(
                f"Consumer with specified consumer ID already exists in the specified consumer group: "
                f"instance '{name}' of group '{group}'.")
        inst = ConsumerInstance(group=group, name=name, format=format, auto_offset_reset=auto_offset_reset,  # type: ignore[arg-type]
                                auto_commit=auto_commit, fetch_min_bytes=fetch_min_bytes,
                                request_timeout_ms=request_timeout_ms, assignor=chosen,
                                isolation_level=isolation_level, principal=principal, topic_filter=topic_filter)
        self._instances[(group, name)] = inst
        try:
            await asyncio.to_thread(self.membership.register_instance, group, name,
                                    broker_id=self.broker.broker_id, base_uri=self.base_url)
        except BaseException:
            self._instances.pop((group, name), None)
            raise
        return inst

    def get(self, group: str, name: str) -> ConsumerInstance:
        """The live instance (its expiry clock restarts). Raises :class:`ConsumerInstanceNotFoundError`."""
        inst = self._instances.get((group, name))
        if inst is None or inst.closed:
            raise ConsumerInstanceNotFoundError(
                f"Consumer instance not found: '{name}' in group '{group}' does not exist on broker "
                f"{self.broker.broker_id} (deleted, expired after consumer.instance.timeout.ms="
                f"{self.instance_timeout_ms}, or created on another broker: use its base_uri).")
        inst.touch()
        return inst

    def instances(self, group: str | None = None) -> list[ConsumerInstance]:
        """The live instances of this broker (of one group)."""
        return [i for (g, _), i in sorted(self._instances.items()) if group is None or g == group]

    async def delete(self, group: str, name: str) -> None:
        """Close an instance: auto commit, leave the group, release the name (REST Proxy ``DELETE``).

        Raises:
            ConsumerInstanceNotFoundError.
        """
        inst = self.get(group, name)
        self._instances.pop((group, name), None)  # gone for requests from now on
        try:
            await self._unsubscribe(inst)
        finally:
            inst.closed = True
            await asyncio.to_thread(self.membership.unregister_instance, group, name)

    # -- subscription and assignment ------------------------------------------------------------

    async def subscribe(self, inst: ConsumerInstance, *, topics: list[str] | None = None,
                        pattern: re.Pattern | None = None) -> None:
        """Subscribe to ``topics`` or to the topics a compiled ``pattern`` matches (now and later).

        Subscribing again to the same topics is a no-op.

        Raises:
            IllegalConsumerStateError: the instance has a manual assignment (409 / 40903).
            ConsumerAlreadySubscribedError: it is subscribed to something else (409 / 40901).
            InconsistentGroupProtocolError: the group has Kafka-protocol members (409 / 40953).
        """
        if inst.manual:
            raise IllegalConsumerStateError("Illegal state: Subscription to topics, partitions and pattern are "
                                            "mutually exclusive; this instance has a manual assignment.")
        same = (inst.topics is not None and topics is not None and sorted(set(inst.topics)) == sorted(set(topics))) or \
               (inst.pattern is not None and pattern is not None and inst.pattern.pattern == pattern.pattern)
        if same:
            return
        if inst.subscribed:
            current = inst.pattern.pattern if inst.pattern is not None else ", ".join(inst.topics or [])
            raise ConsumerAlreadySubscribedError(
                f"Consumer cannot subscribe to the specified target because it has already subscribed to other "
                f"topics ({current}); delete the subscription first.")
        inst.topics = sorted(set(topics)) if topics is not None else None
        inst.pattern = pattern
        try:
            await self._join(inst)
        except InconsistentGroupProtocolError:
            inst.topics, inst.pattern = None, None  # not subscribed: the group has Kafka-protocol members
            raise

    async def _join(self, inst: ConsumerInstance) -> None:
        await asyncio.to_thread(self.membership.join, inst.group, inst.name,
                                topics=await self.subscription_topics(inst), assignor=inst.assignor,
                                broker_id=self.broker.broker_id, base_uri=self.base_url)
        await self.rebalancer.track(inst.group)

    async def subscription_topics(self, inst: ConsumerInstance) -> list[str]:
        """The topics of the subscription (pattern: the existing topics it matches)."""
        all_topics = await asyncio.to_thread(self.broker.metadata.topics) if inst.pattern is not None else []
        return inst.matching_topics(all_topics)

    async def unsubscribe(self, inst: ConsumerInstance) -> None:
        """Drop the subscription or manual assignment (Kafka's ``unsubscribe``), committing first with auto commit."""
        await self._unsubscribe(inst)

    async def _unsubscribe(self, inst: ConsumerInstance) -> None:
        group = inst.group
        was_member = inst.subscribed
        # revoke everything; with auto commit the positions are committed before leaving
        generation = inst.generation
        positions = inst.revoke(set(inst.owned) | set(inst.pending))
        try:
            if inst.auto_commit and positions:
                await self.offsets.commit_quietly(inst, positions, generation)
        finally:
            inst.topics, inst.pattern, inst.manual = None, None, False
            inst.generation = inst.acked_generation = None
            if was_member:
                # leave even if the commit failed: a member that stays would never ack and stall the group
                await asyncio.to_thread(self.membership.leave, group, inst.name)
                if not any(i.subscribed for i in self.instances(group)):
                    self.rebalancer.untrack(group)
        if was_member:
            # the leaving broker starts the next generation right away (the others also see the watch)
            await asyncio.to_thread(self.membership.rebalance, group)

    async def assign(self, inst: ConsumerInstance, partitions: list[TopicPartition]) -> None:
        """Manual assignment (Kafka's ``assign``): read exactly these partitions, outside group membership.

        An empty list is an unsubscribe. Raises :class:`IllegalConsumerStateError` when subscribed,
        :class:`UnknownTopicError` / ``UnknownPartitionError`` for partitions that do not exist.
        """
        if inst.subscribed:
            raise IllegalConsumerStateError("Illegal state: Subscription to topics, partitions and pattern are "
                                            "mutually exclusive; this instance is subscribed.")
        wanted = set(partitions)
        for t, p in sorted(wanted):
            meta = await self.broker.topic_fresh(t)
            self.broker.check_partition(meta, p)
        positions = inst.revoke(inst.owned - wanted)
        if inst.auto_commit and positions:
            await self.offsets.commit_quietly(inst, positions, inst.generation)
        inst.manual = bool(wanted)
        inst.activate(await self.offsets.initial_positions(inst, wanted - inst.owned))

    def _on_topics_changed(self, children: list[str]) -> bool | None:
        # kazoo's thread: pattern subscriptions and partition counts may have changed
        if self._stopping:
            return False
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._refresh_subscriptions(), self._loop)
        return None

    async def _refresh_subscriptions(self) -> None:
        for inst in self.instances():
            if inst.pattern is not None and not inst.closed:
                await self._join(inst)  # updates the member's topics if the pattern matches new ones
        self.rebalancer.kick_all()

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        out = {}
        for t in topics:
            try:
                out[t] = self.broker.metadata.topic(t).partitions_count
            except UnknownTopicError:
                continue
        return out

    # -- expiry ---------------------------------------------------------------------------------

    async def _expire_loop(self) -> None:
        period_s = max(0.05, min(1.0, self.instance_timeout_ms / 4000.0))
        while True:
            await asyncio.sleep(period_s)
            now = time.monotonic()
            for inst in self.instances():
                if inst.idle_ms(now) > self.instance_timeout_ms and not inst.lock.locked():
                    log.info("consumer instance %s/%s expired after %d ms without requests", inst.group,
                             inst.name, self.instance_timeout_ms)
                    try:
                        await self.delete(inst.group, inst.name)
                    except ConsumerInstanceNotFoundError:
                        pass
                    except Exception:
                        log.exception("expiring consumer instance %s/%s failed", inst.group, inst.name)
            # safety net: a group whose members wait for acks is re-checked even if a watch was missed
            self.rebalancer.kick_waiting()

    # -- positions ------------------------------------------------------------------------------

    async def seek(self, inst: ConsumerInstance, offsets: dict[TopicPartition, int]) -> None:
        """Set positions (Kafka's ``seek``). Raises :class:`IllegalConsumerStateError` for unassigned partitions."""
        self._check_owned(inst, offsets)
        inst.positions.update(offsets)
        inst.notify()

    async def seek_to(self, inst: ConsumerInstance, partitions: list[TopicPartition], *, end: bool) -> None:
        """Seek to the log start offsets (``end=False``) or the ends (``end=True``: the high watermarks, the last
        stable offsets with read_committed), as Kafka's ``seekToBeginning`` / ``seekToEnd``."""
        self._check_owned(inst, partitions)
        ends = await self.offsets.bounds(partitions, isolation_level=inst.isolation_level)
        for tp, (start, stop) in ends.items():
            inst.positions[tp] = stop if end else start
        inst.notify()

    @staticmethod
    def _check_owned(inst: ConsumerInstance, partitions: Iterable[TopicPartition]) -> None:
        missing = [tp for tp in partitions if tp not in inst.owned]
        if missing:
            t, p = missing[0]
            raise IllegalConsumerStateError(f"Illegal state: No current assignment for partition {t}-{p}.")

    # -- reads ----------------------------------------------------------------------------------

    async def records(self, inst: ConsumerInstance, *, timeout_ms: int | None = None,
                      max_bytes: int = DEFAULT_MAX_BYTES) -> PollResult:
        """Read records of the owned partitions: Arrow tables per partition and the generation they were
        read in (see :meth:`lakelog.consumer_groups.poller.RecordPoller.poll` for limits and errors)."""
        return await self.poller.poll(inst, timeout_ms=timeout_ms, max_bytes=max_bytes)

    def unread(self, inst: ConsumerInstance, result: PollResult) -> None:
        """Undo a read whose answer could not be given (a ``json`` instance met bytes that are not JSON):
        each partition read goes back to its first record read, if the instance still owns it, so the next
        read returns the same records (REST Proxy's consumer keeps the record that failed too)."""
        first: dict[TopicPartition, int] = {}
        for part in result.partitions:
            tp = (part.topic, part.partition)
            if tp not in first and part.records.num_rows:
                first[tp] = part.records["offset"][0].as_py()
        for tp, offset in first.items():
            if tp in inst.owned:
                inst.positions[tp] = offset

    # -- offsets --------------------------------------------------------------------------------

    async def commit(self, inst: ConsumerInstance, offsets: OffsetCommits | None) -> None:
        """Commit offsets: the positions of the owned partitions when ``offsets`` is None, else the
        given ``{tp: (next offset, metadata)}``.

        Raises:
            IllegalGenerationError: the instance's generation is older than the group's (409 / 40904).
            UnknownTopicError, UnknownPartitionError: a partition does not exist.
        """
        # the generation is read together with the positions, before any await (a rebalance meanwhile
        # must not stamp generation n's positions with n + 1)
        generation = inst.generation
        if offsets is None:
            offsets = {tp: (o, None) for tp, o in inst.consumed_positions().items()}
        await self.offsets.commit(inst.group, offsets, generation)

    async def committed(self, inst: ConsumerInstance, partitions: list[TopicPartition] | None) -> list[CommittedOffset]:
        """The group's committed offsets of ``partitions`` (default: the owned ones); partitions without
        a commit are left out."""
        return await self.offsets.committed(inst.group, partitions if partitions is not None else inst.owned)

    # -- description ----------------------------------------------------------------------------

    async def describe(self, group: str) -> GroupDescription:
        """Members of ``group`` cluster-wide (ZooKeeper) with their assignment in the current generation.

        Raises:
            InvalidGroupIdError: a group id ZooKeeper cannot hold (400 / 40008).
        """
        validate_group_id(group)
        return await describe_group(self.membership, self.broker, group)
