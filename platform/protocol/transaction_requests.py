"""The producer id and transaction requests of :class:`~lakelog.protocol.http_client.LakelogClient`
(a mixin): InitProducerId for idempotent and transactional producers, and the cluster's transactional
ids (``lakelog transactions list|describe``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx


class TransactionRequests:
    """Requests about producer ids and transactions; mixed into
    :class:`~lakelog.protocol.http_client.LakelogClient`, which provides ``_request`` (one request, an error
    answer raised as the server's error class) and ``cluster_id``."""

    cluster_id: str

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

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
        return self._request("POST", f"/v3/clusters/{self.cluster_id}/producers", json=body).json()

    def list_transactions(self, *, states: Sequence[str] | None = None) -> list[dict]:
        """Every transactional id known cluster-wide, by id (``GET /v3/clusters/{c}/transactions``): each a
        ``TransactionData`` dict (``transactional_id``, ``coordinator_id``, ``state``, ``producer_id``,
        ``producer_epoch``, ``transaction_timeout_ms``, ``partitions`` [{``topic_name``,
        ``partition_id``}], ``transaction_start_time_ms``, ``transaction_duration_ms`` (age, ms; null when
        none is open), ``last_update_time_ms``). ``states``: only ids in these states (``Ongoing``, ...).

        Raises: GatewayError (LeaderNotAvailableError 40406, retriable), ConnectionError.
        """
        params = {"state": list(states)} if states else None
        return self._request("GET", f"/v3/clusters/{self.cluster_id}/transactions", params=params).json()["data"]

    def describe_transaction(self, transactional_id: str) -> dict:
        """One transactional id as its coordinator holds it (``GET /v3/clusters/{c}/transactions/{id}``):
        a ``TransactionData`` dict, as :meth:`list_transactions` gives them.

        Raises: GatewayError (TransactionalIdNotFoundError 40408 when unknown), ConnectionError.
        """
        return self._request("GET", f"/v3/clusters/{self.cluster_id}/transactions/"
                                    f"{quote(transactional_id, safe='')}").json()
