"""What any broker answers about any partition of the cluster: its replicas and offsets, its table.

Kafka's metadata requests: every broker answers for the whole cluster. Leader, epoch and ISR come from
ZooKeeper; the offsets and the table location from the partition's leader (read locally when this broker
leads, else asked of the leader through the :class:`~lakelog.replication.leader_client.LeaderClient`).
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass

from lakelog.errors import LakelogError
from lakelog.log_tables.log_metrics import bytes_on_disk
from lakelog.log_tables.transaction_index import IsolationLevel
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
    offsets = await leader_offsets(rm, topic, partition)
    return offsets.log_start_offset, offsets.log_end_offset, offsets.high_watermark


@dataclass(frozen=True)
class LeaderOffsets:
    """A partition's offsets as its leader has them.

    Attributes:
        log_start_offset: first offset still in the log.
        lake_end_offset: first offset not in the Delta table yet (at most the high watermark).
        log_end_offset: the offset the next record gets (LEO).
        high_watermark: first offset not yet replicated to the ISR (read_uncommitted consumers read below it).
        last_stable_offset: Kafka's LSO, the first offset of a still-open transaction, at most the high
            watermark (read_committed consumers read below it; ListOffsets latest with READ_COMMITTED).
    """

    log_start_offset: int
    lake_end_offset: int
    log_end_offset: int
    high_watermark: int
    last_stable_offset: int

    def end_offset(self, isolation_level: IsolationLevel) -> int:
        """Where a consumer with Kafka's ``isolation.level`` may read up to (exclusive): the high watermark
        (read_uncommitted) or the last stable offset (read_committed), as Kafka's ListOffsets latest."""
        return self.last_stable_offset if isolation_level == "read_committed" else self.high_watermark


async def leader_offsets(rm: ReplicaManager, topic: str, partition: int) -> LeaderOffsets:
    """A partition's :class:`LeaderOffsets` (with the last stable offset), from its leader: read locally
    when this broker leads the partition, else asked of the leader.

    Raises:
        as :func:`partition_offsets`.
    """
    try:
        log = (await rm.leader_partition(topic, partition)).log
    except NotLeaderError as e:
        if not e.leader_url:
            raise
        return LeaderOffsets(*await rm.leader_client.stable_offsets(e.leader_url, topic, partition))
    hw = log.high_watermark
    return LeaderOffsets(log.log_start_offset, min(log.lake_end_offset, hw), log.log_end_offset, hw,
                         min(log.last_stable_offset, hw))


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


@dataclass(frozen=True)
class ReplicaSummary:
    """One replica of a partition: its broker, whether it leads, whether it is in the ISR."""

    broker: int
    leader: bool
    in_sync: bool


@dataclass(frozen=True)
class PartitionSummary:
    """A partition as REST Proxy v2 describes it, plus lakelog's leader epoch and offsets (the lake end
    offset: the first offset not in the Delta table yet; the last stable offset: the first offset of a
    still-open transaction, at most the high watermark).

    The offsets are None when the leader is moving or unreachable."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: list[ReplicaSummary]
    log_start_offset: int | None = None
    lake_end_offset: int | None = None
    log_end_offset: int | None = None
    high_watermark: int | None = None
    last_stable_offset: int | None = None


async def partition_summary(rm: ReplicaManager, topic: str, partition: int, replicas: list[int]) -> PartitionSummary:
    """Leader, epoch, replicas with ISR membership, and the leader's offsets of one partition.

    Raises:
        UnknownTopicError, UnknownPartitionError (from ZooKeeper); offsets that cannot be had are None.
    """
    state = await rm.cache.partition_state(topic, partition)
    offsets: dict[str, int] = {}
    if state.leader >= 0:
        try:
            offsets = asdict(await leader_offsets(rm, topic, partition))
        except LakelogError:  # the leader is moving or unreachable: offsets stay unknown
            pass
    return PartitionSummary(
        partition=partition, leader=state.leader, leader_epoch=state.leader_epoch,
        replicas=[ReplicaSummary(b, b == state.leader, b in state.isr) for b in replicas], **offsets)


async def partition_log_info(rm: ReplicaManager, topic: str, partition: int, *,
                             details: bool = False) -> PartitionLogInfo:
    """The partition's table on its leader, for direct readers (Spark) and the console; the table holds the
    committed records below the lake end offset, the leader's segment tail the rest up to the HW. With
    ``details``, also the table's version, its data files and the replica's bytes on disk (a directory walk,
    in a worker thread); else those are None. Default: False.

    Raises:
        UnknownTopicError, UnknownPartitionError, LeaderNotAvailableError, NotLeaderError.
    """
    try:
        part = await rm.leader_partition(topic, partition)
    except NotLeaderError as e:
        if not e.leader_url:
            raise
        return PartitionLogInfo(**await rm.leader_client.topic_log(e.leader_url, topic, partition, details=details))
    meta = rm.cache.topic(topic)
    log = part.log
    version = files = size = None
    if details:
        version, files, size = await asyncio.to_thread(
            lambda: (log.version, log.table_files(), bytes_on_disk(log.table_uri)))
    return PartitionLogInfo(topic=topic, partition=partition, table_uri=part.log.table_uri,
                            log_start_offset=part.log.log_start_offset,
                            lake_end_offset=min(part.log.lake_end_offset, part.log.high_watermark),
                            log_end_offset=part.log.log_end_offset,
                            high_watermark=part.log.high_watermark, leader_epoch=part.leader_epoch,
                            last_stable_offset=min(part.log.last_stable_offset, part.log.high_watermark),
                            timestamp_type=meta.config.timestamp_type_id,
                            table_version=version, table_files=files, size_bytes=size, table_id=log.table_id)
