"""aiokafka, unchanged, against a broker's Kafka listener: it negotiates the oldest versions served
(ApiVersions v0, Metadata v5, InitProducerId v0, Produce v7), so these paths are covered too."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.harness import CONDITION_WAIT_S


def test_aiokafka_idempotent_produce_and_assigned_consume(kafka_broker, kafka_topic):
    _, bootstrap = kafka_broker

    async def scenario() -> list:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                                    compression_type="gzip")
        await producer.start()
        try:
            sent = [await producer.send_and_wait(kafka_topic, value=f"a{i}".encode(), key=b"k", partition=0,
                                                 headers=[("x", b"1")]) for i in range(5)]
            assert [m.offset for m in sent] == list(range(5))
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=200)
        await consumer.start()
        try:
            tp = TopicPartition(kafka_topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            got: list = []
            while len(got) < 5:
                batches = await consumer.getmany(tp, timeout_ms=1000)
                got.extend(batches.get(tp, []))
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(asyncio.wait_for(scenario(), timeout=CONDITION_WAIT_S))
    assert [(r.offset, r.key, r.value, list(r.headers)) for r in got] == [
        (i, b"k", f"a{i}".encode(), [("x", b"1")]) for i in range(5)]
