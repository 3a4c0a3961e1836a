"""Transactions of the cluster (a lakelog extension under ``/v3``; REST Proxy has none): what the
transaction coordinators hold, as Kafka's ``kafka-transactions.sh list`` and ``describe`` show it
(ListTransactions, DescribeTransactions).

- ``GET /v3/clusters/{cluster_id}/transactions[?state=Ongoing&state=...]``: every transactional id known
  cluster-wide (asked of every coordinator), by id;
- ``GET /v3/clusters/{cluster_id}/transactions/{transactional_id}``: one id, from its coordinator;
- ``POST /v3/clusters/{cluster_id}/transactions/{transactional_id}/commit`` and ``.../abort``
  ``{"producer_id", "producer_epoch"}``: end the producer's open transaction (Kafka's EndTxn). Answered
  once the decision is durable in ``__transaction_state`` and, within ``request.timeout.ms``, its markers
  are written on every partition of the transaction (state ``CompleteCommit`` / ``CompleteAbort``; a
  ``PrepareCommit`` / ``PrepareAbort`` answer says the markers took longer: the decision stands and is
  carried out, after a coordinator failover too);
- ``POST /v3/clusters/{cluster_id}/transactions/{transactional_id}/offsets`` ``{"producer_id",
  "producer_epoch", "group_id", "offsets": [{"topic", "partition", "offset", "metadata"?}]}``: a consumer
  group's offsets committed in the producer's open transaction (Kafka's AddOffsetsToTxn + TxnOffsetCommit):
  they count for the group exactly when the transaction commits, with the records it wrote.

Any broker answers (the operations, authorization included, are
:class:`~lakelog.requests.transactions.TransactionOperations`; the routes parse and encode). Each id
shows its state, producer id and epoch, timeout, the partitions of its open transaction, when that
transaction began and how long it has been open (its age, ms, measured by the answering broker's clock).
Errors: 404 with 40409 (not this cluster's id), 40408 (a transactional id its coordinator does not know),
40404 (a ``__transaction_state`` partition without a leader, retriable); 503 / 50320-50321 (no
coordinator answered in ``request.timeout.ms``, retriable).
"""

from __future__ import annotations

import time
from typing import Annotated, Literal, Optional
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field

from lakelog.consumer_groups.offsets_admin import PartitionOffset
from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.errors import check_cluster
from lakelog.ingest_api.models import Offset, PartitionNumber, Related, ResourceMetadata, TopicNameField
from lakelog.ingest_api.openapi_docs import error_responses, v3_read_errors
from lakelog.ingest_api.permissions import transactional_id_permission
from lakelog.ingest_api.v3_models import ResourceCollectionMetadata
from lakelog.coordinators.transaction_state import NO_TIMESTAMP
from lakelog.requests.transactions import CoordinatedTransaction, EndTxnRequest, TxnOffsetCommitRequest
from lakelog.security.acls import Operation

router = APIRouter(tags=["v3 transactions"])

#: The states a transactional id is in (Kafka's names; ``Dead`` and ``PrepareEpochFence`` are never current).
StateName = Literal["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"]

LIST_ERRORS = v3_read_errors("cluster (40409), no leader of a __transaction_state partition (40404)")
DESCRIBE_ERRORS = v3_read_errors("cluster (40409), transactional id (40408), no leader of its "
                                 "__transaction_state partition (40404)")


class TransactionPartition(BaseModel):
    """A partition of a transaction."""

    topic_name: str
    partition_id: int = Field(ge=0, json_schema_extra={"format": "int32"})


class TransactionData(BaseModel):
    """One transactional id as its coordinator holds it (``kind`` ``KafkaTransaction``; Kafka's
    DescribeTransactions answer)."""

    kind: str = "KafkaTransaction"
    metadata: ResourceMetadata
    cluster_id: str
    transactional_id: str
    coordinator_id: Optional[int] = Field(
        None, description="The broker id of the id's coordinator (the leader of its __transaction_state "
                          "partition); null while it is being elected.")
    coordinator: Optional[Related] = Field(None, description="The coordinator's broker; null with coordinator_id.")
    state: StateName = Field(
        description="Empty: no transaction open; Ongoing: a transaction is open; PrepareCommit / PrepareAbort: "
                    "its outcome is decided and being carried out; CompleteCommit / CompleteAbort: the last "
                    "transaction is over.")
    producer_id: int = Field(ge=0, json_schema_extra={"format": "int64"},
                             description="The producer id the transactional id holds.")
    producer_epoch: int = Field(ge=0, json_schema_extra={"format": "int32"},
                                description="The current epoch: requests with an older one are fenced.")
    transaction_timeout_ms: int = Field(
        json_schema_extra={"format": "int32"},
        description="The producer's transaction.timeout.ms: an open transaction older is aborted.")
    partitions: list[TransactionPartition] = Field(
        description="The partitions of the open or deciding transaction, by topic and partition; empty when "
                    "none is open.")
    transaction_start_time_ms: Optional[int] = Field(
        None, json_schema_extra={"format": "int64"},
        description="When the open transaction began (its first partition added), ms since the epoch; null "
                    "when none is open.")
    transaction_duration_ms: Optional[int] = Field(
        None, json_schema_extra={"format": "int64"},
        description="The open transaction's age: ms since it began, by the answering broker's clock; null "
                    "when none is open.")
    last_update_time_ms: Optional[int] = Field(
        None, json_schema_extra={"format": "int64"},
        description="The time of the id's last state change, ms since the epoch.")


