"""REST Proxy v3: topic admin (list, create, describe, delete, add partitions), topic configs (list, get,
batch alter) and single-record produce. The cluster, its brokers, and a topic's partitions and replicas
(what a topic's ``partitions`` link leads to) are in :mod:`~lakelog.ingest_api.v3_cluster_api`."""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
from fastapi import APIRouter, Request
from fastapi.responses import Response

from lakelog.ingest_api import codecs, models
from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.errors import check_cluster
from lakelog.ingest_api.openapi_docs import error_responses
from lakelog.ingest_api.permissions import ProduceContextDep, topic_permission
from lakelog.ingest_api.records_api import PRODUCER_HEADER_PARAMETERS
from lakelog.ingest_api.topics_api import ERRORS, TopicName
from lakelog.protocol.producer_headers import producer_batch_from_headers
from lakelog.replication.metadata import TopicMetadata
from lakelog.replication.topic_configs import TopicConfigEntry
from lakelog.requests import CreateTopicRequest, ProduceRequest
from lakelog.security.acls import Operation

router = APIRouter(tags=["v3"])

#: the answers of routes that change a topic: ERRORS plus 409 (40940, the topic kept changing; retriable)
CHANGE_ERRORS = {**ERRORS, **error_responses(409)}


def _base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _topic_data(request: Request, broker, meta: TopicMetadata) -> models.TopicData:
    url = f"{_base_url(request)}/v3/clusters/{broker.cluster_id}/topics/{meta.name}"
    return models.TopicData(
        metadata=models.ResourceMetadata(self=url, resource_name=f"crn:///kafka={broker.cluster_id}/topic={meta.name}"),
        cluster_id=broker.cluster_id, topic_name=meta.name, replication_factor=meta.replication_factor,
        partitions_count=meta.partitions_count, partitions=models.Related(related=f"{url}/partitions"),
        configs=models.Related(related=f"{url}/configs"),
        configs_list=[models.ConfigEntry(name=k, value=v) for k, v in sorted(meta.configs.items())])


def _config_data(request: Request, broker, topic: str, entry: TopicConfigEntry) -> models.TopicConfigData:
    url = f"{_base_url(request)}/v3/clusters/{broker.cluster_id}/topics/{topic}/configs/{entry.name}"
    return models.TopicConfigData(
        metadata=models.ResourceMetadata(
            self=url, resource_name=f"crn:///kafka={broker.cluster_id}/topic={topic}/config={entry.name}"),
        cluster_id=broker.cluster_id, topic_name=topic, name=entry.name, value=entry.value,
        is_default=entry.is_default, source=entry.source,
        synonyms=[models.ConfigSynonym(name=s.name, value=s.value, source=s.source) for s in entry.synonyms])


@router.get("/v3/clusters/{cluster_id}/topics", response_model=models.TopicList, responses=ERRORS,
            summary="List topics (those the principal may Describe)")
async def list_topics(cluster_id: str, request: Request, broker: BrokerDep,
                      context: ContextDep) -> models.TopicList:
    check_cluster(broker, cluster_id)
    topics = await broker.requests.list_topics(context=context)
    data = [_topic_data(request, broker, topics[t]) for t in sorted(topics)]
    return models.TopicList(metadata={"self": f"{_base_url(request)}/v3/clusters/{cluster_id}/topics", "next": None},
                            data=data)


@router.post("/v3/clusters/{cluster_id}/topics", response_model=models.TopicData, status_code=201,
             responses=ERRORS, summary="Create a topic")
async def create_topic(cluster_id: str, body: models.CreateTopicRequest, request: Request,
                       broker: BrokerDep, context: ContextDep) -> models.TopicData:
    """Create on the cluster, or Create on the topic, when ACLs are checked (Kafka's CreateTopics)."""
    check_cluster(broker, cluster_id)
    configs = {c.name: c.value for c in body.configs if c.value is not None}
    meta = await broker.requests.create_topic(CreateTopicRequest(
        name=body.topic_name, partitions_count=body.partitions_count, replication_factor=body.replication_factor,
        configs=configs), context=context)
    return _topic_data(request, broker, meta)


@router.get("/v3/clusters/{cluster_id}/topics/{topic}", response_model=models.TopicData, responses=ERRORS,
            summary="Describe a topic", dependencies=[topic_permission(Operation.DESCRIBE)])
async def get_topic(cluster_id: str, topic: TopicName, request: Request, broker: BrokerDep,
                    context: ContextDep) -> models.TopicData:
    check_cluster(broker, cluster_id)
    return _topic_data(request, broker, await broker.requests.describe_topic(topic, context=context))


@router.delete("/v3/clusters/{cluster_id}/topics/{topic}", status_code=204, responses=ERRORS,
               summary="Delete a topic and its partition logs", response_class=Response,
               dependencies=[topic_permission(Operation.DELETE)])
