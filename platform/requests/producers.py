"""Producer ids: Kafka's InitProducerId, one operation for idempotent and transactional producers.

- Idempotent producer (no transactional id): any broker answers a new producer id with epoch 0; ids are
  unique cluster-wide (:class:`~lakelog.coordinators.producer_id_manager.ProducerIdManager`: blocks
  reserved in ZooKeeper).
- Transactional producer: the coordinator of the transactional id answers, asked by whichever broker took
  the request (:class:`~lakelog.coordinators.transaction_coordinator.TransactionCoordinator`): a new
  producer id with epoch 0 for a new id, else the same producer id with the epoch + 1, which fences the
  previous instance of the producer.

Authorization as Kafka's ``KafkaApis.handleInitProducerIdRequest``: Write on the transactional id; without
one, IdempotentWrite on the cluster or Write on some topic (KIP-679).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from lakelog.coordinators.producer_id_manager import ProducerIdManager
from lakelog.coordinators.transaction_coordinator import DEFAULT_TRANSACTION_TIMEOUT_MS, TransactionCoordinator
from lakelog.producers.producer_ids import ProducerIdAndEpoch
from lakelog.replication.metadata_cache import MetadataCache
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.security.acls import Operation, ResourceType
from lakelog.security.authorizer import Authorizer

__all__ = ["InitProducerIdRequest", "ProducerIds"]


@dataclass(frozen=True, kw_only=True)
class InitProducerIdRequest:
    """Kafka's InitProducerId.

    Attributes:
        transactional_id: a transactional producer's ``transactional.id`` (non-empty), or None for an
            idempotent producer.
        transaction_timeout_ms: the transactional producer's ``transaction.timeout.ms``, in
            ``(0, transaction.max.timeout.ms]``; None: 60000 (Kafka's producer default). Ignored without a
            transactional id.
    """

    transactional_id: str | None = None
    transaction_timeout_ms: int | None = None


class ProducerIds:
    """InitProducerId of one broker.

    Args:
        producer_ids: this broker's producer id blocks (idempotent producers).
        transactions: the transaction coordinator, wherever a transactional id's coordinator is.
        cache: the topics (an idempotent producer with Write on any of them may have an id, KIP-679).
        authorizer: the broker's ACLs (``authorizer.enabled``).
    """

    def __init__(self, *, producer_ids: ProducerIdManager, transactions: TransactionCoordinator,
                 cache: MetadataCache, authorizer: Authorizer) -> None:
        self.producer_ids = producer_ids
        self.transactions = transactions
        self.cache = cache
        self.authorizer = authorizer

    async def init_producer_id(self, request: InitProducerIdRequest, *,
                               context: RequestContext) -> ProducerIdAndEpoch:
        """A producer id and epoch (see the module docstring).

        Raises:
            AuthorizationError: 403 / 40301 (Write on the transactional id; IdempotentWrite on the cluster
                without one, unless the principal may Write on some topic).
            InvalidTransactionalIdError (400 / 40012), InvalidTransactionTimeoutError (400 / 40011),
            ConcurrentTransactionsError (409 / 40920, retriable), NotCoordinatorError,
            CoordinatorLoadInProgressError, LeaderNotAvailableError (retriable): those of
            :meth:`TransactionCoordinator.init_producer_id
            <lakelog.coordinators.transaction_coordinator.TransactionCoordinator.init_producer_id>`.
            ZooKeeperUnavailableError (503 / 50304), ProducerIdsExhaustedError: those of
            :meth:`ProducerIdManager.init_producer_id
            <lakelog.coordinators.producer_id_manager.ProducerIdManager.init_producer_id>`.
        """
        permissions = RequestPermissions.of(self.authorizer, context)
        if request.transactional_id is not None:
            permissions.require(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
            timeout_ms = request.transaction_timeout_ms
            return await self.transactions.init_producer_id(
                request.transactional_id,
                transaction_timeout_ms=DEFAULT_TRANSACTION_TIMEOUT_MS if timeout_ms is None else timeout_ms)
        if permissions.enabled:
            permissions.require_idempotent_write(self.cache.topics())
        return await asyncio.to_thread(self.producer_ids.init_producer_id)
