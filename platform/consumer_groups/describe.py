"""A consumer group as seen cluster-wide (Kafka's ``DescribeGroups`` / ``kafka-consumer-groups --describe
--members``): its live members from ZooKeeper with the partitions each holds in the current generation."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from lakelog.consumer_groups.assignors import TopicPartition
from lakelog.consumer_groups.broker_api import ConsumerBroker
from lakelog.consumer_groups.membership import GroupMembership

#: ``Empty`` (no members), ``Stable`` (the stored assignment is the current generation's and covers
#: exactly the live members) or ``PreparingRebalance`` (a rebalance is under way).
GroupState = Literal["Empty", "Stable", "PreparingRebalance"]


@dataclass(frozen=True)
class DescribedMember:
    """A member of a group.

    Attributes:
        member_id: the consumer instance's name.
        broker_id, base_uri: the broker its instance lives on and the instance's URI there.
        subscription: the topics it subscribed to (a pattern: the topics it matched when it joined).
        assignment: its partitions in the group's current generation (empty while it is not in it).
    """

    member_id: str
    broker_id: int
    base_uri: str
    subscription: list[str]
    assignment: list[TopicPartition]


@dataclass(frozen=True)
class GroupDescription:
    """A group: its generation (None before the first), state, assignor and members (sorted by id)."""

    group: str
    generation: int | None
    state: GroupState
    assignor: str | None
    members: list[DescribedMember]


async def describe_group(membership: GroupMembership, broker: ConsumerBroker, group: str) -> GroupDescription:
    """Describe ``group`` from ZooKeeper (members, stored assignment, generation); any broker answers."""
    members = await asyncio.to_thread(membership.members, group)
    assignment = await asyncio.to_thread(membership.assignment, group)
    generation = await broker.group_generation(group)
    current = assignment is not None and assignment.generation == generation and \
        set(assignment.members) == set(members)
    state: GroupState = "Empty" if not members else ("Stable" if current else "PreparingRebalance")
    return GroupDescription(
        group=group, generation=generation, state=state,
        assignor=assignment.assignor if assignment else None,
        members=[DescribedMember(
            member_id=m, broker_id=info.broker_id, base_uri=info.base_uri, subscription=list(info.topics),
            assignment=list(assignment.partitions_of(m)) if assignment else [],
        ) for m, info in sorted(members.items())])
