"""Administration of a group's committed offsets: commit, lag and reset (Kafka's ``OffsetCommit`` and
``kafka-consumer-groups --describe`` / ``--reset-offsets``), for any committer (a Spark query, a tool).

Functions take the broker as :class:`~lakelog.consumer_groups.broker_api.OffsetsAdminBroker`; offsets
are Kafka's committed offsets: the next offset the group will read.

- :func:`commit_offsets`: one append to the group's ``__consumer_offsets`` partition through its
  coordinator, fenced by the group generation, idempotent with a transaction (``app_id``, ``version``);
- :func:`group_lag`: committed offset, log end offset, high watermark and lag of every partition of
  the topics the group committed;
- :func:`reset_offsets`: move a group without active members to earliest, latest, a timestamp or an
  offset;
- :func:`delete_offsets`: delete a group's committed offsets of some partitions
  (``kafka-consumer-groups --delete-offsets``; tombstones in ``__consumer_offsets``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from lakelog.consumer_groups.broker_api import OffsetsAdminBroker
from lakelog.consumer_groups.offset_records import offsets_of
from lakelog.consumer_groups.errors import GroupNotEmptyError, InvalidCommitError, UnknownGroupError
from lakelog.replication.errors import UnknownTopicError

#: Where :func:`reset_offsets` moves a group (``kafka-consumer-groups --to-earliest``, ``--to-latest``,
#: ``--to-current``, ``--shift-by``, ``--by-duration``,
#: ``--to-datetime``, ``--to-offset``).
ResetTarget = Literal["earliest", "latest", "timestamp", "offset", "current", "shift", "duration"]


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
        InvalidCommitError: a partition is not one of its topic's (422 / 42228).
    """
    for topic, partition in partitions:
        meta = await broker.topic_fresh(topic)
        if partition not in meta.replicas:
            raise InvalidCommitError(f"Cannot commit {topic}-{partition}: topic '{topic}' has partitions "
                                     f"0 to {meta.partitions_count - 1}.")


async def commit_offsets(broker: OffsetsAdminBroker, group: str, offsets: Sequence[PartitionOffset], *,
                         generation: int | None = None, app_id: str | None = None,
                         version: int | None = None) -> bool:
    """Commit ``offsets`` for ``group`` through its coordinator, in one append.

    Args:
        generation: the committer's group generation; None outside group membership.
        app_id, version: make the commit idempotent (as Delta's ``txn`` action): a replayed or older
            ``version`` for ``app_id`` writes nothing.

    Returns:
        False when the transaction was a replay and nothing was written, else True.

    Raises:
        UnknownTopicError, InvalidCommitError: see :func:`check_commit_partitions` (nothing is written).
        IllegalGenerationError: ``generation`` is older than the group's (409 / 40904).
        NotCoordinatorError: no coordinator answered within ``request.timeout.ms`` (503 / 50320, retriable).
    """
    await check_commit_partitions(broker, [(o.topic, o.partition) for o in offsets])
    return await broker.coordinator.commit(
        group, offsets_of(group, _rows(offsets), generation=generation, app_id=app_id, app_version=version),
        current_generation=await broker.group_generation(group) if generation is not None else None)


