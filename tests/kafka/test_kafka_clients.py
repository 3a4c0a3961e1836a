"""Unchanged Kafka clients against a broker's Kafka listener: kafka-python and confluent-kafka
(librdkafka) produce and consume; records are one log with the HTTP gateway's."""

from __future__ import annotations

import base64

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from lakelog.client import LakelogClient
from tests.harness import read_partition, wait_for


def _consume(bootstrap: str, topic: str, count: int, *, offset: int = 0) -> list:
    """``count`` records of ``topic`` partition 0 from ``offset`` with kafka-python's consumer (assign + seek)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             fetch_max_wait_ms=200)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        got: list = []

        def more() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
            return len(got) >= count

        wait_for(more, what=f"{count} records consumed over Kafka")
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("acks", ["all", 1])
def test_kafka_python_produce_then_consume(kafka_broker, kafka_topic, acks):
    """kafka-python's producer (idempotent with acks=all) writes keys, values, headers and timestamps that
    its consumer reads back at the same offsets."""
    _, bootstrap = kafka_broker
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, enable_idempotence=acks == "all",
                             linger_ms=5)
    futures = [producer.send(kafka_topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0,
                             headers=[("h", f"{i}".encode())], timestamp_ms=1_700_000_000_000 + i)
               for i in range(50)]
    producer.flush()
    offsets = [f.get(timeout=60).offset for f in futures]
    producer.close()
    assert offsets == list(range(50))
    got = _consume(bootstrap, kafka_topic, 50)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in got] == [
        (i, f"k{i}".encode(), f"v{i}".encode(), 1_700_000_000_000 + i) for i in range(50)]
    assert [list(r.headers) for r in got[:2]] == [[("h", b"0")], [("h", b"1")]]


def test_kafka_records_are_the_http_log(kafka_broker, kafka_topic):
    """One log, two doors: records produced over Kafka are read over HTTP at the same offsets, and records
    produced over HTTP are consumed over Kafka after them."""
    broker, bootstrap = kafka_broker
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(3):
        producer.send(kafka_topic, key=b"kafka", value=f"over-kafka-{i}".encode(), partition=0)
    producer.flush()
    producer.close()
    over_http = read_partition(broker.url, kafka_topic, 0)
    assert [(r["offset"], base64.b64decode(r["key"]), base64.b64decode(r["value"])) for r in over_http] == [
        (i, b"kafka", f"over-kafka-{i}".encode()) for i in range(3)]
    with LakelogClient(broker.url) as c:
        c.produce_binary(kafka_topic, [(b"http", b"over-http")], partition=0)
    got = _consume(bootstrap, kafka_topic, 4)
    assert [r.value for r in got] == [b"over-kafka-0", b"over-kafka-1", b"over-kafka-2", b"over-http"]
    assert got[3].offset == 3 and got[3].key == b"http"


def test_list_offsets_earliest_latest_and_by_timestamp(kafka_broker, kafka_topic):
    """ListOffsets: earliest 0, latest the high watermark, by timestamp the first record at or after it
    (None past the newest record), as kafka-python's consumer asks them."""
    _, bootstrap = kafka_broker
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(5):
        producer.send(kafka_topic, value=b"x", partition=0, timestamp_ms=1_700_000_000_000 + 1000 * i)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tp = TopicPartition(kafka_topic, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 5}
        found = consumer.offsets_for_times({tp: 1_700_000_002_500})[tp]
        assert (found.offset, found.timestamp) == (3, 1_700_000_003_000)  # the found record's time, as Kafka
        assert consumer.offsets_for_times({tp: 1_800_000_000_000}) == {tp: None}
    finally:
        consumer.close()


def test_producing_to_a_new_topic_creates_it(kafka_broker, topic_name):
    """auto.create.topics.enable (default true, as Kafka's): a producer's Metadata request for a topic that
    does not exist creates it with num.partitions; the send then succeeds."""
    broker, bootstrap = kafka_broker
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        assert producer.send(topic_name, value=b"first").get(timeout=60).offset == 0
    finally:
        producer.close()
    with LakelogClient(broker.url) as c:
        assert len(c.admin.describe_topic(topic_name)["partitions"]) == 1  # num.partitions
    assert len(read_partition(broker.url, topic_name, 0)) == 1


def test_auto_create_off_answers_unknown_topic(broker_factory, zk_client, topic_name):
    """auto.create.topics.enable=false: Metadata answers UNKNOWN_TOPIC_OR_PARTITION and nothing is created."""
    from kafka.errors import KafkaTimeoutError

    from tests.kafka.conftest import KAFKA_LISTENER_ENV, kafka_bootstrap

    broker = broker_factory(extra_env={**KAFKA_LISTENER_ENV, "LAKELOG_AUTO_CREATE_TOPICS_ENABLE": "false"})
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap(zk_client, 0), max_block_ms=2000)
    try:
        with pytest.raises(KafkaTimeoutError):
            producer.send(topic_name, value=b"x").get(timeout=10)
    finally:
        producer.close()
    with LakelogClient(broker.url) as c:
        assert topic_name not in c.admin.list_topics()
