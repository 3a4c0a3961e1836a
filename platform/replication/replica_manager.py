"""The replica manager: the partitions this broker replicates, their roles, produce, replica fetch.

Kafka's ``ReplicaManager`` (with the role logic of ``Partition`` in :mod:`lakelog.replication.partition`):

- every partition state znode of a partition this broker replicates is watched
  (:mod:`~lakelog.replication.topic_changes` sets the watches, also those of topic configs and partitions
  added on a running cluster, and applies topic changes to the open logs); a state naming this
  broker as leader makes it leader, any other makes it follower (a
  :class:`~lakelog.replication.follower.ReplicaFetcher` pulls from the leader): the replicas' lifecycle,
  open, role changes and drop, is :class:`~lakelog.replication.partition_lifecycle.PartitionLifecycle`;
- the leader learns each follower's LEO from its fetch offset, moves the high watermark, and writes ISR
  shrinks (``replica.lag.time.max.ms``) and expansions to ZooKeeper with znode-version checks;
- produce honours ``acks`` and ``min.insync.replicas``; appends are stamped with the leader epoch and a
  deposed leader's appends are refused;
- :meth:`ReplicaManager.produce` appends and :meth:`ReplicaManager.fetch` reads, both on the leader's
  replica only and for requests already validated (the request layer, :mod:`lakelog.requests`, checks
  them, as Kafka's ``KafkaApis`` does before calling its ``ReplicaManager``);
- a partition led elsewhere answers :class:`NotLeaderError` naming the leader's URL (callers ask that
  leader: :mod:`~lakelog.replication.partition_views`, :mod:`lakelog.requests.produce`).

The leader's side of a follower's fetch is :mod:`~lakelog.replication.replica_fetch`, the read of a
consumer's fetch :mod:`~lakelog.replication.consumer_fetch`; ISR writes are :mod:`~lakelog.replication.isr`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
import logging

import pyarrow as pa
from kazoo.client import KazooClient

from lakelog.config import BrokerSettings
from lakelog.log_tables.partition_log import AppendInfo
from lakelog.log_tables.log_manager import LogManager
from lakelog.log_tables.log_metrics import LogMetrics
from lakelog.log_tables.log_writer import check_holds_transactions
from lakelog.log_tables.transaction_index import IsolationLevel
from lakelog.producers.idempotence import ProducerStates
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.acks import Acks
from lakelog.replication.broker_topic_stats import BrokerTopicStats, counted_requests
from lakelog.replication.consumer_fetch import read_records
from lakelog.replication.errors import LeaderNotAvailableError, NotLeaderError
from lakelog.replication.isr import IsrManager
from lakelog.replication.leader_client import LeaderClient
from lakelog.replication.metadata import ClusterMetadata, PartitionState, TopicMetadata
from lakelog.replication.metadata_cache import MetadataCache
from lakelog.replication.partition import Partition
from lakelog.replication.partition_lifecycle import PartitionKey, PartitionLifecycle
from lakelog.replication.topic_changes import TopicChanges

log = logging.getLogger(__name__)

__all__ = ["PartitionKey", "ReplicaManager"]


class ReplicaManager:
    """The partition replicas of one broker.

    Args:
        settings: ``broker.id``, ``linger.ms``, ``request.timeout.ms``, replica fetch, ``replica.lag.time.max.ms``.
        zk: the broker's started kazoo client (partition state watches).
        metadata: ZooKeeper accessor; cache: the metadata cache; log_manager: opens and drops logs;
        leader_client: the one inter-broker client.

    Use inside the serving event loop: :meth:`start`, then :meth:`stop`.
    """

    def __init__(self, settings: BrokerSettings, *, zk: KazooClient, metadata: ClusterMetadata,
                 cache: MetadataCache, log_manager: LogManager, leader_client: LeaderClient) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.zk = zk
        self.metadata = metadata
        self.cache = cache
        self.log_manager = log_manager
        self.leader_client = leader_client
        self.isr = IsrManager(settings, metadata=metadata, cache=cache)
        #: per-topic traffic and request counters and the logs' histograms (None: ``metrics.enabled`` false)
        self.topic_stats = BrokerTopicStats() if settings.metrics_enabled else None
        self.log_metrics = LogMetrics() if settings.metrics_enabled else None
        #: every replica's producer state (idempotent produce); the broker sets ``is_allocated``
        self.producer_states = ProducerStates(
            producer_id_expiration_ms=settings.producer_id_expiration_ms,
            expiration_check_interval_ms=settings.producer_id_expiration_check_interval_ms,
            snapshot_interval_ms=settings.producer_snapshot_interval_ms)
        #: called ``(partition, producer_id, "commit" | "abort")`` after a transaction marker was written here
        self.marker_listeners: list[Callable[[Partition, int, str], None]] = []
        #: the topic and partition state watches, and topic changes (configs, partitions added)
        self.topic_changes = TopicChanges(self)
        #: the replicas open here: open, take up a role, drop
        self.lifecycle = PartitionLifecycle(
            settings, cache=cache, log_manager=log_manager, leader_client=leader_client,
            producer_states=self.producer_states, catch_up_config=self.topic_changes.catch_up_config,
            on_leader_append=self._after_leader_append, log_metrics=self.log_metrics, topic_stats=self.topic_stats)
        self._refresh_lock = asyncio.Lock()  # one reconciliation of the topic list at a time

    @property
    def role_listeners(self) -> list[Callable[[Partition], None]]:
        """Called (in the event loop) with a replica after it took up a role or was dropped
        (:attr:`PartitionLifecycle.role_listeners`)."""
        return self.lifecycle.role_listeners

    @property
    def session_lost(self) -> bool:
        """True from a ZooKeeper session's expiry until a new session registered the broker."""
        return self.lifecycle.session_lost

    @session_lost.setter
    def session_lost(self, value: bool) -> None:
        self.lifecycle.session_lost = value

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Watch the topics (the first call takes up every partition's role); start the ISR expiry loop."""
        await self.topic_changes.start()
        self.isr.start(self.partitions)
        self.producer_states.start(lambda: (p.producer_state for p in self.partitions()))

    async def stop(self) -> None:
        """Stop fetchers, append queued requests, flush the segment tails to Delta, close every log."""
        self.lifecycle.stopping = True
        self.topic_changes.stop()
        self.isr.stop()
        await self.lifecycle.close()

    def partitions(self) -> list[Partition]:
        """The partition replicas open on this broker."""
        return self.lifecycle.partitions()

    async def refresh_topics(self) -> None:
        """Reload topic metadata; drop the logs of deleted (or re-created) topics; watch every topic's
        znode and the state of every partition this broker replicates (:meth:`TopicChanges.watch`)."""
        async with self._refresh_lock:
            topics = await self.cache.reload_topics()
            gone = self.lifecycle.keys_not_in(topics)
            # all at once: a topic of thousands of partitions is dropped in seconds, not one log at a time
            await asyncio.gather(*(self.lifecycle.drop_deleted(key) for key in gone))
        await self.topic_changes.watch(topics)

    async def topic_fresh(self, name: str) -> TopicMetadata:
        """Metadata of ``name``, re-read (and reconciled) if the cache does not have it yet.

        Raises :class:`UnknownTopicError`."""
        if self.cache.cached_topic(name) is None:
            await self.refresh_topics()
        return self.cache.topic(name)

    # -- ZooKeeper session ----------------------------------------------------------------------

    async def fence_all(self) -> None:
        """The session ended: another broker may lead our partitions now; accept no appends."""
        self.session_lost = True
        for part in self.partitions():
            await part.fence()
            self.lifecycle.notify_role(part)

    # -- local partitions -----------------------------------------------------------------------

    def local_partition(self, topic: str, partition: int) -> Partition | None:
        """The local replica of a partition, if this broker holds it open."""
        return self.lifecycle.get(topic, partition)

    async def leader_partition(self, topic: str, partition: int) -> Partition:
        """The local partition if this broker leads it.

        Raises:
            UnknownTopicError, UnknownPartitionError, NotLeaderError (naming the leader),
            LeaderNotAvailableError.
        """
        part = self.lifecycle.get(topic, partition)
        if part is not None and part.is_leader:
            return part
        if part is not None and part.state is not None and part.state.leader != self.broker_id and not self.session_lost:
            # a replica here: its watched state names the leader, no ZooKeeper read needed
            raise await _not_leader(self, topic, partition, part.state)
        meta = await self.topic_fresh(topic)
        if partition not in meta.replicas:  # partitions added that the topic's watch has not delivered yet
            meta = await self.cache.reload_topic(topic)
        self.cache.check_partition(meta, partition)
        state = await self.cache.partition_state(topic, partition)
        if state.leader == self.broker_id and self.broker_id in meta.replicas[partition] and not self.session_lost:
            # the watch has not delivered this state yet: apply it now
            await self.apply_state(topic, partition, meta.topic_id, state)
            part = self.lifecycle.get(topic, partition)
            if part is not None and part.is_leader:
                return part
        raise await _not_leader(self, topic, partition, state)

    # -- roles ----------------------------------------------------------------------------------

    async def apply_state(self, topic: str, partition: int, topic_id: str, state: PartitionState) -> None:
        """Take up the role a partition state gives this broker (leader, follower), in state order
        (:meth:`PartitionLifecycle.apply_state`)."""
        await self.lifecycle.apply_state(topic, partition, topic_id, state)

    def _after_leader_append(self, part: Partition, info: AppendInfo) -> None:
        """A group commit landed on the leader: its producers into the state, wake the followers'
        fetches, maybe move the HW."""
        part.producer_state.appended(info.producer_appends, end_offset=info.last_offset + 1)
        if self.topic_stats is not None:
            self.topic_stats.appended(part.topic, records=info.count, nbytes=info.nbytes)
        part.notify_log_end_offset()
        part.maybe_advance_high_watermark()

    def leads_with_followers(self) -> bool:
        """True while this broker leads a partition with other ISR members (controlled shutdown waits)."""
        return any(p.is_leader and p.state is not None and len(p.state.isr) > 1 for p in self.partitions())

    # -- produce --------------------------------------------------------------------------------

    @counted_requests("produce")
    async def produce(self, topic: str, partition: int, records: pa.Table, *, acks: Acks = "all",
                      producer: ProducerBatch | None = None) -> int:
        """Append a validated produce batch to a partition this broker leads; return its first offset.

        ``acks`` (:mod:`lakelog.replication.acks`): ``"0"`` queues the batch and answers -1 at once; ``"1"``
        once the leader committed it; ``"all"`` is refused below ``min.insync.replicas`` and answered once
        the HW passed the batch, within ``request.timeout.ms``. With ``producer`` (not with acks 0) the batch
        is appended once (:mod:`lakelog.producers.idempotence`): a retry answers the original's base offset.

        Raises:
            NotLeaderError, LeaderNotAvailableError, NotEnoughReplicasError (nothing written),
            NotEnoughReplicasAfterAppendError, RequestTimedOutError, CommitFailedError, FencedLeaderEpochError;
            InvalidProducerEpochError, OutOfOrderSequenceError, UnknownProducerIdError, TransactionsNeedTailError.
        """
        part = await self.leader_partition(topic, partition)
        part.check_min_insync_replicas(acks)
        assert part.committer is not None
        if producer is not None and producer.transactional_id is not None:  # before it joins the transaction
            check_holds_transactions(part.name, tiered=part.log.tiered)
        if acks == "0":
            task = asyncio.get_running_loop().create_task(part.committer.append(records))
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            return -1
        epoch, committer = part.leader_epoch, part.committer
        if producer is None:
            base, count = await committer.append(records), records.num_rows
        else:
            base, count = await self.producer_states.append(
                part.producer_state, producer, records.num_rows,
                append=lambda check: committer.append(records, producer=producer, check=check))
        if acks == "all":
            await part.wait_for_commit(epoch, base + count, request_timeout_ms=self.settings.request_timeout_ms)
        return base

    @counted_requests("fetch")
    async def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int, max_wait_ms: int,
                    columns: list[str] | None = None,
                    isolation_level: IsolationLevel = "read_uncommitted",
                    control_records: bool = False) -> tuple[pa.Table, Partition]:
        """Read from ``offset`` of a partition this broker leads, long-polling up to ``max_wait_ms``
        (:func:`~lakelog.replication.consumer_fetch.read_records`; ``control_records``: with the transaction
        markers, for Kafka's wire); return ``(rows, partition)``. Raises
        NotLeaderError, LeaderNotAvailableError, UnknownTopicError, UnknownPartitionError, OffsetOutOfRangeError.
        """
        part = await self.leader_partition(topic, partition)
        return await read_records(part, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms, columns=columns,
                                  isolation_level=isolation_level, control_records=control_records), part


async def _not_leader(manager: ReplicaManager, topic: str, partition: int, state: PartitionState) -> Exception:
    """The error for a produce or fetch of a partition ``manager``'s broker does not lead (by ``state``)."""
    broker_id = manager.broker_id
    if state.leader == broker_id:
        return LeaderNotAvailableError(f"Broker {broker_id} is becoming the leader of {topic}-{partition}; retry.")
    url = await manager.cache.broker_url(state.leader) if state.leader >= 0 else None
    if url is None:
        return LeaderNotAvailableError(
            f"Partition {topic}-{partition} has no live leader (leader {state.leader}, ISR {state.isr}).")
    return NotLeaderError(f"Broker {broker_id} is not the leader of {topic}-{partition}; "
                          f"the leader is broker {state.leader} at {url}.", leader_id=state.leader, leader_url=url)
