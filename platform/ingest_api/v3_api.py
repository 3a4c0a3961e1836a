"""REST Proxy v3: topic admin (list, create, describe, delete, add partitions), topic configs (list, get,
batch alter) and produce (one record, or a stream of records: :mod:`~lakelog.ingest_api.v3_records`). The cluster, its brokers, and a topic's partitions and replicas
(what a topic's ``partitions`` link leads to) are in :mod:`~lakelog.ingest_api.v3_cluster_api`."""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from lakelog.ingest_api import codecs, models, v3_records
from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.error_handlers import error_response
from lakelog.ingest_api.errors import check_cluster
from lakelog.ingest_api.openapi_docs import error_responses
from lakelog.ingest_api.permissions import ProduceContextDep, topic_permission
from lakelog.ingest_api.records_api import PRODUCER_HEADER_PARAMETERS, in_flight, read_body
from lakelog.ingest_api.topics_api import ERRORS, TopicName
from lakelog.errors import LakelogError, RecordValidationError
from lakelog.protocol.errors import MalformedBodyError, ProduceQueueFullError
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
    configs = {c.name: c.value for c in body.configs}  # a null value: the default (its name is checked)
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


_V3_PRODUCE_BODY = {
    "required": True,
    "description": "One record, or a stream of records: JSON objects one after another (Confluent's streaming "
                   "produce), each answered in order.",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/V3ProduceRequest"}}},
}


_V3_PRODUCE_ANSWERS = {**CHANGE_ERRORS, 200: {
    "description": "One record: its delivery report. A stream of records: for each record in order its delivery "
                   "report (error_code 200) or its error body (error_code, message), each followed by CRLF."}}


@router.post("/v3/clusters/{cluster_id}/topics/{topic}/records", response_model=models.V3ProduceResponse,
             responses=_V3_PRODUCE_ANSWERS, summary="Produce one record, or a stream of records (REST Proxy v3)",
             openapi_extra={"parameters": PRODUCER_HEADER_PARAMETERS, "requestBody": _V3_PRODUCE_BODY})
async def produce(cluster_id: str, topic: TopicName, request: Request,
                  broker: BrokerDep, context: ProduceContextDep) -> Response:
    """One record: its delivery report, or its error as the answer. Several records (JSON objects one after
    another): 200 and, for each record in order, its delivery report or error body, each followed by
    ``\r\n`` (:mod:`~lakelog.ingest_api.v3_records`); the valid ones are produced as one request.
    Idempotent with the producer headers (``X-Lakelog-Producer-Id``, ``-Epoch``, ``X-Lakelog-Sequence``)."""
    check_cluster(broker, cluster_id)
    producer = producer_batch_from_headers(request.headers)
    meta = await broker.requests.describe_topic(topic, context=context)
    budget = in_flight(request, broker.settings.queued_max_request_bytes)
    size = 0
    try:
        try:
            raw = await read_body(request, limit=broker.settings.socket_request_max_bytes, budget=budget)
        except MalformedBodyError:  # empty: answered as a missing body
            raw = b""
        except ProduceQueueFullError as e:
            response = error_response(e)
            response.headers["Retry-After"] = str(e.retry_after_s)
            return response
        size = len(raw)
        items = await v3_records.serialize_schemas(v3_records.parse_records(raw), topic=meta.name,
                                                   schemas=broker.requests.schemas, context=context)
        del raw
        if len(items) == 1:
            if isinstance(items[0], LakelogError):
                raise items[0]
            return await _produce_one(cluster_id, meta.name, items[0], broker, context, producer)
        batch, named, rows, errors = v3_records.records_batch(items)
        outcomes: list = [errors.get(i) for i in range(len(items))]
        if batch is not None:
            produced = await broker.requests.produce_each(ProduceRequest(
                topic=topic, records=batch, record_partitions=named, producer=producer), context=context)
            for i, outcome in zip(rows, produced):
                outcomes[i] = outcome
        return StreamingResponse(v3_records.answer_lines(outcomes, cluster_id=cluster_id, topic=meta.name),
                                 media_type="application/json")
    finally:
        budget.give(size)


async def _produce_one(cluster_id: str, topic: str, body: models.V3ProduceRequest, broker, context,
                       producer) -> Response:
    """A one-record body: its delivery report, or its error as the answer."""
    batch = codecs.decode_v3_record(body)
    parts = None if body.partition_id is None else pa.array([body.partition_id], pa.int32())
    result = await broker.requests.produce(ProduceRequest(topic=topic, records=batch, record_partitions=parts,
                                                          producer=producer), context=context)
    if result.errors:
        raise next(iter(result.errors.values()))
    if result.dead_letters:  # schema validation sent it to the topic's dead-letter topic (errors.tolerance=all)
        raise RecordValidationError(result.dead_letters[0].message(0))
    answer = models.V3ProduceResponse(cluster_id=cluster_id, topic_name=topic, partition_id=int(result.partitions[0]),
                                      offset=int(result.offsets[0]), timestamp=datetime.now(timezone.utc).isoformat())
    return Response(answer.model_dump_json(), media_type="application/json")
