"""The lifecycle of this broker's partition replicas: open, take up a role, drop.

Kafka's ``ReplicaManager.becomeLeaderOrFollower`` with ``makeLeaders`` / ``makeFollowers`` and
``Partition.makeLeader`` / ``makeFollower``: a partition state znode naming this broker as leader makes the
local replica leader (:meth:`PartitionLifecycle.apply_state`), any other makes it a follower whose
:class:`~lakelog.replication.follower.ReplicaFetcher` pulls from the leader. The replica is opened (its log,
group committer, flusher and producer state) on its first state and dropped with its data when its topic is
deleted or re-created. The replica manager (:mod:`lakelog.replication.replica_manager`) owns one and serves
produce and fetch on the replicas it holds.

Steps of :meth:`PartitionLifecycle.apply_state`, mirrored by ``# N.`` comments:

1. the topic as the cache knows it, re-read once when the state is of a topic it does not know yet;
2. the local replica, opened on first use (one log open at a time);
3. under the replica's lock, an older state (znode version, leader epoch) is ignored;
4. leader: stop fetching and fence older epochs; follower: stop appending and fetch from the new leader;
5. waiters and role listeners (the coordinators) are told.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable

from lakelog.config import BrokerSettings
from lakelog.log_tables.flusher import LakeFlusher
from lakelog.log_tables.group_commit import GroupCommitter
from lakelog.log_tables.log_manager import LogManager
from lakelog.log_tables.log_metrics import LogMetrics
from lakelog.log_tables.partition_log import AppendInfo, PartitionLog
from lakelog.producers.idempotence import ProducerStates
from lakelog.replication.broker_topic_stats import BrokerTopicStats
from lakelog.replication.errors import UnknownTopicError
from lakelog.replication.follower import ReplicaFetcher
from lakelog.replication.leader_client import LeaderClient
from lakelog.replication.metadata import PartitionState, TopicMetadata
from lakelog.replication.metadata_cache import MetadataCache
from lakelog.replication.partition import Partition, ReplicaRole, now_ms

__all__ = ["PartitionKey", "PartitionLifecycle"]

log = logging.getLogger(__name__)

PartitionKey = tuple[str, int]


class PartitionLifecycle:
    """The partition replicas open on one broker, and their roles.

    Args:
        settings: ``broker.id``, ``linger.ms``, ``batch.size``, replica fetch settings,
            ``log.retention.check.interval.ms``.
        cache: the metadata cache; log_manager: opens and drops logs; leader_client: the one inter-broker
            client (followers' fetches); producer_states: every replica's producer state.
        catch_up_config: ``await catch_up_config(log, meta)`` applies a topic config altered while the log
            opened; on_leader_append: ``on_leader_append(part, info)`` after each group commit on a leader.
        log_metrics, topic_stats: the logs' histograms and per-topic counters (None: metrics off).
    """

    def __init__(self, settings: BrokerSettings, *, cache: MetadataCache, log_manager: LogManager,
                 leader_client: LeaderClient, producer_states: ProducerStates,
                 catch_up_config: Callable[[PartitionLog, TopicMetadata], Awaitable[None]],
                 on_leader_append: Callable[[Partition, AppendInfo], None],
                 log_metrics: LogMetrics | None, topic_stats: BrokerTopicStats | None) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.cache = cache
        self.log_manager = log_manager
        self.leader_client = leader_client
        self.producer_states = producer_states
        self._catch_up_config = catch_up_config
        self._on_leader_append = on_leader_append
        self.log_metrics = log_metrics
        self.topic_stats = topic_stats
        self._partitions: dict[PartitionKey, Partition] = {}
        # one open (or drop) of a partition's log at a time; one log opening at a time (its Delta I/O must
        # not fill the shared worker threads)
        self._open_locks: defaultdict[PartitionKey, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._opening = asyncio.Lock()
        self.stopping = False
        #: the ZooKeeper session expired: no role is taken up until a new session registered the broker
        self.session_lost = False
        #: called (in the event loop) with a replica after it took up a role or was dropped (the group
        #: coordinator loads the ``__consumer_offsets`` partitions this broker comes to lead)
        self.role_listeners: list[Callable[[Partition], None]] = []

    # -- the replicas ---------------------------------------------------------------------------

    def partitions(self) -> list[Partition]:
        """The partition replicas open on this broker."""
        return list(self._partitions.values())

    def get(self, topic: str, partition: int) -> Partition | None:
        """The local replica of a partition, if open."""
        return self._partitions.get((topic, partition))

    def keys_not_in(self, topics: dict[str, TopicMetadata]) -> list[PartitionKey]:
        """The replicas whose topic ``topics`` no longer has (deleted, or re-created with a new topic id)."""
        return [key for key, part in self._partitions.items()
                if (meta := topics.get(part.topic)) is None or meta.topic_id != part.topic_id]

    async def open_partition(self, meta: TopicMetadata, partition: int) -> Partition:
        """The local replica, opening (or creating) its log and committer on first use.

        Raises:
            UnknownTopicError: the topic was deleted (or re-created) while the log opened.
        """
        key = (meta.name, partition)
        part = self._partitions.get(key)
        if part is not None:
            return part
        async with self._open_locks[key]:
            part = self._partitions.get(key)
            if part is not None:
                return part
            replicas = list(meta.replicas[partition])
            async with self._opening:
                self._check_current(meta)  # deleted while this open queued: nothing to open
                plog = await asyncio.to_thread(self.log_manager.open_log, topic=meta.name, partition=partition,
                                               topic_id=meta.topic_id, config=meta.config,
                                               replicated=len(replicas) > 1)
            await self._catch_up_config(plog, meta)  # a config altered while it opened
            producer_state = await asyncio.to_thread(self.producer_states.open, plog)
            try:
                self._check_current(meta)
            except UnknownTopicError:  # deleted while it opened: no partition of it
                await self.log_manager.drop_log(plog, delete_data=True)
                raise
            # from here on no await: the topic list's reconciliation sees the partition or saw the topic gone
            part = self._partitions[key] = self._new_partition(meta, partition, plog, replicas=replicas,
                                                               producer_state=producer_state)
            return part

    def _new_partition(self, meta: TopicMetadata, partition: int, plog: PartitionLog, *, replicas: list[int],
                       producer_state) -> Partition:
        """A replica of ``meta``'s ``partition`` around its open log: committer, flusher, producer state."""
        settings, segment_files_max = self.settings, self.log_manager.segment_files_max
        part = Partition(meta.name, partition, meta.topic_id, self.broker_id, plog, replicas=replicas,
                         producer_state=producer_state)
        part.committer = GroupCommitter(plog, linger_ms=settings.linger_ms, batch_size=settings.batch_size,
                                        on_append=lambda info: self._on_leader_append(part, info),
                                        leader_epoch=part.append_epoch, segment_files_max=segment_files_max,
                                        metrics=self.log_metrics)
        part.flusher = LakeFlusher(plog, segment_files_max=segment_files_max,
                                   maintenance_interval_ms=settings.log_retention_check_interval_ms,
                                   metrics=self.log_metrics)
        return part

    def _check_current(self, meta: TopicMetadata) -> None:
        """Raise :class:`UnknownTopicError` when the cache no longer has the topic ``meta`` describes."""
        current = self.cache.cached_topic(meta.name)
        if current is None or current.topic_id != meta.topic_id:
            raise UnknownTopicError(meta.name)

    async def drop_deleted(self, key: PartitionKey) -> None:
        """Drop the replica of a deleted (or re-created) topic and its data, under its open lock."""
        async with self._open_locks[key]:
            part = self._partitions.pop(key, None)
            if part is None:
                return
            part.role = ReplicaRole.NONE
            if part.fetcher is not None:
                await part.fetcher.stop()
            await part.committer.close()
            await part.flusher.close(flush=False)
            await self.log_manager.drop_log(part.log, delete_data=True)
            if self.topic_stats is not None:  # Kafka removes a deleted topic's metrics
                self.topic_stats.drop(part.topic)
            part.notify_all()
        self.notify_role(part)

    async def close(self) -> None:
        """Stop fetchers, append queued requests, flush the segment tails to Delta, close every log."""
        self.stopping = True
        parts = list(self._partitions.values())
        for part in parts:
            if part.fetcher is not None:
                await part.fetcher.stop()
            if part.committer is not None:
                await part.committer.close()
        await self.producer_states.close(part.producer_state for part in parts)
        await asyncio.gather(*(part.flusher.close() for part in parts if part.flusher is not None))
        for part in parts:
            part.log.close()
        self._partitions.clear()

    # -- roles ----------------------------------------------------------------------------------

    async def apply_state(self, topic: str, partition: int, topic_id: str, state: PartitionState) -> None:
        """Take up the role a partition state gives this broker (leader, follower), in state order."""
        if self.stopping:
            return
        # 1. the topic as the cache knows it
        meta = self.cache.cached_topic(topic)
        if meta is None or meta.topic_id != topic_id or partition not in meta.replicas:
            # new, re-created, deleted or grown since the cache read it: one ZooKeeper read of this topic
            # (the topic list's watch reconciles the rest), never a reload of every topic per partition
            try:
                meta = await self.cache.reload_topic(topic)
            except UnknownTopicError:
                return
        if meta.topic_id != topic_id or self.broker_id not in meta.replicas.get(partition, []):
            return
        # 2. the local replica
        try:
            part = await self.open_partition(meta, partition)
        except UnknownTopicError:
            return  # deleted while its log opened
        async with part.lock:
            # 3. an older state is ignored
            if self.stopping or self.session_lost:
                return
            if self._partitions.get((topic, partition)) is not part:
                return  # dropped (and closed) while we waited for the lock
            if part.state is not None and state.version >= 0 and state.version < part.state.version:
                return  # an older event overtaken by a newer one
            if state.leader_epoch < part.leader_epoch:
                return
            part.state = state
            # 4. leader or follower
            if state.leader == self.broker_id:
                if not part.is_leader or part.leader_epoch != state.leader_epoch:
                    await self._become_leader(part, state)
                else:
                    part.maybe_advance_high_watermark()  # the ISR may have shrunk
            elif part.role is not ReplicaRole.FOLLOWER or part.leader_epoch != state.leader_epoch or (
                    part.fetcher is not None and part.fetcher.leader_id != state.leader) or (
                    part.fetcher is None and state.leader >= 0):
                await self._become_follower(part, state)
            # 5. waiters and role listeners
            part.notify_all()
        self.notify_role(part)

    def notify_role(self, part: Partition) -> None:
        """Call every role listener with ``part`` (a listener's failure is logged, not raised)."""
        for listener in list(self.role_listeners):
            try:
                listener(part)
            except Exception:
                log.exception("a role listener failed for %s", part.name,
                              extra={"topic": part.topic, "partition": part.partition})

    async def _become_leader(self, part: Partition, state: PartitionState) -> None:
        """Kafka's makeLeader: stop fetching, fence older epochs, start tracking the followers."""
        if part.fetcher is not None:
            await part.fetcher.stop()
            part.fetcher = None
        part.make_leader(state, at_ms=now_ms())
        # a shared lake: from now on this replica commits the partition's table, fenced by its leader epoch
        part.log.set_lake_leader(True, leader_epoch=state.leader_epoch)
        log.info("broker %d leads %s at leader epoch %d (LEO %d, HW %d, ISR %s)", self.broker_id, part.name,
                 state.leader_epoch, part.log.log_end_offset, part.log.high_watermark, state.isr,
                 extra={"topic": part.topic, "partition": part.partition})

    async def _become_follower(self, part: Partition, state: PartitionState) -> None:
        """Kafka's makeFollower: no more appends here, fence older epochs, fetch from the new leader
        (the fetcher first truncates to what the leader confirms, KIP-101)."""
        part.log.set_lake_leader(False)  # a shared lake: the new leader commits the table, not this replica
        part.make_follower(state)
        if part.fetcher is not None:
            await part.fetcher.stop()
            part.fetcher = None
        if state.leader < 0:
            log.info("%s is offline (no leader); broker %d waits", part.name, self.broker_id,
                     extra={"topic": part.topic, "partition": part.partition})
            return
        part.fetcher = ReplicaFetcher(
            part.log, broker_id=self.broker_id, leader_id=state.leader, leader_epoch=state.leader_epoch,
            resolve_leader_url=self.cache.broker_url, leader_client=self.leader_client,
            fetch_wait_max_ms=self.settings.replica_fetch_wait_max_ms,
            fetch_max_bytes=self.settings.replica_fetch_max_bytes,
            fetch_backoff_ms=self.settings.replica_fetch_backoff_ms,
            producer_state=part.producer_state, on_append=lambda: self._after_follower_append(part)).start()
        log.info("broker %d follows broker %d for %s at leader epoch %d", self.broker_id, state.leader,
                 part.name, state.leader_epoch, extra={"topic": part.topic, "partition": part.partition})

    async def _after_follower_append(self, part: Partition) -> None:
        part.notify_high_watermark()
        await self.log_manager.merge_files_after_append(part.log)
