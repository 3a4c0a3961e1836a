"""Three brokers with Kafka listeners: a client bootstrapped on one broker learns every broker's Kafka
endpoint from Metadata and produces to and fetches from each partition's leader on the others."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.cluster.test_replication import FAST, create_topic
from tests.harness import wait_for
from tests.kafka.conftest import KAFKA_LISTENER_ENV, kafka_bootstrap

pytestmark = pytest.mark.cluster


def test_client_bootstrapped_on_one_broker_reaches_leaders_on_others(broker_factory, zk_client, topic_name):
    brokers = {i: broker_factory(broker_id=i, extra_env={**FAST, **KAFKA_LISTENER_ENV}) for i in range(3)}
    endpoints = {i: kafka_bootstrap(zk_client, i) for i in brokers}
    assert create_topic(brokers[0].url, topic_name, partitions=3, rf=1).status_code == 201
    producer = KafkaProducer(bootstrap_servers=endpoints[0], acks="all")
    try:
        futures = [producer.send(topic_name, value=f"p{p}-{i}".encode(), partition=p) for p in range(3)
                   for i in range(10)]
        producer.flush()
        assert {(f.get(timeout=60).partition, f.get(timeout=60).offset) for f in futures} == {
            (p, i) for p in range(3) for i in range(10)}
        cluster = producer._metadata  # what Metadata from broker 0 told the client
        leaders = {p: cluster.leader_for_partition(TopicPartition(topic_name, p)) for p in range(3)}
        assert set(leaders.values()) == {0, 1, 2}, leaders  # one partition on each broker (rf 1, 3 brokers)
        assert {b.node_id: f"{b.host}:{b.port}" for b in cluster.brokers()} == endpoints
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=endpoints[0], enable_auto_commit=False, group_id=None,
                             fetch_max_wait_ms=200)
    try:
        tps = [TopicPartition(topic_name, p) for p in range(3)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        got: list = []

        def more() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
            return len(got) >= 30

        wait_for(more, what="30 records fetched from three leaders")
        assert sorted((r.partition, r.offset, r.value) for r in got) == [
            (p, i, f"p{p}-{i}".encode()) for p in range(3) for i in range(10)]
    finally:
        consumer.close()
