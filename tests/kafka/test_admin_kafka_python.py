"""kafka-python's ``KafkaAdminClient``, unchanged, against a broker's Kafka listener: topics created,
described, altered and deleted, partitions added, configs described and altered (topic and broker),
records deleted, the cluster described; each refused request writes nothing (checked over HTTP)."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from lakelog.client import GatewayError, LakelogClient

_TOPIC_ALREADY_EXISTS, _INVALID_PARTITIONS, _INVALID_CONFIG, _INVALID_REQUEST = 36, 37, 40, 42


@pytest.fixture
def admin(kafka_broker):
    _, bootstrap = kafka_broker
    client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="test-admin", request_timeout_ms=60000)
    yield client
    client.close()


def _codes(result: dict) -> dict[str, int]:
    return {t["name"]: t["error_code"] for t in result["topics"]}


def test_create_describe_alter_delete_topics(kafka_broker, admin, topic_name):
    """CreateTopics (configs, -1 defaults, validate_only, refusals), DescribeConfigs, IncrementalAlterConfigs,
    AlterConfigs, CreatePartitions and DeleteTopics, each checked against the HTTP gateway's view."""
    broker, _ = kafka_broker
    dry, bad, defaults = f"{topic_name}-dry", f"{topic_name}-bad", f"{topic_name}-defaults"
    created = admin.create_topics({topic_name: {"num_partitions": 2, "replication_factor": 1,
                                                "configs": {"retention.ms": "3600000"}},
                                   defaults: {}})
    assert _codes(created) == {topic_name: 0, defaults: 0}
    (mine,) = [t for t in created["topics"] if t["name"] == topic_name]
    assert (mine["num_partitions"], mine["replication_factor"]) == (2, 1)
    assert mine["configs"]["retention.ms"]["value"] == "3600000"
    assert mine["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

    again = admin.create_topics({topic_name: {"num_partitions": 1}}, raise_errors=False)
    assert _codes(again) == {topic_name: _TOPIC_ALREADY_EXISTS}
    checked = admin.create_topics({dry: {"num_partitions": 3}}, validate_only=True)
    assert _codes(checked) == {dry: 0}
    refused = admin.create_topics({bad: {"configs": {"retention.ms": "soon"}}}, raise_errors=False)
    assert _codes(refused) == {bad: _INVALID_CONFIG}
    none = admin.create_topics({bad: {"num_partitions": 0, "replication_factor": 1}}, raise_errors=False)
    assert _codes(none) == {bad: _INVALID_PARTITIONS}  # not the broker's num.partitions
    assigned = admin.create_topics({bad: {"assignments": {0: [0]}}}, raise_errors=False)
    assert _codes(assigned) == {bad: _INVALID_REQUEST}
    assert "assignments" in assigned["topics"][0]["error_message"]

    with LakelogClient(broker.url) as http:
        topics = set(http.admin.list_topics())
        assert topic_name in topics and defaults in topics and dry not in topics and bad not in topics
        assert len(http.admin.describe_topic(topic_name)["partitions"]) == 2
        assert len(http.admin.describe_topic(defaults)["partitions"]) == 1  # num.partitions

        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)],
                                           include_synonyms=True, config_filter="all")["topic"][topic_name]
        assert described["retention.ms"]["value"] == "3600000"
        assert described["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert [s["source"] for s in described["retention.ms"]["synonyms"]] == ["DYNAMIC_TOPIC_CONFIG",
                                                                                 "DEFAULT_CONFIG"]
        assert described["cleanup.policy"] | {"synonyms": None} == {
            "value": "delete", "read_only": False, "config_source": "DEFAULT_CONFIG", "is_sensitive": False,
            "synonyms": None, "config_type": "LIST", "documentation": None}

        # IncrementalAlterConfigs: SET and DELETE, all or nothing
        result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name, configs={
            "max.message.bytes": "2000000", "retention.ms": ("DELETE", None)})])
        assert result == {"topic": {topic_name: "OK"}}
        configs = http.admin.topic_configs(topic_name)
        assert configs["max.message.bytes"]["value"] == "2000000" and configs["retention.ms"]["is_default"]
        result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name, configs={
            "segment.ms": "60000", "max.message.bytes": "-5"})])
        assert "InvalidConfigurationError" in result["topic"][topic_name]
        assert "segment.ms" not in {k for k, v in http.admin.topic_configs(topic_name).items()
                                    if v["source"] == "DYNAMIC_TOPIC_CONFIG"}

        # AlterConfigs (non-incremental): the client sends the modified configs it keeps with the new one
        result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name, configs={
            "segment.ms": "60000"})], incremental=False)
        assert result == {"topic": {topic_name: "OK"}}
        dynamic = {k: v["value"] for k, v in http.admin.topic_configs(topic_name).items()
                   if v["source"] == "DYNAMIC_TOPIC_CONFIG"}
        assert dynamic == {"max.message.bytes": "2000000", "segment.ms": "60000"}

        # CreatePartitions
        admin.create_partitions({topic_name: 2 + 1}, validate_only=True)
        assert len(http.admin.describe_topic(topic_name)["partitions"]) == 2
        admin.create_partitions({topic_name: 4})
        assert len(http.admin.describe_topic(topic_name)["partitions"]) == 4
        fewer = admin.create_partitions({topic_name: 3}, raise_errors=False)
        assert [(t.name, t.error_code) for t in fewer.results] == [(topic_name, _INVALID_PARTITIONS)]
        assert len(http.admin.describe_topic(topic_name)["partitions"]) == 4

        # DeleteTopics
        admin.delete_topics([topic_name, defaults])
        assert topic_name not in http.admin.list_topics()
        with pytest.raises(GatewayError):
            http.admin.describe_topic(topic_name)


def test_delete_records_describe_cluster_and_broker_configs(kafka_broker, kafka_topic, admin):
    """DeleteRecords moves the log start offset (an offset past the high watermark moves nothing);
    DescribeCluster answers the cluster id and the broker's Kafka endpoint; DescribeConfigs of the broker
    answers its Kafka-named settings, secrets without their value."""
    broker, bootstrap = kafka_broker
    with LakelogClient(broker.url) as http:
        http.produce_json(kafka_topic, [{"value": f"v{i}"} for i in range(10)], partition=0)
        result = admin.delete_records({TopicPartition(kafka_topic, 0): 4})
        assert result[TopicPartition(kafka_topic, 0)]["low_watermark"] == 4
        assert http.admin.partition_offsets(kafka_topic, 0)["beginning_offset"] == 4
        with pytest.raises(Exception, match="OffsetOutOfRange"):
            admin.delete_records({TopicPartition(kafka_topic, 0): 11})
        assert http.admin.partition_offsets(kafka_topic, 0)["beginning_offset"] == 4

        cluster = admin.describe_cluster()
        assert cluster["cluster_id"] == http.cluster_id
        assert cluster["controller_id"] == 0
        host, port = bootstrap.split(":")
        assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(0, host, int(port))]

    configs = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")],
                                     config_filter="all")["broker"]["0"]
    assert configs["broker.id"]["value"] == "0"
    assert configs["listeners"]["value"] == "PLAINTEXT://127.0.0.1:0"
    assert configs["listeners"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert configs["num.partitions"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["inter.broker.password"]["is_sensitive"] and configs["inter.broker.password"]["value"] is None
    refused = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "0", configs={"num.partitions": "3"})],
                                  raise_on_unknown=False)
    assert "InvalidRequestError" in refused["broker"]["0"]
