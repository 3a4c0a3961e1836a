"""What any broker answers about the cluster from ZooKeeper: the controller, the live brokers, and each
partition's replicas with the leader and ISR.

Kafka's ``DescribeCluster`` and the replica part of ``Metadata``, as Confluent REST Proxy v3 serves them
(``ClusterManagerImpl``, ``BrokerManagerImpl``, ``PartitionManagerImpl``, ``ReplicaManagerImpl`` in
``io.confluent.kafkarest.controllers``). Everything is read from ZooKeeper (the controller znode, the
broker registrations under ``/lakelog/brokers/ids``, each partition's state znode), never from a
partition's leader, so these answers cost no broker-to-broker call. Offsets are the business of
:mod:`~lakelog.replication.partition_views`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from kazoo.exceptions import NoNodeError

from lakelog.replication.errors import UnknownBrokerError, UnknownReplicaError
from lakelog.replication.metadata import CONTROLLER_PATH, BrokerInfo, ClusterMetadata, PartitionState, TopicMetadata
from lakelog.replication.metadata_cache import MetadataCache
from lakelog.replication.partition_views import ReplicaSummary
from lakelog.replication.zookeeper_errors import zookeeper_calls


async def controller_id(metadata: ClusterMetadata) -> int | None:
    """The id of the active controller (the ephemeral ``/lakelog/controller`` znode), or None while no
    broker holds it (an election under way)."""
    try:
        with zookeeper_calls(metadata.zk):
            data, _ = await asyncio.to_thread(metadata.zk.get, CONTROLLER_PATH)
    except NoNodeError:
        return None
    return int(json.loads(data)["broker_id"])


async def live_broker(cache: MetadataCache, broker_id: int) -> BrokerInfo:
    """The registration (host, port, rack) of the live broker ``broker_id``, read from ZooKeeper.

    Raises:
        UnknownBrokerError: no live broker has that id (404 / 40410).
    """
    info = (await cache.brokers()).get(broker_id)
    if info is None:
        raise UnknownBrokerError(broker_id)
    return info


@dataclass(frozen=True)
class PartitionReplicas:
    """One partition's replicas as its state znode describes them.

    ``leader`` is None while the partition has no leader; ``replicas`` follow the assignment order
    (the preferred leader first), each with whether it leads and whether it is in the ISR."""

    topic: str
    partition: int
    leader: int | None
    leader_epoch: int
    replicas: list[ReplicaSummary]

    def replica(self, broker_id: int) -> ReplicaSummary:
        """The replica on ``broker_id``.

        Raises:
            UnknownReplicaError: the broker holds no replica of this partition (404 / 40411).
        """
        for r in self.replicas:
            if r.broker == broker_id:
                return r
        raise UnknownReplicaError(self.topic, self.partition, broker_id, [r.broker for r in self.replicas])


def _partition_replicas(meta: TopicMetadata, partition: int, state: PartitionState) -> PartitionReplicas:
    leader = state.leader if state.leader >= 0 else None
    return PartitionReplicas(
        topic=meta.name, partition=partition, leader=leader, leader_epoch=state.leader_epoch,
        replicas=[ReplicaSummary(b, b == leader, b in state.isr) for b in meta.replicas[partition]])


async def partition_replicas(cache: MetadataCache, meta: TopicMetadata, partition: int) -> PartitionReplicas:
    """Leader, leader epoch and replicas (with ISR membership) of one partition of ``meta``, from its
    state znode.

    Raises:
        UnknownPartitionError: ``partition`` is not one of the topic's (404 / 40402).
        UnknownTopicError: the topic was deleted meanwhile (404 / 40401).
    """
    cache.check_partition(meta, partition)
    return _partition_replicas(meta, partition, await cache.partition_state(meta.name, partition))


async def topic_partition_replicas(cache: MetadataCache, meta: TopicMetadata) -> list[PartitionReplicas]:
    """:func:`partition_replicas` of every partition of ``meta``, by partition number, from the watched
    partition states (:meth:`MetadataCache.watched_partition_states`: read once, pipelined, then kept by
    ZooKeeper watches), as Kafka answers metadata from its cache.

    Raises:
        UnknownTopicError: the topic was deleted meanwhile (404 / 40401).
    """
    partitions = sorted(meta.replicas)
    states = await cache.watched_partition_states(meta.name, partitions)
    return [_partition_replicas(meta, p, states[p]) for p in partitions]
