"""Transactions: Kafka's FindCoordinator (transaction key), ListTransactions, DescribeTransactions,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit, one operation each, on the transactional
id's coordinator wherever it is (:class:`~lakelog.coordinators.transaction_coordinator.TransactionCoordinator`;
a transactional produce also adds its partition itself, through the partition leader, so an HTTP producer
needs no AddPartitionsToTxn).

Authorization as Kafka's ``KafkaApis``: Describe on a transactional id to see it (lists keep only those),
Write on it to add partitions, end its transaction or commit offsets in it; added partitions need Write
on their topic; a transaction's offsets also need Read on the group and on each topic.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from lakelog.config import BrokerSettings
from lakelog.consumer_groups.classic_coordinator import ClassicGroupCoordinator
from lakelog.consumer_groups.coordinator import GroupCoordinator
from lakelog.consumer_groups.instances import validate_group_id
from lakelog.consumer_groups.offset_records import OFFSETS_TOPIC, offsets_of, partition_for
from lakelog.consumer_groups.offsets_admin import PartitionOffset
from lakelog.coordinators.transaction_coordinator import TransactionCoordinator
from lakelog.coordinators.transaction_state import TransactionMetadata
from lakelog.producers.errors import TransactionalIdNotFoundError
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.metadata_cache import MetadataCache
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.security.acls import Operation, ResourceType
from lakelog.security.authorizer import Authorizer

__all__ = ["AddOffsetsToTxnRequest", "AddPartitionsToTxnRequest", "CoordinatedTransaction", "EndTxnRequest",
           "TransactionOperations", "TxnOffsetCommitRequest"]


@dataclass(frozen=True)
class CoordinatedTransaction:
    """A transactional id as its coordinator holds it.

    Attributes:
        coordinator_id: the broker id of the id's coordinator (the leader of its ``__transaction_state``
            partition); None while it is being elected.
        metadata: state, producer id and epoch, timeout, the open transaction's partitions and times.
    """

    coordinator_id: int | None
    metadata: TransactionMetadata


@dataclass(frozen=True, kw_only=True)
class EndTxnRequest:
    """Kafka's EndTxn.

    Attributes:
        transactional_id: the producer's ``transactional.id``.
        producer_id, producer_epoch: what InitProducerId handed out for it (a fenced epoch is refused).
        commit: True to commit the open transaction, False to abort it.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool


@dataclass(frozen=True, kw_only=True)
class AddPartitionsToTxnRequest:
    """Kafka's AddPartitionsToTxn (a client's, v0-3): partitions the producer will write in its transaction.

    Attributes:
        transactional_id, producer_id, producer_epoch: the transactional producer.
        partitions: ``(topic, partition)`` pairs.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: Sequence[tuple[str, int]]


@dataclass(frozen=True, kw_only=True)
class AddOffsetsToTxnRequest:
    """Kafka's AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the producer's transaction.

    Attributes:
        transactional_id, producer_id, producer_epoch: the transactional producer.
        group: the consumer group whose offsets the transaction will commit.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    group: str


