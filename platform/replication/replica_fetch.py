"""The leader's side of replication: a follower's fetch and its OffsetsForLeaderEpoch (KIP-101).

Kafka's ``ReplicaManager.fetchMessages`` for a replica id and ``OffsetsForLeaderEpoch``: the follower's
request names its leader epoch (checked against the leader's, :meth:`Partition.check_replica_request`),
its fetch offset is its log end offset (the leader moves the HW and the ISR from it), and the answer holds
full log rows up to the leader's LEO, long-polling while there are none.
"""

from __future__ import annotations

import asyncio

import pyarrow as pa

from lakelog.log_tables.errors import OffsetOutOfRangeError
from lakelog.log_tables.schema import TAIL_SCHEMA
from lakelog.log_tables.records import with_fetched_range
from lakelog.replication.partition import Partition
from lakelog.replication.replica_manager import ReplicaManager


async def replica_leader(rm: ReplicaManager, topic: str, partition: int, replica_id: int, leader_epoch: int) -> Partition:
    """The leader's partition for a follower's request at ``leader_epoch``.

    Raises:
        NotLeaderError / LeaderNotAvailableError: this broker does not lead the partition; and
        the errors of :meth:`Partition.check_replica_request`.
    """
    part = await rm.leader_partition(topic, partition)
    part.check_replica_request(replica_id, leader_epoch,
                               partitions_count=rm.cache.topic(topic).partitions_count)
    return part

async def replica_fetch(rm: ReplicaManager, topic: str, partition: int, *, replica_id: int, leader_epoch: int, offset: int,
                        max_bytes: int, max_wait_ms: int, log_start_offset: int = -1) -> tuple[pa.Table, Partition]:
    """A follower's fetch: full log rows from ``offset`` up to the LEO (not the HW), long-polling.
    ``log_start_offset``: the follower's (Kafka's Fetch ``log_start_offset``), -1 when not said.

    The rows carry the offset range they cover (:func:`~lakelog.log_tables.records.with_fetched_range`:
    ``[offset, last row + 1)``, or ``[offset, LEO)`` when the log holds no record there), so a follower
    replicates the gaps the log cleaner left as they are (Kafka's compacted batches keep their
    ``baseOffset`` and ``lastOffset``).

    Raises:
        the errors of :func:`replica_leader`; OffsetOutOfRangeError when ``offset`` is beyond the
        leader's LEO (the follower truncates) or below its log start offset (retention removed it: the
        follower starts over at the leader's log start offset).
    """
    part = await replica_leader(rm, topic, partition, replica_id, leader_epoch)
    if offset > part.log.log_end_offset or offset < part.log.log_start_offset:
        raise OffsetOutOfRangeError(topic=topic, partition=partition, offset=offset,
                                    log_start_offset=part.log.log_start_offset,
                                    high_watermark=part.log.log_end_offset)
    rm.isr.record_follower_fetch(part, replica_id, offset, log_start_offset=log_start_offset)
    if offset >= part.log.log_end_offset and max_wait_ms > 0:
        await part.wait_for_log_end(offset, max_wait_ms / 1000.0)
    end = part.log.log_end_offset
    # every row as the log holds it, control records and attributes included (the follower's transactions)
    table = await asyncio.to_thread(part.log.read, offset, max_bytes=max_bytes, end_offset=end,
                                    columns=TAIL_SCHEMA.names, control_records=True)
    # the range the answer covers: offsets in it without a row were compacted away (an answer without
    # rows below ``end`` says all of them were); the follower's log end offset becomes its end
    return with_fetched_range(table, offset, end), part

async def epoch_end_offset(rm: ReplicaManager, topic: str, partition: int, *, replica_id: int, leader_epoch: int,
                                   epoch: int) -> tuple[int, int]:
    """Kafka's OffsetsForLeaderEpoch: ``(largest epoch <= epoch, its end offset)`` in the leader's log."""
    part = await replica_leader(rm, topic, partition, replica_id, leader_epoch)
    return part.log.end_offset_for_epoch(epoch)