class TransactionDataList(BaseModel):
    """Every transactional id known cluster-wide, by id (``KafkaTransactionList``)."""

    kind: str = "KafkaTransactionList"
    metadata: ResourceCollectionMetadata
    data: list[TransactionData]


def _cluster_url(request: Request, cluster_id: str) -> str:
    return f"{str(request.base_url).rstrip('/')}/v3/clusters/{quote(cluster_id, safe='')}"


def _data(request: Request, cluster_id: str, found: CoordinatedTransaction, *, now_ms: int) -> TransactionData:
    cluster_url = _cluster_url(request, cluster_id)
    coordinator_id, m = found.coordinator_id, found.metadata
    is_open = m.has_pending_transaction and m.txn_start_timestamp_ms != NO_TIMESTAMP
    return TransactionData(
        metadata=ResourceMetadata(self=f"{cluster_url}/transactions/{quote(m.transactional_id, safe='')}",
                                  resource_name=f"crn:///kafka={cluster_id}/transaction={m.transactional_id}"),
        cluster_id=cluster_id, transactional_id=m.transactional_id, coordinator_id=coordinator_id,
        coordinator=None if coordinator_id is None else Related(related=f"{cluster_url}/brokers/{coordinator_id}"),
        state=m.state.value, producer_id=m.producer_id, producer_epoch=m.producer_epoch,
        transaction_timeout_ms=m.transaction_timeout_ms,
        partitions=[TransactionPartition(topic_name=t, partition_id=p) for t, p in sorted(m.partitions)],
        transaction_start_time_ms=m.txn_start_timestamp_ms if is_open else None,
        transaction_duration_ms=max(0, now_ms - m.txn_start_timestamp_ms) if is_open else None,
        last_update_time_ms=None if m.txn_last_update_timestamp_ms == NO_TIMESTAMP else m.txn_last_update_timestamp_ms)


@router.get("/v3/clusters/{cluster_id}/transactions", response_model=TransactionDataList, responses=LIST_ERRORS,
            summary="Transactional ids of the cluster: state, producer, open transaction's partitions and age")
async def list_transactions(
        cluster_id: str, request: Request, broker: BrokerDep,
        context: ContextDep, state: Annotated[Optional[list[StateName]], Query(
            description="Only ids in these states (repeat the parameter for several); all when left out.")] = None,
) -> TransactionDataList:
    """Every transactional id known cluster-wide (Kafka's ListTransactions sent to every broker), by id.
    `?state=Ongoing&state=PrepareCommit&state=PrepareAbort` lists the open ones. Only the ids the principal
    may Describe."""
    check_cluster(broker, cluster_id)
    found = await broker.requests.transactions.list_transactions(states=state, context=context)
    now_ms = int(time.time() * 1000)
    return TransactionDataList(
        metadata=ResourceCollectionMetadata(self=f"{_cluster_url(request, cluster_id)}/transactions"),
        data=[_data(request, cluster_id, t, now_ms=now_ms) for t in found])


@router.get("/v3/clusters/{cluster_id}/transactions/{transactional_id}", response_model=TransactionData,
            responses=DESCRIBE_ERRORS, summary="One transactional id: state, producer, open transaction's "
                                               "partitions and age",
            dependencies=[transactional_id_permission(Operation.DESCRIBE)])
async def get_transaction(
        cluster_id: str, request: Request, broker: BrokerDep, context: ContextDep,
        transactional_id: Annotated[str, Path(description="The producer's transactional.id.", min_length=1)],
) -> TransactionData:
    """The id as its coordinator holds it (Kafka's DescribeTransactions); 404 / 40408 when it knows none
    (never initialized, or expired after transactional.id.expiration.ms)."""
    check_cluster(broker, cluster_id)
    found = await broker.requests.transactions.describe_transaction(transactional_id, context=context)
    return _data(request, cluster_id, found, now_ms=int(time.time() * 1000))


class EndTransactionRequest(BaseModel):
    """Who ends the transaction: the producer id and epoch ``POST /v3/clusters/{cluster_id}/producers``
    handed out for the transactional id (a fenced epoch is refused)."""

    producer_id: int = Field(ge=0, json_schema_extra={"format": "int64"}, examples=[1000])
    producer_epoch: int = Field(ge=0, le=32767, json_schema_extra={"format": "int32"}, examples=[0])


END_ERRORS = error_responses(400, 404, 408, 409, 422, 500, 503)


