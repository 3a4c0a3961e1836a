"""Response models of the REST Proxy v3 consumer group routes (:mod:`~lakelog.ingest_api.v3_groups_api`).

The shapes are Confluent REST Proxy v3's (``api/v3/openapi.yaml`` of confluentinc/kafka-rest:
``ConsumerGroupData``, ``ConsumerData``, ``ConsumerAssignmentData``, ``ConsumerLagData``,
``ConsumerGroupLagSummaryData`` and their ``...DataList``): ``kind``, ``metadata`` (``self`` and a
``crn:///kafka=<cluster>/consumer-group=<group>...`` resource name), links ``{"related": url}``.

Where a Confluent link would not answer, lakelog gives ``null`` instead, so every link a client follows
answers 200: a group's ``coordinator`` before any group committed (no ``__consumer_offsets`` yet),
its ``lag_summary`` while it has no committed offsets, an assignment's ``lag`` for a partition with no
committed offset, and the lag summary's ``max_lag_consumer`` when no member owns that partition.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, Field

from lakelog.ingest_api.models import Related, ResourceMetadata
from lakelog.ingest_api.v3_models import ResourceCollectionMetadata

__all__ = [
    "ConsumerAssignmentData", "ConsumerAssignmentDataList", "ConsumerData", "ConsumerDataList",
    "ConsumerGroupData", "ConsumerGroupDataList", "ConsumerGroupLagSummaryData", "ConsumerLagData",
    "ConsumerLagDataList",
]

_CLIENT_ID = "A Kafka client's client.id; an HTTP consumer instance's member id (HTTP instances have no client.id)."
_INSTANCE_ID = "group.instance.id of a static member (Kafka clients only); else null."
_LOG_END = ("The partition's high watermark: lakelog's consumers read the offsets below it (Confluent: the "
            "latest offset with read_committed, equal while there are no transactions).")


class ConsumerGroupData(BaseModel):
    """Confluent's ``ConsumerGroupData`` (``KafkaConsumerGroup``): a group with committed offsets or live
    members, its state, assignor and links to its coordinator, consumers and lag summary."""

    kind: str = "KafkaConsumerGroup"
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    is_simple: bool = Field(description="True for a group that never had members, only committed offsets "
                                        "(a Spark query's, a tool's).")
    partition_assignor: str = Field(description="The assignor of the current assignment (range, roundrobin, "
                                                "sticky, ...); empty when the group has none.")
    state: Literal["EMPTY", "STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE"] = Field(
        description="EMPTY: no live members; STABLE: every live member has its partitions of the current "
                    "generation; PREPARING_REBALANCE: a rebalance is under way; COMPLETING_REBALANCE: a Kafka "
                    "client group's members joined and wait for the leader's assignment.")
    coordinator: Optional[Related] = Field(
        None, description="The broker of the group's coordinator (the leader of its __consumer_offsets "
                          "partition); null before any group committed or while it is being elected.")
    consumers: Related
    lag_summary: Optional[Related] = Field(None, description="null while the group has no committed offsets.")


class ConsumerGroupDataList(BaseModel):
    """Confluent's ``ConsumerGroupDataList`` (``KafkaConsumerGroupList``): every group, by id."""

    kind: str = "KafkaConsumerGroupList"
    metadata: ResourceCollectionMetadata
    data: list[ConsumerGroupData]


class ConsumerData(BaseModel):
    """Confluent's ``ConsumerData`` (``KafkaConsumer``): a live member of a group (a consumer instance
    subscribed to topics) with a link to its assignments."""

    kind: str = "KafkaConsumer"
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    consumer_id: str
    instance_id: Optional[str] = Field(None, description=_INSTANCE_ID)
    client_id: str = Field(description=_CLIENT_ID)
    assignments: Related


class ConsumerDataList(BaseModel):
    """Confluent's ``ConsumerDataList`` (``KafkaConsumerList``): a group's live members, by id."""

    kind: str = "KafkaConsumerList"
    metadata: ResourceCollectionMetadata
    data: list[ConsumerData]


class ConsumerAssignmentData(BaseModel):
    """Confluent's ``ConsumerAssignmentData`` (``KafkaConsumerAssignment``): a partition a member owns in
    the group's current generation, with links to the partition and to the group's lag on it."""

    kind: str = "KafkaConsumerAssignment"
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    consumer_id: str
    topic_name: str
    partition_id: int
    partition: Related
    lag: Optional[Related] = Field(None, description="null while the group has no committed offset for the "
                                                     "partition.")


class ConsumerAssignmentDataList(BaseModel):
    """Confluent's ``ConsumerAssignmentDataList`` (``KafkaConsumerAssignmentList``), by topic then partition."""

    kind: str = "KafkaConsumerAssignmentList"
    metadata: ResourceCollectionMetadata
    data: list[ConsumerAssignmentData]


class ConsumerLagData(BaseModel):
    """Confluent's ``ConsumerLagData`` (``KafkaConsumerLag``): the group's lag on one partition it
    committed an offset for, with the member owning the partition (``""`` when none does, as Confluent)."""

    kind: str = "KafkaConsumerLag"
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    topic_name: str
    partition_id: int
    current_offset: int = Field(description="The group's committed offset.")
    log_end_offset: int = Field(description=_LOG_END)
    lag: int = Field(description="log_end_offset - current_offset, at least 0.")
    consumer_id: str = Field(description="The member owning the partition; empty when none does.")
    instance_id: Optional[str] = Field(None, description=_INSTANCE_ID)
    client_id: str = Field(description=_CLIENT_ID + " Empty when no member owns the partition.")


class ConsumerLagDataList(BaseModel):
    """Confluent's ``ConsumerLagDataList`` (``KafkaConsumerLagList``), by topic then partition."""

    kind: str = "KafkaConsumerLagList"
    metadata: ResourceCollectionMetadata
    data: list[ConsumerLagData]


class ConsumerGroupLagSummaryData(BaseModel):
    """Confluent's ``ConsumerGroupLagSummaryData`` (``KafkaConsumerGroupLagSummary``): the group's largest
    lag (the first partition, by topic then partition, with it) and its total lag."""

    kind: str = "KafkaConsumerGroupLagSummary"
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    max_lag_consumer_id: str = Field(description="The member owning the partition; empty when none does.")
    max_lag_instance_id: Optional[str] = Field(None, description=_INSTANCE_ID)
    max_lag_client_id: str = Field(description=_CLIENT_ID + " Empty when no member owns the partition.")
    max_lag_topic_name: str
    max_lag_partition_id: int
    max_lag: int
    total_lag: int
    max_lag_consumer: Optional[Related] = Field(None, description="null when no member owns the partition.")
    max_lag_partition: Related
