"""The one client for broker-to-broker calls: every request one broker sends to another's gateway.

A broker asks a partition's leader when it does not lead the partition itself:

- :meth:`LeaderClient.produce`: a topic-level produce's share for a partition led elsewhere (Arrow IPC
  to ``POST /topics/{t}/partitions/{p}/records``, same ``acks``), as REST Proxy produces to every leader;
- :meth:`LeaderClient.partition_offsets`: log start offset, lake end offset, LEO and HW
  (``GET /topics/{t}/partitions/{p}``); :meth:`~LeaderClient.stable_offsets` with the last stable offset;
- :meth:`LeaderClient.topic_log`: the partition's table location for direct readers
  (``GET /lakelog/v1/topics/{t}/logs?partition=``);
- :meth:`LeaderClient.fetch`: records below the HW (or the LSO, read_committed) as Arrow (consumer
  instances on another broker);
- :meth:`LeaderClient.replica_fetch` and :meth:`LeaderClient.epoch_end_offset`: a follower's replica
  fetch and KIP-101 OffsetsForLeaderEpoch (``/lakelog/v1/replica/...``);
- :meth:`LeaderClient.coordinator_commit`, :meth:`~LeaderClient.coordinator_offsets`,
  :meth:`~LeaderClient.coordinator_delete_offsets`, :meth:`~LeaderClient.coordinator_groups`: a group's
  offsets on its coordinator, the leader of the group's ``__consumer_offsets`` partition
  (``/lakelog/v1/coordinator/...``; :mod:`lakelog.consumer_groups.coordinator`);
- :meth:`LeaderClient.transaction_init_producer_id`, :meth:`~LeaderClient.transaction_describe`,
  :meth:`~LeaderClient.transaction_list`: a transactional id's InitProducerId and metadata on its
  transaction coordinator, the leader of the id's ``__transaction_state`` partition
  (``/lakelog/v1/coordinator/transactions...``; :mod:`lakelog.coordinators.transaction_coordinator`);
  :meth:`~LeaderClient.transaction_add_partitions` and :meth:`~LeaderClient.transaction_end` there too
  (AddPartitionsToTxn, EndTxn);
- :meth:`LeaderClient.write_txn_marker`: a transaction's commit or abort marker on a partition leader
  (Kafka's WriteTxnMarkers, ``/lakelog/v1/replica/...``; :mod:`lakelog.coordinators.transaction_markers`).
- :meth:`LeaderClient.delete_records`: DeleteRecords of one partition on its leader
  (``/lakelog/v1/replica/...``; :mod:`lakelog.replication.record_deletion`).
- :meth:`LeaderClient.schema_registry_write`: a schema registry write on its writer, the leader of
  ``_schemas-0`` (``/lakelog/v1/coordinator/schemas/writes``; :mod:`lakelog.schemas.registry`).

Errors are mapped once, here: a transport failure (connection refused, timeout) raises
:class:`~lakelog.replication.errors.LeaderNotAvailableError` (retriable); an error answer raises the
:class:`~lakelog.errors.LakelogError` the leader raised, rebuilt by
:func:`lakelog.protocol.errors.error_from_response` (``NotLeaderError`` naming the new leader,
``OffsetOutOfRangeError``, ``UnknownTopicError``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa

from lakelog.log_tables.fetch import READ_END_OFFSET_KEY
from lakelog.log_tables.transaction_index import IsolationLevel
from lakelog.protocol import media_types
from lakelog.protocol.arrow_ipc import arrow_ipc, read_arrow_ipc
from lakelog.protocol.errors import error_from_response
from lakelog.protocol.fetch_requests import NEXT_OFFSET_HEADER
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.client.tls import client_ssl_context, describe_tls_failure, uses_tls
from lakelog.errors.schemas import SCHEMA_REGISTRY_ERROR_HEADER, registry_error_from_body
from lakelog.replication.acks import Acks
from lakelog.replication.errors import LeaderNotAvailableError

#: Prefix of the internal replica routes (hidden from the OpenAPI document).
REPLICA_PREFIX = "/lakelog/v1/replica"
#: Prefix of the internal group and transaction coordinator routes (hidden from the OpenAPI document).
COORDINATOR_PREFIX = "/lakelog/v1/coordinator"


@dataclass(frozen=True)
class ReplicaFetchResult:
    """A leader's answer to a replica fetch.

    Attributes:
        records: full log rows (``LOG_SCHEMA``) from the fetch offset, possibly empty.
        high_watermark: the leader's HW when it answered.
        log_end_offset: the leader's LEO when it answered.
        log_start_offset: the leader's log start offset when it answered (-1 when not sent).
    """

    records: pa.Table | None
    high_watermark: int
    log_end_offset: int
    log_start_offset: int = -1


class LeaderClient:
    """Broker-to-broker HTTP calls over one shared connection pool.

    Args:
        request_timeout_ms: timeout of a forwarded produce on top of which 5 s are allowed for the
            transfer (``request.timeout.ms``). Default: 30000.
        max_connections: connection pool size. Default: 200.
        auth: ``(inter.broker.username, inter.broker.password)``: every call carries them as HTTP Basic
            credentials (``authentication.methods=basic``). Default: None (no credentials).
        ssl_cafile: ``ssl.cafile``: the other brokers' TLS certificates are verified against it
            (:func:`lakelog.client.tls.client_ssl_context`). Default: None (the system's trusted CAs).
        ssl_certfile, ssl_keyfile: this broker's ``ssl.certfile``/``ssl.keyfile``, presented as its client
            certificate (``ssl.client.auth``; ``authentication.methods=mtls``). Default: None.

    Use inside the event loop that serves the gateway; :meth:`aclose` when the broker stops.
    """

    def __init__(self, *, request_timeout_ms: int = 30_000, max_connections: int = 200,
                 auth: tuple[str, str] | None = None, ssl_cafile: str | Path | None = None,
                 ssl_certfile: str | Path | None = None, ssl_keyfile: str | Path | None = None) -> None:
        self.request_timeout_ms = request_timeout_ms
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=min(50, max_connections))
        tls = {"ssl_cafile": ssl_cafile, "ssl_certfile": ssl_certfile, "ssl_keyfile": ssl_keyfile}
        self._http = httpx.AsyncClient(timeout=30, limits=limits,
                                       auth=None if auth is None else httpx.BasicAuth(*auth),
                                       verify=client_ssl_context(**tls) if uses_tls(**tls) else True)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _call(self, method: str, url: str, *, what: str, **kwargs: Any) -> httpx.Response:
        """One request; transport errors become LeaderNotAvailableError, error answers their LakelogError
        (a schema registry error answer its :mod:`lakelog.errors.schemas` class)."""
        try:
            resp = await self._http.request(method, url, **kwargs)
        except httpx.HTTPError as e:
            tls_failure = describe_tls_failure(e, url=url.split("/", 3)[:3][-1])
            raise LeaderNotAvailableError(f"The leader of {what} at {url.split('/', 3)[:3][-1]} did not answer "
                                          f"({tls_failure or type(e).__name__}); retry.") from None
        if resp.status_code >= 400:
            if resp.headers.get(SCHEMA_REGISTRY_ERROR_HEADER) == "true":
                raise registry_error_from_body(resp.json())
            raise error_from_response(resp)
        return resp

    async def produce(self, leader_url: str, topic: str, partition: int, records: pa.Table, *,
                      acks: Acks, producer: ProducerBatch | None = None) -> int:
        """Append ``records`` on the leader; return the base offset (-1 with ``acks="0"``). An idempotent
        request's ``producer`` goes along as its headers (the leader deduplicates).

        Raises: LeaderNotAvailableError, or what the leader answered (NotLeaderError, ...).
        """
        headers = {"Content-Type": media_types.ARROW_STREAM}
        if producer is not None:
            headers.update(producer.headers())
        resp = await self._call(
            "POST", f"{leader_url}/topics/{topic}/partitions/{partition}/records", what=f"{topic}-{partition}",
            params={"acks": acks}, content=arrow_ipc(records), headers=headers,
            timeout=self.request_timeout_ms / 1000.0 + 5)
        return int(resp.json()["base_offset"])

    async def partition_offsets(self, leader_url: str, topic: str, partition: int) -> tuple[int, int, int, int]:
        """``(log_start_offset, lake_end_offset, log_end_offset, high_watermark)`` as the leader has them.

        Raises: LeaderNotAvailableError (also when the answer lacks offsets: the leader is moving), or
        what the leader answered.
        """
        return (await self.stable_offsets(leader_url, topic, partition))[:4]

    async def stable_offsets(self, leader_url: str, topic: str,
                             partition: int) -> tuple[int, int, int, int, int]:
        """:meth:`partition_offsets` plus the leader's last stable offset (Kafka's LSO: the first offset of a
        still-open transaction, at most the HW; the HW when the leader answers none)."""
        resp = await self._call("GET", f"{leader_url}/topics/{topic}/partitions/{partition}",
                                what=f"{topic}-{partition}", timeout=5.0)
        body = resp.json()
        if body.get("high_watermark") is None:
            raise LeaderNotAvailableError(f"The leader of {topic}-{partition} at {leader_url} does not know its "
                                          "offsets yet; retry.")
        hw, lake_end, lso = int(body["high_watermark"]), body.get("lake_end_offset"), body.get("last_stable_offset")
        return (int(body["log_start_offset"]), hw if lake_end is None else int(lake_end),
                int(body["log_end_offset"]), hw, hw if lso is None else int(lso))

    async def offset_for_timestamp(self, leader_url: str, topic: str, partition: int, *, timestamp_ms: int) -> int:
        """The leader's first offset whose timestamp is >= ``timestamp_ms`` (its high watermark when none).

        Raises: LeaderNotAvailableError, or what the leader answered (NotLeaderError when it moved).
        """
        resp = await self._call("GET", f"{leader_url}/lakelog/v1/topics/{topic}/partitions/{partition}/offset-for-timestamp",
                                what=f"{topic}-{partition}", params={"timestamp_ms": timestamp_ms}, timeout=30.0)
        return int(resp.json()["offset"])

    async def topic_log(self, leader_url: str, topic: str, partition: int, *, details: bool = False) -> dict:
        """The partition's ``PartitionLogInfo`` body as the leader answers it (table URI, offsets, epoch; with
        ``details`` the table's version, files and bytes on disk too)."""
        resp = await self._call("GET", f"{leader_url}/lakelog/v1/topics/{topic}/logs", what=f"{topic}-{partition}",
                                params={"partition": partition, "details": str(details).lower()}, timeout=10.0)
        return resp.json()[0]

    async def fetch(self, leader_url: str, topic: str, partition: int, *, offset: int, max_bytes: int,
                    max_wait_ms: int = 0, isolation_level: IsolationLevel = "read_uncommitted") -> pa.Table:
        """Records from ``offset`` below the leader's HW (read_committed: below its LSO, without aborted
        records; Kafka's ``isolation.level``), columns ``offset``, ``timestamp`` (ms, UTC), ``key``,
        ``value``, ``headers``. Where the read ended (past dropped transaction markers) is in the table's
        schema metadata as the leader's own read says it (:func:`lakelog.log_tables.fetch.read_end_offset`).

        Raises: LeaderNotAvailableError, OffsetOutOfRangeError, NotLeaderError, UnknownTopicError, ...
        """
        resp = await self._call(
            "GET", f"{leader_url}/topics/{topic}/partitions/{partition}/records", what=f"{topic}-{partition}",
            params={"offset": offset, "max_bytes": max_bytes, "max_wait_ms": max_wait_ms,
                    "isolation_level": isolation_level},
            headers={"Accept": media_types.ARROW_STREAM}, timeout=max_wait_ms / 1000.0 + 30)
        table = read_arrow_ipc(resp.content)
        end = resp.headers.get(NEXT_OFFSET_HEADER)
        return table if end is None else table.replace_schema_metadata({READ_END_OFFSET_KEY: end.encode()})

    async def replica_fetch(self, leader_url: str, topic: str, partition: int, *, replica_id: int,
                            leader_epoch: int, offset: int, max_bytes: int, max_wait_ms: int,
                            log_start_offset: int = -1) -> ReplicaFetchResult:
        """A follower's fetch from its leader (long-polls up to ``max_wait_ms``); ``log_start_offset`` is
        the follower's (the leader's DeleteRecords waits for it).

        Raises: OffsetOutOfRangeError when ``offset`` is beyond the leader's LEO (truncate first) or
        below its log start offset (start over there),
        FencedLeaderEpochError / UnknownLeaderEpochError on an epoch mismatch, NotLeaderError,
        LeaderNotAvailableError.
        """
        resp = await self._call(
            "GET", f"{leader_url}{REPLICA_PREFIX}/topics/{topic}/partitions/{partition}/records",
            what=f"{topic}-{partition}",
            params={"offset": offset, "replica_id": replica_id, "leader_epoch": leader_epoch,
                    "max_wait_ms": max_wait_ms, "max_bytes": max_bytes, "log_start_offset": log_start_offset},
            timeout=max_wait_ms / 1000.0 + 30)
        records = read_arrow_ipc(resp.content) if resp.content else None
        return ReplicaFetchResult(records, int(resp.headers.get("X-Lakelog-High-Watermark", "0")),
                                  int(resp.headers.get("X-Lakelog-Log-End-Offset", "-1")),
                                  int(resp.headers.get("X-Lakelog-Log-Start-Offset", "-1")))

    async def epoch_end_offset(self, leader_url: str, topic: str, partition: int, *, replica_id: int,
                               leader_epoch: int, epoch: int) -> tuple[int, int]:
        """KIP-101's OffsetsForLeaderEpoch: ``(largest epoch <= epoch in the leader's log, its end offset)``."""
        resp = await self._call(
            "GET", f"{leader_url}{REPLICA_PREFIX}/topics/{topic}/partitions/{partition}/epoch-end-offset",
            what=f"{topic}-{partition}",
            params={"epoch": epoch, "leader_epoch": leader_epoch, "replica_id": replica_id})
        answer = resp.json()
        return int(answer["epoch"]), int(answer["end_offset"])

    # -- group coordinators ---------------------------------------------------------------------

    async def coordinator_commit(self, url: str, group: str, offsets: list[dict], *,
                                 current_generation: int | None, only_newer: bool = False,
                                 producer: dict | None = None) -> bool:
        """Commit ``offsets`` (``CommittedOffset`` fields as dicts) on ``group``'s coordinator at ``url``;
        False for a replayed idempotent commit. ``producer`` (``producer_id``, ``producer_epoch``,
        ``transactional_id``): a transactional producer's commit (TxnOffsetCommit). Default: None.

        Raises: NotCoordinatorError / CoordinatorLoadInProgressError (retriable: it moved or is loading),
        IllegalGenerationError, LeaderNotAvailableError (no answer), the append's errors (a transactional
        commit: the transaction coordinator's too).
        """
        resp = await self._call("POST", f"{url}{COORDINATOR_PREFIX}/groups/{group}/offsets", what=f"group '{group}'",
                                json={"offsets": offsets, "current_generation": current_generation,
                                      "only_newer": only_newer, "producer": producer},
                                timeout=self.request_timeout_ms / 1000.0 + 5)
        return bool(resp.json()["committed"])

    async def coordinator_offsets(self, url: str, group: str, *, topic: str | None = None) -> list[dict]:
        """``group``'s committed offsets (``CommittedOffset`` fields as dicts) from its coordinator at ``url``."""
        resp = await self._call("GET", f"{url}{COORDINATOR_PREFIX}/groups/{group}/offsets", what=f"group '{group}'",
                                params={"topic": topic} if topic else None, timeout=10.0)
        return resp.json()["offsets"]

    async def coordinator_delete_offsets(self, url: str, group: str, partitions: list[tuple[str, int]]) -> list[list]:
        """Delete ``group``'s offsets of ``partitions`` on its coordinator; the ``[topic, partition]`` s deleted."""
        resp = await self._call("POST", f"{url}{COORDINATOR_PREFIX}/groups/{group}/offsets:delete",
                                what=f"group '{group}'", json={"partitions": [list(tp) for tp in partitions]},
                                timeout=self.request_timeout_ms / 1000.0 + 5)
        return resp.json()["deleted"]

    async def coordinator_groups(self, url: str) -> list[str]:
        """The groups with committed offsets that the broker at ``url`` coordinates."""
        resp = await self._call("GET", f"{url}{COORDINATOR_PREFIX}/groups", what="the groups", timeout=10.0)
        return resp.json()["groups"]

    # -- transaction coordinators ---------------------------------------------------------------

    async def transaction_init_producer_id(self, url: str, transactional_id: str, *,
                                           transaction_timeout_ms: int) -> tuple[int, int]:
        """InitProducerId of a transactional producer on the coordinator of ``transactional_id`` at ``url``:
        ``(producer_id, producer_epoch)``, written to ``__transaction_state`` when this returns.

        Raises: NotCoordinatorError / CoordinatorLoadInProgressError (retriable: it moved or is loading),
        InvalidTransactionTimeoutError, ConcurrentTransactionsError (retriable), LeaderNotAvailableError (no
        answer), the append's errors.
        """
        resp = await self._call("POST", f"{url}{COORDINATOR_PREFIX}/transactions/init-producer-id",
                                what=f"transactional id '{transactional_id}'",
                                json={"transactional_id": transactional_id,
                                      "transaction_timeout_ms": transaction_timeout_ms},
                                timeout=self.request_timeout_ms / 1000.0 + 5)
        body = resp.json()
        return int(body["producer_id"]), int(body["producer_epoch"])

    async def transaction_describe(self, url: str, transactional_id: str) -> dict | None:
        """The current metadata of ``transactional_id`` (``TransactionMetadata`` fields as a dict, the
        partitions as ``[topic, partition]`` pairs) from its coordinator at ``url``; None when it knows none.

        Raises: NotCoordinatorError / CoordinatorLoadInProgressError (retriable), LeaderNotAvailableError.
        """
        resp = await self._call("GET", f"{url}{COORDINATOR_PREFIX}/transactions/describe",
                                what=f"transactional id '{transactional_id}'",
                                params={"transactional_id": transactional_id}, timeout=10.0)
        return resp.json()["transaction"]

    async def transaction_list(self, url: str) -> list[dict]:
        """The metadata (as :meth:`transaction_describe`) of every transactional id the broker at ``url``
        coordinates (its loaded ``__transaction_state`` partitions)."""
        resp = await self._call("GET", f"{url}{COORDINATOR_PREFIX}/transactions", what="the transactional ids",
                                timeout=10.0)
        return resp.json()["transactions"]

    async def transaction_add_partitions(self, url: str, transactional_id: str, *, producer_id: int,
                                         producer_epoch: int, partitions: list[tuple[str, int]]) -> None:
        """AddPartitionsToTxn on the coordinator of ``transactional_id`` at ``url``: the ``(topic, partition)``
        pairs join the producer's transaction (written to ``__transaction_state`` when this returns).

        Raises: NotCoordinatorError / CoordinatorLoadInProgressError (retriable), InvalidProducerEpochError,
        InvalidProducerIdMappingError, ConcurrentTransactionsError (retriable), LeaderNotAvailableError.
        """
        await self._call("POST", f"{url}{COORDINATOR_PREFIX}/transactions/add-partitions",
                         what=f"transactional id '{transactional_id}'",
                         json={"transactional_id": transactional_id, "producer_id": producer_id,
                               "producer_epoch": producer_epoch, "partitions": [list(tp) for tp in partitions]},
                         timeout=self.request_timeout_ms / 1000.0 + 5)

    async def transaction_end(self, url: str, transactional_id: str, *, producer_id: int, producer_epoch: int,
                              commit: bool) -> dict:
        """EndTxn on the coordinator of ``transactional_id`` at ``url``; answers once the decision is
        durable and, within ``request.timeout.ms``, carried out: the id's metadata (as
        :meth:`transaction_describe`).

        Raises: NotCoordinatorError / CoordinatorLoadInProgressError (retriable), InvalidProducerEpochError,
        InvalidProducerIdMappingError, InvalidTxnStateError, ConcurrentTransactionsError (retriable),
        LeaderNotAvailableError.
        """
        resp = await self._call("POST", f"{url}{COORDINATOR_PREFIX}/transactions/end",
                                what=f"transactional id '{transactional_id}'",
                                json={"transactional_id": transactional_id, "producer_id": producer_id,
                                      "producer_epoch": producer_epoch, "commit": commit},
                                timeout=2 * self.request_timeout_ms / 1000.0 + 5)
        return resp.json()["transaction"]

    async def write_txn_marker(self, leader_url: str, topic: str, partition: int, *, producer_id: int,
                               producer_epoch: int, control: str, coordinator_epoch: int) -> int:
        """WriteTxnMarkers for one partition on its leader at ``leader_url``: the marker's offset, once the
        leader's ISR has it.

        Raises: NotLeaderError, LeaderNotAvailableError, UnknownTopicError, UnknownPartitionError,
        InvalidProducerEpochError, NotEnoughReplicasAfterAppendError, RequestTimedOutError.
        """
        resp = await self._call("POST", f"{leader_url}{REPLICA_PREFIX}/topics/{topic}/partitions/{partition}/markers",
                                what=f"{topic}-{partition}",
                                json={"producer_id": producer_id, "producer_epoch": producer_epoch, "control": control,
                                      "coordinator_epoch": coordinator_epoch},
                                timeout=self.request_timeout_ms / 1000.0 + 5)
        return int(resp.json()["offset"])

    async def delete_records(self, leader_url: str, topic: str, partition: int, *, offset: int, timeout_ms: int) -> int:
        """DeleteRecords for one partition on its leader at ``leader_url``: the partition's low watermark once
        its replicas moved their log start offsets up to ``offset`` (-1: the high watermark), waiting up to
        ``timeout_ms`` for them.

        Raises: NotLeaderError, LeaderNotAvailableError, UnknownTopicError, UnknownPartitionError,
        OffsetOutOfRangeError, PolicyViolationError, RequestTimedOutError.
        """
        resp = await self._call("POST", f"{leader_url}{REPLICA_PREFIX}/topics/{topic}/partitions/{partition}/delete-records",
                                what=f"{topic}-{partition}", json={"offset": offset, "timeout_ms": timeout_ms},
                                timeout=timeout_ms / 1000.0 + 5)
        return int(resp.json()["low_watermark"])

    async def schema_registry_write(self, url: str, command: dict) -> dict:
        """A schema registry write command (:mod:`lakelog.schemas.registry_writes`) on the registry's writer
        at ``url``: ``{"result": its answer, "offset": the offset after its records}``.

        Raises: the registry's errors (:mod:`lakelog.errors.schemas`) as the writer answered them;
        NotCoordinatorError when it no longer leads ``_schemas-0``; LeaderNotAvailableError.
        """
        resp = await self._call("POST", f"{url}{COORDINATOR_PREFIX}/schemas/writes", what="_schemas-0",
                                json=command, timeout=self.request_timeout_ms / 1000.0 + 5)
        return resp.json()
