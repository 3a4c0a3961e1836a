"""Partition assignors: which member of a consumer group reads which partitions.

An assignor maps the group's members and their subscriptions to an assignment in which every
partition of every subscribed topic goes to exactly one member that subscribes to its topic. The three
assignors are Kafka's (``partition.assignment.strategy``, Kafka consumer configs; the pluggable
client-side assignment of KIP-54 is what made them choosable per group):

- ``range`` (:class:`RangeAssignor`, Kafka's default ``RangeAssignor``): per topic, the members that
  subscribe to it, sorted by member id, get consecutive ranges; the first ``partitions % members`` of
  them one partition more;
- ``roundrobin`` (:class:`RoundRobinAssignor`): all partitions sorted by (topic, partition) dealt one
  by one to the sorted members, skipping members not subscribed to the partition's topic;
- ``sticky`` (:class:`StickyAssignor`, KIP-54): as balanced as round robin (member counts differ by at
  most one when subscriptions are equal) while keeping as many partitions as possible with their
  previous owner, so a rebalance moves only the partitions it must.

Assignors are pure functions of their inputs: every broker computes the same assignment from the same
members, subscriptions and partition counts (see :mod:`lakelog.consumer_groups.membership`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import ClassVar, Protocol

from lakelog.consumer_groups.errors import InvalidConsumerConfigError

TopicPartition = tuple[str, int]
Assignment = dict[str, list[TopicPartition]]


class PartitionAssignor(Protocol):
    """What an assignor does (Kafka's ``ConsumerPartitionAssignor``, reduced to the assignment)."""

    name: ClassVar[str]

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Collection[str]], *,
               previous: Mapping[str, Collection[TopicPartition]] | None = None) -> Assignment:
        """Assign partitions to members.

        Args:
            partitions_per_topic: partition count per existing topic; subscribed topics missing here
                (not created yet) get nothing assigned.
            subscriptions: member id -> topics it subscribes to.
            previous: member id -> partitions it owned in the previous generation (used by ``sticky``).

        Returns:
            member id -> sorted ``(topic, partition)`` list, with an entry (maybe empty) for every member.
        """
        ...


def _subscribed_topics(partitions_per_topic: Mapping[str, int],
                       subscriptions: Mapping[str, Collection[str]]) -> list[str]:
    """The existing topics some member subscribes to, sorted."""
    return sorted({t for subs in subscriptions.values() for t in subs if t in partitions_per_topic})


def _subscribed_partitions(partitions_per_topic: Mapping[str, int],
                           subscriptions: Mapping[str, Collection[str]]) -> list[TopicPartition]:
    return [(t, p) for t in _subscribed_topics(partitions_per_topic, subscriptions)
            for p in range(partitions_per_topic[t])]


class RangeAssignor:
    """Kafka's ``RangeAssignor``: consecutive partition ranges per topic.

    For each topic with ``n`` partitions and ``c`` subscribed members (sorted by member id), member ``i``
    gets ``n // c`` partitions starting at ``i * (n // c) + min(i, n % c)``, one more if ``i < n % c``.
    """

    name: ClassVar[str] = "range"

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Collection[str]], *,
               previous: Mapping[str, Collection[TopicPartition]] | None = None) -> Assignment:
        out: Assignment = {m: [] for m in subscriptions}
        for topic in _subscribed_topics(partitions_per_topic, subscriptions):
            members = sorted(m for m, subs in subscriptions.items() if topic in subs)
            n, c = partitions_per_topic[topic], len(members)
            per_member, extra = divmod(n, c)
            for i, member in enumerate(members):
                start = per_member * i + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                out[member].extend((topic, p) for p in range(start, start + length))
        return {m: sorted(tps) for m, tps in out.items()}


