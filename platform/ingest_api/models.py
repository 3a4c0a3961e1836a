"""Request and response models of the gateway, for validation and the OpenAPI document.

Shapes follow Confluent REST Proxy v2 (``/topics``, produce, consumer records) and v3 (clusters,
topics, single-record produce). Produce bodies are decoded by :mod:`lakelog.ingest_api.codecs`; the
models here describe them in the OpenAPI document.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, StrictInt, WithJsonSchema

from lakelog.consumer_groups.instances import INSTANCE_NAME_PATTERN, MAX_GROUP_ID_LENGTH, MAX_INSTANCE_NAME_LENGTH
from lakelog.protocol.log_info import PartitionLogInfo  # noqa: F401  (the logs route answers it)
from lakelog.replication.metadata import MAX_PARTITIONS, MAX_TOPIC_NAME_LENGTH, validate_topic_name

#: Kafka's ranges: a partition is an int32 >= 0, an offset an int64 >= 0. The OpenAPI document also
#: names the formats (``int32``, ``int64``): FastAPI writes ``maximum`` as a float, and 2**63 - 1 as a
#: float is 2**63.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

#: A partition number as the server accepts it (int32 >= 0; a JSON integer: ``false`` is no partition).
PartitionNumber = Annotated[StrictInt, Field(ge=0, le=INT32_MAX, json_schema_extra={"format": "int32"})]
#: An offset as the server accepts it (int64 >= 0, a JSON integer).
Offset = Annotated[StrictInt, Field(ge=0, le=INT64_MAX, json_schema_extra={"format": "int64"})]


def _topic_name(name: str) -> str:
    validate_topic_name(name)  # InvalidTopicError (400 / 40004) leaves validation as it is, naming the rule
    return name


#: Kafka's topic-name rule (``org.apache.kafka.common.internals.Topic``), as the OpenAPI document states it
#: (``.`` and ``..``, refused too, in the description).
TOPIC_NAME_SCHEMA = {"type": "string", "minLength": 1, "maxLength": MAX_TOPIC_NAME_LENGTH,
                     "pattern": r"^[a-zA-Z0-9._-]+$",
                     "description": f"A topic name: 1 to {MAX_TOPIC_NAME_LENGTH} of a-z, A-Z, 0-9, '.', '_', '-', "
                                    f"not '.' or '..' (else 400 / 40004)."}
#: A topic name in a request body, held to Kafka's rule wherever it enters (subscriptions, assignments,
#: positions, commits): 400 / 40004 naming the rule it breaks.
TopicNameField = Annotated[str, AfterValidator(_topic_name), WithJsonSchema(TOPIC_NAME_SCHEMA)]
#: Consumer group ids and instance names: at most Kafka's topic-name length (each is a ZooKeeper znode
#: name and a URL path segment).
MAX_NAME_LENGTH = MAX_INSTANCE_NAME_LENGTH
#: A group id as the OpenAPI document states it (the server's rule: ``validate_group_id``; ``.`` and ``..``,
#: which the pattern leaves to the description, are refused too). No lookahead in the patterns: generated
#: clients and fuzzers build strings from them.
GROUP_ID_SCHEMA = {"maxLength": MAX_GROUP_ID_LENGTH,
                   "pattern": "^[^/\\u0000-\\u001F\\u007F-\\u009F\\uD800-\\uF8FF\\uFFF0-\\uFFFF]+$"}
#: Base64 of bytes (OpenAPI ``format: byte``).
Base64 = Annotated[str, WithJsonSchema({"type": "string", "format": "byte"})]
#: An ISO-8601 date-time string (OpenAPI ``format: date-time``), e.g. ``2024-05-01T12:00:00Z``.
IsoDateTime = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]


class ErrorBody(BaseModel):
    """Every error: ``{"error_code": status*100+n, "message": "..."}`` (REST Proxy)."""

    error_code: int = Field(examples=[40401])
    message: str = Field(examples=["Topic 'orders' not found."])


class Header(BaseModel):
    key: str = Field(description="Header name, required (REST Proxy v3 spells it `name`; both are accepted).")
    value: Optional[Base64] = Field(None, description="Base64 of the header value bytes.")


class BinaryRecord(BaseModel):
    """A record in ``application/vnd.kafka.binary.v2+json``: base64 key and value."""

    model_config = ConfigDict(extra="forbid")

    key: Optional[Base64] = Field(None, description="Base64 of the key bytes; null for no key.")
    value: Optional[Base64] = Field(None, description="Base64 of the value bytes; null is a tombstone.")
    partition: Optional[PartitionNumber] = Field(None, description="Target partition (only on POST /topics/{topic}).")
    headers: Optional[list[Header]] = None
    timestamp: Optional[StrictInt] = Field(None, description="CreateTime in ms since the epoch; default: broker time.")


class JsonRecord(BaseModel):
    """A record in ``application/vnd.kafka.json.v2+json``: key and value are embedded JSON."""

    model_config = ConfigDict(extra="forbid")

    key: Any = None
    value: Any = None
    partition: Optional[PartitionNumber] = None
    headers: Optional[list[Header]] = None
    timestamp: Optional[StrictInt] = Field(None, description="CreateTime in ms since the epoch; default: broker time.")


_RECORD_RULES = ("At least one record; each has at least one of key, value, partition (else 422 / 42222); "
                 "unknown fields are refused (400 / 40001).")


class BinaryProduceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    records: list[BinaryRecord] = Field(min_length=1, description=_RECORD_RULES)
    key_schema: None = Field(None, description="REST Proxy's schema fields: null or absent (lakelog has no schemas).")
    value_schema: None = None
    key_schema_id: None = None
    value_schema_id: None = None


class JsonProduceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    records: list[JsonRecord] = Field(min_length=1, description=_RECORD_RULES)
    key_schema: None = Field(None, description="REST Proxy's schema fields: null or absent (lakelog has no schemas).")
    value_schema: None = None
    key_schema_id: None = None
    value_schema_id: None = None


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
    lake_end_offset: Optional[int] = Field(None, description="First offset not in the Delta table yet (the flusher "
                                           "commits the segment tail below the high watermark).")
    log_end_offset: Optional[int] = None
    high_watermark: Optional[int] = None
    last_stable_offset: Optional[int] = Field(
        None, description="Kafka's LSO: the first offset of a still-open transaction, at most the high watermark "
                          "(read_committed consumers read below it).")


class PartitionOffsets(BaseModel):
    """REST Proxy v2 ``GET /topics/{t}/partitions/{p}/offsets``: end_offset is the high watermark; lakelog
    adds ``last_stable_offset`` and, only when ``?timestamp_ms=`` was given, ``offset_for_timestamp``."""

    beginning_offset: int = Field(description="The log start offset.")
    end_offset: int = Field(description="The high watermark (read_uncommitted consumers read below it).")
    last_stable_offset: int = Field(description=(
        "Kafka's LSO: the first offset of a still-open transaction, at most the high watermark; the end of "
        "what read_committed consumers read (Kafka's ListOffsets latest with READ_COMMITTED)."))
    offset_for_timestamp: Optional[int] = None


class OffsetForTimestamp(BaseModel):
    """The first offset whose record timestamp is >= ``timestamp_ms`` (the high watermark when none is)."""

    timestamp_ms: int
    offset: int


# -- v3 -----------------------------------------------------------------------------------------

class Related(BaseModel):
    related: str


class ResourceMetadata(BaseModel):
    self: str
    resource_name: Optional[str] = None


class ConfigEntry(BaseModel):
    name: str
    value: Optional[str]


class CreateTopicRequest(BaseModel):
    """REST Proxy v3 create topic."""

    model_config = ConfigDict(extra="forbid")

    topic_name: Annotated[str, WithJsonSchema(TOPIC_NAME_SCHEMA)]
    partitions_count: Optional[StrictInt] = Field(None, ge=1, description=(
        f"Default: num.partitions. At most {MAX_PARTITIONS} (else 400 / 40005); one creation writes every "
        f"partition in one ZooKeeper transaction, so create large topics with fewer and add partitions (PATCH)."))
    replication_factor: Optional[StrictInt] = Field(None, ge=1, le=32767, description="Default: "
                                                    "default.replication.factor (an int16, as Kafka's).")
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


class ConfigSynonym(BaseModel):
    """Where a config value may come from, in precedence order (REST Proxy ``ConfigSynonymData``)."""

    name: str
    value: Optional[str] = None
    source: str = Field(examples=["DYNAMIC_TOPIC_CONFIG"])


class TopicConfigData(BaseModel):
    """One topic config with its effective value (REST Proxy v3 ``TopicConfigData``)."""

    kind: str = "KafkaTopicConfig"
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    name: str = Field(examples=["retention.ms"])
    value: Optional[str] = Field(None, examples=["86400000"])
    is_default: bool = Field(description="True when the topic does not set it (the default applies).")
    is_read_only: bool = False
    is_sensitive: bool = False
    source: str = Field(description="DYNAMIC_TOPIC_CONFIG (set on the topic) or DEFAULT_CONFIG.")
    synonyms: list[ConfigSynonym] = Field(default_factory=list)


class TopicConfigList(BaseModel):
    """Every config of a topic (REST Proxy v3 ``TopicConfigDataList``)."""

    kind: str = "KafkaTopicConfigList"
    metadata: dict
    data: list[TopicConfigData]


class AlterConfigEntry(BaseModel):
    """One change of a batch alter: SET ``name`` to ``value``, or DELETE it (back to its default)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(examples=["retention.ms"])
    value: Optional[str] = Field(None, description="The new value (SET).", examples=["86400000"])
    operation: Literal["SET", "DELETE"] = Field("SET", description="SET (default) or DELETE.")


