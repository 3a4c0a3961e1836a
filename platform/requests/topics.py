"""Topic admin and configs: Kafka's CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs and the topic side of Metadata, one operation each.

The topic's znodes are written by :class:`~lakelog.replication.metadata.ClusterMetadata` (replica
placement as Kafka spreads it, validation of names, counts and configs there); the replica manager opens
and drops the logs (:class:`~lakelog.replication.topic_changes.TopicChanges` applies configs and added
partitions to the open logs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from lakelog.config import BrokerSettings
from lakelog.consumer_groups.coordinator import GroupCoordinator
from lakelog.replication.metadata import ClusterMetadata, TopicMetadata
from lakelog.replication.replica_manager import ReplicaManager
from lakelog.replication.topic_configs import ConfigChange

log = logging.getLogger(__name__)

__all__ = ["CreateTopicRequest", "TopicAdmin"]


@dataclass(frozen=True, kw_only=True)
class CreateTopicRequest:
    """Kafka's CreateTopics for one topic.

    Attributes:
        name: the topic's name.
        partitions_count: None: the broker's ``num.partitions``.
        replication_factor: None: the broker's ``default.replication.factor``.
        configs: topic configs stored on the topic (Kafka's dotted names); those it does not set follow
            the broker's defaults (``message.max.bytes``, ``log.retention.ms``, ``log.retention.bytes``).
    """

    name: str
    partitions_count: int | None = None
    replication_factor: int | None = None
    configs: dict[str, str] = field(default_factory=dict)


class TopicAdmin:
    """The topic operations of one broker.

    Args:
        settings: the broker's settings (``num.partitions``, ``default.replication.factor``).
        metadata: ZooKeeper accessor. replica_manager: the broker's replicas (opens and drops logs).
        coordinator: the group coordinator (a deleted topic's committed offsets go with it).
    """

    def __init__(self, *, settings: BrokerSettings, metadata: ClusterMetadata, replica_manager: ReplicaManager,
                 coordinator: GroupCoordinator) -> None:
        self.settings = settings
        self.metadata = metadata
        self.replica_manager = replica_manager
        self.coordinator = coordinator

    async def list_topics(self) -> dict[str, TopicMetadata]:
        """Every topic's metadata by name, re-read from ZooKeeper (Kafka's Metadata for all topics)."""
        await self.replica_manager.refresh_topics()
        return self.replica_manager.cache.topics()

    async def describe_topic(self, name: str) -> TopicMetadata:
        """A topic's metadata (partitions, replicas, configs), re-read if not cached.

        Raises:
            UnknownTopicError: 404 / 40401.
        """
        return await self.replica_manager.topic_fresh(name)

    async def create_topic(self, request: CreateTopicRequest) -> TopicMetadata:
        """Create a topic in ZooKeeper (replicas spread as Kafka does) and open the logs this broker leads.

        Raises:
            the errors of :meth:`ClusterMetadata.create_topic
            <lakelog.replication.metadata.ClusterMetadata.create_topic>`
            (TopicExistsError, InvalidTopicError, InvalidPartitionsError, InvalidReplicationFactorError
            when the replication factor exceeds the live brokers, ConfigError for a bad config).
        """
        rm, broker_id = self.replica_manager, self.settings.broker_id
        meta = await asyncio.to_thread(
            self.metadata.create_topic, request.name,
            partitions=request.partitions_count or self.settings.num_partitions,
            replication_factor=request.replication_factor or self.settings.default_replication_factor,
            configs=request.configs or None)
        await rm.refresh_topics()
        for p, replicas in meta.replicas.items():
            if replicas[0] == broker_id:
                await rm.leader_partition(request.name, p)
        return meta

    async def delete_topic(self, name: str) -> None:
        """Delete a topic and drop its local logs, then every group's committed offsets of it (Kafka's
        cleanup of a deleted topic's offsets; a failure there is logged, the topic is gone either way).

        Raises:
            UnknownTopicError.
        """
        await asyncio.to_thread(self.metadata.delete_topic, name)
        await self.replica_manager.refresh_topics()
        try:
            removed = await self.coordinator.delete_topic_offsets(name)
        except Exception as e:  # noqa: BLE001 - ZooKeeper or a coordinator unavailable: the offsets stay
            log.warning("topic %s deleted, but not the groups' committed offsets of it: %s", name, e)
        else:
            if removed:
                log.info("deleted the committed offsets of %d partitions of the deleted topic %s", removed, name)

    async def alter_topic_configs(self, name: str, changes: Iterable[ConfigChange], *,
                                  validate_only: bool = False) -> TopicMetadata:
        """Set and delete topic configs, all or nothing (``(name, "SET", value)``, ``(name, "DELETE", None)``);
        running brokers apply them to the open logs. See :meth:`TopicChanges.alter_configs
        <lakelog.replication.topic_changes.TopicChanges.alter_configs>` for the errors."""
        return await self.replica_manager.topic_changes.alter_configs(name, changes, validate_only=validate_only)

    async def create_partitions(self, name: str, *, partitions_count: int,
                                validate_only: bool = False) -> TopicMetadata:
        """Grow a topic to ``partitions_count`` partitions (Kafka's CreatePartitions); see
        :meth:`TopicChanges.add_partitions <lakelog.replication.topic_changes.TopicChanges.add_partitions>`
        (InvalidPartitionsError for a count not above the current one)."""
        return await self.replica_manager.topic_changes.add_partitions(name, partitions_count=partitions_count,
                                                                       validate_only=validate_only)
