"""The FastAPI gateway of one broker: REST Proxy v2/v3 produce, fetch, metadata and topic admin.

Run with :func:`create_app` under uvicorn (``lakelog broker start``). Routes:

- v2: ``GET /topics``, ``GET /topics/{topic}``, ``GET /topics/{topic}/partitions[/{p}[/offsets]]``,
  ``POST /topics/{topic}``, ``POST /topics/{topic}/partitions/{p}`` (binary / JSON produce),
  ``POST /topics/{topic}/partitions/{p}/records`` (Arrow IPC produce),
  ``GET /topics/{topic}/partitions/{p}/records`` (fetch; JSON forms or Arrow by ``Accept``);
- v3: ``/v3/clusters``, topics list/create/get/delete, single-record produce;
- lakelog: ``GET /lakelog/v1/topics/{topic}/logs`` (table locations and high watermarks for readers).

Errors are ``{"error_code": status*100+n, "message": ...}`` from :class:`lakelog.errors.LakelogError`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import logging
from datetime import datetime, timezone
from typing import Annotated, Optional

import numpy as np
import httpx
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from fastapi import FastAPI, Header, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException as StarletteHTTPException

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.errors import RETRIABLE_HEADER, LakelogError
from lakelog.ingest_api import codecs, consumers_api, models, offsets_api, replica_api
from lakelog.ingest_api.errors import (
    ForwardedProduceError,
    InvalidEncodingError,
    InvalidPartitionInRecordError,
    MalformedBodyError,
    RequestTooLargeError,
    UnsupportedMediaTypeError,
)
from lakelog.protocol.partitioner import partitions_for_keys
from lakelog.log_tables.records import check_record_sizes, normalize_produce_batch
from lakelog.replication.acks import ACKS_HEADER, parse_acks
from lakelog.replication.errors import LeaderNotAvailableError, NotLeaderError

log = logging.getLogger(__name__)

_ERRORS = {status: {"model": models.ErrorBody} for status in (400, 404, 406, 413, 415, 421, 422, 503, 504)}

_PRODUCE_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            codecs.BINARY_V2: {"schema": {"$ref": "#/components/schemas/BinaryProduceRequest"}},
            codecs.JSON_V2: {"schema": {"$ref": "#/components/schemas/JsonProduceRequest"}},
        },
    }
}
_ARROW_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            codecs.ARROW_STREAM: {"schema": {"type": "string", "format": "binary",
                                             "description": "Arrow IPC stream: key, value (binary or string), "
                                                            "optional headers, timestamp (ms)."}},
            **_PRODUCE_BODY["requestBody"]["content"],
        },
    }
}
_FETCH_RESPONSES = {
    200: {
        "description": "Records from `offset`, below the high watermark, in offset order.",
        "content": {
            codecs.BINARY_V2: {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/ConsumerRecord"}}},
            codecs.JSON_V2: {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/ConsumerRecord"}}},
            codecs.ARROW_STREAM: {"schema": {"type": "string", "format": "binary"}},
        },
    },
    **_ERRORS,
}

TopicName = Annotated[str, Path(description="Topic name")]
PartitionId = Annotated[int, Path(ge=0, description="Partition number")]


def create_app(settings: BrokerSettings, *, broker: Broker | None = None) -> FastAPI:
    """Build the gateway app for one broker; the broker starts and stops with the app (lifespan)."""
    broker = broker or Broker(settings)
    sticky = itertools.count()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        await broker.start()
        try:
            async with consumers_api.consumer_instances(app, broker, settings):
                yield
        finally:
            await broker.stop()

    app = FastAPI(
        title="lakelog gateway",
        version="0.1.0",
        description="Kafka-style topics whose partition logs are Delta tables. Confluent REST Proxy v2/v3 "
                    "compatible produce, fetch, metadata and topic admin, plus Arrow IPC produce and fetch.",
        lifespan=lifespan,
    )
    app.state.broker = broker
    app.include_router(offsets_api.router)
    app.include_router(consumers_api.router)
    app.include_router(replica_api.router)
    _document_raw_body_models(app)

    # -- errors ---------------------------------------------------------------------------------

    @app.exception_handler(LakelogError)
    async def lakelog_error(request: Request, exc: LakelogError) -> JSONResponse:
        return JSONResponse(exc.to_body(), status_code=exc.http_status,
                            headers={RETRIABLE_HEADER: "true" if exc.retriable else "false"})

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        # A bug or an unexpected failure: still a REST Proxy error body, never a bare text/plain 500.
        log.exception("%s %s failed", request.method, request.url.path)
        return JSONResponse({"error_code": 50001, "message": f"Internal error: {type(exc).__name__}: {exc}"},
                            status_code=500, headers={RETRIABLE_HEADER: "false"})

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"])
            parts.append(f"{loc}: {err['msg']}")
        status = 422 if any(e["loc"] and e["loc"][0] == "body" for e in exc.errors()) else 400
        return JSONResponse({"error_code": status * 100 + (22 if status == 422 else 1),
                             "message": "Invalid request: " + "; ".join(parts)}, status_code=status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error_code": exc.status_code, "message": str(exc.detail)}, status_code=exc.status_code)

    # -- helpers --------------------------------------------------------------------------------

    async def read_body(request: Request) -> bytes:
        limit = settings.socket_request_max_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise RequestTooLargeError(f"The request body is {declared} bytes, more than socket.request.max.bytes="
                                       f"{limit}; split it into smaller requests.")
        body = await request.body()
        if len(body) > limit:
            raise RequestTooLargeError(f"The request body is {len(body)} bytes, more than socket.request.max.bytes={limit}.")
        if not body:
            raise MalformedBodyError("The request body is empty; send a produce request.")
        return body

    async def partition_info(topic: str, p: int, replicas: list[int]) -> models.PartitionInfo:
        state = await broker.partition_state(topic, p)
        info = models.PartitionInfo(
            partition=p, leader=state.leader, leader_epoch=state.leader_epoch,
            replicas=[models.ReplicaInfo(broker=b, leader=b == state.leader, in_sync=b in state.isr) for b in replicas])
        if state.leader >= 0:  # any broker answers for the whole cluster: the offsets are the leader's
            try:
                info.log_start_offset, info.log_end_offset, info.high_watermark = \
                    await broker.partition_offsets(topic, p)
            except LakelogError:  # the leader is moving or unreachable: offsets stay unknown
                pass
        return info

    async def produce_batch(topic: str, batch: pa.Table, partitions: pa.Array | None,
                            fixed_partition: int | None, acks: str = "all") -> Response:
        """Route a decoded batch to partitions, validate all of it, append, answer per record.

        ``acks`` as in :mod:`lakelog.replication.acks` (``0`` answers offsets -1)."""
        meta = await broker.topic_fresh(topic)
        n = batch.num_rows
        # 1. validate the whole request before anything is queued: nothing partial is ever written
        if fixed_partition is not None:
            broker.check_partition(meta, fixed_partition)
            parts = None
        else:
            parts = partitions
            if parts is not None and parts.null_count < len(parts):
                bad = pc.or_(pc.less(parts, 0), pc.greater_equal(parts, meta.partitions_count))
                if pc.any(bad).as_py():
                    i = pc.indices_nonzero(bad)[0].as_py()
                    raise InvalidPartitionInRecordError(
                        f"Record {i} names partition {parts[i].as_py()}, but topic '{topic}' has partitions "
                        f"0 to {meta.partitions_count - 1}. Nothing was written.")
        check_record_sizes(batch, max_message_bytes=meta.config.max_message_bytes, topic=topic)
        if n == 0:
            return _json({"offsets": [], "key_schema_id": None, "value_schema_id": None})
        # 2. choose partitions as Kafka's producer does: explicit, else murmur2(key), else sticky
        if fixed_partition is None:
            hashed = partitions_for_keys(batch["key"], meta.partitions_count)
            parts = hashed if parts is None else pc.coalesce(parts, hashed)
            if parts.null_count:
                parts = pc.fill_null(parts, next(sticky) % meta.partitions_count)
            groups = [(int(p), pc.equal(parts, p)) for p in pc.unique(parts).to_pylist()]
        else:
            groups = [(fixed_partition, None)]
        # 3. append each partition's share; the group committer batches them with other requests
        subs = [(p, batch if mask is None else batch.filter(mask), mask) for p, mask in groups]
        append = broker.produce if fixed_partition is not None else append_or_forward
        results = await asyncio.gather(*(append(topic, p, sub, acks=acks) for p, sub, _ in subs),
                                       return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors and len(errors) == len(results):
            raise errors[0]
        # 4. one offset per record, in request order
        offsets = np.zeros(n, dtype=np.int64)
        part_of = np.zeros(n, dtype=np.int64)
        failed: dict[int, LakelogError | BaseException] = {}
        for (p, sub, mask), base in zip(subs, results):
            idx = np.arange(n) if mask is None else pc.indices_nonzero(mask).to_numpy()
            part_of[idx] = p
            if isinstance(base, BaseException):
                failed[p] = base
                offsets[idx] = -1
            else:
                offsets[idx] = -1 if acks == "0" else base + np.arange(len(idx))
        if not failed:
            entries = [{"partition": p, "offset": o, "error_code": None, "error": None}
                       for p, o in zip(part_of.tolist(), offsets.tolist())]
        else:
            entries = []
            for p, o in zip(part_of.tolist(), offsets.tolist()):
                err = failed.get(p)
                if err is None:
                    entries.append({"partition": p, "offset": o, "error_code": None, "error": None})
                else:
                    retriable = getattr(err, "retriable", False)
                    entries.append({"partition": p, "offset": None, "error_code": 2 if retriable else 1,
                                    "error": str(err)})
        return _json({"offsets": entries, "key_schema_id": None, "value_schema_id": None})

    async def append_or_forward(topic: str, partition: int, records: pa.Table, *, acks: str) -> int:
        """Append a topic-level produce's share for ``partition`` here, or send it to the partition's
        leader (Arrow IPC to ``/topics/{t}/partitions/{p}/records`` with the same ``acks``) when this
        broker does not lead it: a ``POST /topics/{t}`` may go to any broker, as with REST Proxy, which
        produces to every leader. Returns the share's base offset; raises what the leader answered."""
        try:
            return await broker.produce(topic, partition, records, acks=acks)
        except NotLeaderError as e:
            if broker.http is None or not e.leader_url:
                raise
            leader_url = e.leader_url
        try:
            resp = await broker.http.post(
                f"{leader_url}/topics/{topic}/partitions/{partition}/records", params={"acks": acks},
                content=codecs.arrow_ipc(records), headers={"Content-Type": codecs.ARROW_STREAM},
                timeout=settings.request_timeout_ms / 1000.0 + 5)
        except httpx.HTTPError as e:
            raise LeaderNotAvailableError(f"The leader of {topic}-{partition} at {leader_url} did not answer "
                                          f"({type(e).__name__}); retry.") from None
        if resp.status_code != 200:
            raise ForwardedProduceError.from_response(resp)
        return resp.json()["base_offset"]

    async def produce(request: Request, topic: str, partition: int | None, *, allow_arrow: bool) -> Response:
        fmt = codecs.produce_format(request.headers.get("content-type"))
        if fmt == "arrow" and not allow_arrow:
            raise UnsupportedMediaTypeError(
                f"Arrow produce goes to one partition: POST /topics/{topic}/partitions/{{p}}/records.")
        acks = parse_acks(request.query_params.get("acks", request.headers.get(ACKS_HEADER)))
        body = await read_body(request)
        await broker.topic_fresh(topic)  # 40401 before body errors, as REST Proxy
        batch, parts = codecs.decode_produce(body, fmt)
        if fmt == "arrow":
            meta = broker.topic(topic)
            broker.check_partition(meta, partition)
            if parts is not None and pc.any(pc.not_equal(parts, partition)).as_py():
                raise InvalidPartitionInRecordError(
                    f"The Arrow body's 'partition' column names other partitions than {partition}. Nothing was written.")
            if batch.num_rows == 0:
                raise MalformedBodyError("The Arrow body holds no records.")
            check_record_sizes(batch, max_message_bytes=meta.config.max_message_bytes, topic=topic)
            base = await broker.produce(topic, partition, batch, acks=acks)
            return _json({"partition": partition, "base_offset": base,
                          "last_offset": -1 if acks == "0" else base + batch.num_rows - 1,
                          "record_count": batch.num_rows})
        return await produce_batch(topic, batch, parts, partition, acks)

    # -- v2: metadata ---------------------------------------------------------------------------

    @app.get("/topics", response_model=list[str], tags=["v2 topics"], summary="List topic names")
    async def list_topics() -> list[str]:
        await broker.refresh_topics()
        return sorted(broker.topics())

    @app.get("/topics/{topic}", response_model=models.TopicInfo, responses=_ERRORS, tags=["v2 topics"],
             summary="Describe a topic: configs and partitions")
    async def get_topic(topic: TopicName) -> models.TopicInfo:
        meta = await broker.topic_fresh(topic)
        parts = await asyncio.gather(*(partition_info(topic, p, r) for p, r in sorted(meta.replicas.items())))
        return models.TopicInfo(name=topic, configs=meta.config.to_kafka(), partitions=list(parts))

    @app.get("/topics/{topic}/partitions", response_model=list[models.PartitionInfo], responses=_ERRORS,
             tags=["v2 partitions"], summary="List a topic's partitions with leader, replicas, ISR")
    async def list_partitions(topic: TopicName) -> list[models.PartitionInfo]:
        meta = await broker.topic_fresh(topic)
        return list(await asyncio.gather(*(partition_info(topic, p, r) for p, r in sorted(meta.replicas.items()))))

    @app.get("/topics/{topic}/partitions/{partition}", response_model=models.PartitionInfo, responses=_ERRORS,
             tags=["v2 partitions"], summary="Describe one partition: leader, replicas (in_sync), offsets")
    async def get_partition(topic: TopicName, partition: PartitionId) -> models.PartitionInfo:
        meta = await broker.topic_fresh(topic)
        broker.check_partition(meta, partition)
        return await partition_info(topic, partition, meta.replicas[partition])

    @app.get("/topics/{topic}/partitions/{partition}/offsets", response_model=models.PartitionOffsets,
             responses=_ERRORS, tags=["v2 partitions"],
             summary="Beginning (log start) and end (high watermark) offsets")
    async def get_offsets(topic: TopicName, partition: PartitionId) -> models.PartitionOffsets:
        log_start, _, high_watermark = await broker.partition_offsets(topic, partition)
        return models.PartitionOffsets(beginning_offset=log_start, end_offset=high_watermark)

    # -- v2: produce ----------------------------------------------------------------------------

    @app.post("/topics/{topic}", response_model=models.ProduceResponse, responses=_ERRORS, tags=["v2 produce"],
              summary="Produce records; partition by record, else murmur2(key), else spread",
              openapi_extra=_PRODUCE_BODY)
    async def produce_topic(topic: TopicName, request: Request) -> Response:
        return await produce(request, topic, None, allow_arrow=False)

    @app.post("/topics/{topic}/partitions/{partition}", response_model=models.ProduceResponse, responses=_ERRORS,
              tags=["v2 produce"], summary="Produce records to one partition", openapi_extra=_PRODUCE_BODY)
    async def produce_partition(topic: TopicName, partition: PartitionId, request: Request) -> Response:
        return await produce(request, topic, partition, allow_arrow=True)

    @app.post("/topics/{topic}/partitions/{partition}/records", tags=["v2 produce"],
              response_model=models.ArrowProduceResponse | models.ProduceResponse, responses=_ERRORS,
              summary="Bulk produce to one partition (Arrow IPC stream, or the JSON forms)",
              openapi_extra=_ARROW_BODY)
    async def produce_records(topic: TopicName, partition: PartitionId, request: Request) -> Response:
        return await produce(request, topic, partition, allow_arrow=True)

    # -- fetch ----------------------------------------------------------------------------------

    @app.get("/topics/{topic}/partitions/{partition}/records", responses=_FETCH_RESPONSES, tags=["fetch"],
             summary="Fetch records from an offset (long-poll up to max_wait_ms)", response_class=Response)
    async def fetch(
        topic: TopicName, partition: PartitionId,
        offset: Annotated[int, Query(ge=0, description="First offset to return.")] = 0,
        max_bytes: Annotated[int, Query(gt=0, le=256 * 1024 * 1024,
                                        description="Soft limit on the records' bytes (at least one record is returned). Default: 1 MiB.")] = 1024 * 1024,
        max_wait_ms: Annotated[int | None, Query(ge=0, le=60_000,
                                                 description="Long-poll when nothing is there. Default: fetch.max.wait.ms.")] = None,
        accept: Annotated[str | None, Header()] = None,
    ) -> Response:
        fmt = codecs.fetch_format(accept)
        wait = settings.fetch_max_wait_ms if max_wait_ms is None else max_wait_ms
        table, part = await broker.fetch(topic, partition, offset, max_bytes=max_bytes, max_wait_ms=wait,
                                         columns=codecs.FETCH_COLUMNS)
        body = await asyncio.to_thread(codecs.encode_records, table, fmt, topic=topic, partition=partition) \
            if table.num_rows > 5000 else codecs.encode_records(table, fmt, topic=topic, partition=partition)
        media = {"arrow": codecs.ARROW_STREAM, "binary": codecs.BINARY_V2, "json": codecs.JSON_V2}[fmt]
        return Response(body, media_type=media, headers={
            "X-Lakelog-High-Watermark": str(part.log.high_watermark),
            "X-Lakelog-Log-Start-Offset": str(part.log.log_start_offset),
        })

    @app.get("/lakelog/v1/topics/{topic}/logs", response_model=list[models.PartitionLogInfo], responses=_ERRORS,
             tags=["lakelog"], summary="Partition tables and their high watermarks, for direct readers (Spark)")
    async def topic_logs(topic: TopicName, partition: Optional[int] = Query(
            None, ge=0, description="only this partition (default: all)")) -> list[models.PartitionLogInfo]:
        """Every partition's table on its leader. Any broker answers: a partition led elsewhere is asked
        of its leader (``?partition=``), whose table holds the committed records (offsets below the HW)."""
        meta = await broker.topic_fresh(topic)
        if partition is not None:
            broker.check_partition(meta, partition)

        async def one(p: int) -> models.PartitionLogInfo:
            try:
                part = await broker.leader_partition(topic, p)
            except NotLeaderError as e:
                if broker.http is None or not e.leader_url:
                    raise
                try:
                    resp = await broker.http.get(f"{e.leader_url}/lakelog/v1/topics/{topic}/logs",
                                                 params={"partition": p}, timeout=10.0)
                except httpx.HTTPError:
                    raise LeaderNotAvailableError(f"The leader of {topic}-{p} at {e.leader_url} did not answer; "
                                                  "retry.") from None
                if resp.status_code != 200:
                    raise
                return models.PartitionLogInfo(**resp.json()[0])
            return models.PartitionLogInfo(
                topic=topic, partition=p, table_uri=part.log.table_uri, log_start_offset=part.log.log_start_offset,
                log_end_offset=part.log.log_end_offset, high_watermark=part.log.high_watermark,
                leader_epoch=part.leader_epoch, timestamp_type=meta.config.timestamp_type_id)

        wanted = [partition] if partition is not None else sorted(meta.replicas)
        return list(await asyncio.gather(*(one(p) for p in wanted)))

    # -- v3 -------------------------------------------------------------------------------------

    def base_url(request: Request) -> str:
        return str(request.base_url).rstrip("/")

    def check_cluster(cluster_id: str) -> None:
        if cluster_id != broker.cluster_id:
            raise _ClusterNotFound(f"Cluster '{cluster_id}' not found; this cluster is '{broker.cluster_id}'.")

    def topic_data(request: Request, meta) -> models.TopicData:
        url = f"{base_url(request)}/v3/clusters/{broker.cluster_id}/topics/{meta.name}"
        return models.TopicData(
            metadata=models.ResourceMetadata(self=url, resource_name=f"crn:///kafka={broker.cluster_id}/topic={meta.name}"),
            cluster_id=broker.cluster_id, topic_name=meta.name, replication_factor=meta.replication_factor,
            partitions_count=meta.partitions_count, partitions=models.Related(related=f"{url}/partitions"),
            configs=models.Related(related=f"{url}/configs"),
            configs_list=[models.ConfigEntry(name=k, value=v) for k, v in sorted(meta.configs.items())])

    @app.get("/v3/clusters", response_model=models.ClusterList, tags=["v3"], summary="The cluster")
    async def list_clusters(request: Request) -> models.ClusterList:
        url = f"{base_url(request)}/v3/clusters/{broker.cluster_id}"
        data = models.ClusterData(metadata=models.ResourceMetadata(self=url), cluster_id=broker.cluster_id,
                                  brokers=models.Related(related=f"{url}/brokers"),
                                  topics=models.Related(related=f"{url}/topics"))
        return models.ClusterList(metadata={"self": f"{base_url(request)}/v3/clusters", "next": None}, data=[data])

    @app.get("/v3/clusters/{cluster_id}/topics", response_model=models.TopicList, responses=_ERRORS, tags=["v3"],
             summary="List topics")
    async def v3_list_topics(cluster_id: str, request: Request) -> models.TopicList:
        check_cluster(cluster_id)
        await broker.refresh_topics()
        data = [topic_data(request, m) for _, m in sorted(broker.topics().items())]
        return models.TopicList(metadata={"self": f"{base_url(request)}/v3/clusters/{cluster_id}/topics", "next": None},
                                data=data)

    @app.post("/v3/clusters/{cluster_id}/topics", response_model=models.TopicData, status_code=201,
              responses=_ERRORS, tags=["v3"], summary="Create a topic")
    async def v3_create_topic(cluster_id: str, body: models.CreateTopicRequest, request: Request) -> models.TopicData:
        check_cluster(cluster_id)
        configs = {c.name: c.value for c in body.configs if c.value is not None}
        meta = await broker.create_topic(body.topic_name, partitions=body.partitions_count,
                                         replication_factor=body.replication_factor, configs=configs)
        return topic_data(request, meta)

    @app.get("/v3/clusters/{cluster_id}/topics/{topic}", response_model=models.TopicData, responses=_ERRORS,
             tags=["v3"], summary="Describe a topic")
    async def v3_get_topic(cluster_id: str, topic: TopicName, request: Request) -> models.TopicData:
        check_cluster(cluster_id)
        return topic_data(request, await broker.topic_fresh(topic))

    @app.delete("/v3/clusters/{cluster_id}/topics/{topic}", status_code=204, responses=_ERRORS, tags=["v3"],
                summary="Delete a topic and its partition logs", response_class=Response)
    async def v3_delete_topic(cluster_id: str, topic: TopicName) -> Response:
        check_cluster(cluster_id)
        await broker.delete_topic(topic)
        return Response(status_code=204)

    @app.post("/v3/clusters/{cluster_id}/topics/{topic}/records", response_model=models.V3ProduceResponse,
              responses=_ERRORS, tags=["v3"], summary="Produce one record (REST Proxy v3)")
    async def v3_produce(cluster_id: str, topic: TopicName, body: models.V3ProduceRequest) -> models.V3ProduceResponse:
        check_cluster(cluster_id)
        meta = await broker.topic_fresh(topic)
        ts = None
        if body.timestamp is not None:
            try:
                ts = int(datetime.fromisoformat(body.timestamp.replace("Z", "+00:00")).timestamp() * 1000)
            except ValueError:
                raise MalformedBodyError(f"timestamp {body.timestamp!r} is not an ISO-8601 date-time") from None
        headers = [{"key": h.get("name", h.get("key", "")), "value": _v3_bytes(models.V3ProduceData(type="BINARY", data=h.get("value")), "header")}
                   for h in body.headers]
        batch = pa.table({
            "key": pa.array([_v3_bytes(body.key, "key")], pa.binary()),
            "value": pa.array([_v3_bytes(body.value, "value")], pa.binary()),
            "headers": pa.array([headers], codecs.HEADERS_TYPE),
            "timestamp": pa.array([ts], pa.int64()),
        })
        batch = normalize_produce_batch(batch)
        parts = None if body.partition_id is None else pa.array([body.partition_id], pa.int32())
        resp = await produce_batch(topic, batch, parts, None)
        entry = orjson.loads(resp.body)["offsets"][0]
        return models.V3ProduceResponse(cluster_id=cluster_id, topic_name=meta.name, partition_id=entry["partition"],
                                        offset=entry["offset"], timestamp=datetime.now(timezone.utc).isoformat())

    return app