class AlterConfigBatchRequest(BaseModel):
    """REST Proxy v3 ``POST .../configs:alter`` (Kafka's IncrementalAlterConfigs); all or nothing."""

    model_config = ConfigDict(extra="forbid")

    data: list[AlterConfigEntry]
    validate_only: bool = Field(False, description="Check the changes and write nothing.")


class UpdatePartitionCountRequest(BaseModel):
    """REST Proxy v3 ``PATCH /v3/clusters/{c}/topics/{t}``: the topic's new partition count (only more)."""

    model_config = ConfigDict(extra="forbid")

    partitions_count: StrictInt = Field(ge=1, le=MAX_PARTITIONS, json_schema_extra={"format": "int32"},
                                  description="The new total number of partitions; must exceed the current one.")


class V3ProduceData(BaseModel):
    """A v3 record's key or value: bytes as ``type`` says, or (Confluent Server's schema'd produce) ``data``
    serialized with a registered schema into Confluent's wire format, the schema named by ``schema_id``, or
    ``subject`` (default: ``subject_name_strategy`` TOPIC_NAME's ``{topic}-key`` / ``{topic}-value``) and
    ``schema_version`` (default: the latest)."""

    type: Optional[str] = Field(None, description="BINARY (base64 `data`; the default), JSON or STRING; or AVRO, "
                                                  "JSONSCHEMA, PROTOBUF with a schema named below")
    data: Any = None
    schema_id: Optional[Annotated[StrictInt, Field(ge=0, le=INT32_MAX)]] = Field(
        None, description="Serialize `data` with the registered schema of this id (Confluent's wire format).")
    subject: Optional[str] = Field(None, description="Serialize `data` with a version of this subject.")
    subject_name_strategy: Optional[Literal["TOPIC_NAME"]] = Field(
        None, description="The subject as Confluent's TopicNameStrategy names it: <topic>-key or <topic>-value.")
    schema_version: Optional[Annotated[StrictInt, Field(ge=-1, le=INT32_MAX)]] = Field(
        None, description="The subject's version (default, or -1: the latest).")
    #: ``data`` in Confluent's wire format once the request layer serialized it (the produced bytes)
    _framed: Optional[bytes] = PrivateAttr(None)

    @property
    def schema_named(self) -> bool:
        """Whether ``data`` is to be serialized with a registered schema."""
        return (self.schema_id is not None or self.subject is not None or self.subject_name_strategy is not None
                or self.schema_version is not None or (self.type or "").upper() in ("AVRO", "JSONSCHEMA", "PROTOBUF"))


