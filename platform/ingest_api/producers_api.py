"""Producer ids: ``POST /v3/clusters/{cluster_id}/producers``, Kafka's InitProducerId for idempotent producers.

Any broker answers ``{"producer_id": <int64>, "producer_epoch": 0}``; ids are unique cluster-wide
(:mod:`lakelog.producers.producer_ids`: blocks reserved in ZooKeeper). The producer then sends the id,
the epoch and a sequence per request with every produce (:mod:`lakelog.protocol.producer_headers`).
A ``transactional_id`` is refused for now (400 / 40010): transactions come later.
"""

from __future__ import annotations

import asyncio
from typing import Optional

from fastapi import APIRouter, Body
from pydantic import BaseModel, Field

from lakelog.ingest_api.deps import BrokerDep, ProducerIdsDep
from lakelog.ingest_api.errors import ClusterNotFoundError
from lakelog.ingest_api.openapi_docs import error_responses
from lakelog.protocol.producer_headers import MAX_PRODUCER_EPOCH, MAX_PRODUCER_ID

router = APIRouter(tags=["v3 producers"])


class InitProducerIdRequest(BaseModel):
    """Kafka's InitProducerId request: ``{}`` for an idempotent producer."""

    transactional_id: Optional[str] = Field(
        None, description="A transactional producer's id. Not supported yet: refused with 400 / 40010. "
                          "Leave it out (send `{}`) for an idempotent producer.")


class InitProducerIdResponse(BaseModel):
    """A new producer id and its epoch (Kafka's InitProducerId response)."""

    producer_id: int = Field(ge=0, le=MAX_PRODUCER_ID, json_schema_extra={"format": "int64"}, examples=[1000],
                             description="Unique in the cluster; send it as X-Lakelog-Producer-Id.")
    producer_epoch: int = Field(ge=0, le=MAX_PRODUCER_EPOCH, json_schema_extra={"format": "int32"}, examples=[0],
                                description="0 for a new idempotent producer; send it as X-Lakelog-Producer-Epoch.")


@router.post("/v3/clusters/{cluster_id}/producers", response_model=InitProducerIdResponse,
             responses=error_responses(400, 404, 408, 422, 500, 503),
             summary="Get a producer id for an idempotent producer (Kafka's InitProducerId)")
async def init_producer_id(cluster_id: str, broker: BrokerDep, producer_ids: ProducerIdsDep,
                           body: Optional[InitProducerIdRequest] = Body(None)) -> InitProducerIdResponse:
    """A new producer id, unique in the cluster, with epoch 0. The producer numbers its produce requests
    0, 1, 2, ... and sends the three headers `X-Lakelog-Producer-Id`, `X-Lakelog-Producer-Epoch`,
    `X-Lakelog-Sequence` with each; a retry repeats the request's number and is answered with the original
    offsets, writing nothing. 400 / 40010 when the body names a `transactional_id` (transactions are not
    supported yet); 404 / 40404 for another cluster id; 503 / 50304 when ZooKeeper is unreachable (retriable)."""
    if cluster_id != broker.cluster_id:
        raise ClusterNotFoundError(f"Cluster '{cluster_id}' not found; this cluster is '{broker.cluster_id}'.")
    transactional_id = body.transactional_id if body is not None else None
    answer = await asyncio.to_thread(producer_ids.init_producer_id, transactional_id=transactional_id)
    return InitProducerIdResponse(producer_id=answer.producer_id, producer_epoch=answer.producer_epoch)
