"""REST Proxy v3: the cluster, its brokers, and the partitions and replicas of a topic (read only).

Confluent REST Proxy v3's ``ClustersResource``, ``BrokersResource``, ``PartitionsResource`` and
``ReplicasResource`` (confluentinc/kafka-rest, ``api/v3/openapi.yaml``); the shapes are in
:mod:`~lakelog.ingest_api.v3_models`:

- ``GET /v3/clusters``, ``GET /v3/clusters/{cluster_id}``: ``KafkaCluster`` with links to the controller,
  brokers, consumer groups and topics;
- ``GET /v3/clusters/{cluster_id}/brokers[/{broker_id}]``: the live brokers (host, port, rack);
- ``GET /v3/clusters/{cluster_id}/topics/{topic}/partitions[/{partition_id}]``: links to the leader's
  replica and to the replicas;
- ``GET .../partitions/{partition_id}/replicas[/{broker_id}]``: each replica's broker, ``is_leader``
  and ``is_in_sync`` (the partition's ISR).

Any broker answers for the whole cluster, from ZooKeeper (the request layer's
:class:`~lakelog.requests.metadata.MetadataViews`).
Every ``related`` link and ``self`` URL answers 200 while the resource exists (a replica's ``broker``
link: while that broker is live). Errors: 404 with 40409 (not this cluster's id), 40410 (no live broker
with that id), 40401 (topic), 40402 (partition), 40411 (the broker holds no replica of the partition).
"""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Path, Request, Response

from lakelog.ingest_api import v3_models as m
from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.errors import check_cluster
from lakelog.ingest_api.models import INT32_MAX
from lakelog.ingest_api.openapi_docs import ZOOKEEPER_ERRORS, v3_read_errors
from lakelog.ingest_api.permissions import topic_permission
from lakelog.ingest_api.topics_api import PartitionId, TopicName
from lakelog.replication.cluster_views import PartitionReplicas
from lakelog.replication.metadata import BrokerInfo
from lakelog.security.acls import Operation
from lakelog.replication.partition_views import ReplicaSummary

router = APIRouter(tags=["v3"])

BrokerId = Annotated[int, Path(ge=0, le=INT32_MAX, description="Broker id (broker.id, int32 >= 0)")]


CLUSTER_ERRORS = v3_read_errors("cluster (40409)")
BROKER_ERRORS = v3_read_errors("cluster (40409), no live broker with that id (40410)")
PARTITION_ERRORS = v3_read_errors("cluster (40409), topic (40401), partition (40402)")
REPLICA_ERRORS = v3_read_errors("cluster (40409), topic (40401), partition (40402), the broker holds no replica "
                         "of the partition (40411)")


# -- URLs and bodies -------------------------------------------------------------------------------

def _cluster_url(request: Request, cluster_id: str) -> str:
    return f"{str(request.base_url).rstrip('/')}/v3/clusters/{cluster_id}"


def _collection(url: str) -> m.ResourceCollectionMetadata:
    return m.ResourceCollectionMetadata(self=url, next=None)


async def _cluster_data(request: Request, broker) -> m.ClusterData:
    cid = broker.cluster_id
    url = _cluster_url(request, cid)
    controller = await broker.requests.metadata.controller_id()
    return m.ClusterData(
        metadata=m.ResourceMetadata(self=url, resource_name=f"crn:///kafka={cid}"), cluster_id=cid,
        controller=None if controller is None else m.Related(related=f"{url}/brokers/{controller}"),
        brokers=m.Related(related=f"{url}/brokers"), consumer_groups=m.Related(related=f"{url}/consumer-groups"),
        topics=m.Related(related=f"{url}/topics"))