async def _end(cluster_id: str, request: Request, broker, context, transactional_id: str,
               body: EndTransactionRequest, *, commit: bool) -> TransactionData:
    check_cluster(broker, cluster_id)
    found = await broker.requests.transactions.end_transaction(EndTxnRequest(
        transactional_id=transactional_id, producer_id=body.producer_id, producer_epoch=body.producer_epoch,
        commit=commit), context=context)
    return _data(request, cluster_id, found, now_ms=int(time.time() * 1000))


@router.post("/v3/clusters/{cluster_id}/transactions/{transactional_id}/commit", response_model=TransactionData,
             responses=END_ERRORS, summary="Commit the producer's open transaction (Kafka's EndTxn)",
            dependencies=[transactional_id_permission(Operation.WRITE)])
async def commit_transaction(
        cluster_id: str, request: Request, broker: BrokerDep, context: ContextDep,
        transactional_id: Annotated[str, Path(description="The producer's transactional.id.", min_length=1)],
        body: EndTransactionRequest,
) -> TransactionData:
    """Commit every record the producer wrote in its open transaction, on every partition at once: a
    read_committed consumer sees all of them or none. Answered with state `CompleteCommit` once the commit
    markers are written (`PrepareCommit` if that took longer than request.timeout.ms: the commit stands).
    409 / 40918 when the transaction was aborted meanwhile (it timed out after its transaction_timeout_ms),
    409 / 40915 when a newer instance fenced this epoch, 409 / 40919 for another producer id, 409 / 40920
    (retriable) while a state change is being written; with nothing produced in it, the current state."""
    return await _end(cluster_id, request, broker, context, transactional_id, body, commit=True)


@router.post("/v3/clusters/{cluster_id}/transactions/{transactional_id}/abort", response_model=TransactionData,
             responses=END_ERRORS, summary="Abort the producer's open transaction (Kafka's EndTxn)",
            dependencies=[transactional_id_permission(Operation.WRITE)])
async def abort_transaction(
        cluster_id: str, request: Request, broker: BrokerDep, context: ContextDep,
        transactional_id: Annotated[str, Path(description="The producer's transactional.id.", min_length=1)],
        body: EndTransactionRequest,
) -> TransactionData:
    """Abort the producer's open transaction: its records stay invisible to read_committed consumers, Spark
    and SQL for good. Answered with state `CompleteAbort` once the abort markers are written."""
    return await _end(cluster_id, request, broker, context, transactional_id, body, commit=False)


class TransactionOffset(BaseModel):
    """A consumer group's committed offset for one partition: the next offset it reads."""

    topic: TopicNameField
    partition: PartitionNumber
    offset: Offset
    metadata: Optional[str] = Field(None, max_length=4096, description="Kept with the offset (Kafka's "
                                    "offset metadata).")


class TransactionOffsetsRequest(EndTransactionRequest):
    """Offsets of ``group_id`` to commit in the producer's open transaction."""

    group_id: str = Field(min_length=1, description="The consumer group whose offsets these are.")
    offsets: list[TransactionOffset] = Field(min_length=1)


class TransactionOffsetsResponse(BaseModel):
    """The offsets written in the transaction: they count once it commits, never if it aborts."""

    transactional_id: str
    group_id: str
    offsets: list[TransactionOffset]


@router.post("/v3/clusters/{cluster_id}/transactions/{transactional_id}/offsets",
             response_model=TransactionOffsetsResponse, responses=END_ERRORS,
             summary="Commit a consumer group's offsets in the producer's transaction (Kafka's TxnOffsetCommit)",
            dependencies=[transactional_id_permission(Operation.WRITE)])
async def commit_offsets_in_transaction(
        cluster_id: str, broker: BrokerDep, context: ContextDep,
        transactional_id: Annotated[str, Path(description="The producer's transactional.id.", min_length=1)],
        body: TransactionOffsetsRequest,
) -> TransactionOffsetsResponse:
    """The consume-transform-produce step of exactly-once: the group's offsets (of the records the producer
    consumed) join the producer's open transaction, beginning it if none is open. A later commit of the
    transaction makes them the group's committed offsets together with the records the transaction wrote;
    an abort leaves the group's offsets as they were. 400 / 40008 for a group id ZooKeeper cannot hold;
    the errors of the transaction (409 / 40915 fenced, 40919 another producer id, 40920 retriable).
    Write on the transactional id, Read on the group and its topics (Kafka's AddOffsetsToTxn, TxnOffsetCommit)."""
    check_cluster(broker, cluster_id)
    await broker.requests.transactions.commit_offsets(TxnOffsetCommitRequest(
        transactional_id=transactional_id, producer_id=body.producer_id, producer_epoch=body.producer_epoch,
        group=body.group_id,
        offsets=[PartitionOffset(o.topic, o.partition, o.offset, o.metadata) for o in body.offsets]),
        context=context)
    return TransactionOffsetsResponse(transactional_id=transactional_id, group_id=body.group_id, offsets=body.offsets)
