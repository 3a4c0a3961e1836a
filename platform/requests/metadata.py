"""Metadata: what any broker answers about the cluster, its brokers, a topic's partitions and their
replicas, offsets and tables (Kafka's Metadata and DescribeCluster, REST Proxy's cluster, broker,
partition and replica resources).

Leader, epoch and ISR are read from ZooKeeper (:mod:`lakelog.replication.cluster_views`); offsets and a
partition's table from its leader (:mod:`lakelog.replication.partition_views`: read locally when this
broker leads, else asked of the leader). Each view of a topic checks Describe on it first
(AuthorizationError: 403 / 40301), then looks the topic up (UnknownTopicError: 40401;
UnknownPartitionError: 40402); the cluster and its brokers need no ACL (Kafka's Metadata and
DescribeCluster answer them to every principal).
"""

from __future__ import annotations

import asyncio

from lakelog.protocol.log_info import PartitionLogInfo
from lakelog.replication.cluster_views import (
    PartitionReplicas,
    controller_id,
    live_broker,
    partition_replicas,
    topic_partition_replicas,
)
from lakelog.replication.metadata import BrokerInfo, ClusterMetadata
from lakelog.replication.partition_views import (
    PartitionSummary,
    local_offset_for_timestamp,
    partition_log_info,
    partition_summary,
)
from lakelog.replication.replica_manager import ReplicaManager
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.security.acls import Operation, ResourceType
from lakelog.security.authorizer import Authorizer

__all__ = ["MetadataViews"]


class MetadataViews:
    """The cluster as any broker describes it.

    Args:
        metadata: ZooKeeper accessor (the controller znode). replica_manager: topics, live brokers
            (its metadata cache) and the partitions this broker leads.
        authorizer: the broker's ACLs (``authorizer.enabled``).
    """

    def __init__(self, *, metadata: ClusterMetadata, replica_manager: ReplicaManager, authorizer: Authorizer) -> None:
        self.metadata = metadata
        self.replica_manager = replica_manager
        self.cache = replica_manager.cache
        self.authorizer = authorizer

    def _require_describe(self, topic: str, context: RequestContext) -> None:
        RequestPermissions.of(self.authorizer, context).require(Operation.DESCRIBE, ResourceType.TOPIC, topic)

    async def controller_id(self) -> int | None:
        """The active controller's broker id, or None during an election."""
        return await controller_id(self.metadata)

    async def brokers(self) -> dict[int, BrokerInfo]:
        """The live brokers' registrations (host, port, rack) by id."""
        return await self.cache.brokers()

    async def broker(self, broker_id: int) -> BrokerInfo:
        """One live broker's registration. Raises UnknownBrokerError (404 / 40410)."""
        return await live_broker(self.cache, broker_id)

    async def partition_replicas(self, topic: str, partition: int | None = None, *,
                                 context: RequestContext) -> list[PartitionReplicas]:
        """Leader, replicas and ISR of a topic's partitions (``partition``: only that one), from ZooKeeper.

        Raises:
            AuthorizationError, UnknownTopicError, UnknownPartitionError.
        """
        self._require_describe(topic, context)
        meta = await self.replica_manager.topic_fresh(topic)
        if partition is not None:
            return [await partition_replicas(self.cache, meta, partition)]
        return await topic_partition_replicas(self.cache, meta)

    async def partition_summaries(self, topic: str, partition: int | None = None, *,
                                  context: RequestContext) -> list[PartitionSummary]:
        """Leader, epoch, replicas (in sync or not) and the leader's offsets of a topic's partitions
        (``partition``: only that one), in partition order.

        Raises:
            AuthorizationError, UnknownTopicError, UnknownPartitionError (offsets a leader cannot give now
            are None).
        """
        self._require_describe(topic, context)
        meta = await self.replica_manager.topic_fresh(topic)
        if partition is not None:
            self.cache.check_partition(meta, partition)
        wanted = [partition] if partition is not None else sorted(meta.replicas)
        return list(await asyncio.gather(*(partition_summary(self.replica_manager, topic, p, meta.replicas[p])
                                           for p in wanted)))

    async def partition_logs(self, topic: str, partition: int | None = None, *, context: RequestContext,
                             details: bool = False) -> list[PartitionLogInfo]:
        """Each partition's table on its leader (``partition``: only that one) with its offsets; with
        ``details`` also the table's version, data files and bytes on disk (a directory walk on the leader).

        Raises:
            AuthorizationError, UnknownTopicError, UnknownPartitionError, LeaderNotAvailableError.
        """
        self._require_describe(topic, context)
        meta = await self.replica_manager.topic_fresh(topic)
        if partition is not None:
            self.cache.check_partition(meta, partition)
        wanted = [partition] if partition is not None else sorted(meta.replicas)
        return list(await asyncio.gather(*(partition_log_info(self.replica_manager, topic, p, details=details)
                                           for p in wanted)))

    async def leader_offset_for_timestamp(self, topic: str, partition: int, *, timestamp_ms: int,
                                          context: RequestContext) -> int:
        """The first offset at or after ``timestamp_ms`` (ms since the epoch), looked up only if this broker
        leads the partition (what another broker forwards, so it is never forwarded again).

        Raises:
            AuthorizationError, NotLeaderError (naming the leader), LeaderNotAvailableError, UnknownTopicError,
            UnknownPartitionError.
        """
        self._require_describe(topic, context)
        return await local_offset_for_timestamp(self.replica_manager, topic, partition, timestamp_ms=timestamp_ms)
