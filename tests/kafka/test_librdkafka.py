"""confluent-kafka (librdkafka), unchanged, against a broker's Kafka listener: compressed idempotent
produce, acks=0, and a consumer reading back by assign."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.harness import read_partition, wait_for


def _produce(bootstrap: str, topic: str, count: int, **config) -> list:
    """``count`` records to partition 0; the delivery reports ``(error, offset)``."""
    reports: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    for i in range(count):
        producer.produce(topic, key=f"k{i}".encode(), value=(f"value-{i}-" * 20).encode(), partition=0,
                         headers=[("n", str(i).encode())],
                         on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(120) == 0
    return reports


def _consume(bootstrap: str, topic: str, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 200})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list = []

        def more() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg)
            return len(got) >= count

        wait_for(more, what=f"{count} records consumed by librdkafka")
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "snappy"])
def test_librdkafka_idempotent_compressed_produce_and_consume(kafka_broker, kafka_topic, codec):
    """An idempotent (acks=all) librdkafka producer's compressed batches are decoded and written once; its
    consumer reads every record back with key, value and headers."""
    _, bootstrap = kafka_broker
    reports = _produce(bootstrap, kafka_topic, 200, **{"compression.type": codec, "enable.idempotence": True,
                                                      "acks": "all"})
    assert [err for err, _ in reports if err is not None] == []
    assert sorted(offset for _, offset in reports) == list(range(200))
    got = _consume(bootstrap, kafka_topic, 200)
    assert [(m.offset(), m.key(), m.value(), m.headers()) for m in got] == [
        (i, f"k{i}".encode(), (f"value-{i}-" * 20).encode(), [("n", str(i).encode())]) for i in range(200)]


def test_librdkafka_acks_0(kafka_broker, kafka_topic):
    """acks=0: the broker sends no response, the records are written all the same."""
    broker, bootstrap = kafka_broker
    reports = _produce(bootstrap, kafka_topic, 20, acks=0)
    assert [err for err, _ in reports if err is not None] == []
    wait_for(lambda: len(read_partition(broker.url, kafka_topic, 0)) == 20, what="20 records of an acks=0 producer")


def test_librdkafka_commits_and_reads_committed_offsets(kafka_broker, kafka_topic):
    """librdkafka's commit() and committed() under a group.id (FindCoordinator, OffsetCommit, OffsetFetch)."""
    _, bootstrap = kafka_broker
    _produce(bootstrap, kafka_topic, 3, acks="all")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{kafka_topic}", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(kafka_topic, 0, 0)])
        consumer.commit(offsets=[TopicPartition(kafka_topic, 0, 2)], asynchronous=False)
        (committed,) = consumer.committed([TopicPartition(kafka_topic, 0)], timeout=60)
        assert committed.offset == 2
    finally:
        consumer.close()
