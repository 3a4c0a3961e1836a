"""DeleteRecords over HTTP (a lakelog extension under ``/v3``: REST Proxy has none).

``POST /v3/clusters/{c}/topics/{t}/records:delete`` ``{"partitions": [{"partition_id": 0, "offset": 42}]}``
-> ``{"cluster_id", "topic_name", "partitions": [{"partition_id": 0, "low_watermark": 42}]}``: Kafka's
DeleteRecords request and response for one topic (per partition an offset, -1 for the high watermark;
per partition the low watermark, the log start offset after it). The rules are the request layer's
(:mod:`lakelog.requests.delete_records`); ``lakelog records delete`` and ``LakelogClient.admin.delete_records``
call this route.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.errors import check_cluster
from lakelog.ingest_api.models import INT32_MAX, INT64_MAX
from lakelog.ingest_api.openapi_docs import error_responses
from lakelog.ingest_api.permissions import topic_permission
from lakelog.ingest_api.topics_api import TopicName
from lakelog.requests import DeleteRecordsRequest
from lakelog.security.acls import Operation

router = APIRouter(tags=["v3"])


class DeleteRecordsPartition(BaseModel):
    """One partition of a DeleteRecords request."""

    model_config = ConfigDict(extra="forbid")

    partition_id: Annotated[StrictInt, Field(ge=0, le=INT32_MAX, json_schema_extra={"format": "int32"})] = Field(
        description="The partition.")
    offset: Annotated[StrictInt, Field(ge=-1, le=INT64_MAX, json_schema_extra={"format": "int64"})] = Field(
        description="Every record below this offset is deleted: the partition's log start offset moves up to "
                    "it. At most the high watermark; -1 means the high watermark (every record a consumer "
                    "can read).")


class DeleteRecordsBody(BaseModel):
    """Kafka's DeleteRecords request for one topic: per partition an offset."""

    model_config = ConfigDict(extra="forbid")

    partitions: list[DeleteRecordsPartition] = Field(
        min_length=1, description="The partitions, each named once, and the offset each log is to start at.")


class DeleteRecordsPartitionResult(BaseModel):
    """One partition of a DeleteRecords answer."""

    partition_id: int = Field(description="The partition.")
    low_watermark: int = Field(description="The leader's log start offset after the request: at least the "
                                           "offset asked (more when the log already started later).")


class DeleteRecordsResponse(BaseModel):
    """Kafka's DeleteRecords response for one topic: per partition its low watermark."""

    cluster_id: str
    topic_name: str
    partitions: list[DeleteRecordsPartitionResult]


@router.post("/v3/clusters/{cluster_id}/topics/{topic}/records:delete", response_model=DeleteRecordsResponse,
             responses=error_responses(400, 404, 421, 422, 503),
             summary="Delete the records below an offset (Kafka's DeleteRecords, kafka-delete-records)",
             dependencies=[topic_permission(Operation.DELETE)])
async def delete_records(cluster_id: str, topic: TopicName, body: DeleteRecordsBody, broker: BrokerDep,
                         context: ContextDep) -> DeleteRecordsResponse:
    """Move the log start offset of each partition up to its offset (``kafka-delete-records
    --offset-json-file``): every record below it is gone for readers at once, and the partition's Delta
    data files wholly below it leave the table, and the disk after ``lake.vacuum.retention.ms``, as
    retention removes them. Needs Delete on the topic. The whole request is checked before anything
    moves: an offset above the high watermark (the offset-out-of-range error naming the valid range), a
    partition named twice (422 / 42222), an unknown partition (404 / 40402), an internal topic (400 /
    40004), a topic whose `cleanup.policy` is `compact` alone (400 / 40030, Kafka's POLICY_VIOLATION).
    Idempotent: a log start offset never moves back."""
    check_cluster(broker, cluster_id)
    request = DeleteRecordsRequest.of([(topic, p.partition_id, p.offset) for p in body.partitions])
    result = await broker.requests.delete_records(request, context=context)
    return DeleteRecordsResponse(cluster_id=cluster_id, topic_name=topic, partitions=[
        DeleteRecordsPartitionResult(partition_id=partition, low_watermark=low)
        for (_, partition), low in sorted(result.low_watermarks.items())])