def _broker_data(request: Request, cluster_id: str, info: BrokerInfo) -> m.BrokerData:
    url = f"{_cluster_url(request, cluster_id)}/brokers/{info.broker_id}"
    return m.BrokerData(
        metadata=m.ResourceMetadata(self=url, resource_name=f"crn:///kafka={cluster_id}/broker={info.broker_id}"),
        cluster_id=cluster_id, broker_id=info.broker_id, host=info.host, port=info.port, rack=info.rack,
        endpoints=list(info.endpoints))


def _partition_url(request: Request, cluster_id: str, topic: str, partition: int) -> str:
    return f"{_cluster_url(request, cluster_id)}/topics/{topic}/partitions/{partition}"


def _partition_data(request: Request, cluster_id: str, p: PartitionReplicas) -> m.PartitionData:
    return _partition_data_at(_cluster_url(request, cluster_id), cluster_id, p)


def _partition_data_at(cluster_url: str, cluster_id: str, p: PartitionReplicas) -> m.PartitionData:
    return m.PartitionData.model_validate(_partition_dict_at(cluster_url, cluster_id, p))


def _partition_dict_at(cluster_url: str, cluster_id: str, p: PartitionReplicas) -> dict:
    """:class:`~lakelog.ingest_api.v3_models.PartitionData` as the plain dict it serializes to: the list of
    thousands of partitions encodes these at once (orjson) instead of building and dumping models."""
    url = f"{cluster_url}/topics/{p.topic}/partitions/{p.partition}"
    return {"kind": "KafkaPartition",
            "metadata": {"self": url,
                         "resource_name": f"crn:///kafka={cluster_id}/topic={p.topic}/partition={p.partition}"},
            "cluster_id": cluster_id, "topic_name": p.topic, "partition_id": p.partition,
            "leader": None if p.leader is None else {"related": f"{url}/replicas/{p.leader}"},
            "replicas": {"related": f"{url}/replicas"}, "reassignment": None}


def _replica_data(request: Request, cluster_id: str, p: PartitionReplicas, r: ReplicaSummary) -> m.ReplicaData:
    url = f"{_partition_url(request, cluster_id, p.topic, p.partition)}/replicas/{r.broker}"
    return m.ReplicaData(
        metadata=m.ResourceMetadata(
            self=url,
            resource_name=f"crn:///kafka={cluster_id}/topic={p.topic}/partition={p.partition}/replica={r.broker}"),
        cluster_id=cluster_id, topic_name=p.topic, partition_id=p.partition, broker_id=r.broker,
        is_leader=r.leader, is_in_sync=r.in_sync,
        broker=m.Related(related=f"{_cluster_url(request, cluster_id)}/brokers/{r.broker}"))


# -- the cluster -----------------------------------------------------------------------------------

@router.get("/v3/clusters", response_model=m.ClusterDataList, responses=ZOOKEEPER_ERRORS, summary="The cluster")
async def list_clusters(request: Request, broker: BrokerDep) -> m.ClusterDataList:
    """A list of one: the cluster this broker belongs to (REST Proxy's ``GET /v3/clusters``)."""
    return m.ClusterDataList(metadata=_collection(f"{str(request.base_url).rstrip('/')}/v3/clusters"),
                             data=[await _cluster_data(request, broker)])


@router.get("/v3/clusters/{cluster_id}", response_model=m.ClusterData, responses=CLUSTER_ERRORS,
            summary="Describe the cluster: its controller, brokers, topics")
async def get_cluster(cluster_id: str, request: Request, broker: BrokerDep) -> m.ClusterData:
    check_cluster(broker, cluster_id)
    return await _cluster_data(request, broker)


# -- brokers ---------------------------------------------------------------------------------------

@router.get("/v3/clusters/{cluster_id}/brokers", response_model=m.BrokerDataList, responses=CLUSTER_ERRORS,
            summary="The live brokers: id, host, port, rack")
async def list_brokers(cluster_id: str, request: Request, broker: BrokerDep) -> m.BrokerDataList:
    check_cluster(broker, cluster_id)
    brokers = await broker.requests.metadata.brokers()
    return m.BrokerDataList(metadata=_collection(f"{_cluster_url(request, cluster_id)}/brokers"),
                            data=[_broker_data(request, cluster_id, info) for _, info in sorted(brokers.items())])


