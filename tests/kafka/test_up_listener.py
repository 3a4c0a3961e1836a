"""``lakelog up`` and ``lakelog cluster up`` open Kafka listeners (``--kafka-port``, default 9092) beside their
HTTP gateways."""

from __future__ import annotations

import signal

import httpx
import pytest
from kafka import KafkaProducer

from lakelog.runtime.zookeeper_server import free_port
from tests.cluster.test_process_lifecycle import (  # noqa: F401 (run: a fixture)
    ENV,
    Command,
    free_port_pair,
    run,
    wait_until_serving,
)
from tests.harness import read_partition

pytestmark = pytest.mark.cluster  # starts ZooKeeper and a broker through the CLI


def test_up_serves_kafka_clients_on_its_kafka_port(tmp_path, run, topic_name):  # noqa: F811
    port, zk_port, kafka_port = free_port(), free_port(), free_port()
    up = run("up", "up", "--data-dir", tmp_path / "data", "--port", port, "--zookeeper-port", zk_port,
             "--kafka-port", kafka_port, "--log-level", "warning", env=ENV)
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(up, url)
    cluster = httpx.get(f"{url}/v3/clusters").json()["data"][0]["cluster_id"]
    assert httpx.post(f"{url}/v3/clusters/{cluster}/topics", json={
        "topic_name": topic_name, "partitions_count": 1, "replication_factor": 1}).status_code == 201
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{kafka_port}", acks="all")
    assert producer.send(topic_name, value=b"via lakelog up", partition=0).get(timeout=60).offset == 0
    producer.close()
    assert len(read_partition(url, topic_name, 0)) == 1
    up.send(signal.SIGTERM)
    assert up.wait(60) == 0


def test_cluster_up_gives_each_broker_a_kafka_port(tmp_path, run, topic_name):  # noqa: F811
    port, zk_port, kafka_port = free_port_pair(), free_port(), free_port_pair()
    cluster = run("cluster", "cluster", "up", "--brokers", 2, "--data-dir", tmp_path / "cluster", "--port", port,
                  "--zookeeper-port", zk_port, "--kafka-port", kafka_port, "--log-level", "warning", env=ENV)
    for i in range(2):
        wait_until_serving(cluster, f"http://127.0.0.1:{port + i}")
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{kafka_port}", acks="all")
    try:
        assert producer.send(topic_name, value=b"x").get(timeout=60).offset == 0  # auto-created
        assert sorted((b.node_id, b.port) for b in producer._metadata.brokers()) == [
            (0, kafka_port), (1, kafka_port + 1)]
    finally:
        producer.close()
    cluster.send(signal.SIGTERM)
    assert cluster.wait(120) == 0
