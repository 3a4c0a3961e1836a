"""Committed offsets over Kafka: a kafka-python consumer that assigns partitions commits under a group.id
(FindCoordinator, OffsetCommit) and a new consumer of the group resumes there (OffsetFetch); the offsets
are the group's over HTTP too (one ``__consumer_offsets``)."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from lakelog.client import LakelogClient
from tests.harness import wait_for


def test_assigned_consumer_commits_and_resumes(kafka_broker, kafka_topic):
    broker, bootstrap = kafka_broker
    group = f"g-{kafka_topic}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(10):
        producer.send(kafka_topic, value=f"v{i}".encode(), partition=0)
    producer.flush()
    producer.close()
    tp = TopicPartition(kafka_topic, 0)

    first = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        first.assign([tp])
        assert first.committed(tp) is None
        first.seek(tp, 0)
        got: list = []

        def more() -> bool:
            for records in first.poll(timeout_ms=500).values():
                got.extend(records)
            return len(got) >= 4

        wait_for(more, what="4 records")
        first.commit({tp: OffsetAndMetadata(4, "after v3", -1)})
        assert first.committed(tp) == 4
    finally:
        first.close()

    with LakelogClient(broker.url) as http:
        assert [(o["topic"], o["partition"], o["offset"]) for o in http.groups.committed_offsets(group)] == [
            (kafka_topic, 0, 4)]
        http.groups.commit_offsets(group, [{"topic": kafka_topic, "partition": 0, "offset": 7}])

    second = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                           auto_offset_reset="earliest")
    try:
        second.assign([tp])
        got = []

        def rest() -> bool:
            for records in second.poll(timeout_ms=500).values():
                got.extend(records)
            return len(got) >= 3

        wait_for(rest, what="the records after the offset committed over HTTP")
        assert [r.offset for r in got] == [7, 8, 9]
    finally:
        second.close()
