"""The request handler: one typed operation per request kind, whatever front door a request came by.

Kafka's ``KafkaApis`` (core/src/main/scala/kafka/server/KafkaApis.scala): a front door (the HTTP gateway,
:mod:`lakelog.ingest_api`; next, a Kafka listener) only turns its bytes into a typed request and the typed
result (or a :class:`~lakelog.errors.LakelogError`) back into bytes; the rules of a request (validation,
forwarding to the leader, authorization) are applied here, once, and the replica manager only appends
and reads. Every operation takes the caller's :class:`~lakelog.requests.context.RequestContext`
(principal, address, client id, listener) and checks the principal's ACLs itself
(:mod:`lakelog.requests.authorization`), so a front door that only calls operations is authorized correctly.

================  ======================================================  =================================
request kind      operation                                               Kafka API
================  ======================================================  =================================
produce           :meth:`RequestHandler.produce`,                         Produce
                  :meth:`RequestHandler.produce_each`
fetch             :meth:`RequestHandler.fetch`                            Fetch
list offsets      :meth:`RequestHandler.list_offsets`                     ListOffsets
topics            :meth:`~RequestHandler.list_topics`,                    Metadata
                  :meth:`~RequestHandler.describe_topic`
cluster, brokers, :attr:`RequestHandler.metadata`                         Metadata, DescribeCluster
partitions        (:class:`~lakelog.requests.metadata.MetadataViews`)
topic admin       :meth:`~RequestHandler.create_topic`,                   CreateTopics, DeleteTopics,
                  :meth:`~RequestHandler.delete_topic`,                   CreatePartitions
                  :meth:`~RequestHandler.create_partitions`
topic configs     :meth:`~RequestHandler.describe_topic_configs`,         DescribeConfigs,
                  :meth:`~RequestHandler.alter_topic_configs`             IncrementalAlterConfigs
broker configs    :attr:`RequestHandler.broker_configs`                   DescribeConfigs (BROKER)
delete records    :meth:`RequestHandler.delete_records`                   DeleteRecords
group offsets     :attr:`RequestHandler.groups`                           OffsetCommit, OffsetFetch,
                  (:class:`~lakelog.requests.groups.GroupOffsets`)        ListGroups, OffsetDelete
Kafka-protocol    :attr:`RequestHandler.group_membership` (:class:`~      JoinGroup, SyncGroup, Heartbeat,
group membership  lakelog.requests.group_membership.                      LeaveGroup, DescribeGroups,
                  GroupMembershipOperations`)                             ListGroups, DeleteGroups
consumer          :attr:`RequestHandler.consumers` (:class:`~lakelog.     JoinGroup, SyncGroup, LeaveGroup,
instances         requests.consumer_instances.ConsumerInstances`)         Fetch, OffsetCommit, OffsetFetch
group views       :attr:`RequestHandler.group_views`                      ListGroups, DescribeGroups
                  (:class:`~lakelog.requests.group_views.GroupViews`)
ACLs              :attr:`RequestHandler.acls`                             DescribeAcls, CreateAcls, DeleteAcls
users             :attr:`RequestHandler.users`                            Describe-/AlterUserScramCredentials
client quotas     :attr:`RequestHandler.quotas`                           Describe-/AlterClientQuotas
producer ids      :attr:`RequestHandler.producers`                        InitProducerId
                  (:class:`~lakelog.requests.producers.ProducerIds`)
transactions      :attr:`RequestHandler.transactions`                     FindCoordinator (transaction),
                  (:class:`~lakelog.requests.transactions.                ListTransactions,
                  TransactionOperations`)                                 DescribeTransactions,
                                                                          AddPartitionsToTxn, EndTxn,
                                                                          AddOffsetsToTxn, TxnOffsetCommit
schema registry   :attr:`RequestHandler.schemas` (:class:`~lakelog.       (Confluent Schema Registry's
                  requests.schemas.SchemaRegistryOperations`)             REST API)
================  ======================================================  =================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from lakelog.config import BrokerSettings
from lakelog.consumer_groups.broker_api import OffsetsAdminBroker
from lakelog.consumer_groups.classic_coordinator import ClassicGroupCoordinator
from lakelog.consumer_groups.coordinator import GroupCoordinator
from lakelog.consumer_groups.manager import ConsumerManager
from lakelog.coordinators.producer_id_manager import ProducerIdManager
from lakelog.coordinators.transaction_coordinator import TransactionCoordinator
from lakelog.replication.leader_client import LeaderClient
from lakelog.replication.metadata import ClusterMetadata, TopicMetadata
from lakelog.replication.replica_manager import ReplicaManager
from lakelog.replication.topic_configs import ConfigChange
from lakelog.requests import fetch as fetches
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.broker_configs import BrokerConfigs
from lakelog.requests.fetch import FetchRequest, FetchResult, ListOffsetsRequest, ListOffsetsResult
from lakelog.requests.consumer_instances import ConsumerInstances
from lakelog.requests.context import RequestContext
from lakelog.requests.delete_records import DeleteRecordsRequest, DeleteRecordsResult, RecordDeletion
from lakelog.requests.group_membership import GroupMembershipOperations
from lakelog.requests.group_views import GroupViews
from lakelog.requests.groups import GroupOffsets
from lakelog.requests.metadata import MetadataViews
from lakelog.requests.schemas import SchemaRegistryOperations
from lakelog.requests.produce import ProduceOperation, ProduceRequest, ProduceResult, RecordOutcome
from lakelog.requests.producers import ProducerIds
from lakelog.requests.security_admin import AclAdmin, ClientQuotaAdmin, UserAdmin
from lakelog.requests.topics import CreateTopicRequest, TopicAdmin
from lakelog.requests.transactions import TransactionOperations
from lakelog.schemas.registry import SchemaRegistry
from lakelog.security.acl_store import AclStore
from lakelog.security.authorizer import Authorizer
from lakelog.security.quotas import QuotaStore
from lakelog.security.user_credentials import UserCredentials

__all__ = ["RequestHandler"]


class RequestHandler:
    """The operations of one broker (see the module docstring).

    Args:
        settings: the broker's settings (defaults a request leaves out: ``fetch.max.wait.ms``,
            ``num.partitions``, ``default.replication.factor``).
        metadata: ZooKeeper accessor. replica_manager: appends and reads on this broker's replicas.
        leader_client: forwards shares of a topic-level produce to their leaders.
        coordinator: the group coordinator (committed offsets; a deleted topic's go with it).
        offsets_broker: what the group offsets administration uses of the broker (the broker itself).
        consumer_instances: the broker's consumer instances (``Broker.consumer_instances``).
        acl_store, user_credentials, quota_store: the ACLs, SCRAM credentials and client quotas in ZooKeeper.
        producer_ids: this broker's producer id blocks (idempotent producers' InitProducerId).
        transaction_coordinator: transactional ids' requests, wherever their coordinator is.
        cluster_id: the cluster's id once the broker started (named in errors' advice).
        authorizer: the broker's ACLs (``authorizer.enabled``), which every operation checks.
        schema_registry: the broker's schema registry (its view of ``_schemas``, writes through its writer).
    """

    def __init__(self, *, settings: BrokerSettings, metadata: ClusterMetadata, replica_manager: ReplicaManager,
                 leader_client: LeaderClient, coordinator: GroupCoordinator, offsets_broker: OffsetsAdminBroker,
                 consumer_instances: ConsumerManager, acl_store: AclStore, user_credentials: UserCredentials, quota_store: QuotaStore,
                 producer_ids: ProducerIdManager, transaction_coordinator: TransactionCoordinator,
                 cluster_id: Callable[[], str], authorizer: Authorizer, schema_registry: SchemaRegistry) -> None:
        self.settings = settings
        self.replica_manager = replica_manager
        self.authorizer = authorizer
        #: the brokers' own requests (a super user: internal topics created on first need)
        self.broker_context = RequestContext(principal=f"User:{settings.inter_broker_username}", listener="internal")
        self._produce = ProduceOperation(replica_manager=replica_manager, leader_client=leader_client,
                                         authorizer=authorizer, schema_registry=schema_registry)
        self._delete_records = RecordDeletion(replica_manager=replica_manager)
        self.topics = TopicAdmin(settings=settings, metadata=metadata, replica_manager=replica_manager,
                                 coordinator=coordinator, authorizer=authorizer)
        #: this broker's own configs (DescribeConfigs of a BROKER resource)
        self.broker_configs = BrokerConfigs(settings=settings, authorizer=authorizer)
        #: the cluster, its brokers, partitions and replicas, offsets and tables as any broker answers them
        self.metadata = MetadataViews(metadata=metadata, replica_manager=replica_manager, authorizer=authorizer)
        #: the Kafka-protocol groups this broker coordinates (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
        self.classic_groups = ClassicGroupCoordinator(settings, offsets=coordinator.manager,
                                                      membership=consumer_instances.membership)
        #: consumer groups' committed offsets: commit, fetch, list, lag, reset, delete
        self.groups = GroupOffsets(broker=offsets_broker, coordinator=coordinator, authorizer=authorizer,
                                   classic=self.classic_groups)
        #: consumer instances: create, subscribe or assign, seek, poll, commit, delete
        self.consumers = ConsumerInstances(manager=consumer_instances, authorizer=authorizer)
        #: consumer groups as a whole: list, describe, members, assignments, lags
        self.group_views = GroupViews(manager=consumer_instances, broker=offsets_broker, authorizer=authorizer)
        #: Kafka-protocol group membership: join, sync, heartbeat, leave; describe, list, delete groups
        self.group_membership = GroupMembershipOperations(
            coordinator=self.classic_groups, views=self.group_views, offsets=self.groups,
            broker_id=settings.broker_id, authorizer=authorizer)
        #: security administration: ACLs, users' credentials, client quotas
        self.acls = AclAdmin(store=acl_store, authorizer=authorizer)
        self.users = UserAdmin(credentials=user_credentials, inter_broker_username=settings.inter_broker_username,
                               authorizer=authorizer)
        self.quotas = ClientQuotaAdmin(store=quota_store, authorizer=authorizer)
        #: InitProducerId of idempotent and transactional producers
        self.producers = ProducerIds(producer_ids=producer_ids, transactions=transaction_coordinator,
                                     cache=replica_manager.cache, authorizer=authorizer)
        #: transactional ids: list, describe, end a transaction, offsets in a transaction
        self.transactions = TransactionOperations(
            settings=settings, transactions=transaction_coordinator, groups=coordinator, classic=self.classic_groups,
            cache=replica_manager.cache, cluster_id=cluster_id, authorizer=authorizer)
        #: the schema registry: subjects, versions, ids, compatibility, config, mode
        self.schemas = SchemaRegistryOperations(registry=schema_registry, authorizer=authorizer)

    def permissions(self, context: RequestContext) -> RequestPermissions:
        """``context``'s principal before this broker's authorizer (for a front door's early checks)."""
        return RequestPermissions.of(self.authorizer, context)

    async def produce(self, request: ProduceRequest, *, context: RequestContext) -> ProduceResult:
        """Kafka's Produce; see :meth:`ProduceOperation.produce <lakelog.requests.produce.ProduceOperation.produce>`."""
        return await self._produce.produce(request, context=context)

    async def produce_each(self, request: ProduceRequest, *, context: RequestContext) -> list[RecordOutcome]:
        """Produce with an outcome per record (REST Proxy v3's streaming produce); see
        :meth:`ProduceOperation.produce_each <lakelog.requests.produce.ProduceOperation.produce_each>`."""
        return await self._produce.produce_each(request, context=context)

    async def fetch(self, request: FetchRequest, *, context: RequestContext) -> FetchResult:
        """Kafka's Fetch (a consumer's); see :func:`lakelog.requests.fetch.fetch`."""
        return await fetches.fetch(self.replica_manager, self.settings, request, permissions=self.permissions(context))

    async def list_offsets(self, request: ListOffsetsRequest, *, context: RequestContext) -> ListOffsetsResult:
        """Kafka's ListOffsets; see :func:`lakelog.requests.fetch.list_offsets`."""
        return await fetches.list_offsets(self.replica_manager, request, permissions=self.permissions(context))

    async def list_topics(self, *, context: RequestContext) -> dict[str, TopicMetadata]:
        """Kafka's Metadata for every topic the principal may Describe; see :meth:`TopicAdmin.list_topics
        <lakelog.requests.topics.TopicAdmin.list_topics>`."""
        return await self.topics.list_topics(context=context)

    async def describe_topic(self, name: str, *, context: RequestContext, with_configs: bool = False) -> TopicMetadata:
        """Kafka's Metadata for one topic; see :meth:`TopicAdmin.describe_topic
        <lakelog.requests.topics.TopicAdmin.describe_topic>` (AuthorizationError: 40301, UnknownTopicError: 40401)."""
        return await self.topics.describe_topic(name, context=context, with_configs=with_configs)

    async def describe_topic_configs(self, name: str, *, context: RequestContext) -> TopicMetadata:
        """Kafka's DescribeConfigs for a topic; see :meth:`TopicAdmin.describe_topic_configs
        <lakelog.requests.topics.TopicAdmin.describe_topic_configs>`."""
        return await self.topics.describe_topic_configs(name, context=context)

    async def create_topic(self, request: CreateTopicRequest, *, context: RequestContext,
                           validate_only: bool = False) -> TopicMetadata:
        """Kafka's CreateTopics; see :meth:`TopicAdmin.create_topic
        <lakelog.requests.topics.TopicAdmin.create_topic>`."""
        return await self.topics.create_topic(request, context=context, validate_only=validate_only)

    async def delete_topic(self, name: str, *, context: RequestContext) -> None:
        """Kafka's DeleteTopics; see :meth:`TopicAdmin.delete_topic
        <lakelog.requests.topics.TopicAdmin.delete_topic>`."""
        await self.topics.delete_topic(name, context=context)

    async def create_partitions(self, name: str, *, partitions_count: int, context: RequestContext,
                                validate_only: bool = False) -> TopicMetadata:
        """Kafka's CreatePartitions; see :meth:`TopicAdmin.create_partitions
        <lakelog.requests.topics.TopicAdmin.create_partitions>`."""
        return await self.topics.create_partitions(name, partitions_count=partitions_count, context=context,
                                                   validate_only=validate_only)

    async def alter_topic_configs(self, name: str, changes: Iterable[ConfigChange], *, context: RequestContext,
                                  validate_only: bool = False) -> TopicMetadata:
        """Kafka's IncrementalAlterConfigs for a topic; see :meth:`TopicAdmin.alter_topic_configs
        <lakelog.requests.topics.TopicAdmin.alter_topic_configs>`."""
        return await self.topics.alter_topic_configs(name, changes, context=context, validate_only=validate_only)

    async def delete_records(self, request: DeleteRecordsRequest, *, context: RequestContext) -> DeleteRecordsResult:
        """Kafka's DeleteRecords; see :meth:`RecordDeletion.delete_records
        <lakelog.requests.delete_records.RecordDeletion.delete_records>`."""
        return await self._delete_records.delete_records(request, permissions=self.permissions(context))
