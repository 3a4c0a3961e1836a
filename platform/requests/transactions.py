"""Transactions: Kafka's ListTransactions, DescribeTransactions, EndTxn and AddOffsetsToTxn +
TxnOffsetCommit, one operation each, on the transactional id's coordinator wherever it is
(:class:`~lakelog.coordinators.transaction_coordinator.TransactionCoordinator`; a transactional produce
adds its partitions itself, through the partition leader).

Authorization as Kafka's ``KafkaApis``: Describe on a transactional id to see it (lists keep only those),
Write on it to end its transaction or commit offsets in it; a transaction's offsets also need Read on the
group and on each topic.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from lakelog.consumer_groups.coordinator import GroupCoordinator
from lakelog.consumer_groups.instances import validate_group_id
from lakelog.consumer_groups.offset_records import offsets_of
from lakelog.consumer_groups.offsets_admin import PartitionOffset
from lakelog.coordinators.transaction_coordinator import TransactionCoordinator
from lakelog.coordinators.transaction_state import TransactionMetadata
from lakelog.producers.errors import TransactionalIdNotFoundError
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.security.acls import Operation, ResourceType
from lakelog.security.authorizer import Authorizer

__all__ = ["CoordinatedTransaction", "EndTxnRequest", "TransactionOperations", "TxnOffsetCommitRequest"]


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
class TxnOffsetCommitRequest:
    """Kafka's AddOffsetsToTxn + TxnOffsetCommit: a consumer group's offsets in the producer's open transaction.

    Attributes:
        transactional_id, producer_id, producer_epoch: the transactional producer.
        group: the consumer group whose offsets these are.
        offsets: the next offset to read per partition (with metadata).
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    group: str
    offsets: Sequence[PartitionOffset]


class TransactionOperations:
    """The transaction requests of one broker.

    Args:
        transactions: the transaction coordinator, wherever a transactional id's coordinator is.
        groups: the group coordinator (a transaction's offsets go to the group's coordinator).
        cluster_id: the cluster's id once the broker started (named in errors' advice).
        authorizer: the broker's ACLs (``authorizer.enabled``).
    """

    def __init__(self, *, transactions: TransactionCoordinator, groups: GroupCoordinator,
                 cluster_id: Callable[[], str], authorizer: Authorizer) -> None:
        self.transactions = transactions
        self.groups = groups
        self.cluster_id = cluster_id
        self.authorizer = authorizer

    def _permissions(self, context: RequestContext) -> RequestPermissions:
        return RequestPermissions.of(self.authorizer, context)

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
        """
        permissions = self._permissions(context)
        permissions.require(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        validate_group_id(request.group)
        permissions.require(Operation.READ, ResourceType.GROUP, request.group)
        permissions.require_all(Operation.READ, ResourceType.TOPIC, (o.topic for o in request.offsets))
        producer = ProducerBatch(request.producer_id, request.producer_epoch, 0, request.transactional_id)
        rows = [{"topic": o.topic, "partition": o.partition, "offset": o.offset, "metadata": o.metadata}
                for o in request.offsets]
        await self.groups.commit(request.group, offsets_of(request.group, rows), producer=producer)
