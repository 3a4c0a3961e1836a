"""Producer ids and transactions: :class:`TransactionsClient`, :attr:`LakelogClient.transactions
<lakelog.client.LakelogClient.transactions>`: InitProducerId for idempotent and transactional producers, a
transactional producer's requests (Kafka's ``initTransactions``, ``sendOffsetsToTransaction``,
``commitTransaction``, ``abortTransaction``) and the cluster's transactional ids (``lakelog transactions
list|describe``).

A client becomes a transactional producer with :meth:`TransactionsClient.init_transactions`: from then on
its produce requests carry the transactional id with the idempotent producer's sequences and retries
(:class:`TransactionalProducer`) and join the open transaction, which :meth:`~TransactionsClient.
commit_transaction` or :meth:`~TransactionsClient.abort_transaction` ends. :meth:`~TransactionsClient.
end_transaction` and :meth:`~TransactionsClient.add_offsets_to_transaction` take the producer id and
epoch explicitly, so another process (a Spark driver) can commit a transaction a task wrote.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from lakelog.client.idempotent_producer import DeliveryTimeoutError, IdempotentProducer, ProducerTransport
from lakelog.protocol.errors import RemoteError
from lakelog.protocol.producer_headers import ProducerBatch

if TYPE_CHECKING:
    from lakelog.client.transport import LakelogClient

__all__ = ["CONCURRENT_TRANSACTIONS", "TransactionalProducer", "TransactionsClient"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: ConcurrentTransactionsError (:mod:`lakelog.producers.errors`, not importable from this layer): the
#: previous transaction of the id is being completed; send the same request again.
CONCURRENT_TRANSACTIONS = 40920


class TransactionalProducer(IdempotentProducer):
    """The idempotent producer of one transactional id at one producer id and epoch (from InitProducerId):
    sequences 0, 1, 2, ... and retries with the same sequence as :class:`IdempotentProducer`, every request
    carrying ``X-Lakelog-Transactional-Id`` so it joins the open transaction. It never takes a new producer
    id by itself (a transactional producer that lost its id must abort: Kafka's abortable error): an
    error answer is raised, and the transaction is the caller's to abort.

    Args:
        transport: the client that sends. transactional_id: the producer's ``transactional.id``.
        producer_id, producer_epoch: InitProducerId's answer for it. Other keywords: as
            :class:`IdempotentProducer`.
    """

    def __init__(self, transport: ProducerTransport, transactional_id: str, producer_id: int, producer_epoch: int,
                 **kwargs: Any) -> None:
        super().__init__(transport, **kwargs)
        self.transactional_id = transactional_id
        self._producer = (producer_id, producer_epoch)

    def _begin(self, deadline: float) -> ProducerBatch:
        return dataclasses.replace(super()._begin(deadline), transactional_id=self.transactional_id)

    def _refused(self, batch: ProducerBatch, err: RemoteError) -> None:
        """Keep the producer id: a refused transactional request fails the transaction."""

    def _ensure_producer(self, deadline: float) -> tuple[int, int]:
        producer = self._producer
        if producer is None:  # 2**31 requests in one producer epoch
            raise DeliveryTimeoutError(f"transactional producer {self.transactional_id!r} ran out of sequences; "
                                       "initialize it again")
        return producer


class TransactionsClient:
    """Producer id and transaction requests of one :class:`~lakelog.client.LakelogClient` (its transport
    sends them; :meth:`init_transactions` makes its produce requests transactional)."""

    def __init__(self, transport: "LakelogClient") -> None:
        self.transport = transport

    @staticmethod
    def _until_settled(call: Callable[[], T], *, timeout_s: float, what: str) -> T:
        """``call()`` again while it raises a retriable error (40920 while the id's previous transaction is
        completed, no coordinator yet, ZooKeeper away) or no gateway answers, for up to ``timeout_s``;
        then the last error."""
        deadline = time.monotonic() + timeout_s
        wait_s = 0.05
        while True:
            try:
                return call()
            except RemoteError as e:
                if not e.retriable and e.error_code != CONCURRENT_TRANSACTIONS:
                    raise
                last: Exception = e
            except ConnectionError as e:
                last = e
            if time.monotonic() + wait_s >= deadline:
                raise last
            log.info("%s: %s; retrying in %.0f ms", what, last, wait_s * 1000)
            time.sleep(wait_s)
            wait_s = min(wait_s * 2, 1.0)

    def init_producer_id(self, *, transactional_id: str | None = None,
                         transaction_timeout_ms: int | None = None) -> dict:
        """A producer id (``POST /v3/clusters/{c}/producers``, Kafka's InitProducerId): a new one with epoch 0
        for an idempotent producer; with ``transactional_id``, the one its transaction coordinator holds
        with the epoch + 1 (fencing the previous instance; a new id: a new producer id with epoch 0).

        Args:
            transactional_id: a transactional producer's ``transactional.id`` (non-empty); None for an
                idempotent producer.
            transaction_timeout_ms: its ``transaction.timeout.ms``; None: the server's default, 60000.

        Returns:
            ``{"producer_id": int (int64 >= 0), "producer_epoch": int (0..32767)}``.

        Raises:
            GatewayError: InvalidTransactionTimeoutError (40011), InvalidTransactionalIdError (40012),
            ConcurrentTransactionsError (40920, retriable), ZooKeeperUnavailableError (50304, retriable),
            NotCoordinatorError (50320, retriable). ConnectionError: no gateway reachable.
        """
        body: dict = {}
        if transactional_id is not None:
            body["transactional_id"] = transactional_id
            if transaction_timeout_ms is not None:
                body["transaction_timeout_ms"] = transaction_timeout_ms
        return self.transport.request("POST", f"/v3/clusters/{self.transport.cluster_id}/producers",
                                      json=body).json()

    def list_transactions(self, *, states: Sequence[str] | None = None) -> list[dict]:
        """Every transactional id known cluster-wide, by id (``GET /v3/clusters/{c}/transactions``): each a
        ``TransactionData`` dict (``transactional_id``, ``coordinator_id``, ``state``, ``producer_id``,
        ``producer_epoch``, ``transaction_timeout_ms``, ``partitions`` [{``topic_name``,
        ``partition_id``}], ``transaction_start_time_ms``, ``transaction_duration_ms`` (age, ms; null when
        none is open), ``last_update_time_ms``). ``states``: only ids in these states (``Ongoing``, ...).

        Raises: GatewayError (LeaderNotAvailableError 40404, retriable), ConnectionError.
        """
        params = {"state": list(states)} if states else None
        path = f"/v3/clusters/{self.transport.cluster_id}/transactions"
        return self.transport.request("GET", path, params=params).json()["data"]

    def describe_transaction(self, transactional_id: str) -> dict:
        """One transactional id as its coordinator holds it (``GET /v3/clusters/{c}/transactions/{id}``):
        a ``TransactionData`` dict, as :meth:`list_transactions` gives them.

        Raises: GatewayError (TransactionalIdNotFoundError 40408 when unknown), ConnectionError.
        """
        return self.transport.request("GET", f"/v3/clusters/{self.transport.cluster_id}/transactions/"
                                    f"{quote(transactional_id, safe='')}").json()

    # -- a transactional producer ---------------------------------------------------------------

    def init_transactions(self, transactional_id: str, *, transaction_timeout_ms: int | None = None,
                          timeout_s: float = 60.0, **producer_settings: Any) -> dict:
        """Kafka's ``initTransactions``: InitProducerId for ``transactional_id`` (fencing every older
        instance and aborting its open transaction; resent while the coordinator completes a previous
        transaction, 40920), then this client's produce requests join the id's transaction
        (:class:`TransactionalProducer`, with ``producer_settings``: ``delivery_timeout_ms``,
        ``retry_backoff_ms``, ``retry_backoff_max_ms``).

        Returns:
            ``{"producer_id", "producer_epoch"}``.

        Raises:
            GatewayError: InvalidTransactionTimeoutError (40011), InvalidTransactionalIdError (40012), or a
            retriable error still answered after ``timeout_s``. ConnectionError: no gateway answered.
        """
        answer = self._until_settled(
            lambda: self.init_producer_id(transactional_id=transactional_id,
                                          transaction_timeout_ms=transaction_timeout_ms),
            timeout_s=timeout_s, what=f"InitProducerId of {transactional_id!r}")
        self.transport.producer = TransactionalProducer(self.transport, transactional_id, int(answer["producer_id"]),
                                              int(answer["producer_epoch"]), **producer_settings)
        return answer

    def _transactional(self) -> TransactionalProducer:
        producer = self.transport.producer
        if not isinstance(producer, TransactionalProducer):
            raise RuntimeError("not a transactional producer: call init_transactions() first")
        return producer

    def send_offsets_to_transaction(self, group_id: str, offsets: Sequence[dict]) -> dict:
        """Kafka's ``sendOffsetsToTransaction``: :meth:`add_offsets_to_transaction` with this client's
        transactional producer (see :meth:`init_transactions`)."""
        p = self._transactional()
        return self.add_offsets_to_transaction(p.transactional_id, producer_id=p.producer_id,
                                               producer_epoch=p.producer_epoch, group_id=group_id, offsets=offsets)

    def commit_transaction(self, *, timeout_s: float = 60.0) -> dict:
        """Kafka's ``commitTransaction``: :meth:`end_transaction` (commit) of this client's transactional producer."""
        p = self._transactional()
        return self.end_transaction(p.transactional_id, producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                                    commit=True, timeout_s=timeout_s)

    def abort_transaction(self, *, timeout_s: float = 60.0) -> dict:
        """Kafka's ``abortTransaction``: :meth:`end_transaction` (abort) of this client's transactional producer."""
        p = self._transactional()
        return self.end_transaction(p.transactional_id, producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                                    commit=False, timeout_s=timeout_s)

    def add_offsets_to_transaction(self, transactional_id: str, *, producer_id: int, producer_epoch: int,
                                   group_id: str, offsets: Sequence[dict]) -> dict:
        """Commit ``group_id``'s ``offsets`` (``[{"topic", "partition", "offset"}]``, the next offsets to
        read) in the producer's open transaction (``POST /v3/clusters/{c}/transactions/{id}/offsets``,
        Kafka's AddOffsetsToTxn + TxnOffsetCommit): they count for the group exactly when it commits.
        Resent while answered 40920 or another retriable error (the same offsets: committing them twice in
        one transaction changes nothing).

        Raises:
            GatewayError: InvalidProducerEpochError (40915, fenced), InvalidProducerIdMappingError (40919),
            InvalidGroupIdError (40008), a retriable error still answered after 60 s. ConnectionError.
        """
        body = {"producer_id": producer_id, "producer_epoch": producer_epoch, "group_id": group_id,
                "offsets": [dict(o) for o in offsets]}
        path = f"/v3/clusters/{self.transport.cluster_id}/transactions/{quote(transactional_id, safe='')}/offsets"
        return self._until_settled(lambda: self.transport.request("POST", path, json=body).json(), timeout_s=60.0,
                                   what=f"offsets in the transaction of {transactional_id!r}")

    def end_transaction(self, transactional_id: str, *, producer_id: int, producer_epoch: int, commit: bool,
                        timeout_s: float = 60.0) -> dict:
        """End the producer's open transaction (``POST /v3/clusters/{c}/transactions/{id}/commit`` or
        ``/abort``, Kafka's EndTxn), resent while answered 40920 or another retriable error. Any process may
        end it with the producer id and epoch InitProducerId gave.

        Returns:
            The id's ``TransactionData``: ``state`` ``CompleteCommit`` / ``CompleteAbort`` once its markers are
            written, ``PrepareCommit`` / ``PrepareAbort`` when they took longer (the decision stands); with
            nothing produced in the transaction, the id's current state.

        Raises:
            GatewayError: InvalidProducerEpochError (40915, fenced by a newer instance or a timeout's abort),
            InvalidTxnStateError (40918, e.g. a commit after the transaction timed out and was aborted),
            InvalidProducerIdMappingError (40919), a retriable error still answered after ``timeout_s``.
            ConnectionError.
        """
        body = {"producer_id": producer_id, "producer_epoch": producer_epoch}
        path = (f"/v3/clusters/{self.transport.cluster_id}/transactions/{quote(transactional_id, safe='')}/"
                f"{'commit' if commit else 'abort'}")
        return self._until_settled(lambda: self.transport.request("POST", path, json=body).json(), timeout_s=timeout_s,
                                   what=f"{'commit' if commit else 'abort'} of {transactional_id!r}")