class V3ProduceRequest(BaseModel):
    """REST Proxy v3 produce one record."""

    partition_id: Optional[Annotated[StrictInt, Field(ge=0, le=INT32_MAX, json_schema_extra={"format": "int32"})]] = Field(
        None, description="Target partition (an integer; default: murmur2 of the key, else spread).")
    headers: list[dict] = []
    key: Optional[V3ProduceData] = None
    value: Optional[V3ProduceData] = None
    timestamp: Optional[IsoDateTime] = Field(None, description="CreateTime as an ISO-8601 date-time "
                                                               "(e.g. 2024-05-01T12:00:00Z); default: broker time.")


class V3ProduceResponse(BaseModel):
    error_code: int = 200
    cluster_id: str
    topic_name: str
    partition_id: int
    offset: int
    timestamp: Optional[IsoDateTime] = None
    key: Optional[dict] = None
    value: Optional[dict] = None


TopicInfo.model_rebuild()


# -- consumer groups: REST Proxy v2 consumer instances (consumers_api) and group offsets (offsets_api) --

#: Names of consumer instances (REST Proxy's characters; ``.`` and ``..`` alone are refused, 42209).
CONSUMER_NAME_PATTERN = INSTANCE_NAME_PATTERN


class CreateConsumerRequest(BaseModel):
    """REST Proxy v2 ``ConsumerInstanceConfig``."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    name: Optional[str] = Field(None, pattern=CONSUMER_NAME_PATTERN, max_length=MAX_NAME_LENGTH,
                                description="Instance name (not '.' or '..': 42209); default rest-consumer-<uuid>.")
    id: Optional[str] = Field(None, pattern=CONSUMER_NAME_PATTERN, max_length=MAX_NAME_LENGTH,
                              description="Deprecated REST Proxy alias of name (not '.' or '..': 42209).")
    format: Literal["binary", "json", "avro", "jsonschema", "protobuf"] = Field(
        "binary", description="Embedded format of keys and values: binary (base64), json, or avro / jsonschema / "
                              "protobuf (Confluent's wire format, answered as JSON with the schema its id names).")
    auto_offset_reset: Literal["earliest", "latest"] = Field(
        "latest", alias="auto.offset.reset", description="Where to start without a committed offset. Default: latest.")
    auto_commit_enable: bool = Field(
        True, alias="auto.commit.enable",
        description="Commit positions every 5 s on reads, on revocation and on close. Default: true (Kafka's).")
    fetch_min_bytes: StrictInt = Field(1, alias="fetch.min.bytes", ge=-1, le=INT32_MAX,
                                 description="A read returns once it has this many bytes. Default: 1.")
    consumer_request_timeout_ms: StrictInt = Field(1000, alias="consumer.request.timeout.ms", ge=0, le=60_000,
                                             description="Default timeout of a read. Default: 1000.")
    partition_assignment_strategy: Optional[Literal["range", "roundrobin", "sticky"]] = Field(
        None, alias="partition.assignment.strategy",
        description="lakelog: the assignor this member asks for. Default: the broker's.")
    isolation_level: Literal["read_uncommitted", "read_committed"] = Field(
        "read_uncommitted", alias="isolation.level",
        description="Kafka's isolation.level: read_uncommitted (default) reads below the high watermark, open and "
                    "aborted transactions included; read_committed reads below the last stable offset and no aborted "
                    "record ('latest' is then the last stable offset). Neither returns transaction markers.")


class CreateConsumerResponse(BaseModel):
    """REST Proxy v2: the instance's id and the URI of its routes (on the broker that holds it)."""

    instance_id: str
    base_uri: str