@dataclass(frozen=True, kw_only=True)
class TxnOffsetCommitRequest:
    """Kafka's AddOffsetsToTxn + TxnOffsetCommit: a consumer group's offsets in the producer's open transaction.

    Attributes:
        transactional_id, producer_id, producer_epoch: the transactional producer.
        group: the consumer group whose offsets these are.
        offsets: the next offset to read per partition (with metadata).
        generation_id, member_id, group_instance_id: the consumer's group metadata (KIP-447; Kafka's
            TxnOffsetCommit v3+): a member id or a generation >= 0 is checked against the Kafka-protocol
            group, so a zombie's commit is fenced. -1 and "" (the defaults): not checked.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    group: str
    offsets: Sequence[PartitionOffset]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class TransactionOperations:
    """The transaction requests of one broker.

    Args:
        settings: ``offsets.topic.num.partitions`` (the group's ``__consumer_offsets`` partition).
        transactions: the transaction coordinator, wherever a transactional id's coordinator is.
        groups: the group coordinator (a transaction's offsets go to the group's coordinator).
        classic: the Kafka-protocol groups (a TxnOffsetCommit's member and generation are checked there).
        cache: the topics (AddPartitionsToTxn refuses a partition that does not exist).
        cluster_id: the cluster's id once the broker started (named in errors' advice).
        authorizer: the broker's ACLs (``authorizer.enabled``).
    """

    def __init__(self, *, settings: BrokerSettings, transactions: TransactionCoordinator, groups: GroupCoordinator,
                 classic: ClassicGroupCoordinator, cache: MetadataCache, cluster_id: Callable[[], str],
                 authorizer: Authorizer) -> None:
        self.settings = settings
        self.transactions = transactions
        self.groups = groups
        self.classic = classic
        self.cache = cache
        self.cluster_id = cluster_id
        self.authorizer = authorizer

    def _permissions(self, context: RequestContext) -> RequestPermissions:
        return RequestPermissions.of(self.authorizer, context)

    async def find_coordinator(self, transactional_id: str, *, context: RequestContext) -> int | None:
        """The broker id of the id's coordinator (Kafka's FindCoordinator with key type TRANSACTION), or None
        before ``__transaction_state`` exists or while the id's partition has no leader: then any broker
        takes the id's requests and forwards them.

        Raises:
            AuthorizationError: 403 / 40301 (Describe on the transactional id).
        """
        self._permissions(context).require(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id)
        return await self.transactions.coordinator_id(transactional_id)

    async def list_transactions(self, *, states: Collection[str] | None = None,
                                context: RequestContext) -> list[CoordinatedTransaction]:
        """Every transactional id known cluster-wide (Kafka's ListTransactions sent to every broker), by id;
        ``states``: only ids in these states (Kafka's names, e.g. ``Ongoing``). Only the ids the principal
        may Describe.

        Raises:
            LeaderNotAvailableError (retriable): a ``__transaction_state`` partition has no live leader or
            a coordinator does not answer.
        """
        found = await self.transactions.list_transactions()
        visible = set(self._permissions(context).filter(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                         [m.transactional_id for _, m in found]))
        return [CoordinatedTransaction(coordinator_id, m) for coordinator_id, m in found
                if (states is None or m.state.value in states) and m.transactional_id in visible]

    async def describe_transaction(self, transactional_id: str, *,
                                   context: RequestContext) -> CoordinatedTransaction:
        """The id as its coordinator holds it (Kafka's DescribeTransactions).

        Raises:
            AuthorizationError: 403 / 40301 (Describe on the transactional id).
            TransactionalIdNotFoundError: 404 / 40408, no producer initialized it, or it expired after
                ``transactional.id.expiration.ms``.
            NotCoordinatorError, CoordinatorLoadInProgressError, LeaderNotAvailableError (retriable).
        """
        self._permissions(context).require(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id)
        metadata = await self.transactions.describe(transactional_id)
        if metadata is None:
            raise TransactionalIdNotFoundError(
                f"Transactional id '{transactional_id}' not found: no producer initialized it (POST "
                f"/v3/clusters/{self.cluster_id()}/producers with its transactional_id), or it expired.")
        return CoordinatedTransaction(await self.transactions.coordinator_id(transactional_id), metadata)

    async def add_partitions(self, request: AddPartitionsToTxnRequest, *,
                             context: RequestContext) -> dict[tuple[str, int], Exception]:
        """Add partitions to the producer's transaction (beginning it if none is open; Kafka's
        ``handleAddPartitionsToTransaction``), on the id's coordinator. All or nothing: when a partition is
        refused, none is added and the refused ones are answered.

        Returns:
            ``{(topic, partition): error}`` of the refused partitions (AuthorizationError: no Write on the
            topic; UnknownTopicError / UnknownPartitionError); empty when all were added.

        Raises:
            AuthorizationError: 403 / 40301 (Write on the transactional id).
            InvalidProducerEpochError (409 / 40915: fenced), InvalidProducerIdMappingError (409 / 40919),
            ConcurrentTransactionsError (409 / 40920, retriable), NotCoordinatorError,
            CoordinatorLoadInProgressError, LeaderNotAvailableError (retriable): those of
            :meth:`TransactionCoordinator.add_partition
            <lakelog.coordinators.transaction_coordinator.TransactionCoordinator.add_partition>`.
        """
        permissions = self._permissions(context)
        permissions.require(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        allowed = set(permissions.filter(Operation.WRITE, ResourceType.TOPIC, {t for t, _ in request.partitions}))
        refused: dict[tuple[str, int], Exception] = {}
        for topic, partition in request.partitions:
            try:
                if topic not in allowed:
                    permissions.require(Operation.WRITE, ResourceType.TOPIC, topic)
                self.cache.check_partition(self.cache.topic(topic), partition)
            except Exception as e:  # noqa: BLE001 - answered per partition
                refused[(topic, partition)] = e
        if not refused:
            producer = ProducerBatch(request.producer_id, request.producer_epoch, 0, request.transactional_id)
            for topic, partition in sorted(set(request.partitions)):
                await self.transactions.add_partition(producer, topic, partition)
        return refused

    async def add_offsets(self, request: AddOffsetsToTxnRequest, *, context: RequestContext) -> None:
        """The group's ``__consumer_offsets`` partition joins the producer's transaction (Kafka's
        AddOffsetsToTxn; the TxnOffsetCommit that follows writes there).

        Raises:
            InvalidGroupIdError: 400 / 40008, a group id ZooKeeper cannot hold.
            AuthorizationError: 403 / 40301 (Write on the transactional id, Read on the group).
            The errors of :meth:`add_partitions` (fenced, unknown producer id, concurrent transactions).
        """
        permissions = self._permissions(context)
        permissions.require(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        validate_group_id(request.group)
        permissions.require(Operation.READ, ResourceType.GROUP, request.group)
        producer = ProducerBatch(request.producer_id, request.producer_epoch, 0, request.transactional_id)
        await self.transactions.add_partition(
            producer, OFFSETS_TOPIC, partition_for(request.group, self.settings.offsets_topic_num_partitions))

    async def end_transaction(self, request: EndTxnRequest, *,
                              context: RequestContext) -> CoordinatedTransaction:
        """Commit or abort the producer's open transaction (Kafka's EndTxn): answered once the decision is
        durable and, within ``request.timeout.ms``, its markers are written (Complete*; Prepare* when that
        took longer: the decision stands); with nothing produced in it, the current state.

        Raises:
            AuthorizationError: 403 / 40301 (Write on the transactional id).
            InvalidTxnStateError (409 / 40918: the other outcome was decided), InvalidProducerEpochError
            (409 / 40915: fenced), InvalidProducerIdMappingError (409 / 40919), ConcurrentTransactionsError
            (409 / 40920, retriable): those of :meth:`TransactionCoordinator.end_transaction
            <lakelog.coordinators.transaction_coordinator.TransactionCoordinator.end_transaction>`.
        """
        self._permissions(context).require(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        metadata = await self.transactions.end_transaction(
            request.transactional_id, producer_id=request.producer_id, producer_epoch=request.producer_epoch,
            commit=request.commit)
        return CoordinatedTransaction(await self.transactions.coordinator_id(request.transactional_id), metadata)

    async def commit_offsets(self, request: TxnOffsetCommitRequest, *, context: RequestContext) -> None:
        """The group's offsets join the producer's open transaction (beginning it if none is open): they
        become the group's committed offsets when the transaction commits, never if it aborts.

        Raises:
            InvalidGroupIdError: 400 / 40008, a group id ZooKeeper cannot hold.
            AuthorizationError: 403 / 40301 (Write on the transactional id, Read on the group, Read on each
                topic; Kafka's AddOffsetsToTxn, TxnOffsetCommit).
            InvalidProducerEpochError (409 / 40915), InvalidProducerIdMappingError (409 / 40919),
            ConcurrentTransactionsError (409 / 40920, retriable): the transaction's errors.
            With a member id or generation (KIP-447), those of
            :meth:`~lakelog.consumer_groups.classic_coordinator.ClassicGroupCoordinator.check_commit`:
            UnknownMemberIdError, IllegalGenerationError, FencedInstanceIdError, RebalanceInProgressError,
            NotCoordinatorError. Nothing is written then.
        """
        permissions = self._permissions(context)
        permissions.require(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        validate_group_id(request.group)
        permissions.require(Operation.READ, ResourceType.GROUP, request.group)
        permissions.require_all(Operation.READ, ResourceType.TOPIC, (o.topic for o in request.offsets))
        if request.member_id or request.generation_id >= 0:  # Kafka's GroupMetadataManager: -1 and "" pass
            await self.classic.check_commit(request.group, member_id=request.member_id,
                                            generation_id=request.generation_id,
                                            group_instance_id=request.group_instance_id)
        producer = ProducerBatch(request.producer_id, request.producer_epoch, 0, request.transactional_id)
        rows = [{"topic": o.topic, "partition": o.partition, "offset": o.offset, "metadata": o.metadata}
                for o in request.offsets]
        await self.groups.commit(request.group, offsets_of(request.group, rows), producer=producer)
