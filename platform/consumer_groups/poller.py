"""The records path of consumer instances: a long-poll over the owned partitions (Kafka's ``poll``).

:meth:`RecordPoller.poll` reads each owned partition from its position, locally when this broker
leads it, else from the leader through :class:`~lakelog.replication.leader_client.LeaderClient`
(Arrow IPC), and answers Arrow tables (columns :data:`~lakelog.log_tables.schema.FETCH_COLUMNS`),
one per partition read, with the group generation they were read in. Encoding them as REST Proxy
records is the HTTP layer's job (:mod:`lakelog.ingest_api.consumers_api`).

Kafka consumer semantics kept:

- ``max.partition.fetch.bytes`` (1 MiB) per partition within the request's ``max_bytes``, at least
  one record per partition;
- ``fetch.min.bytes``: the poll returns once the keys and values read add up to it, or at its timeout;
- an out-of-range position is reset by ``auto.offset.reset`` (a position below the log start offset
  after retention, or past the high watermark);
- offsets have gaps where compaction removed records: a position inside one reads the next records,
  positions move to the last offset returned + 1, and past a gap that reaches the high watermark;
- ``isolation.level`` (KIP-98): read_committed reads below the last stable offset and no aborted records;
  transaction markers are never returned, and positions move past them (and past aborted records) to
  where the read ended (:func:`~lakelog.replication.consumer_fetch.next_offset`), so a position reaches the
  log end after a transaction's commit marker;
- partitions whose leader moved, has no live leader or whose topic was deleted are skipped for the
  round (logged) as a Kafka consumer's poll does, other errors end the request;
- partitions are rotated between requests, so a busy partition cannot starve the others;
- auto commit every ``auto.commit.interval.ms`` before reading.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.consumer_groups.assignors import TopicPartition
from lakelog.consumer_groups.broker_api import ConsumerBroker, LocalReplica
from lakelog.consumer_groups.errors import IllegalConsumerStateError
from lakelog.consumer_groups.instances import ConsumerInstance
from lakelog.consumer_groups.positions import InstanceOffsets
from lakelog.log_tables.errors import OffsetOutOfRangeError
from lakelog.log_tables.schema import FETCH_COLUMNS
from lakelog.replication.consumer_fetch import next_offset
from lakelog.replication.errors import LeaderNotAvailableError, NotLeaderError, UnknownTopicError

log = logging.getLogger(__name__)

#: Kafka consumer's ``max.partition.fetch.bytes`` default: bytes read per partition per records request.
MAX_PARTITION_FETCH_BYTES = 1024 * 1024

#: Default ``max_bytes`` of a records request (keys and values).
DEFAULT_MAX_BYTES = 64 * 1024 * 1024

#: Partitions a records request skips for this round (logged), as a Kafka consumer's poll does.
SKIPPABLE_READ_ERRORS = (NotLeaderError, LeaderNotAvailableError, UnknownTopicError)

#: While an owned partition is led by another broker, a waiting poll re-reads this often (seconds).
REMOTE_POLL_INTERVAL_S = 0.1


@dataclass(frozen=True)
class PartitionRecords:
    """Records read from one partition in one round.

    Attributes:
        topic, partition: the partition.
        records: Arrow table with columns :data:`~lakelog.log_tables.schema.FETCH_COLUMNS` (``offset``
            long, ``timestamp``, ``key``, ``value``, ``headers``), offsets ascending, at least one row.
    """

    topic: str
    partition: int
    records: pa.Table


@dataclass(frozen=True)
class PollResult:
    """What one records request read.

    Attributes:
        partitions: the rounds' reads in order (a partition may appear once per round).
        generation: the group generation every record was read in; None outside group membership
            (manual assignment).
    """

    partitions: list[PartitionRecords]
    generation: int | None

    @property
    def record_count(self) -> int:
        """Number of records read."""
        return sum(p.records.num_rows for p in self.partitions)


class RecordPoller:
    """Reads records for the consumer instances of one broker.

    Args:
        broker: the started broker (local fetch, local replicas, ``leader_client``).
        offsets: positions and commits (auto commit, ``auto.offset.reset``).
    """

    def __init__(self, broker: ConsumerBroker, offsets: InstanceOffsets) -> None:
        self.broker = broker
        self.offsets = offsets

    async def poll(self, inst: ConsumerInstance, *, timeout_ms: int | None = None,
                   max_bytes: int = DEFAULT_MAX_BYTES) -> PollResult:
        """Read records of the owned partitions of ``inst``.

        Returns once the records' keys and values add up to ``fetch.min.bytes`` (default: any record)
        or after ``timeout_ms`` (default: the instance's ``consumer.request.timeout.ms``), with at most
        about ``max_bytes`` of keys and values, and about 1 MiB per partition (Kafka's
        ``max.partition.fetch.bytes``; at least one record). Positions advance past what is
        returned. With auto commit, positions are committed first every ``auto.commit.interval.ms``.
        A rebalance during the request ends it with what was read before; when nothing was read yet
        (the first poll after subscribing waits for the member's first assignment), the request waits
        on in the new generation until records arrive or the timeout passes.

        Raises:
            IllegalConsumerStateError: neither subscribed nor assigned (409 / 40903).
            LakelogError: a read failed other than by :data:`SKIPPABLE_READ_ERRORS`.
        """
        if not inst.subscribed and not inst.manual:
            raise IllegalConsumerStateError("Illegal state: Consumer is not subscribed to any topics or "
                                            "assigned any partitions.")
        timeout_ms = inst.request_timeout_ms if timeout_ms is None else timeout_ms
        async with inst.lock:
            inst.touch()
            if inst.auto_commit_due():
                inst.last_auto_commit = time.monotonic()
                await self.offsets.commit_quietly(inst, inst.consumed_positions(), inst.generation)
            deadline = time.monotonic() + timeout_ms / 1000.0
            read: list[PartitionRecords] = []
            total = 0
            generation = inst.generation
            while not inst.closed and (inst.subscribed or inst.manual):
                if inst.generation != generation:
                    if read:
                        break  # rebalanced: answer what was read in the old generation
                    # nothing read yet (e.g. the first poll after subscribe, before the first assignment):
                    # wait on in the new generation, as a Kafka consumer's poll does across a rebalance
                    generation = inst.generation
                owned = sorted(inst.owned)
                if owned:
                    round_ = await self._round(inst, owned, max_bytes - total, generation)
                    if round_ is None:
                        continue  # rebalanced while reading: drop this round (positions stay), see above
                    for part in round_:
                        tp = (part.topic, part.partition)
                        inst.positions[tp] = next_offset(part.records, inst.positions[tp])
                        total += record_bytes(part.records)
                        read.append(part)
                remaining = deadline - time.monotonic()
                if total >= max(1, inst.fetch_min_bytes) or total >= max_bytes or remaining <= 0:
                    break
                await self._wait_for_records(inst, remaining)
            inst.rotation += 1
            inst.touch()
        return PollResult(read, generation)

    async def _round(self, inst: ConsumerInstance, owned: list[TopicPartition], max_bytes: int,
                     generation: int | None) -> list[PartitionRecords] | None:
        """One read of every owned partition, concurrently; keeps only reads still current (the
        assignment or a seek may have changed meanwhile). None when the group left ``generation``
        meanwhile."""
        k = inst.rotation % len(owned)
        owned = owned[k:] + owned[:k]
        # Kafka's fetch limits: max.partition.fetch.bytes per partition within the request's max_bytes
        budget = max(1, min(MAX_PARTITION_FETCH_BYTES, max_bytes // len(owned)))
        starts = [inst.positions[tp] for tp in owned]
        results = await asyncio.gather(*(self._read(inst, tp, off, budget) for tp, off in zip(owned, starts)),
                                       return_exceptions=True)
        if inst.generation != generation:
            return None
        out = []
        for tp, start, res in zip(owned, starts, results):
            if isinstance(res, BaseException):
                if not isinstance(res, SKIPPABLE_READ_ERRORS):
                    raise res
                log.warning("reading %s-%d for %s/%s: %s", tp[0], tp[1], inst.group, inst.name, res)
                continue
            if res is None or tp not in inst.owned or inst.positions.get(tp) != start:
                continue
            if isinstance(res, int):  # no record from the position up to this offset: a gap (compaction)
                inst.positions[tp] = res
                continue
            if res.num_rows:
                out.append(PartitionRecords(tp[0], tp[1], res))
        return out

    async def _read(self, inst: ConsumerInstance, tp: TopicPartition, offset: int,
                    max_bytes: int) -> pa.Table | int | None:
        """Records of ``tp`` from ``offset``: from the local log when this broker leads the partition,
        else from the leader the ``NotLeaderError`` names. None after an out-of-range reset.

        A fetch from inside a gap (compaction keeps the latest record per key; offsets never change)
        returns the records after it. When a local read finds no record at all between ``offset`` and
        the end it saw (the high watermark; read_committed: the last stable offset) (the gap reaches the
        end of the log, e.g. removed tombstones), the answer is that end, the position to go on from: as
        a Kafka consumer's position moves past batches without records for it, and a poll does not keep
        re-reading the gap until its timeout (the end already lies past the position, so waiting for it
        returns at once). A read of transaction markers or aborted records only answers where it ended.
        """
        level = inst.isolation_level
        try:
            try:
                local = self.broker.local_partition(*tp)
                end = _readable_end(local, level) if local is not None and local.role == "leader" else None
                table, part = await self.broker.fetch(tp[0], tp[1], offset, max_bytes=max_bytes, max_wait_ms=0,
                                                      columns=FETCH_COLUMNS, isolation_level=level)
                if table.num_rows == 0 and next_offset(table, offset) > offset:
                    return next_offset(table, offset)  # only markers (or aborted records) were there
                if table.num_rows == 0 and end is not None and end > offset and part is local:
                    return end  # the read (of a view taken after `end` was seen) found nothing below it
                return table
            except NotLeaderError as e:
                if not e.leader_url:
                    raise
                # raises the leader's own error: OffsetOutOfRangeError, NotLeaderError (moved again),
                # UnknownTopicError, ...; LeaderNotAvailableError when it does not answer
                table = await self.broker.leader_client.fetch(e.leader_url, tp[0], tp[1], offset=offset,
                                                              max_bytes=max_bytes, max_wait_ms=0, isolation_level=level)
                return next_offset(table, offset) if table.num_rows == 0 else table
        except OffsetOutOfRangeError:
            # Kafka: an out-of-range position is reset by auto.offset.reset
            if tp in inst.owned and inst.positions.get(tp) == offset:
                inst.positions[tp] = await self.offsets.reset_position(inst, tp)
            return None

    async def _wait_for_records(self, inst: ConsumerInstance, timeout_s: float) -> None:
        """Wait until an owned local partition has records past its position, the assignment or a
        position changes, or ``timeout_s`` passes (remote partitions are polled every 100 ms)."""
        waits = [asyncio.ensure_future(inst.changed.wait())]
        remote = False
        for tp in sorted(inst.owned):
            part = self.broker.local_partition(*tp)  # no I/O: led elsewhere (or not yet known here) is polled
            if part is None or part.role != "leader":
                remote = True
                continue
            position, level = inst.positions[tp], inst.isolation_level
            waits.append(asyncio.ensure_future(part.wait_until(
                lambda part=part, position=position: _readable_end(part, level) > position, timeout_s)))
        try:
            await asyncio.wait(waits, timeout=min(timeout_s, REMOTE_POLL_INTERVAL_S) if remote else timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()


def _readable_end(part: LocalReplica, isolation_level: str) -> int:
    """The end of what an instance with ``isolation_level`` reads of a local replica now: its high
    watermark, or (read_committed) its last stable offset."""
    hw = part.log.high_watermark
    return min(part.log.last_stable_offset, hw) if isolation_level == "read_committed" else hw


def record_bytes(table: pa.Table) -> int:
    """Bytes of keys and values of a record table (nulls count 0), computed by Arrow."""
    total = 0
    for name in ("key", "value"):
        lengths = pc.binary_length(table[name])
        total += int(pc.sum(lengths).as_py() or 0)
    return total
