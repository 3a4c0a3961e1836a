"""REST Proxy v2 metadata routes and lakelog's table locations.

- ``GET /topics``, ``GET /topics/{topic}``, ``GET /topics/{topic}/partitions[/{p}[/offsets]]``: any broker
  answers for the whole cluster (offsets, the last stable offset among them, come from each partition's
  leader); ``?timestamp_ms=`` on the offsets route adds the first offset at or after a time (Kafka's
  ListOffsets by timestamp);
- ``GET /lakelog/v1/topics/{topic}/logs``: each partition's Delta table and offsets on its leader, for
  direct readers (Spark); with ``?details=true`` also the table's version, data files and the replica's
  bytes on disk (the console);
- ``GET /lakelog/v1/topics/{topic}/partitions/{p}/offset-for-timestamp``: the time lookup on the leader
  itself (what another broker forwards ``?timestamp_ms=`` to).
"""

from __future__ import annotations

from typing import Annotated, Optional

from fastapi import APIRouter, Path, Query

from lakelog.ingest_api import models
from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.openapi_docs import ERRORS, ZOOKEEPER_ERRORS, KafkaV2JSONResponse, referenced
from lakelog.ingest_api.permissions import topic_permission
from lakelog.ingest_api.v2_media import V2_ANSWERS, accepts
from lakelog.log_tables.records import MAX_TIMESTAMP_MS
from lakelog.security.acls import Operation
from lakelog.replication.partition_views import PartitionSummary
from lakelog.requests import ListOffsetsRequest, RequestContext

router = APIRouter()

__all__ = ["ERRORS", "PartitionId", "TopicName", "router"]  # ERRORS: the routers' error answers (openapi_docs)

TopicName = Annotated[str, Path(description="Topic name")]
PartitionId = Annotated[int, Path(ge=0, le=models.INT32_MAX, description="Partition number (int32 >= 0)")]
#: Metadata, offsets and logs of a topic: Describe on it (Kafka's Metadata and ListOffsets).
DESCRIBE_TOPIC = topic_permission(Operation.DESCRIBE)
#: REST Proxy v2 routes answer application/vnd.kafka.v2+json, and 406 / 40602 to an Accept that allows it not.
ACCEPTS_V2 = accepts(*V2_ANSWERS)
#: The error answers of the v2 routes: application/json bodies beside their v2 answers.
V2_ERRORS = referenced(ERRORS)


def _partition_info(s: PartitionSummary) -> models.PartitionInfo:
    return models.PartitionInfo(
        partition=s.partition, leader=s.leader, leader_epoch=s.leader_epoch,
        replicas=[models.ReplicaInfo(broker=r.broker, leader=r.leader, in_sync=r.in_sync) for r in s.replicas],
        log_start_offset=s.log_start_offset, lake_end_offset=s.lake_end_offset, log_end_offset=s.log_end_offset,
        high_watermark=s.high_watermark, last_stable_offset=s.last_stable_offset)


async def _partitions(broker, topic: str, context: RequestContext) -> list[models.PartitionInfo]:
    return [_partition_info(s) for s in await broker.requests.metadata.partition_summaries(topic, context=context)]


@router.get("/topics", response_model=list[str], responses=referenced(ZOOKEEPER_ERRORS), tags=["v2 topics"],
            summary="List topic names", response_class=KafkaV2JSONResponse, dependencies=[ACCEPTS_V2])
async def list_topics(broker: BrokerDep, context: ContextDep) -> list[str]:
    return sorted(await broker.requests.list_topics(context=context))


@router.get("/topics/{topic}", response_model=models.TopicInfo, responses=V2_ERRORS, tags=["v2 topics"],
            summary="Describe a topic: configs and partitions", response_class=KafkaV2JSONResponse,
            dependencies=[ACCEPTS_V2, DESCRIBE_TOPIC, topic_permission(Operation.DESCRIBE_CONFIGS)])
async def get_topic(topic: TopicName, broker: BrokerDep, context: ContextDep) -> models.TopicInfo:
    """Describe and DescribeConfigs on the topic with ACLs checked (REST Proxy reads the configs with Kafka's
    DescribeConfigs)."""
    meta = await broker.requests.describe_topic(topic, context=context, with_configs=True)
    return models.TopicInfo(name=topic, configs=meta.config.to_kafka(),
                            partitions=await _partitions(broker, topic, context))


@router.get("/topics/{topic}/partitions", response_model=list[models.PartitionInfo], responses=V2_ERRORS,
            tags=["v2 partitions"], summary="List a topic's partitions with leader, replicas, ISR",
            response_class=KafkaV2JSONResponse, dependencies=[ACCEPTS_V2, DESCRIBE_TOPIC])