class RoundRobinAssignor:
    """Kafka's ``RoundRobinAssignor``: partitions sorted by (topic, partition) dealt to sorted members.

    A member that does not subscribe to a partition's topic is skipped for that partition.
    """

    name: ClassVar[str] = "roundrobin"

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Collection[str]], *,
               previous: Mapping[str, Collection[TopicPartition]] | None = None) -> Assignment:
        members = sorted(subscriptions)
        out: Assignment = {m: [] for m in members}
        if not members:
            return out
        i = 0
        for tp in _subscribed_partitions(partitions_per_topic, subscriptions):
            for _ in range(len(members)):
                member = members[i % len(members)]
                i += 1
                if tp[0] in subscriptions[member]:
                    out[member].append(tp)
                    break
        return out


class StickyAssignor:
    """Kafka's ``StickyAssignor`` (KIP-54): balanced, and moving as few partitions as possible.

    Steps:

    1. every member keeps the partitions it owned in ``previous`` that still exist and that it still
       subscribes to, up to its balanced quota (``P // M``, or one more for at most ``P % M`` members;
       members that owned more keep their lowest partitions);
    2. the other partitions go, one by one in (topic, partition) order, to the subscribed member with
       the fewest partitions (ties: member id order);
    3. while a member holds two or more partitions more than another member subscribed to one of
       them, one such partition moves (only happens with unequal subscriptions).

    With equal subscriptions the result is as balanced as :class:`RoundRobinAssignor`'s.
    """

    name: ClassVar[str] = "sticky"

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Collection[str]], *,
               previous: Mapping[str, Collection[TopicPartition]] | None = None) -> Assignment:
        members = sorted(subscriptions)
        out: Assignment = {m: [] for m in members}
        if not members:
            return out
        partitions = _subscribed_partitions(partitions_per_topic, subscriptions)
        valid = set(partitions)
        floor, ceil_slots = divmod(len(partitions), len(members))
        taken: set[TopicPartition] = set()
        # 1. keep previous ownership within the quota (members with the most previous partitions first)
        kept: dict[str, list[TopicPartition]] = {}
        for m in members:
            owned = {(str(tp[0]), int(tp[1])) for tp in (previous or {}).get(m, ())}
            kept[m] = sorted(tp for tp in owned if tp in valid and tp[0] in subscriptions[m])
        for m in sorted(members, key=lambda m: (-len(kept[m]), m)):
            mine = [tp for tp in kept[m] if tp not in taken]
            quota = floor + 1 if ceil_slots > 0 else floor
            keep = mine[:quota]
            if len(keep) == floor + 1:
                ceil_slots -= 1
            out[m].extend(keep)
            taken.update(keep)
        # 2. the rest to the least loaded subscribed member
        for tp in partitions:
            if tp in taken:
                continue
            eligible = [m for m in members if tp[0] in subscriptions[m]]
            target = min(eligible, key=lambda m: (len(out[m]), m))
            out[target].append(tp)
            taken.add(tp)
        # 3. balance unequal subscriptions: move from the most to a less loaded eligible member
        moved = True
        while moved:
            moved = False
            for hi in sorted(members, key=lambda m: (-len(out[m]), m)):
                for tp in sorted(out[hi], reverse=True):
                    lo = [m for m in members if tp[0] in subscriptions[m] and len(out[m]) < len(out[hi]) - 1]
                    if lo:
                        target = min(lo, key=lambda m: (len(out[m]), m))
                        out[hi].remove(tp)
                        out[target].append(tp)
                        moved = True
                        break
                if moved:
                    break
        return {m: sorted(tps) for m, tps in out.items()}


ASSIGNORS: dict[str, PartitionAssignor] = {a.name: a for a in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor())}


def get_assignor(name: str) -> PartitionAssignor:
    """The assignor called ``name`` (``range``, ``roundrobin``, ``sticky``; Kafka's class names work too).

    Raises:
        InvalidConsumerConfigError: an unknown name (422 / 42204).
    """
    key = name.strip().lower().rsplit(".", 1)[-1].removesuffix("assignor")
    if key not in ASSIGNORS:
        raise InvalidConsumerConfigError(
            f"Invalid consumer configuration: partition.assignment.strategy {name!r} is not one of "
            f"{', '.join(ASSIGNORS)}.")
    return ASSIGNORS[key]
