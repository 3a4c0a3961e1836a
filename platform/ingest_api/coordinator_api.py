"""Internal group coordinator endpoints: a broker asks a group's coordinator (the leader of the group's
``__consumer_offsets`` partition) for its offsets (Kafka's OffsetCommit / OffsetFetch / OffsetDelete /
ListGroups sent to the coordinator), over HTTP.

- ``POST /lakelog/v1/coordinator/groups/{group}/offsets`` ``{"offsets": [CommittedOffset fields],
  "current_generation": int | null, "only_newer": bool, "producer": {"producer_id", "producer_epoch",
  "transactional_id"} | null}`` -> ``{"committed": bool}`` (with a producer: TxnOffsetCommit, written in
  its transaction);
- ``GET /lakelog/v1/coordinator/groups/{group}/offsets?topic=`` -> ``{"offsets": [CommittedOffset fields]}``;
- ``POST /lakelog/v1/coordinator/groups/{group}/offsets:delete`` ``{"partitions": [[topic, partition]]}``
  -> ``{"deleted": [[topic, partition]]}``;
- ``GET /lakelog/v1/coordinator/groups`` -> ``{"groups": [...]}`` (the groups this broker coordinates).

And the transaction coordinator's (Kafka's InitProducerId / DescribeTransactions / ListTransactions sent
to the coordinator of a transactional id; the id travels in the body or query, never in the path):

- ``POST /lakelog/v1/coordinator/transactions/init-producer-id`` ``{"transactional_id",
  "transaction_timeout_ms"}`` -> ``{"producer_id", "producer_epoch"}``;
- ``GET /lakelog/v1/coordinator/transactions/describe?transactional_id=`` -> ``{"transaction": {...} | null}``
  (:func:`~lakelog.coordinators.transaction_coordinator.metadata_to_dict`);
- ``GET /lakelog/v1/coordinator/transactions`` -> ``{"transactions": [{...}]}`` (the ids this broker
  coordinates);
- ``POST /lakelog/v1/coordinator/transactions/add-partitions`` ``{"transactional_id", "producer_id",
  "producer_epoch", "partitions": [[topic, partition]]}`` -> ``{}`` (AddPartitionsToTxn);
- ``POST /lakelog/v1/coordinator/transactions/end`` ``{"transactional_id", "producer_id", "producer_epoch",
  "commit"}`` -> ``{"transaction": {...}}`` (EndTxn, answered once carried out or after
  ``request.timeout.ms``).

They answer only as the coordinator, never forwarding: 503 / 50320 (NOT_COORDINATOR) when this broker is
not it, 503 / 50321 while it loads; the asking broker retries
(:class:`~lakelog.consumer_groups.coordinator.GroupCoordinator`,
:class:`~lakelog.coordinators.transaction_coordinator.TransactionCoordinator`). For brokers, not clients:
hidden from the OpenAPI document.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from fastapi import APIRouter, Query
from pydantic import BaseModel

from lakelog.consumer_groups.offset_records import CommittedOffset
from lakelog.ingest_api.consumers_api import GroupName
from lakelog.ingest_api.deps import CoordinatorDep, TransactionCoordinatorDep
from lakelog.ingest_api.permissions import require_cluster_action
from lakelog.coordinators.transaction_coordinator import metadata_to_dict
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.leader_client import COORDINATOR_PREFIX

router = APIRouter(prefix=COORDINATOR_PREFIX, tags=["coordinator (internal)"], include_in_schema=False,
                   dependencies=[require_cluster_action])  # brokers only (ClusterAction)


class _Offset(BaseModel):
    group: str
    topic: str
    partition: int
    offset: int
    metadata: Optional[str] = None
    generation: Optional[int] = None
    commit_timestamp_ms: int
    app_id: Optional[str] = None
    app_version: Optional[int] = None


class _TransactionalProducer(BaseModel):
    producer_id: int
    producer_epoch: int
    transactional_id: str


class _Commit(BaseModel):
    offsets: list[_Offset]
    current_generation: Optional[int] = None
    only_newer: bool = False
    producer: Optional[_TransactionalProducer] = None


class _Delete(BaseModel):
    partitions: list[tuple[str, int]]


@router.post("/groups/{group}/offsets")
async def commit(group: GroupName, body: _Commit, coordinator: CoordinatorDep) -> dict:
    producer = None if body.producer is None else ProducerBatch(
        body.producer.producer_id, body.producer.producer_epoch, 0, body.producer.transactional_id)
    written = await coordinator.manager.commit_local(group, [CommittedOffset(**o.model_dump()) for o in body.offsets],
                                             current_generation=body.current_generation, only_newer=body.only_newer,
                                             producer=producer)
    return {"committed": written}


@router.get("/groups/{group}/offsets")
async def committed(group: GroupName, coordinator: CoordinatorDep, topic: Optional[str] = Query(None)) -> dict:
    return {"offsets": [dataclasses.asdict(c) for c in await coordinator.manager.committed_local(group, topic)]}


@router.post("/groups/{group}/offsets:delete")
async def delete(group: GroupName, body: _Delete, coordinator: CoordinatorDep) -> dict:
    return {"deleted": [list(tp) for tp in await coordinator.manager.delete_local(group, body.partitions)]}


@router.get("/groups")
async def groups(coordinator: CoordinatorDep) -> dict:
    return {"groups": await coordinator.manager.groups_loaded()}


class _InitProducerId(BaseModel):
    transactional_id: str
    transaction_timeout_ms: int


@router.post("/transactions/init-producer-id")
async def init_producer_id(body: _InitProducerId, transactions: TransactionCoordinatorDep) -> dict:
    answer = await transactions.manager.init_producer_id(body.transactional_id,
                                                         transaction_timeout_ms=body.transaction_timeout_ms)
    return {"producer_id": answer.producer_id, "producer_epoch": answer.producer_epoch}


@router.get("/transactions/describe")
async def describe_transaction(transactions: TransactionCoordinatorDep, transactional_id: str = Query(...)) -> dict:
    metadata = await transactions.manager.describe(transactional_id)
    return {"transaction": None if metadata is None else metadata_to_dict(metadata)}


@router.get("/transactions")
async def list_transactions(transactions: TransactionCoordinatorDep) -> dict:
    return {"transactions": [metadata_to_dict(m) for m in await transactions.manager.list_transactions()]}


class _AddPartitions(BaseModel):
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]]


@router.post("/transactions/add-partitions")
async def add_partitions(body: _AddPartitions, transactions: TransactionCoordinatorDep) -> dict:
    await transactions.manager.add_partitions(body.transactional_id, producer_id=body.producer_id,
                                              producer_epoch=body.producer_epoch, partitions=body.partitions)
    return {}


class _End(BaseModel):
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool


@router.post("/transactions/end")
async def end_transaction(body: _End, transactions: TransactionCoordinatorDep) -> dict:
    metadata = await transactions.end_local(body.transactional_id, producer_id=body.producer_id,
                                            producer_epoch=body.producer_epoch, commit=body.commit)
    return {"transaction": metadata_to_dict(metadata)}
