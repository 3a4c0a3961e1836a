"""DeleteRecords on a partition's leader: the log start offset moves up to the requested offset.

Kafka's ``ReplicaManager.deleteRecords`` and ``Partition.deleteRecordsOnLeader``: the leader checks the
offset against its high watermark (``-1`` means the high watermark), moves its log start offset
(:meth:`LogLifecycle.advance_log_start_offset <lakelog.log_tables.lifecycle.LogLifecycle.advance_log_start_offset>`,
``reason="delete-records"``: every record below it is gone for readers at once, the Delta table's data
files wholly below it are removed as retention removes them, and leave the disk after
``lake.vacuum.retention.ms``). The followers take the leader's log start offset with their next replica
fetch and say theirs with the one after; the answer waits, as Kafka's ``DelayedDeleteRecords``, until the
partition's low watermark (the lowest log start offset of its replicas on live brokers,
:meth:`Partition.low_watermark <lakelog.replication.partition.Partition.low_watermark>`) reached the offset,
and is that low watermark; after ``timeout_ms`` it is REQUEST_TIMED_OUT (the leader's records are gone
all the same, the followers' follow). A broker that does not lead the partition asks the leader
(:meth:`LeaderClient.delete_records <lakelog.replication.leader_client.LeaderClient.delete_records>`).
"""

from __future__ import annotations

import asyncio
import functools

from lakelog.log_tables.errors import OffsetOutOfRangeError
from lakelog.replication.errors import NotLeaderError, PolicyViolationError, RequestTimedOutError
from lakelog.replication.replica_manager import ReplicaManager

__all__ = ["HIGH_WATERMARK", "check_deletable", "check_offset", "delete_records", "local_delete_records"]

#: The offset of a DeleteRecords request that means "the high watermark" (Kafka's
#: ``DeleteRecordsRequest.HIGH_WATERMARK``, ``-1`` in kafka-delete-records' offsets JSON).
HIGH_WATERMARK = -1


def check_deletable(topic: str, *, cleanup_policy: str) -> None:
    """Refuse DeleteRecords on a topic whose ``cleanup.policy`` is ``compact`` alone (Kafka's
    ``Partition.deleteRecordsOnLeader``).

    Raises:
        PolicyViolationError: 400 / 40030.
    """
    if "delete" not in cleanup_policy:
        raise PolicyViolationError(f"Records of topic {topic!r} cannot be deleted: its cleanup.policy is "
                                   f"{cleanup_policy} (DeleteRecords needs delete in cleanup.policy).")


def check_offset(topic: str, partition: int, *, offset: int, log_start_offset: int, high_watermark: int) -> int:
    """The log start offset ``offset`` asks for: ``offset`` itself, or the high watermark for
    :data:`HIGH_WATERMARK`.

    Raises:
        OffsetOutOfRangeError: ``offset`` above the high watermark, or negative other than -1.
    """
    if offset == HIGH_WATERMARK:
        return high_watermark
    if offset < 0 or offset > high_watermark:
        raise OffsetOutOfRangeError(topic=topic, partition=partition, offset=offset,
                                    log_start_offset=log_start_offset, high_watermark=high_watermark)
    return offset


async def local_delete_records(rm: ReplicaManager, topic: str, partition: int, *, offset: int,
                               timeout_ms: int) -> int:
    """DeleteRecords of one partition on this broker, its leader: the partition's low watermark once every
    replica on a live broker moved its log start offset up to the offset asked (an offset below the log
    start offset moves nothing).

    Args:
        offset: the new log start offset, at most the high watermark; :data:`HIGH_WATERMARK` (-1) for the
            high watermark.
        timeout_ms: how long to wait for the followers (Kafka's DeleteRecords ``timeout_ms``).

    Raises:
        NotLeaderError (naming the leader), LeaderNotAvailableError, UnknownTopicError, UnknownPartitionError,
        PolicyViolationError (``cleanup.policy=compact``), OffsetOutOfRangeError (:func:`check_offset`),
        CommitFailedError (the Delta commit failed; nothing moved), RequestTimedOutError (the leader's log
        start offset moved, a follower's did not within ``timeout_ms``).
    """
    part = await rm.leader_partition(topic, partition)
    check_deletable(topic, cleanup_policy=rm.cache.topic(topic).config.cleanup_policy)
    log = part.log
    target = check_offset(topic, partition, offset=offset, log_start_offset=log.log_start_offset,
                          high_watermark=log.high_watermark)
    await asyncio.to_thread(functools.partial(log.lifecycle.advance_log_start_offset, target,
                                              reason="delete-records"))
    wanted = max(target, log.log_start_offset) if offset != HIGH_WATERMARK else log.log_start_offset
    live = set(await rm.cache.brokers())

    def reached() -> bool:
        return part.low_watermark(live) >= wanted or not part.is_leader

    if not await part.wait_until(reached, timeout_ms / 1000.0, log_end=True):
        raise RequestTimedOutError(
            f"Records of {topic}-{partition} below offset {wanted} are deleted on its leader, but its replicas "
            f"did not all follow within {timeout_ms} ms (low watermark {part.low_watermark(live)}); retry "
            f"to learn when they did.")
    if not part.is_leader:
        raise NotLeaderError(f"Broker {rm.broker_id} stopped leading {topic}-{partition} during DeleteRecords.")
    return part.low_watermark(live)


async def delete_records(rm: ReplicaManager, topic: str, partition: int, *, offset: int, timeout_ms: int) -> int:
    """:func:`local_delete_records` on the partition's leader: here when this broker leads it, else asked
    of the leader through the one inter-broker client.

    Raises:
        as :func:`local_delete_records`; LeaderNotAvailableError also when the leader does not answer.
    """
    try:
        return await local_delete_records(rm, topic, partition, offset=offset, timeout_ms=timeout_ms)
    except NotLeaderError as e:
        if not e.leader_url:
            raise
        return await rm.leader_client.delete_records(e.leader_url, topic, partition, offset=offset,
                                                     timeout_ms=timeout_ms)
