"""Topic admin and configs: Kafka's CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs and the topic side of Metadata, one operation each.

The topic's znodes are written by :class:`~lakelog.replication.metadata.ClusterMetadata` (replica
placement as Kafka spreads it, validation of names, counts and configs there); the replica manager opens
and drops the logs (:class:`~lakelog.replication.topic_changes.TopicChanges` applies configs and added
partitions to the open logs).

Every operation first checks its caller's ACLs as Kafka's ``KafkaApis`` does: Describe on a topic to see
it (lists keep only those), DescribeConfigs to read its configs, Create on the cluster or the topic,
Delete, Alter (partitions), AlterConfigs on the topic.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from lakelog.config import BrokerSettings
from lakelog.consumer_groups.coordinator import GroupCoordinator
from lakelog.errors import TopicExistsError
from lakelog.replication.metadata import ClusterMetadata, TopicMetadata
from lakelog.replication.replica_manager import ReplicaManager
from lakelog.errors import ConfigError
from lakelog.replication.topic_configs import ConfigChange, known_configs
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.security.acls import Operation, ResourceType
from lakelog.security.authorizer import Authorizer

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
            A None value asks for the default (as a null value in Kafka's CreateTopics): not stored, but its
            name must be a topic config all the same.
    """

    name: str
    partitions_count: int | None = None
    replication_factor: int | None = None
    configs: dict[str, str | None] = field(default_factory=dict)