async def delete_topic(cluster_id: str, topic: TopicName, broker: BrokerDep, context: ContextDep) -> Response:
    check_cluster(broker, cluster_id)
    await broker.requests.delete_topic(topic, context=context)
    return Response(status_code=204)


@router.patch("/v3/clusters/{cluster_id}/topics/{topic}", response_model=models.TopicData, responses=CHANGE_ERRORS,
              summary="Add partitions to a topic (never fewer)", dependencies=[topic_permission(Operation.ALTER)])
async def update_partition_count(cluster_id: str, topic: TopicName, body: models.UpdatePartitionCountRequest,
                                 request: Request, broker: BrokerDep, context: ContextDep) -> models.TopicData:
    """Grow the topic to ``partitions_count`` partitions (``kafka-topics --alter --partitions``). A count
    not above the current one is refused with 400 / 40005 (Kafka's INVALID_PARTITIONS). Records with
    keys may map to other partitions from now on (murmur2 over the new count)."""
    check_cluster(broker, cluster_id)
    meta = await broker.requests.create_partitions(topic, partitions_count=body.partitions_count, context=context)
    return _topic_data(request, broker, meta)


@router.get("/v3/clusters/{cluster_id}/topics/{topic}/configs", response_model=models.TopicConfigList,
            responses=ERRORS, summary="Every config of a topic with its effective value",
            dependencies=[topic_permission(Operation.DESCRIBE_CONFIGS)])
async def list_topic_configs(cluster_id: str, topic: TopicName, request: Request,
                             broker: BrokerDep, context: ContextDep) -> models.TopicConfigList:
    check_cluster(broker, cluster_id)
    meta = await broker.requests.describe_topic_configs(topic, context=context)
    return models.TopicConfigList(
        metadata={"self": f"{_base_url(request)}/v3/clusters/{cluster_id}/topics/{topic}/configs", "next": None},
        data=[_config_data(request, broker, topic, e) for e in meta.config_entries()])


@router.get("/v3/clusters/{cluster_id}/topics/{topic}/configs/{name}", response_model=models.TopicConfigData,
            responses=ERRORS, summary="One config of a topic", dependencies=[topic_permission(Operation.DESCRIBE_CONFIGS)])
async def get_topic_config(cluster_id: str, topic: TopicName, name: str, request: Request,
                           broker: BrokerDep, context: ContextDep) -> models.TopicConfigData:
    """404 / 40440 when ``name`` is not a topic config."""
    check_cluster(broker, cluster_id)
    meta = await broker.requests.describe_topic_configs(topic, context=context)
    return _config_data(request, broker, topic, meta.config_entry(name))


@router.post("/v3/clusters/{cluster_id}/topics/{topic}/configs:alter", status_code=204, responses=CHANGE_ERRORS,
             summary="Set and delete topic configs (all or nothing)", response_class=Response,
             dependencies=[topic_permission(Operation.ALTER_CONFIGS)])
async def alter_topic_configs(cluster_id: str, topic: TopicName, body: models.AlterConfigBatchRequest,
                              broker: BrokerDep, context: ContextDep) -> Response:
    """SET and DELETE configs in one change (``kafka-configs --alter --add-config/--delete-config``);
    running brokers apply it to the topic's open logs without a restart. An unknown key or an invalid
    value is refused with 400 / 40003 naming the key (so is a key named twice), and nothing is written."""
    check_cluster(broker, cluster_id)
    await broker.requests.alter_topic_configs(topic, [(e.name, e.operation, e.value) for e in body.data],
                                              context=context, validate_only=body.validate_only)
    return Response(status_code=204)


@router.post("/v3/clusters/{cluster_id}/topics/{topic}/records", response_model=models.V3ProduceResponse,
             responses=CHANGE_ERRORS, summary="Produce one record (REST Proxy v3)",
             openapi_extra={"parameters": PRODUCER_HEADER_PARAMETERS})
async def produce(cluster_id: str, topic: TopicName, body: models.V3ProduceRequest, request: Request,
                  broker: BrokerDep, context: ProduceContextDep) -> models.V3ProduceResponse:
    """Idempotent with the producer headers (``X-Lakelog-Producer-Id``, ``-Epoch``, ``X-Lakelog-Sequence``)."""
    check_cluster(broker, cluster_id)
    producer = producer_batch_from_headers(request.headers)
    meta = await broker.requests.describe_topic(topic, context=context)
    batch = codecs.decode_v3_record(body)
    parts = None if body.partition_id is None else pa.array([body.partition_id], pa.int32())
    result = await broker.requests.produce(ProduceRequest(topic=topic, records=batch, record_partitions=parts,
                                                          producer=producer), context=context)
    if result.errors:
        raise next(iter(result.errors.values()))
    return models.V3ProduceResponse(cluster_id=cluster_id, topic_name=meta.name,
                                    partition_id=int(result.partitions[0]), offset=int(result.offsets[0]),
                                    timestamp=datetime.now(timezone.utc).isoformat())
