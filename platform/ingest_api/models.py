"""Request and response models of the gateway, for validation and the OpenAPI document.

Shapes follow Confluent REST Proxy v2 (``/topics``, produce, consumer records) and v3 (clusters,
topics, single-record produce). Produce bodies are decoded by :mod:`lakelog.ingest_api.codecs`; the
models here describe them in the OpenAPI document.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field


class ErrorBody(BaseModel):
    """Every error: ``{"error_code": status*100+n, "message": "..."}`` (REST Proxy)."""

    error_code: int = Field(examples=[40401])
    message: str = Field(examples=["Topic 'orders' not found."])


class Header(BaseModel):
    key: str = Field(description="Header name (REST Proxy v3 spells it `name`; both are accepted).")
    value: Optional[str] = Field(None, description="Base64 of the header value bytes.")


class BinaryRecord(BaseModel):
    """A record in ``application/vnd.kafka.binary.v2+json``: base64 key and value."""

    key: Optional[str] = Field(None, description="Base64 of the key bytes; null for no key.")
    value: Optional[str] = Field(None, description="Base64 of the value bytes; null is a tombstone.")
    partition: Optional[int] = Field(None, ge=0, description="Target partition (only on POST /topics/{topic}).")
    headers: Optional[list[Header]] = None
    timestamp: Optional[int] = Field(None, description="CreateTime in ms since the epoch; default: broker time.")


class JsonRecord(BaseModel):
    """A record in ``application/vnd.kafka.json.v2+json``: key and value are embedded JSON."""

    key: Any = None
    value: Any = None
    partition: Optional[int] = Field(None, ge=0)
    headers: Optional[list[Header]] = None
    timestamp: Optional[int] = None


class BinaryProduceRequest(BaseModel):
    records: list[BinaryRecord]


class JsonProduceRequest(BaseModel):
    records: list[JsonRecord]


class ProduceOffset(BaseModel):
    partition: Optional[int]
    offset: Optional[int]
    error_code: Optional[int] = None
    error: Optional[str] = None


class ProduceResponse(BaseModel):
    """REST Proxy v2 produce response: one entry per record, in request order."""

    offsets: list[ProduceOffset]
    key_schema_id: Optional[int] = None
    value_schema_id: Optional[int] = None


class ArrowProduceResponse(BaseModel):
    """Response to an Arrow produce: the batch's offsets are dense from ``base_offset``."""

    partition: int
    base_offset: int
    last_offset: int
    record_count: int


class ConsumerRecord(BaseModel):
    """A fetched record in the JSON forms (REST Proxy v2 consumer record + timestamp, headers)."""

    topic: str
    key: Any
    value: Any
    partition: int
    offset: int
    timestamp: int = Field(description="ms since the epoch")
    headers: list[Header]


class TopicInfo(BaseModel):
    """REST Proxy v2 ``GET /topics/{topic}``."""

    name: str
    configs: dict[str, str]
    partitions: list["PartitionInfo"]


class ReplicaInfo(BaseModel):
    broker: int
    leader: bool
    in_sync: bool


class PartitionInfo(BaseModel):
    """REST Proxy v2 partition, plus lakelog's leader epoch and offsets."""

    partition: int
    leader: int
    replicas: list[ReplicaInfo]
    leader_epoch: int
    log_start_offset: Optional[int] = Field(None, description="Known when this broker is the leader.")
    log_end_offset: Optional[int] = None
    high_watermark: Optional[int] = None


class PartitionOffsets(BaseModel):
    """REST Proxy v2 ``GET /topics/{t}/partitions/{p}/offsets``: end_offset is the high watermark."""

    beginning_offset: int
    end_offset: int


class PartitionLogInfo(BaseModel):
    """Where a partition's Delta table is and which offsets readers may see (lakelog's own)."""

    topic: str
    partition: int
    table_uri: str
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    leader_epoch: int
    timestamp_type: int = Field(description="0 = CreateTime, 1 = LogAppendTime")


# -- v3 -----------------------------------------------------------------------------------------

class Related(BaseModel):
    related: str


class ResourceMetadata(BaseModel):
    self: str
    resource_name: Optional[str] = None


class ClusterData(BaseModel):
    kind: str = "KafkaCluster"
    metadata: ResourceMetadata
    cluster_id: str
    controller: Optional[Related] = None
    brokers: Related
    topics: Related


class ClusterList(BaseModel):
    kind: str = "KafkaClusterList"
    metadata: dict
    data: list[ClusterData]


class ConfigEntry(BaseModel):
    name: str
    value: Optional[str]


class CreateTopicRequest(BaseModel):
    """REST Proxy v3 create topic."""

    model_config = ConfigDict(extra="forbid")

    topic_name: str
    partitions_count: Optional[int] = Field(None, ge=1, description="Default: num.partitions.")
    replication_factor: Optional[int] = Field(None, ge=1, description="Default: default.replication.factor.")
    configs: list[ConfigEntry] = []


class TopicData(BaseModel):
    kind: str = "KafkaTopic"
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    is_internal: bool = False
    replication_factor: int
    partitions_count: int
    partitions: Related
    configs: Related
    configs_list: list[ConfigEntry] = Field(default_factory=list, description="lakelog: the topic's explicit configs.")


class TopicList(BaseModel):
    kind: str = "KafkaTopicList"
    metadata: dict
    data: list[TopicData]


class V3ProduceData(BaseModel):
    type: str = Field("BINARY", description="BINARY (base64 `data`), JSON or STRING")
    data: Any = None


class V3ProduceRequest(BaseModel):
    """REST Proxy v3 produce one record."""

    partition_id: Optional[int] = None
    headers: list[dict] = []
    key: Optional[V3ProduceData] = None
    value: Optional[V3ProduceData] = None
    timestamp: Optional[str] = Field(None, description="ISO-8601 date-time")


class V3ProduceResponse(BaseModel):
    error_code: int = 200
    cluster_id: str
    topic_name: str
    partition_id: int
    offset: int
    timestamp: Optional[str] = None
    key: Optional[dict] = None
    value: Optional[dict] = None


TopicInfo.model_rebuild()
