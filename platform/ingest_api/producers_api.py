"""Producer ids: ``POST /v3/clusters/{cluster_id}/producers``, Kafka's InitProducerId.

- Idempotent producer (``{}``, no ``transactional_id``): any broker answers ``{"producer_id": <int64>,
  "producer_epoch": 0}``; ids are unique cluster-wide (:mod:`lakelog.producers.producer_ids`: blocks
  reserved in ZooKeeper).
- Transactional producer (``{"transactional_id": "t1", "transaction_timeout_ms": 60000}``): the
  coordinator of the transactional id answers, asked by whichever broker took the request: a new producer
  id with epoch 0 for a new id, else the same producer id with the epoch + 1, which fences the previous
  instance of the producer.

The route parses the body and encodes the answer; the operation (authorization included) is
:meth:`ProducerIds.init_producer_id <lakelog.requests.producers.ProducerIds.init_producer_id>`.

The producer then sends the id, the epoch and a sequence per request with every produce
(:mod:`lakelog.protocol.producer_headers`).
"""

from __future__ import annotations

from typing import Optional

from fastapi import APIRouter, Body
from pydantic import BaseModel, Field

from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.errors import ClusterNotFoundError
from lakelog.ingest_api.openapi_docs import error_responses
from lakelog.coordinators.transaction_coordinator import DEFAULT_TRANSACTION_TIMEOUT_MS
from lakelog.protocol.producer_headers import MAX_PRODUCER_EPOCH, MAX_PRODUCER_ID
from lakelog.requests.producers import InitProducerIdRequest as ProducerIdRequest

router = APIRouter(tags=["v3 producers"])


class InitProducerIdRequest(BaseModel):
    """Kafka's InitProducerId request: ``{}`` for an idempotent producer, ``{"transactional_id": ...,
    "transaction_timeout_ms": ...}`` for a transactional one."""

    transactional_id: Optional[str] = Field(
        None, examples=["orders-etl-1"],
        description="A transactional producer's `transactional.id` (non-empty; else 400 / 40012). Its "
                    "coordinator answers the producer id it holds with the epoch + 1, fencing the previous "
                    "instance (a new id gets a new producer id with epoch 0). Leave it out (send `{}`) for "
                    "an idempotent producer.")
    transaction_timeout_ms: Optional[int] = Field(
        None, examples=[DEFAULT_TRANSACTION_TIMEOUT_MS], json_schema_extra={"format": "int32"},
        description="The transactional producer's `transaction.timeout.ms`: a transaction open longer is "
                    "aborted by its coordinator. In (0, transaction.max.timeout.ms] (default 900000), else "
                    f"400 / 40011. Default: {DEFAULT_TRANSACTION_TIMEOUT_MS}. Ignored without a "
                    "`transactional_id`.")


class InitProducerIdResponse(BaseModel):
    """A producer id and its epoch (Kafka's InitProducerId response)."""

    producer_id: int = Field(ge=0, le=MAX_PRODUCER_ID, json_schema_extra={"format": "int64"}, examples=[1000],
                             description="Unique in the cluster; send it as X-Lakelog-Producer-Id.")
    producer_epoch: int = Field(ge=0, le=MAX_PRODUCER_EPOCH, json_schema_extra={"format": "int32"}, examples=[0],
                                description="0 for a new idempotent producer or a new transactional id; the "
                                            "previous epoch + 1 for a transactional id initialized before. "
                                            "Send it as X-Lakelog-Producer-Epoch.")


@router.post("/v3/clusters/{cluster_id}/producers", response_model=InitProducerIdResponse,
             responses=error_responses(400, 404, 408, 409, 422, 500, 503, 504),
             summary="Get a producer id for an idempotent or transactional producer (Kafka's InitProducerId)")
async def init_producer_id(cluster_id: str, broker: BrokerDep, context: ContextDep,
                           body: Optional[InitProducerIdRequest] = Body(None)) -> InitProducerIdResponse:
    """Without a `transactional_id` (`{}` or no body): a new producer id, unique in the cluster, with
    epoch 0. The producer numbers its produce requests 0, 1, 2, ... and sends the three headers
    `X-Lakelog-Producer-Id`, `X-Lakelog-Producer-Epoch`, `X-Lakelog-Sequence` with each; a retry repeats
    the request's number and is answered with the original offsets, writing nothing.

    With a `transactional_id`: the answer of the id's transaction coordinator (the leader of its
    `__transaction_state` partition; any broker takes the request and asks it): a new producer id with
    epoch 0 for a new id, else the same producer id with the epoch + 1, which fences the previous
    instance. `__transaction_state` is created by the first transactional producer.

    Errors: 400 / 40011 a `transaction_timeout_ms` out of (0, transaction.max.timeout.ms], 400 / 40012 an
    empty `transactional_id`; 404 / 40409 another cluster id; 409 / 40920 the id's previous transaction is
    being completed (retriable); 503 / 50304 ZooKeeper unreachable, 503 / 50320-50321 no coordinator
    answered within request.timeout.ms (retriable).

    With ACLs checked: Write on the `transactional_id`; without one, IdempotentWrite on the cluster or Write
    on some topic (KIP-679); else 403 / 40301."""
    if cluster_id != broker.cluster_id:
        raise ClusterNotFoundError(f"Cluster '{cluster_id}' not found; this cluster is '{broker.cluster_id}'.")
    answer = await broker.requests.producers.init_producer_id(
        ProducerIdRequest() if body is None else ProducerIdRequest(
            transactional_id=body.transactional_id, transaction_timeout_ms=body.transaction_timeout_ms),
        context=context)
    return InitProducerIdResponse(producer_id=answer.producer_id, producer_epoch=answer.producer_epoch)
