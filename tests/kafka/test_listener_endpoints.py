"""Where a broker's Kafka endpoints show: ``lakelog broker start`` opens a Kafka listener unless
``listeners`` says otherwise, registers it in ZooKeeper, and ``GET /v3/clusters/{c}/brokers(/{id})`` and
``lakelog topics describe`` show it."""

from __future__ import annotations

import json
import subprocess
import sys

from kafka import KafkaAdminClient

from lakelog.client import LakelogClient
from lakelog.replication.metadata import BROKERS_PATH


def test_broker_start_opens_a_kafka_listener_shown_by_the_gateway_and_the_cli(broker_factory, zk_client, topic_name):
    broker = broker_factory(kafka_port=0)  # lakelog broker start --kafka-port 0, listeners set nowhere
    (endpoint,) = broker.kafka_endpoints()
    assert endpoint.startswith("PLAINTEXT://127.0.0.1:") and not endpoint.endswith(":0")
    assert json.loads(zk_client.get(f"{BROKERS_PATH}/0")[0])["endpoints"] == [endpoint]
    with LakelogClient(broker.url) as http:
        http.create_topic(topic_name, partitions=1, replication_factor=1)
        (listed,) = http.admin.brokers()
        assert listed["endpoints"] == [endpoint]
    described = subprocess.run([sys.executable, "-m", "lakelog.cli", "topics", "describe", topic_name,
                                "--bootstrap-server", broker.url], capture_output=True, text=True, timeout=120,
                               check=True).stdout
    assert endpoint in described and f"http://127.0.0.1:{broker.port}" in described
    admin = KafkaAdminClient(bootstrap_servers=endpoint.removeprefix("PLAINTEXT://"), request_timeout_ms=60000)
    try:
        assert topic_name in admin.list_topics()
    finally:
        admin.close()


def test_an_empty_listeners_setting_opens_none(broker_factory):
    broker = broker_factory(extra_env={"LAKELOG_LISTENERS": ""})
    assert broker.kafka_endpoints() == []