class SubscriptionRequest(BaseModel):
    """REST Proxy v2 subscription: a non-empty ``topics`` list or a ``topic_pattern`` regex, not both
    (else 422 / 42227)."""

    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["topics"]}, {"required": ["topic_pattern"]}]})

    topics: Optional[list[TopicNameField]] = Field(None, min_length=1, description="Topic names (Kafka's rule).")
    topic_pattern: Optional[str] = Field(None, min_length=1, description="A regex over topic names.")


class TopicsResponse(BaseModel):
    topics: list[str]


class TopicPartitionRef(BaseModel):
    topic: TopicNameField
    partition: PartitionNumber


class PartitionsRequest(BaseModel):
    partitions: list[TopicPartitionRef]


class PartitionOffsetRef(TopicPartitionRef):
    offset: Offset


class SeekRequest(BaseModel):
    offsets: list[PartitionOffsetRef]


class CommitOffset(PartitionOffsetRef):
    offset: StrictInt = Field(ge=0, le=INT64_MAX - 1, json_schema_extra={"format": "int64"}, description="The last record processed; the group resumes at "
                                                               "offset + 1 (an int64).")
    metadata: Optional[str] = None


class CommitRequest(BaseModel):
    """REST Proxy v2 instance commit: each offset is the last record processed (the group resumes after it)."""

    offsets: list[CommitOffset] = Field(default_factory=list)


