"""Internal replica endpoints: followers fetch from their leader (Kafka's replica Fetch and
OffsetsForLeaderEpoch requests, KIP-101), and transaction coordinators write markers (WriteTxnMarkers),
over HTTP.

- ``GET /lakelog/v1/replica/topics/{t}/partitions/{p}/records?offset=&replica_id=&leader_epoch=&max_wait_ms=&max_bytes=&log_start_offset=``:
  full log rows (:data:`lakelog.log_tables.schema.TAIL_SCHEMA`: offset, timestamp, key, value, headers,
  leader_epoch, producer fields, attributes; transaction markers included) from ``offset`` up to the
  leader's log end offset, as an Arrow IPC
  stream; long-polls up to ``max_wait_ms`` when there are none. The fetch offset is the follower's log
  end offset: the leader moves its high watermark and ISR from it. The stream's schema metadata
  ``lakelog.base_offset`` / ``lakelog.next_offset`` says which offset range the answer covers (Kafka's
  batch ``baseOffset`` / ``lastOffset + 1``): offsets in it without a row were compacted away by the
  leader's log cleaner, and the follower's log end offset becomes ``next_offset``. A range compacted away
  entirely is a stream without rows; an empty body means there is nothing to fetch. Headers:
  ``X-Lakelog-High-Watermark``, ``X-Lakelog-Log-End-Offset``, ``X-Lakelog-Log-Start-Offset`` (the follower
  moves its own log start offset up to it, as Kafka's fetch response ``log_start_offset``),
  ``X-Lakelog-Leader-Epoch``.
- ``GET /lakelog/v1/replica/topics/{t}/partitions/{p}/epoch-end-offset?epoch=&leader_epoch=&replica_id=``:
  ``{"epoch": E', "end_offset": N}``, E' the largest leader epoch at or below ``epoch`` in the leader's
  log and N the first offset after it (the follower truncates to it before fetching).
- ``POST /lakelog/v1/replica/topics/{t}/partitions/{p}/markers`` ``{"producer_id", "producer_epoch",
  "control": "commit"|"abort", "coordinator_epoch"}`` -> ``{"offset": N}``: a transaction's marker on this
  leader, answered once the ISR has it (:func:`~lakelog.replication.transaction_markers.write_marker`).
- ``POST /lakelog/v1/replica/topics/{t}/partitions/{p}/delete-records`` ``{"offset": N, "timeout_ms": T}`` ->
  ``{"low_watermark": M}``: DeleteRecords of a partition this broker leads, forwarded by another broker
  (:func:`~lakelog.replication.record_deletion.local_delete_records`).

Errors: 421/42101 not the leader, 421/42102 the follower's ``leader_epoch`` is older than the leader's,
409/40912 newer, 422/42226 ``offset`` beyond the leader's log end offset (the follower truncates).
The endpoints are for brokers, not clients; they are hidden from the OpenAPI document.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field
from fastapi.responses import Response

from lakelog.ingest_api.deps import BrokerDep
from lakelog.ingest_api.permissions import require_cluster_action
from lakelog.log_tables.records import fetched_range
from lakelog.protocol.arrow_ipc import arrow_ipc
from lakelog.protocol.media_types import ARROW_STREAM
from lakelog.replication import replica_fetch as leader_side
from lakelog.replication.leader_client import REPLICA_PREFIX
from lakelog.replication.record_deletion import local_delete_records
from lakelog.replication.transaction_markers import write_marker

router = APIRouter(prefix=REPLICA_PREFIX, tags=["replication (internal)"], include_in_schema=False,
                   dependencies=[require_cluster_action])  # brokers only (ClusterAction)


@router.get("/topics/{topic}/partitions/{partition}/records", response_class=Response)
async def replica_fetch(
    broker: BrokerDep,
    topic: Annotated[str, Path()],
    partition: Annotated[int, Path(ge=0)],
    offset: Annotated[int, Query(ge=0)],
    replica_id: Annotated[int, Query(ge=0)],
    leader_epoch: Annotated[int, Query(ge=0)],
    max_wait_ms: Annotated[int, Query(ge=0, le=60_000)] = 500,
    max_bytes: Annotated[int, Query(gt=0, le=256 * 1024 * 1024)] = 16 * 1024 * 1024,
    log_start_offset: Annotated[int, Query(ge=-1)] = -1,
) -> Response:
    table, part = await leader_side.replica_fetch(broker.replica_manager, topic, partition, replica_id=replica_id, leader_epoch=leader_epoch,
                                             offset=offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms,
                                             log_start_offset=log_start_offset)
    body = b"" if table.num_rows == 0 and fetched_range(table) is None else (
        await asyncio.to_thread(arrow_ipc, table) if table.num_rows > 5000 else arrow_ipc(table))
    return Response(body, media_type=ARROW_STREAM, headers={
        "X-Lakelog-High-Watermark": str(part.log.high_watermark),
        "X-Lakelog-Log-End-Offset": str(part.log.log_end_offset),
        "X-Lakelog-Log-Start-Offset": str(part.log.log_start_offset),
        "X-Lakelog-Leader-Epoch": str(part.leader_epoch),
    })


@router.get("/topics/{topic}/partitions/{partition}/epoch-end-offset")
async def epoch_end_offset(
    broker: BrokerDep,
    topic: Annotated[str, Path()],
    partition: Annotated[int, Path(ge=0)],
    epoch: Annotated[int, Query(ge=0)],
    leader_epoch: Annotated[int, Query(ge=0)],
    replica_id: Annotated[int, Query(ge=0)],
) -> dict:
    found, end = await leader_side.epoch_end_offset(broker.replica_manager, topic, partition, replica_id=replica_id,
                                                       leader_epoch=leader_epoch, epoch=epoch)
    return {"epoch": found, "end_offset": end}


class _Marker(BaseModel):
    producer_id: int = Field(ge=0)
    producer_epoch: int = Field(ge=0)
    control: Literal["commit", "abort"]
    coordinator_epoch: int = Field(ge=0)


@router.post("/topics/{topic}/partitions/{partition}/markers")
async def write_txn_marker(broker: BrokerDep, topic: Annotated[str, Path()], partition: Annotated[int, Path(ge=0)],
                           body: _Marker) -> dict:
    offset = await write_marker(broker.replica_manager, topic, partition, producer_id=body.producer_id,
                                producer_epoch=body.producer_epoch, control=body.control,
                                coordinator_epoch=body.coordinator_epoch,
                                request_timeout_ms=broker.settings.request_timeout_ms)
    return {"offset": offset}


class _DeleteRecords(BaseModel):
    offset: int = Field(ge=-1)
    timeout_ms: int = Field(30_000, ge=0, le=3_600_000)


@router.post("/topics/{topic}/partitions/{partition}/delete-records")
async def delete_records(broker: BrokerDep, topic: Annotated[str, Path()], partition: Annotated[int, Path(ge=0)],
                         body: _DeleteRecords) -> dict:
    low_watermark = await local_delete_records(broker.replica_manager, topic, partition, offset=body.offset,
                                               timeout_ms=body.timeout_ms)
    return {"low_watermark": low_watermark}
