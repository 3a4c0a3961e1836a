"""confluent-kafka's ``AdminClient`` (librdkafka), unchanged, against a broker's Kafka listener: topics,
partitions, configs, records and the cluster, each result checked over HTTP."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from lakelog.client import LakelogClient

TIMEOUT_S = 60


def _done(futures: dict) -> dict:
    return {key: future.result(timeout=TIMEOUT_S) for key, future in futures.items()}


@pytest.fixture
def admin(kafka_broker):
    _, bootstrap = kafka_broker
    return AdminClient({"bootstrap.servers": bootstrap})


def test_librdkafka_admin_topics_configs_records_cluster(kafka_broker, admin, topic_name):
    broker, bootstrap = kafka_broker
    _done(admin.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=1,
                                        config={"retention.ms": "3600000"})], operation_timeout=30))
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        _done(admin.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=1)]))
    with pytest.raises(KafkaException, match="INVALID_REPLICATION_FACTOR"):
        _done(admin.create_topics([NewTopic(f"{topic_name}-rf", num_partitions=1, replication_factor=3)]))

    with LakelogClient(broker.url) as http:
        assert f"{topic_name}-rf" not in http.admin.list_topics()
        assert len(http.admin.describe_topic(topic_name)["partitions"]) == 2

        resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
        (entries,) = _done(admin.describe_configs([resource])).values()
        assert entries["retention.ms"].value == "3600000"
        assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert entries["cleanup.policy"].is_default

        alter = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("segment.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
        _done(admin.incremental_alter_configs([alter]))
        configs = http.admin.topic_configs(topic_name)
        assert configs["segment.ms"]["value"] == "60000" and configs["retention.ms"]["is_default"]

        _done(admin.create_partitions([NewPartitions(topic_name, 3)]))
        assert len(http.admin.describe_topic(topic_name)["partitions"]) == 3

        http.produce_json(topic_name, [{"value": f"v{i}"} for i in range(5)], partition=0)
        (deleted,) = _done(admin.delete_records([TopicPartition(topic_name, 0, 2)])).values()
        assert deleted.low_watermark == 2
        assert http.admin.partition_offsets(topic_name, 0)["beginning_offset"] == 2

        cluster = admin.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
        assert cluster.cluster_id == http.cluster_id
        host, port = bootstrap.split(":")
        assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, host, int(port))]

        _done(admin.delete_topics([topic_name], operation_timeout=30))
        assert topic_name not in http.admin.list_topics()