@router.get("/v3/clusters/{cluster_id}/brokers/{broker_id}", response_model=m.BrokerData,
            responses=BROKER_ERRORS, summary="One live broker")
async def get_broker(cluster_id: str, broker_id: BrokerId, request: Request, broker: BrokerDep) -> m.BrokerData:
    """404 / 40410 when no live broker has ``broker_id`` (a stopped broker is not listed)."""
    check_cluster(broker, cluster_id)
    return _broker_data(request, cluster_id, await broker.requests.metadata.broker(broker_id))


# -- partitions and replicas -----------------------------------------------------------------------

@router.get("/v3/clusters/{cluster_id}/topics/{topic}/partitions", response_model=m.PartitionDataList,
            responses=PARTITION_ERRORS, summary="A topic's partitions with links to their leader and replicas",
            dependencies=[topic_permission(Operation.DESCRIBE)])
async def list_partitions(cluster_id: str, topic: TopicName, request: Request, broker: BrokerDep,
                          context: ContextDep) -> Response:
    check_cluster(broker, cluster_id)
    parts = await broker.requests.metadata.partition_replicas(topic, context=context)
    cluster_url = _cluster_url(request, cluster_id)
    # thousands of partitions: plain dicts encoded once (the shape of m.PartitionDataList, which the
    # single-partition route validates; building 5,000 models cost more than the rest of the answer)
    listing = {"kind": "KafkaPartitionList",
               "metadata": _collection(f"{cluster_url}/topics/{topic}/partitions").model_dump(),
               "data": [_partition_dict_at(cluster_url, cluster_id, p) for p in parts]}
    return Response(orjson.dumps(listing), media_type="application/json")


@router.get("/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id}", response_model=m.PartitionData,
            responses=PARTITION_ERRORS, summary="One partition",
            dependencies=[topic_permission(Operation.DESCRIBE)])
async def get_partition(cluster_id: str, topic: TopicName, partition_id: PartitionId, request: Request,
                        broker: BrokerDep, context: ContextDep) -> m.PartitionData:
    check_cluster(broker, cluster_id)
    [p] = await broker.requests.metadata.partition_replicas(topic, partition_id, context=context)
    return _partition_data(request, cluster_id, p)


@router.get("/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id}/replicas",
            response_model=m.ReplicaDataList, responses=PARTITION_ERRORS,
            summary="A partition's replicas: leader and in-sync (ISR) flags",
            dependencies=[topic_permission(Operation.DESCRIBE)])
async def list_replicas(cluster_id: str, topic: TopicName, partition_id: PartitionId, request: Request,
                        broker: BrokerDep, context: ContextDep) -> m.ReplicaDataList:
    check_cluster(broker, cluster_id)
    [p] = await broker.requests.metadata.partition_replicas(topic, partition_id, context=context)
    return m.ReplicaDataList(
        metadata=_collection(f"{_partition_url(request, cluster_id, topic, partition_id)}/replicas"),
        data=[_replica_data(request, cluster_id, p, r) for r in p.replicas])


@router.get("/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id}/replicas/{broker_id}",
            response_model=m.ReplicaData, responses=REPLICA_ERRORS, summary="One replica of a partition",
            dependencies=[topic_permission(Operation.DESCRIBE)])
async def get_replica(cluster_id: str, topic: TopicName, partition_id: PartitionId, broker_id: BrokerId,
                      request: Request, broker: BrokerDep, context: ContextDep) -> m.ReplicaData:
    """404 / 40411 when ``broker_id`` holds no replica of the partition."""
    check_cluster(broker, cluster_id)
    [p] = await broker.requests.metadata.partition_replicas(topic, partition_id, context=context)
    return _replica_data(request, cluster_id, p, p.replica(broker_id))