class CommittedOffsetsResponse(BaseModel):
    offsets: list[CommitOffset]


class MemberDescription(BaseModel):
    member_id: str
    broker_id: int
    base_uri: str
    subscription: list[str]
    assignment: list[TopicPartitionRef]
    client_id: str = Field("", description="A Kafka client's client.id; empty for an HTTP consumer instance.")
    client_host: str = Field("", description="A Kafka client's address; empty for an HTTP consumer instance.")


class GroupMembers(BaseModel):
    """lakelog: a group's members cluster-wide, its generation and each member's partitions."""

    group: str
    generation: Optional[int]
    state: Literal["Empty", "Stable", "PreparingRebalance", "CompletingRebalance"]
    assignor: Optional[str]
    members: list[MemberDescription]


class TopicPartitionOffset(BaseModel):
    topic: TopicNameField
    partition: PartitionNumber
    offset: Offset = Field(description="The next offset the group will read (Kafka's committed offset).")
    metadata: Optional[str] = None


class Transaction(BaseModel):
    """Makes a commit idempotent: a replayed (app_id, version) is a no-op (Delta ``txn`` action)."""

    app_id: str = Field(min_length=1)
    version: StrictInt = Field(ge=0, le=INT64_MAX)


class CommitOffsetsRequest(BaseModel):
    offsets: list[TopicPartitionOffset]
    generation_id: Optional[StrictInt] = Field(None, ge=0, le=INT32_MAX,
                                               description="The member's generation; older than the group's is refused.")
    transaction: Optional[Transaction] = None


class CommitOffsetsResponse(BaseModel):
    committed: bool = Field(description="False when the transaction was a replay and nothing was written.")
    offsets: list[TopicPartitionOffset]


class CommittedOffsetInfo(TopicPartitionOffset):
    generation_id: Optional[int] = None
    commit_timestamp: int = Field(description="ms since the epoch")


class OffsetsResponse(BaseModel):
    offsets: list[CommittedOffsetInfo]


class PartitionLag(BaseModel):
    topic: str
    partition: int
    committed_offset: Optional[int]
    log_end_offset: int
    high_watermark: int
    lag: int = Field(description="high_watermark - committed offset (all of it when nothing is committed)")


class GroupLag(BaseModel):
    group: str
    partitions: list[PartitionLag]
    total_lag: int


class ResetOffsetsRequest(BaseModel):
    """``kafka-consumer-groups --reset-offsets``: where to move a group without active members."""

    to: Literal["earliest", "latest", "timestamp", "offset", "current", "shift", "duration"] = Field(
        description="earliest (--to-earliest), latest (--to-latest), timestamp (--to-datetime: `value` ms since "
                    "the epoch), offset (--to-offset `value`), current (--to-current: the committed offset), "
                    "shift (--shift-by `value`, may be negative), duration (--by-duration: `value` ms before now).")
    value: Optional[StrictInt] = Field(None, ge=-INT64_MAX, le=INT64_MAX,
                                 description="ms since the epoch (timestamp), an offset (offset), a shift (shift), "
                                             "ms (duration).")
    topics: Optional[list[TopicNameField]] = Field(None, description="Topics, all partitions of each. Default (with no "
                                                          "`partitions` either): every topic the group has committed.")
    partitions: Optional[list[TopicPartitionRef]] = Field(None, description="Only these partitions (--topic t:0,2).")
    dry_run: bool = Field(False, description="Answer the new offsets without committing them (--dry-run).")


class DeleteOffsetsRequest(BaseModel):
    """``kafka-consumer-groups --delete-offsets --topic t[:p,...]``."""

    topic: TopicNameField
    partitions: Optional[list[PartitionNumber]] = Field(None, description="Default: every partition of the topic.")


class DeletedOffsetsResponse(BaseModel):
    deleted: list[TopicPartitionRef] = Field(description="The partitions whose committed offset was deleted.")


class BrokerList(BaseModel):
    """REST Proxy v2 ``GET /brokers``: the ids of the live brokers."""

    brokers: list[int] = Field(examples=[[0, 1, 2]])
