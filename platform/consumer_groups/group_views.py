"""Consumer groups as Confluent REST Proxy v3 shows them: groups, their consumers and assignments, lag
per partition and the group's lag summary (the data behind :mod:`lakelog.ingest_api.v3_groups_api`).

Everything is assembled here from what other modules own: committed offsets from the group coordinator
(:class:`~lakelog.consumer_groups.coordinator.GroupCoordinator`, any broker asks it), lag from
:func:`~lakelog.consumer_groups.offsets_admin.group_lag`, live members and the current generation's
assignment from ZooKeeper (:func:`~lakelog.consumer_groups.describe.describe_group`). Any broker
answers for any group.

Sources: confluentinc/kafka-rest ``ConsumerGroupManagerImpl``, ``ConsumerLagManagerImpl`` (one lag per
partition with a committed offset, the owner from the assignment, ``""`` when no member owns it) and
``ConsumerGroupLagSummary.Builder.addOffset`` (lag ``max(0, end - current)``; the first partition with
the largest lag is the maximum); Kafka's ``ConsumerGroupDescription`` (``isSimpleConsumerGroup``,
``partitionAssignor``, ``state``, ``coordinator``).

Differences from Confluent, on purpose:

- ``log_end_offset`` of a lag is the partition's **high watermark** (lakelog's consumers read below it,
  as :func:`~lakelog.consumer_groups.offsets_admin.group_lag` counts lag); Confluent lists the latest
  offsets with ``read_committed``, i.e. the last stable offset, which lakelog's HW equals while there
  are no transactions.
- An HTTP consumer's ``client_id`` is its member id (lakelog's consumer instances have no ``client.id``;
  a Kafka client's is its ``client.id``); ``instance_id`` is a Kafka static member's ``group.instance.id``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from lakelog.consumer_groups.broker_api import OffsetsAdminBroker
from lakelog.consumer_groups.describe import DescribedMember, GroupDescription
from lakelog.consumer_groups.errors import ConsumerInstanceNotFoundError, UnknownGroupError
from lakelog.consumer_groups.manager import ConsumerManager
from lakelog.consumer_groups.offsets_admin import group_lag

#: Confluent's ``ConsumerGroupState`` values lakelog's groups take (Kafka's ``ConsumerGroupState``):
#: ``EMPTY`` (no live members), ``STABLE`` (the stored assignment is the current generation's and
#: covers exactly the live members), ``PREPARING_REBALANCE`` (a rebalance is under way),
#: ``COMPLETING_REBALANCE`` (a Kafka-protocol group's members wait for the leader's assignment).
GroupStateName = Literal["EMPTY", "STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE"]

_STATES: dict[str, GroupStateName] = {"Empty": "EMPTY", "Stable": "STABLE", "PreparingRebalance": "PREPARING_REBALANCE",
                                      "CompletingRebalance": "COMPLETING_REBALANCE"}


@dataclass(frozen=True)
class GroupView:
    """A consumer group (Confluent's ``ConsumerGroup``).

    Attributes:
        group: the group id.
        state: see :data:`GroupStateName`.
        is_simple: True for a group that never had members, only committed offsets (a Spark query's, a
            tool's; Kafka: a group with an empty protocol type, e.g. consumers using ``assign()``).
        assignor: the current assignment's assignor (``range``, ``roundrobin``, ...); ``""`` when the group
            has none (Kafka's ``partitionAssignor`` of a group without protocol).
        coordinator: the broker id of the group's coordinator, None before any group committed an offset
            (no ``__consumer_offsets`` yet) or while the coordinator is being elected.
        has_offsets: the group has committed offsets (so its lags and lag summary exist).
        members: the live members by id, each with its partitions in the current generation.
    """

    group: str
    state: GroupStateName
    is_simple: bool
    assignor: str
    coordinator: int | None
    has_offsets: bool
    members: list[DescribedMember]

    def member(self, member_id: str) -> DescribedMember:
        """The live member ``member_id``.

        Raises:
            ConsumerInstanceNotFoundError: the group has no live member of that id (404 / 40403).
        """
        for m in self.members:
            if m.member_id == member_id:
                return m
        raise ConsumerInstanceNotFoundError(f"Consumer '{member_id}' is not a member of group '{self.group}'.")


@dataclass(frozen=True)
class AssignmentView:
    """A partition a member owns in the current generation (Confluent's ``ConsumerAssignment``);
    ``has_offset``: the group committed an offset for it (so its lag exists)."""

    topic: str
    partition: int
    has_offset: bool


@dataclass(frozen=True)
class PartitionLagView:
    """Lag of a group on one partition it committed an offset for (Confluent's ``ConsumerLag``).

    Attributes:
        current_offset: the committed offset.
        log_end_offset: the partition's high watermark (see the module docstring).
        lag: ``max(0, log_end_offset - current_offset)``.
        consumer_id: the member owning the partition in the current generation; ``""`` when none does
            (as Confluent).
    """

    topic: str
    partition: int
    current_offset: int
    log_end_offset: int
    lag: int
    consumer_id: str


@dataclass(frozen=True)
class LagSummaryView:
    """The group's largest lag and total lag (Confluent's ``ConsumerGroupLagSummary``): ``max_lag`` of
    partition ``max_lag_topic``-``max_lag_partition`` (the first, by topic then partition, of those
    with the largest lag) owned by ``max_lag_consumer_id`` (``""``: no member owns it)."""

    max_lag_consumer_id: str
    max_lag_topic: str
    max_lag_partition: int
    max_lag: int
    total_lag: int


# -- groups ----------------------------------------------------------------------------------------

async def _view(consumers: ConsumerManager, broker: OffsetsAdminBroker, group: str, *,
                has_offsets: bool) -> GroupView:
    desc: GroupDescription = await consumers.describe(group)
    return GroupView(
        group=group, state=_STATES[desc.state], is_simple=not desc.members and desc.generation is None,
        assignor=desc.assignor or "", coordinator=await broker.coordinator.coordinator_id(group),
        has_offsets=has_offsets, members=desc.members)


async def list_group_views(*, consumers: ConsumerManager, broker: OffsetsAdminBroker) -> list[GroupView]:
    """Every group cluster-wide, by id: those with committed offsets (Kafka's ListGroups, sent to every
    coordinator) and those with live members (ZooKeeper, ``/lakelog/consumers/{group}/members``).

    Raises:
        LeaderNotAvailableError: a ``__consumer_offsets`` partition has no live leader (its groups are
            unknown; 404 / 40404, retriable).
    """
    with_offsets = set(await broker.coordinator.groups())
    with_members = set(await asyncio.to_thread(consumers.membership.groups_with_members))
    groups = sorted(with_offsets | with_members)
    return list(await asyncio.gather(*(_view(consumers, broker, g, has_offsets=g in with_offsets) for g in groups)))


async def get_group_view(*, consumers: ConsumerManager, broker: OffsetsAdminBroker, group: str) -> GroupView:
    """The group ``group`` (Confluent's ``GET /v3/clusters/{c}/consumer-groups/{g}``).

    Raises:
        InvalidGroupIdError: a group id ZooKeeper cannot hold (400 / 40008).
        UnknownGroupError: the group has neither committed offsets nor live members (404 / 40405).
    """
    view = await _view(consumers, broker, group, has_offsets=bool(await broker.coordinator.committed(group)))
    if not view.has_offsets and not view.members:
        raise UnknownGroupError(f"Consumer group '{group}' not found: it has no committed offsets and no members.")
    return view


async def member_assignments(*, consumers: ConsumerManager, broker: OffsetsAdminBroker, group: str,
                             member_id: str) -> list[AssignmentView]:
    """The partitions member ``member_id`` of ``group`` owns in the current generation, by topic then
    partition (Confluent's ``ConsumerAssignmentManager.listConsumerAssignments``).

    Raises:
        UnknownGroupError: no such group (404 / 40405).
        ConsumerInstanceNotFoundError: the group has no live member ``member_id`` (404 / 40403).
    """
    view = await get_group_view(consumers=consumers, broker=broker, group=group)
    member = view.member(member_id)
    committed = {(c.topic, c.partition) for c in await broker.coordinator.committed(group)} if view.has_offsets else set()
    return [AssignmentView(topic=t, partition=p, has_offset=(t, p) in committed) for t, p in sorted(member.assignment)]


def find_assignment(assignments: list[AssignmentView], *, member_id: str, topic: str,
                    partition: int) -> AssignmentView:
    """The assignment of ``topic``-``partition`` among ``assignments`` (those of ``member_id``).

    Raises:
        UnknownGroupError: the member does not own that partition (404 / 40405: the group has no such
            assignment, as :func:`find_lag` for a lag).
    """
    for a in assignments:
        if (a.topic, a.partition) == (topic, partition):
            return a
    raise UnknownGroupError(f"Consumer '{member_id}' is not assigned partition {topic}-{partition} in the "
                            "group's current generation.")


# -- lag -------------------------------------------------------------------------------------------

async def group_lags(*, consumers: ConsumerManager, broker: OffsetsAdminBroker, group: str) -> list[PartitionLagView]:
    """The lag of ``group`` on every partition it committed an offset for (topics deleted since are left
    out), by topic then partition, each with the member that owns it (Confluent's
    ``ConsumerLagManagerImpl.listConsumerLags``).

    Raises:
        InvalidGroupIdError: a group id ZooKeeper cannot hold (400 / 40008).
        UnknownGroupError: the group has no committed offsets (404 / 40405).
        LeaderNotAvailableError: a partition's leader does not answer.
    """
    lag, desc = await asyncio.gather(group_lag(broker, group), consumers.describe(group))
    owner = {tp: m.member_id for m in desc.members for tp in m.assignment}
    return [PartitionLagView(topic=p.topic, partition=p.partition, current_offset=p.committed_offset,
                             log_end_offset=p.high_watermark, lag=max(0, p.high_watermark - p.committed_offset),
                             consumer_id=owner.get((p.topic, p.partition), ""))
            for p in lag.partitions if p.committed_offset is not None]


def find_lag(lags: list[PartitionLagView], *, group: str, topic: str, partition: int) -> PartitionLagView:
    """The lag of ``topic``-``partition`` among ``lags`` (those of ``group``).

    Raises:
        UnknownGroupError: the group has no committed offset for that partition (404 / 40405).
    """
    for lag in lags:
        if (lag.topic, lag.partition) == (topic, partition):
            return lag
    raise UnknownGroupError(f"Group '{group}' has no committed offset for partition {topic}-{partition}.")


def summarize_lags(lags: list[PartitionLagView], *, group: str) -> LagSummaryView:
    """The largest and the total lag of ``lags`` (Confluent's ``ConsumerGroupLagSummary.Builder``: the
    first partition whose lag exceeds every earlier one holds the maximum).

    Raises:
        UnknownGroupError: ``lags`` is empty: the group has no committed offsets (404 / 40405).
    """
    if not lags:
        raise UnknownGroupError(f"Group '{group}' has no committed offsets.")
    top = lags[0]
    for lag in lags[1:]:
        if lag.lag > top.lag:
            top = lag
    return LagSummaryView(max_lag_consumer_id=top.consumer_id, max_lag_topic=top.topic,
                          max_lag_partition=top.partition, max_lag=top.lag, total_lag=sum(x.lag for x in lags))
