"""The transaction coordinator as every broker sees it: a transactional id's requests are answered by its
coordinator, the leader of the id's ``__transaction_state`` partition
(:func:`~lakelog.producers.transaction_records.partition_for`, Kafka's rule), wherever that is.

Any broker accepts these requests (Kafka's clients find the coordinator with FindCoordinator; an HTTP
client may talk to any broker): :class:`TransactionCoordinator` serves them with this broker's
:class:`~lakelog.producers.transaction_log.TransactionStateManager` when this broker is the coordinator,
else sends them to it through the leader client (the internal ``/lakelog/v1/coordinator/transactions``
routes, which answer only as the coordinator), and sends them again while the coordinator moves
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, a leader election), for up to ``request.timeout.ms``
(:func:`~lakelog.replication.coordinator_partitions.retry_while_moving`), as the group coordinator does.

Between brokers a :class:`~lakelog.producers.transaction_state.TransactionMetadata` travels as the dict of
:func:`metadata_to_dict` (read back by :func:`metadata_from_dict`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from lakelog.config import BrokerSettings
from lakelog.producers.errors import InvalidTransactionalIdError
from lakelog.producers.producer_ids import ProducerIdAndEpoch
from lakelog.producers.transaction_log import TransactionStateManager
from lakelog.producers.transaction_state import TransactionMetadata
from lakelog.replication.coordinator_partitions import retry_while_moving
from lakelog.replication.leader_client import LeaderClient

#: ``transaction.timeout.ms`` of a producer that names none: 60000 (Kafka's producer default).
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000


def metadata_to_dict(metadata: TransactionMetadata) -> dict:
    """``metadata`` as JSON-ready fields: ``state`` its Kafka name, ``partitions`` sorted
    ``[topic, partition]`` pairs; the other fields as they are (ints in ms, -1 when unset)."""
    fields = dataclasses.asdict(metadata)
    fields["state"] = metadata.state.value
    fields["partitions"] = [[t, p] for t, p in sorted(metadata.partitions)]
    return fields


def metadata_from_dict(fields: dict) -> TransactionMetadata:
    """:func:`metadata_to_dict`'s inverse. Raises TypeError / ValueError on other fields or values."""
    return TransactionMetadata(**fields)


class TransactionCoordinator:
    """The transaction coordinator's requests from any broker (see the module docstring).

    Args:
        settings: ``request.timeout.ms`` (how long a request waits for a coordinator that moves).
        manager: this broker's :class:`TransactionStateManager` (the transactional ids it coordinates).
        leader_client: the inter-broker client.

    Every method raises NotCoordinatorError / CoordinatorLoadInProgressError / LeaderNotAvailableError
    (503, retriable) when no coordinator answered within ``request.timeout.ms``.
    """

    def __init__(self, settings: BrokerSettings, *, manager: TransactionStateManager,
                 leader_client: LeaderClient) -> None:
        self.settings = settings
        self.manager = manager
        self.leader_client = leader_client

    async def _retrying(self, call: Callable[[], Awaitable]):
        return await retry_while_moving(call, timeout_ms=self.settings.request_timeout_ms)

    async def _url(self, transactional_id: str, *, create: bool = False) -> str | None:
        """The URL of the id's coordinator, None when it is this broker."""
        return await self.manager.partitions.coordinator_url(
            transactional_id, what=f"transactional id '{transactional_id}'", create=create)

    async def coordinator_id(self, transactional_id: str) -> int | None:
        """The broker id of the id's coordinator; None before ``__transaction_state`` exists or while the
        id's partition has no leader."""
        return await self.manager.partitions.coordinator_id(transactional_id)

    async def init_producer_id(self, transactional_id: str, *,
                               transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS) -> ProducerIdAndEpoch:
        """InitProducerId of a transactional producer on the id's coordinator, wherever it is
        (:meth:`TransactionStateManager.init_producer_id`, Kafka's ``handleInitProducerId``): a new producer
        id with epoch 0 for a new transactional id, else the same producer id with epoch + 1, which fences
        the previous instance. ``__transaction_state`` is created on first need.

        Args:
            transactional_id: the producer's ``transactional.id``, non-empty.
            transaction_timeout_ms: its ``transaction.timeout.ms``, in ``(0, transaction.max.timeout.ms]``.
                Default: 60000.

        Raises:
            InvalidTransactionalIdError: an empty id (400 / 40012).
            InvalidTransactionTimeoutError: the timeout is out of range (400 / 40011).
            ConcurrentTransactionsError: the id's previous transaction is being completed, or its open
                transaction was just aborted under a bumped epoch (409 / 40920, retriable).
            NotCoordinatorError, CoordinatorLoadInProgressError, LeaderNotAvailableError (retriable), the
            append's errors (NotEnoughReplicasError, ...).
        """
        if not transactional_id:
            raise InvalidTransactionalIdError(
                "transactional_id must not be empty: name the transactional producer (e.g. \"orders-etl-1\"), "
                "or leave transactional_id out for an idempotent producer.")

        async def call() -> ProducerIdAndEpoch:
            url = await self._url(transactional_id, create=True)
            if url is None:
                return await self.manager.init_producer_id(transactional_id,
                                                           transaction_timeout_ms=transaction_timeout_ms)
            producer_id, producer_epoch = await self.leader_client.transaction_init_producer_id(
                url, transactional_id, transaction_timeout_ms=transaction_timeout_ms)
            return ProducerIdAndEpoch(producer_id, producer_epoch)
        return await self._retrying(call)

    async def describe(self, transactional_id: str) -> TransactionMetadata | None:
        """The id's current metadata from its coordinator, wherever it is (Kafka's DescribeTransactions);
        None when the coordinator knows none (or no transactional producer ever initialized)."""
        if not transactional_id or not await self.manager.partitions.topic_exists():
            return None

        async def call() -> TransactionMetadata | None:
            url = await self._url(transactional_id)
            if url is None:
                return await self.manager.describe(transactional_id)
            fields = await self.leader_client.transaction_describe(url, transactional_id)
            return None if fields is None else metadata_from_dict(fields)
        return await self._retrying(call)

    async def list_transactions(self) -> list[tuple[int, TransactionMetadata]]:
        """``(coordinator broker id, metadata)`` of every transactional id known cluster-wide, by
        transactional id: the union of what every coordinator holds (Kafka's ListTransactions sent to
        every broker). Partitions still loading are left out, as Kafka's brokers leave them out.

        Raises: LeaderNotAvailableError (retriable) when a ``__transaction_state`` partition has no live
        leader or a coordinator does not answer.
        """
        found: dict[str, tuple[int, TransactionMetadata]] = {}
        for broker_id, url in (await self.manager.partitions.coordinator_brokers()).items():
            if url is None:
                metadatas = await self.manager.list_transactions()
            else:
                metadatas = [metadata_from_dict(f) for f in await self.leader_client.transaction_list(url)]
            for m in metadatas:
                found.setdefault(m.transactional_id, (broker_id, m))
        return [found[t] for t in sorted(found)]
