"""REST Proxy v2 metadata routes and lakelog's table locations.

- ``GET /topics``, ``GET /topics/{topic}``, ``GET /topics/{topic}/partitions[/{p}[/offsets]]``: any broker
  answers for the whole cluster (offsets come from each partition's leader);
- ``GET /lakelog/v1/topics/{topic}/logs``: each partition's Delta table and high watermark on its
  leader, for direct readers (Spark).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Optional

from fastapi import APIRouter, Path, Query

from lakelog.ingest_api import models
from lakelog.ingest_api.deps import BrokerDep
from lakelog.ingest_api.openapi_docs import ERRORS, ZOOKEEPER_ERRORS
from lakelog.replication.metadata import TopicMetadata
from lakelog.replication.partition_views import PartitionSummary, partition_log_info, partition_summary

router = APIRouter()

__all__ = ["ERRORS", "PartitionId", "TopicName", "router"]  # ERRORS: the routers' error answers (openapi_docs)

TopicName = Annotated[str, Path(description="Topic name")]
PartitionId = Annotated[int, Path(ge=0, le=models.INT32_MAX, description="Partition number (int32 >= 0)")]


def _partition_info(s: PartitionSummary) -> models.PartitionInfo:
    return models.PartitionInfo(
        partition=s.partition, leader=s.leader, leader_epoch=s.leader_epoch,
        replicas=[models.ReplicaInfo(broker=r.broker, leader=r.leader, in_sync=r.in_sync) for r in s.replicas],
        log_start_offset=s.log_start_offset, lake_end_offset=s.lake_end_offset, log_end_offset=s.log_end_offset,
        high_watermark=s.high_watermark)


async def _partitions(broker, meta: TopicMetadata) -> list[models.PartitionInfo]:
    summaries = await asyncio.gather(*(partition_summary(broker.replica_manager, meta.name, p, r)
                                       for p, r in sorted(meta.replicas.items())))
    return [_partition_info(s) for s in summaries]


@router.get("/topics", response_model=list[str], responses=ZOOKEEPER_ERRORS, tags=["v2 topics"],
            summary="List topic names")
async def list_topics(broker: BrokerDep) -> list[str]:
    await broker.refresh_topics()
    return sorted(broker.topics())


@router.get("/topics/{topic}", response_model=models.TopicInfo, responses=ERRORS, tags=["v2 topics"],
            summary="Describe a topic: configs and partitions")
async def get_topic(topic: TopicName, broker: BrokerDep) -> models.TopicInfo:
    meta = await broker.topic_fresh(topic)
    return models.TopicInfo(name=topic, configs=meta.config.to_kafka(), partitions=await _partitions(broker, meta))


@router.get("/topics/{topic}/partitions", response_model=list[models.PartitionInfo], responses=ERRORS,
            tags=["v2 partitions"], summary="List a topic's partitions with leader, replicas, ISR")
async def list_partitions(topic: TopicName, broker: BrokerDep) -> list[models.PartitionInfo]:
    return await _partitions(broker, await broker.topic_fresh(topic))


@router.get("/topics/{topic}/partitions/{partition}", response_model=models.PartitionInfo, responses=ERRORS,
            tags=["v2 partitions"], summary="Describe one partition: leader, replicas (in_sync), offsets")
async def get_partition(topic: TopicName, partition: PartitionId, broker: BrokerDep) -> models.PartitionInfo:
    meta = await broker.topic_fresh(topic)
    broker.check_partition(meta, partition)
    return _partition_info(await partition_summary(broker.replica_manager, topic, partition,
                                                   meta.replicas[partition]))


@router.get("/topics/{topic}/partitions/{partition}/offsets", response_model=models.PartitionOffsets,
            responses=ERRORS, tags=["v2 partitions"],
            summary="Beginning (log start) and end (high watermark) offsets")
async def get_offsets(topic: TopicName, partition: PartitionId, broker: BrokerDep) -> models.PartitionOffsets:
    log_start, _, high_watermark = await broker.partition_offsets(topic, partition)
    return models.PartitionOffsets(beginning_offset=log_start, end_offset=high_watermark)


@router.get("/lakelog/v1/topics/{topic}/logs", response_model=list[models.PartitionLogInfo], responses=ERRORS,
            tags=["lakelog"], summary="Partition tables and their high watermarks, for direct readers (Spark)")
async def topic_logs(broker: BrokerDep, topic: TopicName, partition: Optional[int] = Query(
        None, ge=0, le=models.INT32_MAX, description="only this partition (default: all)")) -> list[models.PartitionLogInfo]:
    """Every partition's table on its leader. Any broker answers: a partition led elsewhere is asked
    of its leader (``?partition=``), whose table holds the committed records (offsets below the HW)."""
    meta = await broker.topic_fresh(topic)
    if partition is not None:
        broker.check_partition(meta, partition)
    wanted = [partition] if partition is not None else sorted(meta.replicas)
    return list(await asyncio.gather(*(partition_log_info(broker.replica_manager, topic, p) for p in wanted)))
