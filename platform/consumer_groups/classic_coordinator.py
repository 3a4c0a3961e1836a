"""The group coordinator of Kafka-protocol consumer groups: JoinGroup, SyncGroup, Heartbeat and LeaveGroup
on the group's coordinator, around the decisions of :mod:`lakelog.consumer_groups.classic_group`.

Kafka's ``GroupCoordinator`` (core/src/main/scala/kafka/coordinator/group/GroupCoordinator.scala) with its
purgatories: a JoinGroup waits for the end of the join phase and a SyncGroup for the leader's
assignment (each a future here); one reaper task ends join phases at their deadline and removes members
whose session timed out (Kafka's ``DelayedJoin``, ``InitialDelayedJoin`` and ``DelayedHeartbeat``),
reading an injected :class:`~lakelog.clock.Time`.

- **Where.** A group lives on its coordinator, the leader of its ``__consumer_offsets`` partition
  (:class:`~lakelog.coordinators.coordinator_partitions.CoordinatorPartitions`; a JoinGroup creates the
  topic on first need). Any other broker answers NotCoordinatorError, so the client finds the coordinator
  again (FindCoordinator). The groups are kept beside the loaded partition: when this broker stops leading
  it (or reloads it at a new leader epoch) they are dropped, their waiting requests answered
  NotCoordinatorError, and the members rejoin at the new coordinator. A group made on a coordinator starts
  from the generation its committed offsets carry.
- **One kind of member.** A group whose members are HTTP consumer instances (ZooKeeper,
  :mod:`lakelog.consumer_groups.membership`) refuses Kafka members, and the reverse: each non-empty
  Kafka group is published in ZooKeeper (``/lakelog/consumers/{group}/kafka``, ephemeral), which the HTTP
  members check and the group views read (members, client ids, hosts, partitions). Its committed offsets
  are the same ``__consumer_offsets``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from lakelog.clock import SYSTEM_TIME, Time
from lakelog.config import BrokerSettings
from lakelog.consumer_groups.classic_group import ClassicGroup, JoinResult, SyncWaiter
from lakelog.consumer_groups.consumer_protocol import assigned_partitions, subscribed_topics
from lakelog.consumer_groups.errors import (
    FencedInstanceIdError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    NotCoordinatorError,
    UnknownMemberIdError,
)
from lakelog.consumer_groups.group_metadata import GroupMetadataManager
from lakelog.consumer_groups.instances import validate_group_id
from lakelog.consumer_groups.membership import GroupMembership
from lakelog.coordinators.coordinator_partitions import LoadedPartition

__all__ = ["ClassicGroupCoordinator", "GroupSummary", "MemberSummary"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemberSummary:
    """A member as DescribeGroups shows it: ids, client, its metadata for the selected protocol and its
    assignment (opaque bytes: the ``consumer`` protocol's subscription and partitions)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    """A Kafka-protocol group as its coordinator holds it (Kafka's ``GroupSummary``)."""

    group_id: str
    state: str
    generation_id: int
    protocol_type: str
    protocol_name: str
    leader_id: str
    members: list[MemberSummary]


class ClassicGroupCoordinator:
    """The Kafka-protocol groups this broker coordinates (see the module docstring).

    Args:
        settings: ``broker.id``, ``group.min.session.timeout.ms``, ``group.max.session.timeout.ms``,
            ``group.initial.rebalance.delay.ms``.
        offsets: the broker's :class:`GroupMetadataManager` (the coordinated partitions, committed generations).
        membership: group membership in ZooKeeper (HTTP members; where Kafka groups are published).
        time: the clock of sessions and rebalance timeouts. Default: the system's.
    """

    def __init__(self, settings: BrokerSettings, *, offsets: GroupMetadataManager, membership: GroupMembership,
                 time: Time = SYSTEM_TIME) -> None:
        self.settings = settings
        self.offsets = offsets
        self.partitions = offsets.partitions
        self.membership = membership
        self.time = time
        self._groups: dict[str, tuple[LoadedPartition, ClassicGroup]] = {}
        self._joins: dict[tuple[str, str], asyncio.Future] = {}
        self._syncs: dict[tuple[str, str], asyncio.Future] = {}
        self._published: dict[str, object] = {}
        self._publish_locks: dict[str, asyncio.Lock] = {}
        self._pending_writes: dict[str, int] = {}  # group -> writes queued on its lock
        self._wake = asyncio.Event()
        self._reaper: asyncio.Task | None = None

    def _now(self) -> int:
        return int(self.time.monotonic() * 1000)

    # -- the groups of this coordinator ---------------------------------------------------------

    async def _group(self, group_id: str, *, create: bool = False) -> ClassicGroup | None:
        """The group when this broker coordinates it (made when ``create``); None without ``create`` when it
        holds none (or no group has a coordinator yet: no ``__consumer_offsets``). Raises NotCoordinatorError,
        CoordinatorLoadInProgressError; InvalidGroupIdError."""
        validate_group_id(group_id)
        what = f"group '{group_id}'"
        if not create and not await self.partitions.topic_exists():
            return None
        if await self.partitions.coordinator_url(group_id, what=what, create=create) is not None:
            raise NotCoordinatorError(f"Broker {self.settings.broker_id} is not the coordinator of {what}; retry.")
        _, entry = await self.partitions.coordinated(group_id, what=what)
        held = self._groups.get(group_id)
        if held is not None and held[0] is entry:
            return held[1]
        if held is not None:
            self._drop(group_id)
        if not create:
            return None
        committed = entry.state.get(group_id)
        group = ClassicGroup(group_id, generation_id=(committed.generation or 0) if committed else 0,
                             initial_rebalance_delay_ms=self.settings.group_initial_rebalance_delay_ms)
        self._groups[group_id] = (entry, group)
        self._ensure_reaper()
        return group

    def _drop(self, group_id: str) -> None:
        """Forget a group this broker no longer coordinates; its waiting requests answer NotCoordinatorError."""
        self._groups.pop(group_id, None)
        self._published.pop(group_id, None)
        error = NotCoordinatorError(f"Broker {self.settings.broker_id} no longer coordinates group '{group_id}'; "
                                    "find the coordinator and rejoin.")
        for waiters in (self._joins, self._syncs):
            for key in [k for k in waiters if k[0] == group_id]:
                self._fail(waiters.pop(key), error)

    @staticmethod
    def _fail(future: asyncio.Future, error: Exception) -> None:
        if not future.done():
            future.set_exception(error)
            future.exception()  # retrieved: a waiter that went away leaves no warning

    @staticmethod
    def _answer(future: asyncio.Future | None, value: object) -> None:
        if future is not None and not future.done():
            future.set_result(value)

    def _settle(self, group: ClassicGroup) -> None:
        """After every change: answer the SyncGroups a new join phase failed, end the join phase when it may
        end (answering the waiting JoinGroups), publish the membership, wake the reaper."""
        gid = group.group_id
        for waiter in group.failed_syncs:
            future = self._syncs.pop((gid, waiter.member_id), None)
            if future is not None and waiter.error is not None:
                self._fail(future, waiter.error)
        group.failed_syncs.clear()
        for waiters in (self._joins, self._syncs):
            for member_id in [m for (g, m) in waiters if g == gid and m not in group.members]:
                self._fail(waiters.pop((gid, member_id)), UnknownMemberIdError(
                    f"Member {member_id} was removed from group '{gid}' (or replaced by a static member); rejoin."))
        now = self._now()
        if group.join_can_complete(now):
            results = group.complete_join(now)
            for result in results:
                self._answer(self._joins.pop((gid, result.member_id), None), result)
            log.info("group '%s' generation %d: %d members, protocol %s, leader %s", gid, group.generation_id,
                     len(group.members), group.protocol_name, group.leader_id)
        self._publish(group)
        self._wake.set()

    # -- the operations -------------------------------------------------------------------------

    async def join_group(self, group_id: str, *, member_id: str, group_instance_id: str | None, client_id: str,
                         client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                         protocols: Sequence[tuple[str, bytes]], require_known_member_id: bool) -> JoinResult:
        """Kafka's JoinGroup: waits for the end of the join phase (at most the group's rebalance timeout).

        Raises:
            InvalidSessionTimeoutError; InvalidGroupIdError; NotCoordinatorError, CoordinatorLoadInProgressError;
            InconsistentGroupProtocolError (HTTP members in the group, or protocols the group cannot use);
            MemberIdRequiredError (a new member's first join from v4); UnknownMemberIdError.
        """
        low, high = self.settings.group_min_session_timeout_ms, self.settings.group_max_session_timeout_ms
        if not low <= session_timeout_ms <= high:
            raise InvalidSessionTimeoutError(
                f"session.timeout.ms {session_timeout_ms} is outside the broker's group.min.session.timeout.ms "
                f"({low}) to group.max.session.timeout.ms ({high}).")
        validate_group_id(group_id)
        if await self.has_http_members(group_id):
            log.warning("Kafka client %r (%s) refused in group '%s': the group has HTTP consumer instances",
                        client_id, client_host, group_id)
            raise InconsistentGroupProtocolError(
                f"Group '{group_id}' has HTTP consumer instances as members: a Kafka consumer cannot join it. Use "
                "another group id, or delete the HTTP instances first (the committed offsets are shared).")
        group = await self._group(group_id, create=True)
        assert group is not None
        rebalance_timeout_ms = rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms
        try:
            member_id, result = group.join(
                member_id=member_id, group_instance_id=group_instance_id, client_id=client_id,
                client_host=client_host, session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=protocol_type, protocols=list(protocols),
                require_known_member_id=require_known_member_id, now_ms=self._now())
        finally:
            self._wake.set()
        if result is not None:
            self._settle(group)
            return result
        future = asyncio.get_running_loop().create_future()
        previous = self._joins.pop((group_id, member_id), None)
        if previous is not None:
            self._fail(previous, UnknownMemberIdError(f"Member {member_id} sent another JoinGroup."))
        self._joins[(group_id, member_id)] = future
        self._settle(group)
        return await future

    async def sync_group(self, group_id: str, *, member_id: str, generation_id: int, protocol_type: str | None,
                         protocol_name: str | None, assignments: dict[str, bytes],
                         group_instance_id: str | None = None) -> bytes:
        """Kafka's SyncGroup: the member's assignment, once the leader sent the generation's.

        Raises:
            NotCoordinatorError; UnknownMemberIdError, IllegalGenerationError, InconsistentGroupProtocolError,
            RebalanceInProgressError, FencedInstanceIdError.
        """
        group = await self._group(group_id)
        if group is None:
            raise UnknownMemberIdError(f"Group '{group_id}' has no member {member_id}; rejoin.")
        answered = group.sync(member_id=member_id, generation_id=generation_id, protocol_type=protocol_type,
                              protocol_name=protocol_name, assignments=assignments, now_ms=self._now(),
                              group_instance_id=group_instance_id)
        mine: SyncWaiter | None = None
        for waiter in answered or []:
            if waiter.member_id == member_id:
                mine = waiter
            else:
                self._answer(self._syncs.pop((group_id, waiter.member_id), None), waiter.assignment)
        if mine is not None:
            self._settle(group)
            return mine.assignment
        future = asyncio.get_running_loop().create_future()
        self._syncs[(group_id, member_id)] = future
        self._settle(group)
        return await future

    async def heartbeat(self, group_id: str, *, member_id: str, generation_id: int,
                        group_instance_id: str | None = None) -> None:
        """Kafka's Heartbeat. Raises NotCoordinatorError; UnknownMemberIdError, IllegalGenerationError,
        FencedInstanceIdError, RebalanceInProgressError (rejoin)."""
        group = await self._group(group_id)
        if group is None:
            raise UnknownMemberIdError(f"Group '{group_id}' has no member {member_id}; rejoin.")
        group.heartbeat(member_id=member_id, generation_id=generation_id, now_ms=self._now(),
                        group_instance_id=group_instance_id)
        self._wake.set()

    async def leave_group(self, group_id: str,
                          members: Sequence[tuple[str, str | None]]) -> list[Exception | None]:
        """Kafka's LeaveGroup (v3+: several members): each ``(member id, group instance id)``'s error or None.

        Raises: NotCoordinatorError, CoordinatorLoadInProgressError.
        """
        group = await self._group(group_id)
        errors: list[Exception | None] = []
        for member_id, instance_id in members:
            if group is None:
                errors.append(UnknownMemberIdError(f"Group '{group_id}' has no member {member_id or instance_id}."))
                continue
            try:
                left = group.leave(member_id, self._now(), group_instance_id=instance_id)
                log.info("member %s left group '%s'", left, group_id)
                errors.append(None)
            except (UnknownMemberIdError, FencedInstanceIdError) as e:
                errors.append(e)
        if group is not None:
            self._settle(group)
        return errors

    async def check_commit(self, group_id: str, *, member_id: str, generation_id: int,
                           group_instance_id: str | None = None) -> int | None:
        """Fence an OffsetCommit by the group's member and generation (Kafka's ``handleCommitOffsets``).
        Returns the group's generation when this broker holds the group as a Kafka-protocol group with
        members (the commit is then checked against it), None when it does not.

        Raises: NotCoordinatorError (a member's commit reached another broker); UnknownMemberIdError,
        IllegalGenerationError, RebalanceInProgressError.
        """
        simple = not member_id and generation_id < 0
        try:
            group = await self._group(group_id)
        except NotCoordinatorError:
            if simple:
                return None  # a commit outside membership: the group coordinator's commit routes it
            raise
        if group is None or (simple and group.is_empty()):
            if not simple:
                raise UnknownMemberIdError(f"Group '{group_id}' has no member {member_id}; rejoin.")
            return None
        group.check_commit(member_id=member_id, generation_id=generation_id, now_ms=self._now(),
                           group_instance_id=group_instance_id)
        return group.generation_id

    async def subscribed_to(self, group_id: str, topic: str) -> bool:
        """Whether a member of the Kafka-protocol group (``consumer`` protocol) subscribes to ``topic``
        (Kafka's ``isSubscribedToTopic``). Raises NotCoordinatorError, CoordinatorLoadInProgressError."""
        group = await self._group(group_id)
        if group is None or group.protocol_type != "consumer" or group.is_empty():
            return False
        return any(topic in subscribed_topics(group.subscription(m)) for m in group.members.values())

    async def has_http_members(self, group_id: str) -> bool:
        """Whether the group has HTTP consumer instances as members (ZooKeeper)."""
        return bool(await asyncio.to_thread(self.membership.members, group_id))

    async def describe(self, group_id: str) -> GroupSummary | None:
        """The group as this broker coordinates it; None when it holds no Kafka-protocol group of that id.
        Raises NotCoordinatorError, CoordinatorLoadInProgressError."""
        group = await self._group(group_id)
        if group is None:
            return None
        protocol = group.protocol_name or ""
        return GroupSummary(group_id, group.state, group.generation_id, group.protocol_type or "", protocol,
                            group.leader_id or "", [MemberSummary(
                                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.metadata(protocol),
                                m.assignment) for m in group.members.values()])

    async def delete(self, group_id: str) -> None:
        """Forget an empty group (DeleteGroups; the caller checked it is empty)."""
        if await self._group(group_id) is not None:
            self._groups.pop(group_id, None)
            self._published.pop(group_id, None)
            await self._write(group_id, None)

    async def close(self) -> None:
        """At broker shutdown, as Kafka's coordinator resigns its groups: every waiting JoinGroup and
        SyncGroup answers NotCoordinatorError (its client finds the next coordinator and rejoins), the
        session reaper stops, and the groups are forgotten (their committed offsets stay in
        ``__consumer_offsets``). Pending ZooKeeper publications finish first. Idempotent."""
        for group_id in list(self._groups):
            self._drop(group_id)
        for waiters in (self._joins, self._syncs):  # waiters of groups held no more (a race with a move)
            for key in list(waiters):
                self._fail(waiters.pop(key), NotCoordinatorError(
                    f"Broker {self.settings.broker_id} is shutting down; find the coordinator and rejoin."))
        if self._reaper is not None:
            self._reaper.cancel()
            await asyncio.gather(self._reaper, return_exceptions=True)
            self._reaper = None
        for lock in list(self._publish_locks.values()):
            async with lock:
                pass

    def local_groups(self) -> list[ClassicGroup]:
        """The Kafka-protocol groups this broker holds (of partitions it still leads)."""
        return [g for entry, g in self._groups.values() if self.partitions.holds(entry)]

    # -- sessions and join deadlines ------------------------------------------------------------

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap(), name="kafka-group-sessions")

    async def _reap(self) -> None:
        """End join phases at their deadline, remove members whose session timed out, drop the groups of
        partitions this broker stopped leading; sleeps until the next deadline or a change."""
        while True:
            if not self._groups:
                self._reaper = None  # started again with the next group
                return
            now = self._now()
            deadlines = []
            for group_id, (entry, group) in list(self._groups.items()):
                if not self.partitions.holds(entry):
                    self._drop(group_id)
                    continue
                try:
                    self._expire(group, now)
                except Exception:
                    log.exception("session check of group '%s' failed", group_id)
                if group.state == "Empty" and not group.pending and not any(k[0] == group_id for k in self._joins):
                    del self._groups[group_id]  # made again at the next join, from its committed generation
                    continue
                deadline = group.next_deadline_ms()
                if deadline is not None:
                    deadlines.append(deadline)
            self._wake.clear()
            timeout_s = None if not deadlines else max(0.0, (min(deadlines) - self._now()) / 1000) + 0.001
            await self.time.wait(self._wake, min(timeout_s, 1.0) if timeout_s is not None else 1.0)

    def _expire(self, group: ClassicGroup, now: int) -> None:
        group.expire_pending(now)
        for member_id in group.expired_members(now):
            member = group.members[member_id]
            log.info("member %s (client %r, %s) of group '%s' removed: no heartbeat for session.timeout.ms (%d ms)",
                     member_id, member.client_id, member.client_host, group.group_id, member.session_timeout_ms)
            group.leave(member_id, now)
        self._settle(group)

    # -- publication in ZooKeeper ---------------------------------------------------------------

    def _publish(self, group: ClassicGroup) -> None:
        """Publish the group's membership in ZooKeeper when what it shows changed (in order, in a task)."""
        view = None if group.is_empty() else {
            "coordinator": self.settings.broker_id, "generation": group.generation_id, "state": group.state,
            "protocol_type": group.protocol_type, "protocol": group.protocol_name, "leader": group.leader_id,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "topics": subscribed_topics(group.subscription(m)),
                         "assignment": [[t, p] for t, p in assigned_partitions(m.assignment)]}
                        for m in group.members.values()]}
        if self._published.get(group.group_id, None) == view and group.group_id in self._published:
            return
        self._published[group.group_id] = view
        asyncio.get_running_loop().create_task(self._write(group.group_id, view))

    async def _write(self, group_id: str, view: dict | None) -> None:
        lock = self._publish_locks.setdefault(group_id, asyncio.Lock())
        self._pending_writes[group_id] = self._pending_writes.get(group_id, 0) + 1
        try:
            async with lock:
                if self._published.get(group_id, view) != view:
                    return  # a newer view was queued after this one
                try:
                    await asyncio.to_thread(self.membership.publish_kafka_group, group_id, view)
                except Exception:
                    log.exception("publishing group '%s' in ZooKeeper failed", group_id)
        finally:
            self._pending_writes[group_id] -= 1
            if not self._pending_writes[group_id]:
                del self._pending_writes[group_id]
                if group_id not in self._groups:
                    self._publish_locks.pop(group_id, None)  # a group held no more keeps no lock
