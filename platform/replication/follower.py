"""A follower's fetcher: pulls one partition's records from its leader into the local replica.

Kafka's ``ReplicaFetcherThread`` for one partition, over the leader's internal HTTP endpoints
(:mod:`lakelog.ingest_api.replica_api`). Steps (mirrored by comments in :meth:`ReplicaFetcher._run`):

1. truncate (KIP-101, KIP-279): ask the leader for the end offset of this replica's latest leader
   epoch (``GET .../epoch-end-offset?epoch=E``); the leader answers ``(E', end)`` with E' the largest
   epoch it has at or below E; truncate the local log to ``min(end, own end offset of E')``. This
   drops a tail the leader never had (an old leader's un-replicated records) and keeps everything
   committed;
2. fetch from the log end offset (``GET .../records?offset=LEO&replica_id=&leader_epoch=``, a
   long-poll of ``replica.fetch.wait.max.ms``): the answer is an Arrow IPC stream of full log rows
   (leader's offsets, timestamps, leader epochs) plus the leader's high watermark in
   ``X-Lakelog-High-Watermark``; the fetch offset itself tells the leader this replica's LEO;
3. append the rows with their offsets (:meth:`PartitionLog.append_replicated`: a frame of the segment
   tail, written from the event loop when small; the replica's own flusher commits it to Delta) and
   move the local high watermark to ``min(leader HW, LEO)``. Where the leader's log cleaner compacted
   the range, the answer has offset gaps and says the range it covers (schema metadata,
   :func:`~lakelog.log_tables.records.with_fetched_range`; an answer without rows covers a range that
   was compacted away entirely): it is appended as it is, in a worker thread (a Delta commit), and the
   log end offset becomes the range's end, as Kafka's follower takes compacted batches;
4. repeat 2-3; an out-of-range answer (422 / 42226) or a batch that does not continue the log goes
   back to 1 after ``replica.fetch.backoff.ms``; other errors (leader unreachable, epoch mismatch
   while the new state propagates) wait ``replica.fetch.backoff.ms`` and retry.

The fetcher runs until cancelled (the broker stops it when the partition's leader or epoch changes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from lakelog.log_tables.errors import NonContiguousOffsetsError, OffsetOutOfRangeError
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.log_tables.records import fetched_range, has_gaps
from lakelog.producers.producer_state import ProducerStateManager
from lakelog.replication.errors import LeaderNotAvailableError
from lakelog.replication.leader_client import LeaderClient

log = logging.getLogger(__name__)


class _TruncateAgain(Exception):
    """The leader says our fetch offset is out of range: run the truncation step again."""


class ReplicaFetcher:
    """Fetches one partition from its leader and appends to the local log.

    Args:
        log: the local replica's log.
        broker_id: this broker's id (sent as ``replica_id``).
        leader_id: the leader's broker id.
        leader_epoch: the leader epoch this broker learned from ZooKeeper (sent with every request).
        resolve_leader_url: coroutine giving the leader's ``http://host:port`` (None while unknown).
        leader_client: the broker's one inter-broker client.
        fetch_wait_max_ms: long-poll of each fetch (``replica.fetch.wait.max.ms``).
        fetch_max_bytes: soft limit on a fetch's bytes (``replica.fetch.max.bytes``).
        fetch_backoff_ms: pause after a failed request (``replica.fetch.backoff.ms``).
        on_append: called after each append (the broker wakes waiters, compacts).
        producer_state: the replica's producer state: each appended batch is folded in, a truncation
            rebuilds it. Default: None.
    """

    def __init__(self, log: PartitionLog, *, broker_id: int, leader_id: int, leader_epoch: int,
                 resolve_leader_url: Callable[[int], Awaitable[str | None]], leader_client: LeaderClient,
                 fetch_wait_max_ms: int = 500, fetch_max_bytes: int = 16 * 1024 * 1024,
                 fetch_backoff_ms: int = 100, on_append: Callable[[], Awaitable[None]] | None = None,
                 producer_state: ProducerStateManager | None = None) -> None:
        self.log = log
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self._resolve = resolve_leader_url
        self._leader = leader_client
        self.fetch_wait_max_ms = fetch_wait_max_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.backoff_s = fetch_backoff_ms / 1000.0
        self._on_append = on_append
        self.producer_state = producer_state
        self._task: asyncio.Task | None = None

    def start(self) -> "ReplicaFetcher":
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"fetch-{self.log.topic}-{self.log.partition}-from-{self.leader_id}")
        return self

    async def stop(self) -> None:
        """Cancel the fetcher and wait until it stopped (an append in a worker thread finishes first)."""
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):
            pass
        self._task = None

    async def _run(self) -> None:
        need_truncation = True
        while True:
            try:
                url = await self._resolve(self.leader_id)
                if url is None:
                    await asyncio.sleep(self.backoff_s)
                    continue
                # 1. truncate to what the leader confirms for our latest epoch
                if need_truncation:
                    await self._truncate(url)
                    need_truncation = False
                # 2.-3. fetch from our log end offset, append with the leader's offsets
                await self._fetch_once(url)
            except asyncio.CancelledError:
                raise
            except (_TruncateAgain, NonContiguousOffsetsError) as e:
                log.info("%s-%d: truncating again (%s)", self.log.topic, self.log.partition, e,
                         extra={"topic": self.log.topic, "partition": self.log.partition})
                need_truncation = True
                if self.producer_state is not None:  # the log may have cut its tail (an open transaction)
                    await asyncio.to_thread(self.producer_state.truncated, self.log)
                await asyncio.sleep(self.backoff_s)  # no tight loop while the leader's log moves
            except (LeaderNotAvailableError, OSError) as e:
                log.debug("%s-%d: fetch from broker %d failed: %s", self.log.topic, self.log.partition,
                          self.leader_id, e, extra={"topic": self.log.topic, "partition": self.log.partition})
                await asyncio.sleep(self.backoff_s)
            except Exception as e:
                # 4. anything else (the leader's epoch moved on, a commit failed): back off and retry
                log.info("%s-%d: fetch from broker %d failed: %s", self.log.topic, self.log.partition,
                         self.leader_id, e, extra={"topic": self.log.topic, "partition": self.log.partition})
                await asyncio.sleep(self.backoff_s)

    async def _truncate(self, url: str) -> None:
        latest = self.log.latest_epoch
        if latest < 0:
            if self.log.log_end_offset > self.log.log_start_offset:
                # records but no epoch information (a table written before replication): keep them only
                # up to the leader's end offset
                latest = 0
            else:
                return
        leader_epoch_found, leader_end = await self._leader.epoch_end_offset(
            url, self.log.topic, self.log.partition, replica_id=self.broker_id, leader_epoch=self.leader_epoch,
            epoch=latest)
        if leader_epoch_found < 0:
            target = leader_end
        else:
            _, own_end = self.log.end_offset_for_epoch(leader_epoch_found)
            target = min(leader_end, own_end)
        target = max(target, self.log.log_start_offset)
        if target < self.log.log_end_offset:
            log.info("%s-%d: truncating to %d (leader epoch %d ends at %d on broker %d; our LEO %d)",
                     self.log.topic, self.log.partition, target, leader_epoch_found, leader_end,
                     self.leader_id, self.log.log_end_offset,
                     extra={"topic": self.log.topic, "partition": self.log.partition})
            await asyncio.to_thread(self.log.truncate_to, target)
            if self.producer_state is not None:
                await asyncio.to_thread(self.producer_state.truncated, self.log)

    async def _fetch_once(self, url: str) -> None:
        offset = self.log.log_end_offset
        try:
            answer = await self._leader.replica_fetch(
                url, self.log.topic, self.log.partition, replica_id=self.broker_id, leader_epoch=self.leader_epoch,
                offset=offset, max_bytes=self.fetch_max_bytes, max_wait_ms=self.fetch_wait_max_ms,
                log_start_offset=self.log.log_start_offset)
        except OffsetOutOfRangeError as e:
            if await self._behind_log_start(url):
                return
            raise _TruncateAgain(str(e)) from None  # our log is ahead of the leader's
        leader_hw = answer.high_watermark
        records = answer.records
        gaps = records is not None and has_gaps(records["offset"].to_numpy(), fetched_range(records))
        if records is not None and (records.num_rows or gaps):
            if self.log.append_is_quick(records.nbytes) and not gaps:
                self.log.append_replicated(records)  # a small write to the segment tail
            else:  # large, or a range with gaps (a Delta commit)
                await asyncio.to_thread(self.log.append_replicated, records)
            if self.producer_state is not None:
                self.producer_state.update(records, end_offset=self.log.log_end_offset)
        self.log.advance_high_watermark(min(leader_hw, self.log.log_end_offset))
        if answer.log_start_offset > self.log.log_start_offset:
            # the leader's retention moved its log start offset: ours follows (Kafka's follower fetch)
            await asyncio.to_thread(self.log.lifecycle.advance_log_start_offset, answer.log_start_offset,
                                    reason="leader")
        if self._on_append is not None:
            await self._on_append()

    async def _behind_log_start(self, url: str) -> bool:
        """After an out-of-range fetch: when our log ends below the leader's log start offset (retention
        removed what we would fetch next), drop our log and start over there (Kafka's
        ``truncateFullyAndStartAt``). Returns True when it did."""
        leader_start, _, _, _ = await self._leader.partition_offsets(url, self.log.topic, self.log.partition)
        if self.log.log_end_offset >= leader_start:
            return False
        log.info("%s-%d: our log ends at %d, below the leader's log start offset %d: starting over there",
                 self.log.topic, self.log.partition, self.log.log_end_offset, leader_start,
                 extra={"topic": self.log.topic, "partition": self.log.partition})
        await asyncio.to_thread(self.log.lifecycle.reset_to, leader_start)
        if self.producer_state is not None:
            await asyncio.to_thread(self.producer_state.truncated, self.log)
        return True

