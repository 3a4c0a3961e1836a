"""A consumer group as seen cluster-wide (Kafka's ``DescribeGroups`` / ``kafka-consumer-groups --describe
--members``): its live members from ZooKeeper with the partitions each holds in the current generation:
HTTP consumer instances, or the Kafka-protocol members its coordinator published
(:meth:`~lakelog.consumer_groups.membership.GroupMembership.publish_kafka_group`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from lakelog.consumer_groups.assignors import TopicPartition
from lakelog.consumer_groups.broker_api import ConsumerBroker
from lakelog.consumer_groups.membership import GroupMembership

#: ``Empty`` (no members), ``Stable`` (the stored assignment is the current generation's and covers
#: exactly the live members), ``PreparingRebalance`` (a rebalance is under way) or, for Kafka-protocol
#: groups, ``CompletingRebalance`` (the members have joined and wait for the leader's assignment).
GroupState = Literal["Empty", "Stable", "PreparingRebalance", "CompletingRebalance"]


@dataclass(frozen=True)
class DescribedMember:
    """A member of a group.

    Attributes:
        member_id: the consumer instance's name (a Kafka client's: the id its coordinator gave it).
        broker_id, base_uri: the broker its instance lives on and the instance's URI there (a Kafka client's:
            the group's coordinator, and "").
        subscription: the topics it subscribed to (a pattern: the topics it matched when it joined).
        assignment: its partitions in the group's current generation (empty while it is not in it).
        client_id, client_host: a Kafka client's ``client.id`` and address ("" for an HTTP instance).
        group_instance_id: a Kafka static member's ``group.instance.id`` (None otherwise).
    """

    member_id: str
    broker_id: int
    base_uri: str
    subscription: list[str]
    assignment: list[TopicPartition]
    client_id: str = ""
    client_host: str = ""
    group_instance_id: str | None = None


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
    kafka = await asyncio.to_thread(membership.kafka_group, group)
    if kafka is not None:
        return GroupDescription(
            group=group, generation=kafka.get("generation"), state=kafka.get("state", "Stable"),
            assignor=kafka.get("protocol"), members=sorted((DescribedMember(
                member_id=m["member_id"], broker_id=int(kafka.get("coordinator", -1)), base_uri="",
                subscription=list(m.get("topics", [])), assignment=[(t, int(p)) for t, p in m.get("assignment", [])],
                client_id=m.get("client_id", ""), client_host=m.get("client_host", ""),
                group_instance_id=m.get("group_instance_id"))
                for m in kafka.get("members", [])), key=lambda d: d.member_id))
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
