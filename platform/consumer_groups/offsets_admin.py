"""Administration of a group's committed offsets: commit, lag and reset (Kafka's ``OffsetCommit`` and
``kafka-consumer-groups --describe`` / ``--reset-offsets``), for any committer (a Spark query, a tool).

Functions take the broker as :class:`~lakelog.consumer_groups.broker_api.OffsetsAdminBroker`; offsets
are Kafka's committed offsets: the next offset the group will read.

- :func:`commit_offsets`: one Delta transaction in ``__consumer_offsets``, fenced by the group
  generation, idempotent with a transaction (``app_id``, ``version``);
- :func:`group_lag`: committed offset, log end offset, high watermark and lag of every partition of
  the topics the group committed;
- :func:`reset_offsets`: move a group without active members to earliest, latest, a timestamp or an
  offset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from lakelog.consumer_groups.broker_api import OffsetsAdminBroker
from lakelog.consumer_groups.errors import GroupNotEmptyError, InvalidCommitError, UnknownGroupError
from lakelog.replication.errors import UnknownTopicError

#: Where :func:`reset_offsets` moves a group (``kafka-consumer-groups --to-earliest``, ``--to-latest``,
#: ``--to-datetime``, ``--to-offset``).
ResetTarget = Literal["earliest", "latest", "timestamp", "offset"]


@dataclass(frozen=True)
class PartitionOffset:
    """A committed offset of one partition: the next offset the group reads, with optional metadata."""

    topic: str
    partition: int
    offset: int
    metadata: str | None = None


@dataclass(frozen=True)
class PartitionLagInfo:
    """Lag of a group on one partition.

    Attributes:
        committed_offset: the group's committed offset; None when it committed none for this partition.
        log_end_offset, high_watermark: the leader's.
        lag: ``high_watermark - committed_offset`` (from the log start offset when nothing is committed),
            at least 0.
    """

    topic: str
    partition: int
    committed_offset: int | None
    log_end_offset: int
    high_watermark: int
    lag: int


@dataclass(frozen=True)
class GroupLagInfo:
    """Lag of a group on every partition of the topics it committed offsets for."""

    group: str
    partitions: list[PartitionLagInfo]

    @property
    def total_lag(self) -> int:
        """Sum of the partitions' lag."""
        return sum(p.lag for p in self.partitions)


async def check_commit_partitions(broker: OffsetsAdminBroker, partitions: Iterable[tuple[str, int]]) -> None:
    """Check that every ``(topic, partition)`` exists.

    Raises:
        UnknownTopicError: a topic does not exist (404 / 40401).
        InvalidCommitError: a partition is not one of its topic's (422 / 42207).
    """
    for topic, partition in partitions:
        meta = await broker.topic_fresh(topic)
        if partition not in meta.replicas:
            raise InvalidCommitError(f"Cannot commit {topic}-{partition}: topic '{topic}' has partitions "
                                     f"0 to {meta.partitions_count - 1}.")


async def commit_offsets(broker: OffsetsAdminBroker, group: str, offsets: Sequence[PartitionOffset], *,
                         generation: int | None = None, app_id: str | None = None,
                         version: int | None = None) -> bool:
    """Commit ``offsets`` for ``group`` in one Delta transaction.

    Args:
        generation: the committer's group generation; None outside group membership.
        app_id, version: make the commit idempotent (Delta ``txn`` action): a replayed or older
            ``version`` for ``app_id`` writes nothing.

    Returns:
        False when the transaction was a replay and nothing was written, else True.

    Raises:
        UnknownTopicError, InvalidCommitError: see :func:`check_commit_partitions` (nothing is written).
        IllegalGenerationError: ``generation`` is older than the group's (409 / 40904).
    """
    await check_commit_partitions(broker, [(o.topic, o.partition) for o in offsets])
    return await asyncio.to_thread(
        broker.offset_store.commit, group, [asdict(o) for o in offsets], generation=generation,
        current_generation=await broker.group_generation(group), app_id=app_id, version=version)


