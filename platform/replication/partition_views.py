"""What any broker answers about any partition of the cluster: its replicas and offsets, its table.

Kafka's metadata requests: every broker answers for the whole cluster. Leader, epoch and ISR come from
ZooKeeper; the offsets and the table location from the partition's leader (read locally when this broker
leads, else asked of the leader through the :class:`~lakelog.replication.leader_client.LeaderClient`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from lakelog.errors import LakelogError
from lakelog.protocol.log_info import PartitionLogInfo
from lakelog.replication.errors import NotLeaderError
from lakelog.replication.replica_manager import ReplicaManager


async def partition_offsets(rm: ReplicaManager, topic: str, partition: int) -> tuple[int, int, int]:
    """``(log_start_offset, log_end_offset, high_watermark)`` of a partition, from its leader.

    Read locally when this broker leads the partition, else asked of the leader, so any broker
    answers for the whole cluster.

    Raises:
        UnknownTopicError, UnknownPartitionError, LeaderNotAvailableError (no live or reachable
        leader, or it does not know its offsets yet), NotLeaderError (leadership moved again).
    """
    start, _, leo, hw = await _leader_offsets(rm, topic, partition)
    return start, leo, hw


async def offset_for_timestamp(rm: ReplicaManager, topic: str, partition: int, *, timestamp_ms: int) -> int:
    """The first offset of a partition whose record timestamp is >= ``timestamp_ms`` (ms since the epoch),
    or the high watermark when no record is that new: Kafka's ``ListOffsets`` by timestamp
    (``kafka-get-offsets --time``, ``kafka-consumer-groups --reset-offsets --to-datetime``). Looked up in
    the leader's log (its time index): locally when this broker leads, else asked of the leader.

    Raises:
        UnknownTopicError, UnknownPartitionError, LeaderNotAvailableError (no live or reachable leader),
        NotLeaderError (leadership moved again).
    """
    try:
        return await local_offset_for_timestamp(rm, topic, partition, timestamp_ms=timestamp_ms)
    except NotLeaderError as e:
        if not e.leader_url:
            raise
        return await rm.leader_client.offset_for_timestamp(e.leader_url, topic, partition, timestamp_ms=timestamp_ms)


async def local_offset_for_timestamp(rm: ReplicaManager, topic: str, partition: int, *, timestamp_ms: int) -> int:
    """:func:`offset_for_timestamp` on this broker only (what a forwarded lookup asks of the leader).

    Raises:
        NotLeaderError (naming the leader), LeaderNotAvailableError, UnknownTopicError, UnknownPartitionError.
    """
    log = (await rm.leader_partition(topic, partition)).log
    return await asyncio.to_thread(log.offset_for_timestamp, timestamp_ms)


async def _leader_offsets(rm: ReplicaManager, topic: str, partition: int) -> tuple[int, int, int, int]:
    """``(log_start_offset, lake_end_offset, log_end_offset, high_watermark)`` from the leader."""
    try:
        log = (await rm.leader_partition(topic, partition)).log
    except NotLeaderError as e:
        if not e.leader_url:
            raise
        return await rm.leader_client.partition_offsets(e.leader_url, topic, partition)
    hw = log.high_watermark
    return log.log_start_offset, min(log.lake_end_offset, hw), log.log_end_offset, hw


@dataclass(frozen=True)
class ReplicaSummary:
    """One replica of a partition: its broker, whether it leads, whether it is in the ISR."""

    broker: int
    leader: bool
    in_sync: bool


@dataclass(frozen=True)
class PartitionSummary:
    """A partition as REST Proxy v2 describes it, plus lakelog's leader epoch and offsets (the lake end
    offset: the first offset not in the Delta table yet).

    The offsets are None when the leader is moving or unreachable."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: list[ReplicaSummary]
    log_start_offset: int | None = None
    lake_end_offset: int | None = None
    log_end_offset: int | None = None
    high_watermark: int | None = None


async def partition_summary(rm: ReplicaManager, topic: str, partition: int, replicas: list[int]) -> PartitionSummary:
    """Leader, epoch, replicas with ISR membership, and the leader's offsets of one partition.

    Raises:
        UnknownTopicError, UnknownPartitionError (from ZooKeeper); offsets that cannot be had are None.
    """
    state = await rm.cache.partition_state(topic, partition)
    offsets: tuple[int | None, int | None, int | None, int | None] = (None, None, None, None)
    if state.leader >= 0:
        try:
            offsets = await _leader_offsets(rm, topic, partition)
        except LakelogError:  # the leader is moving or unreachable: offsets stay unknown
            pass
    return PartitionSummary(
        partition=partition, leader=state.leader, leader_epoch=state.leader_epoch,
        replicas=[ReplicaSummary(b, b == state.leader, b in state.isr) for b in replicas],
        log_start_offset=offsets[0], lake_end_offset=offsets[1], log_end_offset=offsets[2], high_watermark=offsets[3])


async def partition_log_info(rm: ReplicaManager, topic: str, partition: int) -> PartitionLogInfo:
    """The partition's table on its leader, for direct readers (Spark); the table holds the committed
    records below the lake end offset, the leader's segment tail the rest up to the HW.

    Raises:
        UnknownTopicError, UnknownPartitionError, LeaderNotAvailableError, NotLeaderError.
    """
    try:
        part = await rm.leader_partition(topic, partition)
    except NotLeaderError as e:
        if not e.leader_url:
            raise
        return PartitionLogInfo(**await rm.leader_client.topic_log(e.leader_url, topic, partition))
    meta = rm.cache.topic(topic)
    return PartitionLogInfo(topic=topic, partition=partition, table_uri=part.log.table_uri,
                            log_start_offset=part.log.log_start_offset,
                            lake_end_offset=min(part.log.lake_end_offset, part.log.high_watermark),
                            log_end_offset=part.log.log_end_offset,
                            high_watermark=part.log.high_watermark, leader_epoch=part.leader_epoch,
                            timestamp_type=meta.config.timestamp_type_id)