async def group_lag(broker: OffsetsAdminBroker, group: str) -> GroupLagInfo:
    """Lag of ``group`` on every partition of the topics it committed (deleted topics are left out),
    with each partition's offsets from its leader (asked concurrently per topic).

    Raises:
        UnknownGroupError: the group has no committed offsets (404 / 40405).
        LeaderNotAvailableError: a partition's leader does not answer.
    """
    committed = {(c.topic, c.partition): c.offset for c in await broker.coordinator.committed(group)}
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
                        topics: Sequence[str] | None = None, partitions: Sequence[tuple[str, int]] | None = None,
                        dry_run: bool = False) -> list[PartitionOffset]:
    """Reset the committed offsets of ``group`` on the partitions chosen and commit them (Kafka's
    ``kafka-consumer-groups --reset-offsets``, ``ResetOffsetsOpts``).

    Targets: ``earliest`` the log start offset (``--to-earliest``), ``latest`` the high watermark
    (``--to-latest``), ``timestamp`` the first offset whose timestamp is >= ``value`` ms (``--to-datetime``;
    the high watermark when none is; looked up in the partition leader's log, wherever it is), ``offset``
    ``value`` (``--to-offset``), ``current`` the committed offset (``--to-current``), ``shift`` the
    committed offset plus ``value`` (``--shift-by``, may be negative), ``duration`` the first offset at or
    after ``value`` ms before now (``--by-duration``). Every new offset is clamped to [log start offset,
    high watermark], as Kafka does; ``current`` and ``shift`` of a partition without a committed
    offset start from ``auto.offset.reset``'s default, the high watermark (Kafka: ``latest``).

    Args:
        topics: every partition of these topics. partitions: these ``(topic, partition)`` s
            (``--topic t:0,2``). Neither: every partition of the topics the group committed offsets for.
        dry_run: compute the offsets, commit nothing (``--dry-run``; Kafka's default without ``--execute``).

    Returns:
        The new offsets, by topic then partition.

    Raises:
        GroupNotEmptyError: the group has active members (409 / 40905).
        InvalidCommitError: ``timestamp``, ``offset``, ``shift`` or ``duration`` without a ``value``, or a
            partition the topic does not have (422 / 42228).
        UnknownGroupError: nothing chosen and the group has no committed offsets (404 / 40405).
        UnknownTopicError: a topic does not exist.
        LeaderNotAvailableError: a partition has no reachable leader (retriable).
    """
    await _check_no_members(broker, group, doing="resetting")
    if to in ("timestamp", "offset", "shift", "duration") and value is None:
        raise InvalidCommitError(f"Reset to {to} needs a value.")
    committed = {(c.topic, c.partition): c.offset for c in await broker.coordinator.committed(group)}
    chosen: list[tuple[str, int]] = []
    if partitions:
        await check_commit_partitions(broker, partitions)
        chosen += list(partitions)
    for topic in (topics or ([] if partitions else sorted({t for t, _ in committed}))):
        meta = await broker.topic_fresh(topic)
        chosen += [(topic, p) for p in sorted(meta.replicas)]
    if not chosen:
        raise UnknownGroupError(f"Group '{group}' has no committed offsets; name the topics to reset.")
    if to == "duration":
        to, value = "timestamp", int(time.time() * 1000) - (value or 0)
    offsets = [PartitionOffset(t, p, await _reset_target(broker, t, p, to, value, committed.get((t, p))))
               for t, p in sorted(set(chosen))]
    if not dry_run:
        await broker.coordinator.commit(group, offsets_of(group, _rows(offsets)))
    return offsets


async def _reset_target(broker: OffsetsAdminBroker, topic: str, partition: int, to: ResetTarget,
                        value: int | None, committed: int | None) -> int:
    if to == "timestamp":  # the time index is the leader's log, wherever it is
        return await broker.offset_for_timestamp(topic, partition, timestamp_ms=value or 0)
    # from the partition's leader, wherever it is
    log_start, _, high_watermark = await broker.partition_offsets(topic, partition)
    if to == "earliest":
        return log_start
    if to == "latest":
        return high_watermark
    if to == "current":
        target = high_watermark if committed is None else committed
    elif to == "shift":
        target = (high_watermark if committed is None else committed) + (value or 0)
    else:
        target = value or 0
    return min(max(target, log_start), high_watermark)


async def delete_offsets(broker: OffsetsAdminBroker, group: str, *, topic: str,
                         partitions: Sequence[int] | None = None) -> list[tuple[str, int]]:
    """Delete ``group``'s committed offsets of ``topic`` (``partitions``, default all of them) through its
    coordinator: tombstones in ``__consumer_offsets`` (Kafka's OffsetDelete, KIP-496,
    ``kafka-consumer-groups --delete-offsets``). A group with active members is refused, as Kafka refuses
    one subscribed to the topic.

    Returns:
        The ``(topic, partition)`` s that had an offset, now deleted.

    Raises:
        GroupNotEmptyError: the group has active members (409 / 40905).
        UnknownGroupError: the group has no committed offsets of the topic (404 / 40405).
        NotCoordinatorError: no coordinator answered within ``request.timeout.ms`` (503 / 50320, retriable).
    """
    await _check_no_members(broker, group, doing="deleting")
    committed = [(c.topic, c.partition) for c in await broker.coordinator.committed(group, topic)]
    wanted = [tp for tp in committed if partitions is None or tp[1] in set(partitions)]
    if not wanted:
        raise UnknownGroupError(f"Group '{group}' has no committed offsets of topic '{topic}'"
                                + (f" partitions {sorted(partitions)}." if partitions is not None else "."))
    return await broker.coordinator.delete_offsets(group, wanted)


def _rows(offsets: Sequence[PartitionOffset]) -> list[dict]:
    """``offsets`` as the rows :func:`~lakelog.consumer_groups.offset_records.offsets_of` takes."""
    return [{"topic": o.topic, "partition": o.partition, "offset": o.offset, "metadata": o.metadata} for o in offsets]


async def _check_no_members(broker: OffsetsAdminBroker, group: str, *, doing: str) -> None:
    """Raises GroupNotEmptyError (409 / 40905) when ``group`` has live members (Kafka's NON_EMPTY_GROUP)."""
    members = await broker.group_members(group)
    if members:
        raise GroupNotEmptyError(f"Group '{group}' has {len(members)} active member(s) ({', '.join(members)}); "
                                 f"stop them before {doing} its offsets.")
