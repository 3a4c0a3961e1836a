"""Response models of the REST Proxy v3 cluster, broker, partition and replica routes
(:mod:`~lakelog.ingest_api.v3_cluster_api`).

The shapes are Confluent REST Proxy v3's (``api/v3/openapi.yaml`` of confluentinc/kafka-rest:
``ClusterData``, ``BrokerData``, ``PartitionData``, ``ReplicaData`` and their ``...DataList``): every
resource has ``kind`` and ``metadata`` (``self``, ``resource_name``, a ``crn:///kafka=...`` name), every
list ``{"kind": "Kafka...List", "metadata": {"self", "next"}, "data": [...]}``; resources link to each
other with ``{"related": url}``. Where Confluent links to a resource lakelog does not serve (ACLs,
broker configs, partition reassignments, a broker's partition replicas) the link is ``null``, so every
link a client follows answers.

``Related`` and ``ResourceMetadata`` are the ones of :mod:`~lakelog.ingest_api.models` (shared with the
topic resources, one schema each in the OpenAPI document).
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, Field

from lakelog.ingest_api.models import Related, ResourceMetadata

__all__ = [
    "BrokerData", "BrokerDataList", "ClusterData", "ClusterDataList", "PartitionData", "PartitionDataList",
    "Related", "ReplicaData", "ReplicaDataList", "ResourceCollectionMetadata", "ResourceMetadata",
]

_NOT_SERVED = "null: lakelog has no such resource (Confluent links it)."


class ResourceCollectionMetadata(BaseModel):
    """Confluent's ``ResourceCollectionMetadata``: the list's own URL; ``next`` is always null (every
    list is answered in one page)."""

    self: str
    next: Optional[str] = None


class ClusterData(BaseModel):
    """Confluent's ``ClusterData`` (``kind`` ``KafkaCluster``): the cluster id and links to its controller
    (the active controller broker; null during an election), brokers, consumer groups and topics."""

    kind: str = "KafkaCluster"
    metadata: ResourceMetadata
    cluster_id: str
    controller: Optional[Related] = Field(None, description="The controller broker; null while none is elected.")
    acls: Optional[Related] = Field(None, description=_NOT_SERVED)
    brokers: Related
    broker_configs: Optional[Related] = Field(None, description=_NOT_SERVED)
    consumer_groups: Related
    topics: Related
    partition_reassignments: Optional[Related] = Field(None, description=_NOT_SERVED)


class ClusterDataList(BaseModel):
    """Confluent's ``ClusterDataList`` (``KafkaClusterList``): this cluster, the only one a broker knows."""

    kind: str = "KafkaClusterList"
    metadata: ResourceCollectionMetadata
    data: list[ClusterData]


class BrokerData(BaseModel):
    """Confluent's ``BrokerData`` (``KafkaBroker``): a live broker's id and registration (host, port and
    rack, as in ``/lakelog/brokers/ids/{id}``); its gateway is ``http://{host}:{port}``."""

    kind: str = "KafkaBroker"
    metadata: ResourceMetadata
    cluster_id: str
    broker_id: int
    host: Optional[str] = None
    port: Optional[int] = None
    rack: Optional[str] = Field(None, description="broker.rack; null when not set.")
    endpoints: list[str] = Field(default_factory=list, description=(
        "lakelog's own: the broker's Kafka listeners as registered in ZooKeeper (advertised.listeners, "
        "NAME://host:port); empty when it opens none."), examples=[["PLAINTEXT://127.0.0.1:9092"]])
    configs: Optional[Related] = Field(None, description=_NOT_SERVED)
    partition_replicas: Optional[Related] = Field(None, description=_NOT_SERVED)


class BrokerDataList(BaseModel):
    """Confluent's ``BrokerDataList`` (``KafkaBrokerList``): the live brokers by id."""

    kind: str = "KafkaBrokerList"
    metadata: ResourceCollectionMetadata
    data: list[BrokerData]


class PartitionData(BaseModel):
    """Confluent's ``PartitionData`` (``KafkaPartition``): links to the leader's replica (null while the
    partition has no leader) and to the partition's replicas."""

    kind: str = "KafkaPartition"
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    partition_id: int
    leader: Optional[Related] = Field(None, description="The leader's replica (`.../replicas/{broker_id}`); "
                                                        "null while the partition has no leader.")
    replicas: Related
    reassignment: Optional[Related] = Field(None, description=_NOT_SERVED + " lakelog never reassigns replicas.")


class PartitionDataList(BaseModel):
    """Confluent's ``PartitionDataList`` (``KafkaPartitionList``): a topic's partitions by number."""

    kind: str = "KafkaPartitionList"
    metadata: ResourceCollectionMetadata
    data: list[PartitionData]


class ReplicaData(BaseModel):
    """Confluent's ``ReplicaData`` (``KafkaReplica``): one replica of a partition, on broker
    ``broker_id``: whether it leads and whether it is in the ISR (the partition's state in ZooKeeper),
    with a link to its broker (answered while that broker is live)."""

    kind: str = "KafkaReplica"
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    partition_id: int
    broker_id: int
    is_leader: bool
    is_in_sync: bool
    broker: Related


class ReplicaDataList(BaseModel):
    """Confluent's ``ReplicaDataList`` (``KafkaReplicaList``): a partition's replicas in assignment order
    (the preferred leader first)."""

    kind: str = "KafkaReplicaList"
    metadata: ResourceCollectionMetadata
    data: list[ReplicaData]
