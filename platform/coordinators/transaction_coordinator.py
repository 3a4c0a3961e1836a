"""The transaction coordinator as every broker sees it: a transactional id's requests are answered by its
coordinator, the leader of the id's ``__transaction_state`` partition
(:func:`~lakelog.coordinators.transaction_records.partition_for`, Kafka's rule), wherever that is.

Any broker accepts these requests (Kafka's clients find the coordinator with FindCoordinator; an HTTP
client may talk to any broker): :class:`TransactionCoordinator` serves them with this broker's
:class:`~lakelog.coordinators.transaction_log.TransactionStateManager` when this broker is the coordinator,
else sends them to it through the leader client (the internal ``/lakelog/v1/coordinator/transactions``
routes, which answer only as the coordinator), and sends them again while the coordinator moves
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, a leader election), for up to ``request.timeout.ms``
(:func:`~lakelog.coordinators.coordinator_partitions.retry_while_moving`), as the group coordinator does.

Between brokers a :class:`~lakelog.coordinators.transaction_state.TransactionMetadata` travels as the dict of
:func:`metadata_to_dict` (read back by :func:`metadata_from_dict`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable

from lakelog.config import BrokerSettings
from lakelog.coordinators.coordinator_partitions import retry_while_moving
from lakelog.coordinators.transaction_log import TransactionStateManager
from lakelog.coordinators.transaction_state import TransactionMetadata, TransactionState
from lakelog.producers.errors import InvalidProducerIdMappingError, InvalidTransactionalIdError, InvalidTxnStateError
from lakelog.producers.producer_ids import ProducerIdAndEpoch
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.leader_client import LeaderClient

_PREPARED = (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
_ENDED = (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

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

    async def _check_known(self, transactional_id: str) -> None:
        """Before ``__transaction_state`` exists no transactional id is known: refuse at once (Kafka's
        INVALID_PRODUCER_ID_MAPPING) rather than wait for a coordinator that cannot appear."""
        if not await self.manager.partitions.topic_exists():
            raise InvalidProducerIdMappingError(
                f"transactional id {transactional_id!r} is unknown: no transactional producer has initialized "
                "yet. Get its producer id and epoch first (POST /v3/clusters/{cluster_id}/producers with the "
                "transactional_id); nothing was written.")

    async def add_partition(self, producer: ProducerBatch, topic: str, partition: int) -> None:
        """AddPartitionsToTxn of one partition for a transactional produce request (implicit: the partition
        leader calls it before appending the request's records; :mod:`lakelog.producers.idempotence`), on
        the id's coordinator wherever it is. The transaction begins (Ongoing) if none is open.

        Raises:
            InvalidProducerEpochError (fenced: a newer instance initialized), InvalidProducerIdMappingError
            (the id holds another producer id, or is unknown), ConcurrentTransactionsError (retriable: the
            previous transaction is being completed); NotCoordinatorError, CoordinatorLoadInProgressError,
            LeaderNotAvailableError (retriable); the append's errors. Nothing of the request is written.
        """
        transactional_id = producer.transactional_id
        if not transactional_id:
            raise InvalidTransactionalIdError("A transactional produce request names an empty transactional id.")
        await self._check_known(transactional_id)
        kwargs = dict(producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
                      partitions=[(topic, partition)])

        async def call() -> None:
            url = await self._url(transactional_id)
            if url is None:
                await self.manager.add_partitions(transactional_id, **kwargs)
            else:
                await self.leader_client.transaction_add_partitions(url, transactional_id, **kwargs)
        await self._retrying(call)

    async def end_transaction(self, transactional_id: str, *, producer_id: int, producer_epoch: int,
                              commit: bool) -> TransactionMetadata:
        """EndTxn (Kafka's ``TransactionCoordinator.endTransaction``) on the id's coordinator, wherever it is:
        :meth:`end_local` there.

        Raises: as :meth:`end_local`; NotCoordinatorError, CoordinatorLoadInProgressError,
        LeaderNotAvailableError (retriable) when no coordinator answered in ``request.timeout.ms``.
        """
        if not transactional_id:
            raise InvalidTransactionalIdError("transactional_id must not be empty.")
        await self._check_known(transactional_id)

        async def call() -> TransactionMetadata:
            url = await self._url(transactional_id)
            if url is None:
                return await self.end_local(transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
                                            commit=commit)
            return metadata_from_dict(await self.leader_client.transaction_end(
                url, transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, commit=commit))
        return await self._retrying(call)

    async def end_local(self, transactional_id: str, *, producer_id: int, producer_epoch: int,
                        commit: bool) -> TransactionMetadata:
        """EndTxn on this broker, the id's coordinator: the decision (PrepareCommit / PrepareAbort) is written
        to ``__transaction_state`` (durable once it is), then this waits up to ``request.timeout.ms`` for
        the markers (CompleteCommit / CompleteAbort), so that a read_committed consumer sees a committed
        transaction once the producer's commit is answered.

        Returns:
            The id's current metadata: Complete* once the markers are written, Prepare* when they took
            longer (the decision stands and is carried out, after a coordinator failover too). With no
            transaction open (Empty, CompleteCommit, CompleteAbort under the producer's epoch: nothing was
            produced since the last end; Kafka's producer sends no EndTxn then) the current metadata as it is.

        Raises:
            InvalidProducerIdMappingError (another producer id, unknown id), InvalidProducerEpochError
            (fenced), InvalidTxnStateError (the other outcome was decided: e.g. the transaction timed out and
            was aborted), ConcurrentTransactionsError (retriable); NotCoordinatorError,
            CoordinatorLoadInProgressError (retriable); the append's errors.
        """
        current = await self.manager.describe(transactional_id)
        if (current is not None and current.state in _ENDED
                and (current.producer_id, current.producer_epoch) == (producer_id, producer_epoch)):
            return current  # no transaction open (nothing produced since the last end): nothing to end
        decided = await self.manager.end_transaction(transactional_id, producer_id=producer_id,
                                                     producer_epoch=producer_epoch, commit=commit)
        deadline = time.monotonic() + self.settings.request_timeout_ms / 1000.0
        current = decided if decided is not None else await self.manager.describe(transactional_id)
        while current is not None and current.state in _PREPARED and time.monotonic() < deadline:
            await self.manager.wait_for_change(transactional_id, timeout_s=max(0.0, deadline - time.monotonic()))
            current = await self.manager.describe(transactional_id)
        if current is None:
            raise InvalidTxnStateError(f"transactional id {transactional_id!r} is gone (expired)")
        return current