async def list_partitions(topic: TopicName, broker: BrokerDep, context: ContextDep) -> list[models.PartitionInfo]:
    return await _partitions(broker, topic, context)


@router.get("/topics/{topic}/partitions/{partition}", response_model=models.PartitionInfo, responses=V2_ERRORS,
            tags=["v2 partitions"], summary="Describe one partition: leader, replicas (in_sync), offsets",
            response_class=KafkaV2JSONResponse, dependencies=[ACCEPTS_V2, DESCRIBE_TOPIC])
async def get_partition(topic: TopicName, partition: PartitionId, broker: BrokerDep,
                        context: ContextDep) -> models.PartitionInfo:
    summaries = await broker.requests.metadata.partition_summaries(topic, partition, context=context)
    return _partition_info(summaries[0])


_TIMESTAMP_MS = dict(ge=0, le=MAX_TIMESTAMP_MS, description=(
    "A time, ms since the epoch: the first offset whose record timestamp is at or after it, or the high "
    "watermark when no record is that new (Kafka's ListOffsets by timestamp, kafka-get-offsets --time)"))


@router.get("/topics/{topic}/partitions/{partition}/offsets", response_model=models.PartitionOffsets,
            response_model_exclude_none=True, responses=V2_ERRORS, tags=["v2 partitions"],
            summary="Beginning (log start), end (high watermark) and last stable offsets; with timestamp_ms, the "
                    "offset of a time",
            response_class=KafkaV2JSONResponse, dependencies=[ACCEPTS_V2, DESCRIBE_TOPIC])
async def get_offsets(topic: TopicName, partition: PartitionId, broker: BrokerDep, context: ContextDep,
                      timestamp_ms: Annotated[Optional[int], Query(**_TIMESTAMP_MS)] = None,
                      ) -> models.PartitionOffsets:
    listed = await broker.requests.list_offsets(ListOffsetsRequest(topic=topic, partition=partition,
                                                                   timestamp_ms=timestamp_ms), context=context)
    offsets = listed.offsets
    return models.PartitionOffsets(beginning_offset=offsets.log_start_offset, end_offset=offsets.high_watermark,
                                   last_stable_offset=offsets.last_stable_offset,
                                   offset_for_timestamp=listed.offset_for_timestamp)


@router.get("/lakelog/v1/topics/{topic}/partitions/{partition}/offset-for-timestamp",
            response_model=models.OffsetForTimestamp, responses=ERRORS, tags=["lakelog"],
            summary="The first offset at or after a time, looked up on this broker (the partition's leader)",
            dependencies=[DESCRIBE_TOPIC])
async def leader_offset_for_timestamp(topic: TopicName, partition: PartitionId, broker: BrokerDep,
                                      context: ContextDep,
                                      timestamp_ms: Annotated[int, Query(**_TIMESTAMP_MS)]) -> models.OffsetForTimestamp:
    """Answered only by the partition's leader (421 naming the leader elsewhere): the lookup another
    broker forwards, so a forwarded request is never forwarded again."""
    offset = await broker.requests.metadata.leader_offset_for_timestamp(topic, partition, timestamp_ms=timestamp_ms,
                                                                        context=context)
    return models.OffsetForTimestamp(timestamp_ms=timestamp_ms, offset=offset)


@router.get("/lakelog/v1/topics/{topic}/logs", response_model=list[models.PartitionLogInfo], responses=ERRORS,
            tags=["lakelog"], summary="Partition tables (version, files, bytes on disk) and their offsets, for direct "
                                      "readers (Spark) and the console",
            dependencies=[DESCRIBE_TOPIC])
async def topic_logs(broker: BrokerDep, context: ContextDep, topic: TopicName, partition: Optional[int] = Query(
        None, ge=0, le=models.INT32_MAX, description="only this partition (default: all)"),
        details: bool = Query(False, description="also the table's version, data files and the replica's bytes on "
                                                 "disk (a directory walk on the leader: for the console, not for "
                                                 "every planning call of a reader)")) -> list[models.PartitionLogInfo]:
    """Every partition's table on its leader. Any broker answers: a partition led elsewhere is asked
    of its leader (``?partition=``), whose table holds the committed records (offsets below the HW).
    ``?details=true`` adds ``table_version``, ``table_files`` and ``size_bytes`` (null without it)."""
    return await broker.requests.metadata.partition_logs(topic, partition, context=context, details=details)
