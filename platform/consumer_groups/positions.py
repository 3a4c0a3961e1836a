"""Where consumer instances start reading and what they commit.

:class:`InstanceOffsets` is shared by the consumer manager, the records poller and the rebalancer:

- partition bounds (log start offset, high watermark or, read_committed, last stable offset) from each
  partition's leader;
- initial positions of newly assigned partitions: the group's committed offset, else
  ``auto.offset.reset`` (Kafka's consumer: also when the committed offset is out of range; "latest" is the
  last stable offset for a read_committed instance);
- offset commits to the group's coordinator (``__consumer_offsets``, wherever its leader is), fenced by
  the group generation (Kafka's ``OffsetCommit`` with ``generationId``), and auto commits that only log a
  failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from lakelog.consumer_groups.assignors import TopicPartition
from lakelog.consumer_groups.broker_api import ConsumerBroker
from lakelog.consumer_groups.errors import IllegalGenerationError
from lakelog.consumer_groups.instances import ConsumerInstance
from lakelog.consumer_groups.offset_records import offsets_of
from lakelog.consumer_groups.offset_records import CommittedOffset
from lakelog.log_tables.transaction_index import IsolationLevel
from lakelog.replication.partition_views import LeaderOffsets

log = logging.getLogger(__name__)

#: ``{(topic, partition): (next offset to read, metadata or None)}``: what one commit writes.
OffsetCommits = dict[TopicPartition, tuple[int, str | None]]


class InstanceOffsets:
    """Positions and commits of the consumer instances of one broker.

    Args:
        broker: the started broker (its partition offsets, topic metadata, group generations and
            group coordinator).
    """

    def __init__(self, broker: ConsumerBroker) -> None:
        self.broker = broker

    async def bounds(self, partitions: Iterable[TopicPartition], *,
                     isolation_level: IsolationLevel = "read_uncommitted") -> dict[TopicPartition, tuple[int, int]]:
        """``(log start offset, end)`` of each partition, from its leader (asked concurrently); the end is the
        high watermark, or with ``read_committed`` the last stable offset (Kafka's ListOffsets latest).

        Raises: ``UnknownTopicError``, ``UnknownPartitionError``, ``LeaderNotAvailableError``, ``NotLeaderError``.
        """
        return {tp: (o.log_start_offset, o.end_offset(isolation_level))
                for tp, o in (await self._offsets(partitions)).items()}

    async def _offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, LeaderOffsets]:
        tps = sorted(partitions)
        return dict(zip(tps, await asyncio.gather(*(self.broker.leader_offsets(*tp) for tp in tps))))

    async def reset_position(self, inst: ConsumerInstance, tp: TopicPartition) -> int:
        """The position ``auto.offset.reset`` gives: the log start offset (``earliest``) or the end
        (``latest``: the high watermark, the last stable offset with read_committed)."""
        offsets = await self.broker.leader_offsets(*tp)
        return offsets.log_start_offset if inst.auto_offset_reset == "earliest" else offsets.end_offset(
            inst.isolation_level)

    async def initial_positions(self, inst: ConsumerInstance,
                                partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Where ``inst`` starts reading ``partitions``: the group's committed offset when it lies between
        the log start offset and the high watermark, else ``auto.offset.reset`` (see :meth:`reset_position`)."""
        committed = {(c.topic, c.partition): c.offset for c in await self.broker.coordinator.committed(inst.group)}
        out = {}
        for tp, o in (await self._offsets(partitions)).items():
            c = committed.get(tp)
            if c is not None and o.log_start_offset <= c <= o.high_watermark:
                out[tp] = c
            else:
                out[tp] = o.log_start_offset if inst.auto_offset_reset == "earliest" else o.end_offset(
                    inst.isolation_level)
        return out

    async def commit(self, group: str, offsets: OffsetCommits, generation: int | None) -> None:
        """Commit ``offsets`` read in ``generation`` (None: outside group membership) through the group's
        coordinator (one append), fenced by the group's current generation.

        Raises:
            UnknownTopicError, UnknownPartitionError: a partition does not exist (nothing is written).
            IllegalGenerationError: ``generation`` is older than the group's (409 / 40904).
        """
        if not offsets:
            return
        for t, p in sorted(offsets):
            meta = await self.broker.topic_fresh(t)
            self.broker.check_partition(meta, p)
        rows = [{"topic": t, "partition": p, "offset": o, "metadata": m} for (t, p), (o, m) in sorted(offsets.items())]
        current = await self.broker.group_generation(group) if generation is not None else None
        await self.broker.coordinator.commit(group, offsets_of(group, rows, generation=generation),
                                             current_generation=current)

    async def commit_quietly(self, inst: ConsumerInstance, positions: dict[TopicPartition, int],
                             generation: int | None) -> None:
        """Auto commit of ``positions``: a failure is logged and the caller goes on (as Kafka's auto commit)."""
        try:
            await self.commit(inst.group, {tp: (o, None) for tp, o in positions.items()}, generation)
        except IllegalGenerationError as e:
            log.info("auto commit of %s/%s refused: %s", inst.group, inst.name, e)
        except Exception as e:
            log.warning("auto commit of %s/%s failed: %s", inst.group, inst.name, e, exc_info=True)

    async def committed(self, group: str, partitions: Iterable[TopicPartition]) -> list[CommittedOffset]:
        """The group's latest committed offsets of ``partitions`` (partitions without a commit are left out),
        from its coordinator."""
        wanted = set(partitions)
        return [c for c in await self.broker.coordinator.committed(group) if (c.topic, c.partition) in wanted]
