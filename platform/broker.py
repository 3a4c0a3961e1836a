"""The broker: the composition root that wires one broker process's pieces together.

A :class:`Broker` owns, and builds unless they are injected:

- a kazoo client and :class:`~lakelog.replication.metadata.ClusterMetadata` (ZooKeeper reads and writes);
- the :class:`~lakelog.replication.metadata_cache.MetadataCache` (topics, live brokers);
- the :class:`~lakelog.replication.controller.Controller` (leader election, when this broker wins it);
- the :class:`~lakelog.log_tables.log_manager.LogManager` (partition logs under ``log.dirs``);
- the :class:`~lakelog.replication.leader_client.LeaderClient` (every broker-to-broker call);
- the :class:`~lakelog.replication.replica_manager.ReplicaManager` (roles, produce, fetch, ISR);
- the :class:`~lakelog.replication.partition_writer.ReplicaPartitionWriter`, the replica manager as the
  coordinators see it (:class:`~lakelog.coordinators.partition_writer.PartitionWriter`);
- the :class:`~lakelog.consumer_groups.coordinator.GroupCoordinator` (committed offsets in the internal
  topic ``__consumer_offsets``; an old per-broker table is imported once at start);
- the :class:`~lakelog.coordinators.producer_id_manager.ProducerIdManager` (producer ids, blocks in ZooKeeper);
- the :class:`~lakelog.coordinators.transaction_log.TransactionStateManager` (the transaction coordinator's
  state in the internal topic ``__transaction_state``) and the
  :class:`~lakelog.coordinators.transaction_coordinator.TransactionCoordinator` (its requests from any broker);
- the :class:`~lakelog.consumer_groups.manager.ConsumerManager` (the consumer instances living on this
  broker, their group membership and rebalances; started last, closed first: with auto commit an
  instance commits as it closes);
- the :class:`~lakelog.requests.handler.RequestHandler` (one typed operation per request kind: produce,
  fetch, list offsets, topics and topic admin, consumer instances, ...), which every front door calls.

It runs inside the gateway's asyncio event loop, registers under ``/lakelog/brokers/ids/{id}``, handles
the ZooKeeper session (fence every partition when it is lost, rejoin when a new one is made) and
Kafka's controlled shutdown. Everything else is delegated; the thin methods below are the surface the
gateway and the consumer groups use.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

import pyarrow as pa
from kazoo.client import KazooClient, KazooState

from lakelog.config import BrokerSettings
from lakelog.consumer_groups.coordinator import GroupCoordinator
from lakelog.consumer_groups.manager import ConsumerManager
from lakelog.consumer_groups.offsets_import import import_old_offsets
from lakelog.coordinators.producer_id_manager import ProducerIdManager
from lakelog.coordinators.transaction_coordinator import TransactionCoordinator
from lakelog.coordinators.transaction_log import TransactionStateManager
from lakelog.coordinators.transaction_markers import TransactionMarkerWriter
from lakelog.errors import ConfigError
from lakelog.kafka.listeners import sasl_mechanisms_in_use
from lakelog.kafka.server import KafkaListeners
from lakelog.log_tables.log_manager import LogManager
from lakelog.log_tables.transaction_index import IsolationLevel
from lakelog.replication.committer_lease import LeaseWatch
from lakelog.replication.controller import Controller, controlled_shutdown
from lakelog.replication.errors import UnknownTopicError
from lakelog.replication.leader_client import LeaderClient
from lakelog.replication.metadata import BrokerInfo, ClusterMetadata, TopicMetadata
from lakelog.replication.metadata_cache import MetadataCache
from lakelog.replication.partition import Partition
from lakelog.replication.partition_views import LeaderOffsets, leader_offsets, offset_for_timestamp, partition_offsets
from lakelog.replication.partition_writer import ReplicaPartitionWriter
from lakelog.replication.replica_manager import ReplicaManager
from lakelog.replication.zookeeper_session import ZooKeeperSession, connection_retry, ensure_chroot
from lakelog.requests import CreateTopicRequest, RequestHandler
from lakelog.schemas.decode_worker import ProcessRegistryColumns
from lakelog.schemas.record_columns import TYPED_COLUMN_UNKNOWN_ID_WAIT_S, RegistryColumns
from lakelog.schemas.registry import SchemaRegistry
from lakelog.security.acl_store import AclStore
from lakelog.security.authentication import Authenticator
from lakelog.security.authorizer import Authorizer, parse_super_users
from lakelog.security.oauth import jwt_validator
from lakelog.security.quotas import ClientQuotaManager, QuotaCache, QuotaStore
from lakelog.security.errors import SecurityError
from lakelog.security.tls_principal import SslPrincipalMapper, certificate_file_subject
from lakelog.security.user_credentials import UserCredentials

log = logging.getLogger(__name__)


def broker_principal_mapper(settings: BrokerSettings) -> SslPrincipalMapper:
    """``ssl.principal.mapping.rules`` parsed; with ``mtls`` as the brokers' way to authenticate to each other
    (``authentication.methods`` with mtls and neither basic nor oauthbearer, whose brokers send HTTP Basic)
    also checks that this broker's own certificate (``ssl.certfile``, its client certificate to the other
    brokers) maps to ``inter.broker.username``, the brokers' principal and a super user.

    Raises:
        ConfigError: a rule that does not parse, or (mtls) a certificate subject that maps to another name.
    """
    try:
        mapper = SslPrincipalMapper(settings.ssl_principal_mapping_rules)
        if ("mtls" in settings.authentication_method_set and not settings.inter_broker_basic
                and settings.ssl_certfile is not None):
            subject = certificate_file_subject(settings.ssl_certfile)
            name = mapper.name(subject)
            if name != settings.inter_broker_username:
                raise SecurityError(f"with authentication.methods=mtls this broker's certificate ({subject}) maps to "
                                    f"User:{name}, not to inter.broker.username={settings.inter_broker_username}: the "
                                    "other brokers would not know it as a broker. Give the brokers certificates "
                                    "whose subject maps to it (ssl.principal.mapping.rules, e.g. "
                                    "RULE:^CN=([^,]+),OU=brokers$/$1/,DEFAULT), or set inter.broker.username")
    except (SecurityError, OSError, ValueError) as e:
        raise ConfigError(str(getattr(e, "message", e))) from None
    return mapper


class Broker:
    """One broker: leader or follower of the partitions assigned to it, registered in ZooKeeper.

    Args:
        settings: the broker's settings (``broker.id``, ``log.dirs``, ``zookeeper.connect``, ...).
        zk, metadata, cache, controller, log_manager, leader_client, replica_manager: injected pieces
            (tests); each defaults to the real one built from ``settings``.

    Call :meth:`start` and :meth:`stop` inside the event loop that serves requests.
    """

    def __init__(self, settings: BrokerSettings, *, zk: KazooClient | None = None,
                 metadata: ClusterMetadata | None = None, cache: MetadataCache | None = None,
                 controller: Controller | None = None, log_manager: LogManager | None = None,
                 leader_client: LeaderClient | None = None, replica_manager: ReplicaManager | None = None) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.zk = zk or KazooClient(hosts=settings.zookeeper_connect, connection_retry=connection_retry(),
                                    timeout=settings.zookeeper_session_timeout_ms / 1000.0)
        self.metadata = metadata or ClusterMetadata(self.zk, topic_defaults=settings.topic_config_defaults())
        self.cache = cache or MetadataCache(self.metadata)
        self.controller = controller or Controller(
            self.zk, self.broker_id, metadata=self.metadata,
            auto_leader_rebalance_enable=settings.auto_leader_rebalance_enable,
            leader_imbalance_check_interval_s=settings.leader_imbalance_check_interval_seconds)
        self.log_manager = log_manager or LogManager(settings.log_dirs,
                                                     tail_cache_max_bytes=settings.log_tail_cache_max_bytes,
                                                     segment_files_max=settings.log_segment_files_max,
                                                     lake_uri=settings.lake_uri,
                                                     lake_storage_options=settings.lake_storage_options())
        self.log_dirs = self.log_manager.log_dirs
        basic = settings.inter_broker_basic  # brokers send HTTP Basic credentials (with basic or oauthbearer)
        inter_broker_password = settings.inter_broker_password.get_secret_value() if basic else None
        self.leader_client = leader_client or LeaderClient(
            request_timeout_ms=settings.request_timeout_ms,
            auth=(settings.inter_broker_username, inter_broker_password) if basic else None,
            # the other brokers verified against ssl.cafile; this broker's certificate is its client certificate
            ssl_cafile=settings.ssl_cafile, ssl_certfile=settings.ssl_certfile, ssl_keyfile=settings.ssl_keyfile)
        self.replica_manager = replica_manager or ReplicaManager(
            settings, zk=self.zk, metadata=self.metadata, cache=self.cache, log_manager=self.log_manager,
            leader_client=self.leader_client)
        #: the ZooKeeper connection's state and counters (metrics, readiness)
        self.zookeeper_session = ZooKeeperSession(self.zk)
        self.lease_watch = LeaseWatch(self.zk, self.log_manager.leased_tables)
        self.producer_ids = ProducerIdManager(self.zk, broker_id=self.broker_id)
        self.acl_store = AclStore(self.zk)  # the v3 ACL routes; the authorizer follows the same znodes
        self.user_credentials = UserCredentials(self.zk)  # SCRAM credentials of the users routes
        # the Kafka listeners' SASL mechanisms (sasl.enabled.mechanisms when a listener is SASL_*)
        sasl = sasl_mechanisms_in_use(settings.listeners, protocol_map=settings.listener_security_protocol_map,
                                      mechanisms=settings.sasl_mechanism_list)
        self.authenticator = Authenticator(method=settings.authentication_methods, zk=self.zk,
                                           oauth=jwt_validator(settings, sasl_oauthbearer="OAUTHBEARER" in sasl),
                                           inter_broker_user=settings.inter_broker_username,
                                           principal_mapper=broker_principal_mapper(settings), sasl_mechanisms=sasl)
        self.authorizer = Authorizer(  # the brokers' own principal is a super user (ClusterAction)
            enabled=settings.authorizer_enabled, zk=self.zk,
            super_users=parse_super_users(settings.super_users) | {f"User:{settings.inter_broker_username}"},
            allow_everyone_if_no_acl_found=settings.allow_everyone_if_no_acl_found)
        self.quota_store = QuotaStore(self.zk)  # the client quota routes; client_quotas follows the same znodes
        self.client_quotas = ClientQuotaManager(  # the brokers' own requests are never throttled
            QuotaCache(self.zk), window_num=settings.quota_window_num,
            window_size_s=settings.quota_window_size_seconds,
            exempt_principals={f"User:{settings.inter_broker_username}"})
        self.replica_manager.producer_states.is_allocated = self.producer_ids.is_allocated
        #: the coordinators' only way to the replicas: append, role and marker listeners, local reads
        self.partition_writer = ReplicaPartitionWriter(self.replica_manager,
                                                       request_timeout_ms=settings.request_timeout_ms)
        self.coordinator = GroupCoordinator(settings, cache=self.cache, writer=self.partition_writer,
                                            leader_client=self.leader_client, create_topic=self.create_topic)
        self.transaction_state_manager = TransactionStateManager(
            settings, cache=self.cache, writer=self.partition_writer, create_topic=self.create_topic,
            producer_ids=self.producer_ids)
        self.transaction_coordinator = TransactionCoordinator(
            settings, manager=self.transaction_state_manager, leader_client=self.leader_client)
        # transactional produce requests join their transaction; decided transactions get their markers
        self.replica_manager.producer_states.add_partition = self.transaction_coordinator.add_partition
        TransactionMarkerWriter(settings, manager=self.transaction_state_manager, cache=self.cache,
                                writer=self.partition_writer, leader_client=self.leader_client).attach()
        #: the schema registry: this broker's view of _schemas, writes through the leader of _schemas-0
        self.schema_registry = SchemaRegistry(settings, cache=self.cache, writer=self.partition_writer,
                                              replica_manager=self.replica_manager, leader_client=self.leader_client,
                                              create_topic=self.create_topic)
        # schema'd topics' tables get typed columns at flush, decoded with the registry's schemas
        #  (in a child process: schemas/decode_worker.py)
        self.record_decoder = ProcessRegistryColumns(
            RegistryColumns(lambda: self.schema_registry.view, ready=lambda: self.schema_registry.caught_up,
                            unknown_id_wait_s=TYPED_COLUMN_UNKNOWN_ID_WAIT_S))
        self.log_manager.record_decoder = self.record_decoder
        #: the consumer instances living on this broker (REST Proxy v2's consumers)
        self.consumer_instances = ConsumerManager(self, instance_timeout_ms=settings.consumer_instance_timeout_ms,
                                                  default_assignor=settings.partition_assignment_strategy)
        #: the operations every front door calls (Kafka's KafkaApis)
        self.requests = RequestHandler(settings=settings, metadata=self.metadata, replica_manager=self.replica_manager,
                                       leader_client=self.leader_client, coordinator=self.coordinator,
                                       offsets_broker=self, consumer_instances=self.consumer_instances,
                                       acl_store=self.acl_store,
                                       user_credentials=self.user_credentials, quota_store=self.quota_store,
                                       producer_ids=self.producer_ids,
                                       transaction_coordinator=self.transaction_coordinator,
                                       cluster_id=lambda: self.cluster_id, authorizer=self.authorizer,
                                       schema_registry=self.schema_registry)
        #: the Kafka listeners (``listeners``), started before the broker registers their endpoints
        self.kafka = KafkaListeners(settings, requests=self.requests, cluster_id=lambda: self.cluster_id,
                                    authenticator=self.authenticator, client_quotas=lambda: self.client_quotas)
        self.cluster_id = ""
        #: True while this broker's registration znode is written by its current ZooKeeper session
        self.registered = False
        self._import: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._shut_down_controlled = False

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Create the ``zookeeper.connect`` chroot if missing, connect to ZooKeeper, register, join the controller
        election, take up partition roles.

        Raises:
            kazoo.handlers.threading.KazooTimeoutError: ZooKeeper not reachable in the session timeout.
            lakelog.replication.errors.BrokerIdInUseError: the broker id is taken by a live broker (a
                registration of another ZooKeeper session is first waited for, up to
                ``zookeeper.session.timeout.ms``: that of this broker's process killed just before).
        """
        self._loop = asyncio.get_running_loop()
        self.log_manager.ensure_dirs()
        await asyncio.to_thread(ensure_chroot, self.settings.zookeeper_connect)
        await asyncio.to_thread(self.zk.start)
        self.zk.add_listener(self._on_zk_state)
        self.zk.add_listener(self.zookeeper_session.on_state)
        await asyncio.to_thread(self.metadata.ensure_paths)
        await asyncio.to_thread(self.lease_watch.start)  # before any log opens: a job may hold a lease
        if self.settings.inter_broker_basic:  # brokers authenticate to each other as this user
            await asyncio.to_thread(self.authenticator.ensure_user, self.settings.inter_broker_username,
                                    self.settings.inter_broker_password.get_secret_value())
        await asyncio.to_thread(self.authenticator.start)
        await asyncio.to_thread(self.authorizer.start)
        await asyncio.to_thread(self.client_quotas.cache.start)
        await self.cache.watch_brokers()
        self.cluster_id = await asyncio.to_thread(self.metadata.cluster_id)
        await self.kafka.start()  # bound before registering: a port 0 listener registers its bound port
        await self._register()
        self.coordinator.start()  # before the roles: it loads the __consumer_offsets partitions it comes to lead
        self.transaction_state_manager.start()  # and this one the __transaction_state partitions
        await asyncio.to_thread(self.controller.start)
        await self.replica_manager.start()
        self._import = asyncio.get_running_loop().create_task(self._import_old_offsets(), name="offsets-import")
        await self.consumer_instances.start()
        await self.schema_registry.start()
        log.info("broker %d started: cluster %s, log dirs %s, %d topic(s)", self.broker_id, self.cluster_id,
                 self.log_dirs, len(self.cache.topics()))

    async def _import_old_offsets(self) -> None:
        try:
            await import_old_offsets(self.coordinator, self.log_dirs)
        except Exception:
            log.exception("importing the old per-broker __consumer_offsets table failed; the next start tries again")

    async def _register(self) -> None:
        await asyncio.to_thread(functools.partial(
            self.metadata.register_broker, BrokerInfo(
                self.broker_id, self.settings.host, self.settings.port, self.settings.rack, int(time.time() * 1000),
                "https" if self.settings.ssl_certfile else "http", self.kafka.endpoints),
            previous_session_wait_ms=self.settings.zookeeper_session_timeout_ms))
        self.registered = True

    async def stop(self) -> None:
        """Close the consumer instances (auto commits, leaving their groups), move leaderships away
        (controlled shutdown), commit queued appends, close the logs, leave ZooKeeper."""
        await self.consumer_instances.stop()
        await self.schema_registry.stop()
        await self.controlled_shutdown()
        self._stopping = True
        await self.requests.classic_groups.close()  # waiting joins answer NOT_COORDINATOR before the listener closes
        await self.kafka.stop()
        if self._import is not None:
            self._import.cancel()
        self.cache.stop()
        self.lease_watch.stop()
        self.authenticator.close()
        self.authorizer.close()
        self.client_quotas.cache.close()
        self.coordinator.stop()
        self.transaction_state_manager.stop()
        await self.replica_manager.stop()
        await self.log_manager.scheduler.close()
        await asyncio.to_thread(self.record_decoder.close)
        try:
            await asyncio.to_thread(self.controller.stop)
            await asyncio.to_thread(self.zk.stop)
            await asyncio.to_thread(self.zk.close)
        except Exception:
            log.exception("leaving ZooKeeper failed")
        await self.leader_client.aclose()
        log.info("broker %d stopped", self.broker_id)

    async def controlled_shutdown(self) -> None:
        """Kafka's controlled shutdown: hand this broker's leaderships to other in-sync replicas and leave
        every ISR, so producers move on before the broker exits (``controlled.shutdown.enable``).

        Steps: 1. write the new partition states (compare-and-set, :func:`controlled_shutdown`);
        2. wait (up to 5 s) until this broker has applied them, so no produce is accepted here after.
        Idempotent; errors are logged, never raised (the broker stops anyway, as after a crash).
        """
        if (self._shut_down_controlled or not self.settings.controlled_shutdown_enable
                or self.replica_manager.session_lost):
            return
        self._shut_down_controlled = True
        try:
            # 1. new leaders and ISRs in ZooKeeper
            moved = await asyncio.to_thread(controlled_shutdown, self.metadata, self.broker_id)
            # 2. our watches apply them
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and self.replica_manager.leads_with_followers():
                await asyncio.sleep(0.05)
            log.info("controlled shutdown of broker %d: %d partition state(s) moved", self.broker_id, moved)
        except Exception:
            log.exception("controlled shutdown failed")

    def _on_zk_state(self, state: str) -> None:
        # kazoo's thread: only schedule work on the event loop.
        if self._stopping or self._loop is None:
            return
        if state == KazooState.LOST:
            log.warning("ZooKeeper session lost: fencing every partition until the session is re-established")
            self.replica_manager.session_lost = True
            self.registered = False  # the ephemeral znode went with the session
            asyncio.run_coroutine_threadsafe(self.replica_manager.fence_all(), self._loop)
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection suspended")
        elif state == KazooState.CONNECTED and self.replica_manager.session_lost:
            asyncio.run_coroutine_threadsafe(self._rejoin(), self._loop)

    async def _rejoin(self) -> None:
        """A new session after the old one expired: register again and re-apply every partition state."""
        try:
            await self._register()
        except Exception:
            log.exception("registering again after the session expired failed")
        rm = self.replica_manager
        rm.session_lost = False
        for part in rm.partitions():
            try:
                state = await self.cache.partition_state(part.topic, part.partition)
            except UnknownTopicError:
                continue
            await rm.apply_state(part.topic, part.partition, part.topic_id, state)
        log.info("broker %d rejoined after its ZooKeeper session expired", self.broker_id)

    # -- admin ----------------------------------------------------------------------------------

    async def create_topic(self, name: str, *, partitions: int | None = None, replication_factor: int | None = None,
                           configs: dict[str, str] | None = None) -> TopicMetadata:
        """Create a topic as the brokers' own principal (the coordinators create their internal topics so);
        see :meth:`RequestHandler.create_topic <lakelog.requests.handler.RequestHandler.create_topic>`."""
        return await self.requests.create_topic(CreateTopicRequest(
            name=name, partitions_count=partitions, replication_factor=replication_factor, configs=configs or {}),
            context=self.requests.broker_context)

    # -- the surface the gateway and consumer groups use (delegations) ----------------------------

    def topics(self) -> dict[str, TopicMetadata]:
        """The cached topic metadata by name."""
        return self.cache.topics()

    async def topic_fresh(self, name: str) -> TopicMetadata:
        """Metadata of ``name``, re-read from ZooKeeper if not cached. Raises :class:`UnknownTopicError`."""
        return await self.replica_manager.topic_fresh(name)

    async def refresh_topics(self) -> None:
        """Reload topic metadata from ZooKeeper (and reconcile the local partitions)."""
        await self.replica_manager.refresh_topics()

    def check_partition(self, meta: TopicMetadata, partition: int) -> None:
        """Raises :class:`UnknownPartitionError` if ``partition`` is not one of the topic's."""
        self.cache.check_partition(meta, partition)

    async def partition_offsets(self, topic: str, partition: int) -> tuple[int, int, int]:
        """``(log_start_offset, log_end_offset, high_watermark)`` from the partition's leader."""
        return await partition_offsets(self.replica_manager, topic, partition)

    async def leader_offsets(self, topic: str, partition: int) -> LeaderOffsets:
        """The partition's offsets with its last stable offset, from its leader; see
        :func:`lakelog.replication.partition_views.leader_offsets`."""
        return await leader_offsets(self.replica_manager, topic, partition)

    async def offset_for_timestamp(self, topic: str, partition: int, *, timestamp_ms: int) -> int:
        """The first offset whose timestamp is >= ``timestamp_ms``, from the partition's leader; see
        :func:`lakelog.replication.partition_views.offset_for_timestamp`."""
        return await offset_for_timestamp(self.replica_manager, topic, partition, timestamp_ms=timestamp_ms)

    def local_partition(self, topic: str, partition: int) -> Partition | None:
        """The local replica of a partition, if this broker holds it open."""
        return self.replica_manager.local_partition(topic, partition)

    async def leader_partition(self, topic: str, partition: int) -> Partition:
        """The local partition if this broker leads it (else NotLeaderError naming the leader)."""
        return await self.replica_manager.leader_partition(topic, partition)

    async def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int, max_wait_ms: int,
                    columns: list[str] | None = None,
                    isolation_level: IsolationLevel = "read_uncommitted") -> tuple[pa.Table, Partition]:
        """Records below the HW (read_committed: the LSO) from a partition this broker leads, for the
        consumer instances; see :meth:`ReplicaManager.fetch <lakelog.replication.replica_manager.ReplicaManager.fetch>`."""
        return await self.replica_manager.fetch(topic, partition, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms,
                                                columns=columns, isolation_level=isolation_level)

    async def group_generation(self, group: str) -> int | None:
        """The group's current generation from ZooKeeper, or None if it has no membership state."""
        return await asyncio.to_thread(self.metadata.group_generation, group)

    async def group_members(self, group: str) -> list[str]:
        """Ids of the group's live members (ephemeral znodes)."""
        return await asyncio.to_thread(self.metadata.group_members, group)