async def group_lag(broker: OffsetsAdminBroker, group: str) -> GroupLagInfo:
    """Lag of ``group`` on every partition of the topics it committed (deleted topics are left out),
    with each partition's offsets from its leader (asked concurrently per topic).

    Raises:
        UnknownGroupError: the group has no committed offsets (404 / 40407).
        LeaderNotAvailableError: a partition's leader does not answer.
    """
    committed = {(c.topic, c.partition): c.offset for c in broker.offset_store.committed(group)}
    if not committed:
        raise UnknownGroupError(f"Group '{group}' has no committed offsets.")
    parts = []
    for topic in sorted({t for t, _ in committed}):
        try:
            meta = await broker.topic_fresh(topic)
        except UnknownTopicError:
            continue  # the topic was deleted since
        partitions = sorted(meta.replicas)
        bounds = await asyncio.gather(*(broker.partition_offsets(topic, p) for p in partitions))
        for p, (log_start, log_end, hw) in zip(partitions, bounds):
            c = committed.get((topic, p))
            parts.append(PartitionLagInfo(topic=topic, partition=p, committed_offset=c, log_end_offset=log_end,
                                          high_watermark=hw, lag=max(0, hw - (c if c is not None else log_start))))
    return GroupLagInfo(group=group, partitions=parts)


async def reset_offsets(broker: OffsetsAdminBroker, group: str, *, to: ResetTarget, value: int | None = None,
                        topics: Sequence[str] | None = None) -> list[PartitionOffset]:
    """Reset the committed offsets of ``group`` on every partition of ``topics`` and commit them.

    Targets (``kafka-consumer-groups --reset-offsets``): ``earliest`` the log start offset, ``latest``
    the high watermark, ``timestamp`` the first offset whose timestamp is >= ``value`` ms (the high
    watermark when none is; looked up in this broker's log, so the broker must lead the partition),
    ``offset`` ``value`` clamped to [log start offset, high watermark].

    Args:
        topics: default: every topic the group has committed offsets for.

    Returns:
        The offsets committed, by topic then partition.

    Raises:
        GroupNotEmptyError: the group has active members (409 / 40905).
        InvalidCommitError: ``timestamp`` or ``offset`` without a ``value`` (422 / 42207).
        UnknownGroupError: no ``topics`` given and the group has no committed offsets (404 / 40407).
        UnknownTopicError: a topic does not exist.
        NotLeaderError: ``timestamp`` for a partition this broker does not lead.
    """
    members = await broker.group_members(group)
    if members:
        raise GroupNotEmptyError(f"Group '{group}' has {len(members)} active member(s) ({', '.join(members)}); "
                                 f"stop them before resetting its offsets.")
    if to in ("timestamp", "offset") and value is None:
        raise InvalidCommitError(f"Reset to {to} needs a value.")
    topics = list(topics or sorted({c.topic for c in broker.offset_store.committed(group)}))
    if not topics:
        raise UnknownGroupError(f"Group '{group}' has no committed offsets; name the topics to reset.")
    offsets = []
    for topic in topics:
        meta = await broker.topic_fresh(topic)
        for p in sorted(meta.replicas):
            offsets.append(PartitionOffset(topic, p, await _reset_target(broker, topic, p, to, value)))
    await asyncio.to_thread(broker.offset_store.commit, group, [asdict(o) for o in offsets])
    return offsets


async def _reset_target(broker: OffsetsAdminBroker, topic: str, partition: int, to: ResetTarget,
                        value: int | None) -> int:
    if to == "timestamp":  # the time index is the leader's log: reset on the leader
        log = (await broker.leader_partition(topic, partition)).log
        return await asyncio.to_thread(log.offset_for_timestamp, value)
    # from the partition's leader, wherever it is
    log_start, _, high_watermark = await broker.partition_offsets(topic, partition)
    if to == "earliest":
        return log_start
    if to == "latest":
        return high_watermark
    return min(max(value or 0, log_start), high_watermark)