class TopicAdmin:
    """The topic operations of one broker.

    Args:
        settings: the broker's settings (``num.partitions``, ``default.replication.factor``).
        metadata: ZooKeeper accessor. replica_manager: the broker's replicas (opens and drops logs).
        coordinator: the group coordinator (a deleted topic's committed offsets go with it).
        authorizer: the broker's ACLs (``authorizer.enabled``).
    """

    def __init__(self, *, settings: BrokerSettings, metadata: ClusterMetadata, replica_manager: ReplicaManager,
                 coordinator: GroupCoordinator, authorizer: Authorizer) -> None:
        self.settings = settings
        self.metadata = metadata
        self.replica_manager = replica_manager
        self.coordinator = coordinator
        self.authorizer = authorizer

    def _permissions(self, context: RequestContext) -> RequestPermissions:
        return RequestPermissions.of(self.authorizer, context)

    async def list_topics(self, *, context: RequestContext) -> dict[str, TopicMetadata]:
        """Every topic's metadata by name, re-read from ZooKeeper (Kafka's Metadata for all topics): only the
        topics the principal may Describe."""
        await self.replica_manager.refresh_topics()
        topics = self.replica_manager.cache.topics()
        if not self.authorizer.enabled:
            return topics
        return {t: topics[t] for t in self._permissions(context).filter(Operation.DESCRIBE, ResourceType.TOPIC, topics)}

    async def describe_topic(self, name: str, *, context: RequestContext, with_configs: bool = False) -> TopicMetadata:
        """A topic's metadata (partitions, replicas, configs), re-read if not cached; Describe on the topic
        (``with_configs``: DescribeConfigs too, for an answer that shows the configs).

        Raises:
            AuthorizationError: 403 / 40301 (checked first). UnknownTopicError: 404 / 40401.
        """
        permissions = self._permissions(context)
        permissions.require(Operation.DESCRIBE, ResourceType.TOPIC, name)
        if with_configs:
            permissions.require(Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name)
        return await self.replica_manager.topic_fresh(name)

    async def describe_topic_configs(self, name: str, *, context: RequestContext) -> TopicMetadata:
        """A topic's metadata for its configs (Kafka's DescribeConfigs): DescribeConfigs on the topic.

        Raises:
            AuthorizationError: 403 / 40301 (checked first). UnknownTopicError: 404 / 40401.
        """
        self._permissions(context).require(Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name)
        return await self.replica_manager.topic_fresh(name)

    async def create_topic(self, request: CreateTopicRequest, *, context: RequestContext,
                           validate_only: bool = False) -> TopicMetadata:
        """Create a topic in ZooKeeper (replicas spread as Kafka does) and open the logs this broker leads;
        Create on the cluster, else Create on the topic. ``validate_only`` (Kafka's CreateTopics
        ``validateOnly``): every check, nothing written; the topic as it would be.

        Raises:
            AuthorizationError: 403 / 40301 (checked first);
            the errors of :meth:`ClusterMetadata.create_topic
            <lakelog.replication.metadata.ClusterMetadata.create_topic>`
            (TopicExistsError, InvalidTopicError, InvalidPartitionsError, InvalidReplicationFactorError
            when the replication factor exceeds the live brokers, ConfigError for a bad config).
        """
        self._permissions(context).require_create_topic(request.name)
        known = set(known_configs())
        unknown = sorted(name for name in request.configs if name not in known)
        if unknown:  # a null value too: a typo must not pass unnoticed
            raise ConfigError(f"Invalid configuration: unknown config '{unknown[0]}' (known: {', '.join(sorted(known))})")
        configs = {name: value for name, value in request.configs.items() if value is not None}
        rm, broker_id = self.replica_manager, self.settings.broker_id
        partitions, replication_factor = request.partitions_count, request.replication_factor
        meta = await asyncio.to_thread(
            self.metadata.create_topic, request.name,
            partitions=self.settings.num_partitions if partitions is None else partitions,
            replication_factor=(self.settings.default_replication_factor if replication_factor is None
                                else replication_factor),
            configs=configs or None, validate_only=validate_only)
        if validate_only:
            return meta
        await rm.refresh_topics()
        for p, replicas in meta.replicas.items():
            if replicas[0] == broker_id:
                await rm.leader_partition(request.name, p)
        return meta

    async def auto_create_topic(self, name: str, *, context: RequestContext) -> bool:
        """Kafka's ``auto.create.topics.enable``: create ``name`` with the broker's ``num.partitions`` and
        ``default.replication.factor`` when a client's Metadata request for it allows auto-creation
        (Kafka's ``KafkaApis.handleTopicMetadataRequest``, which then answers LEADER_NOT_AVAILABLE while
        the partitions get leaders). False when the setting is off; True when created here or by a
        concurrent request.

        Raises:
            AuthorizationError (403 / 40301: Create on the cluster or the topic); InvalidTopicError,
            InvalidReplicationFactorError (fewer live brokers than ``default.replication.factor``).
        """
        if not self.settings.auto_create_topics_enable:
            return False
        try:
            await self.create_topic(CreateTopicRequest(name=name), context=context)
        except TopicExistsError:
            pass
        log.info("topic %r auto-created for %s (auto.create.topics.enable)", name, context.principal)
        return True

    async def delete_topic(self, name: str, *, context: RequestContext) -> None:
        """Delete a topic and drop its local logs, then every group's committed offsets of it (Kafka's
        cleanup of a deleted topic's offsets; a failure there is logged, the topic is gone either way);
        Delete on the topic.

        Raises:
            AuthorizationError (403 / 40301, checked first), UnknownTopicError.
        """
        self._permissions(context).require(Operation.DELETE, ResourceType.TOPIC, name)
        await asyncio.to_thread(self.metadata.delete_topic, name)
        await self.replica_manager.refresh_topics()
        try:
            removed = await self.coordinator.delete_topic_offsets(name)
        except Exception as e:  # noqa: BLE001 - ZooKeeper or a coordinator unavailable: the offsets stay
            log.warning("topic %s deleted, but not the groups' committed offsets of it: %s", name, e)
        else:
            if removed:
                log.info("deleted the committed offsets of %d partitions of the deleted topic %s", removed, name)

    async def alter_topic_configs(self, name: str, changes: Iterable[ConfigChange], *, context: RequestContext,
                                  validate_only: bool = False) -> TopicMetadata:
        """Set and delete topic configs, all or nothing (``(name, "SET", value)``, ``(name, "DELETE", None)``);
        running brokers apply them to the open logs; AlterConfigs on the topic (AuthorizationError, checked
        first). See :meth:`TopicChanges.alter_configs
        <lakelog.replication.topic_changes.TopicChanges.alter_configs>` for the other errors."""
        self._permissions(context).require(Operation.ALTER_CONFIGS, ResourceType.TOPIC, name)
        return await self.replica_manager.topic_changes.alter_configs(name, changes, validate_only=validate_only)

    async def create_partitions(self, name: str, *, partitions_count: int, context: RequestContext,
                                validate_only: bool = False) -> TopicMetadata:
        """Grow a topic to ``partitions_count`` partitions (Kafka's CreatePartitions); Alter on the topic
        (AuthorizationError, checked first); see
        :meth:`TopicChanges.add_partitions <lakelog.replication.topic_changes.TopicChanges.add_partitions>`
        (InvalidPartitionsError for a count not above the current one)."""
        self._permissions(context).require(Operation.ALTER, ResourceType.TOPIC, name)
        return await self.replica_manager.topic_changes.add_partitions(name, partitions_count=partitions_count,
                                                                       validate_only=validate_only)