class _ClusterNotFound(LakelogError):
    """Cluster not found."""

    http_status = 404
    error_code = 40404


def _v3_bytes(data: models.V3ProduceData | None, what: str) -> bytes | None:
    if data is None or data.data is None:
        return None
    kind = data.type.upper()
    if kind == "BINARY":
        try:
            return base64.b64decode(data.data, validate=True)
        except (ValueError, TypeError):
            raise InvalidEncodingError(f"{what}.data is not valid base64 (type BINARY).") from None
    if kind == "JSON":
        return orjson.dumps(data.data)
    if kind == "STRING":
        return str(data.data).encode()
    raise MalformedBodyError(f"{what}.type {data.type!r} is not supported; use BINARY, JSON or STRING.")


def _document_raw_body_models(app: FastAPI) -> None:
    """Add the models of raw-body routes (produce bodies, fetched records) to the OpenAPI components."""
    default_openapi = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            doc = default_openapi()
            _, defs = models_json_schema(
                [(m, "validation") for m in (models.BinaryProduceRequest, models.JsonProduceRequest,
                                             models.ConsumerRecord)],
                ref_template="#/components/schemas/{model}")
            doc.setdefault("components", {}).setdefault("schemas", {}).update(defs["$defs"])
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _json(payload) -> Response:
    return Response(orjson.dumps(payload), media_type="application/vnd.kafka.v2+json")
