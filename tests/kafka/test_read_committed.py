"""read_committed over Kafka: with a transaction open (begun over HTTP), ListOffsets latest and Fetch
answer the last stable offset, and a read_committed fetch stops before the open transaction."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse

from lakelog.client import LakelogClient
from tests.kafka.test_protocol_edges import _connect, _read_frame


def _fetch(bootstrap: str, topic: str, *, isolation_level: int):
    v = 11
    request = FetchRequest(version=v, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                           isolation_level=isolation_level, session_id=0, session_epoch=-1, rack_id="",
                           forgotten_topics_data=[], topics=[FetchRequest.FetchTopic(version=v, topic=topic, partitions=[
                               FetchRequest.FetchTopic.FetchPartition(version=v, partition=0, current_leader_epoch=-1,
                                                                      fetch_offset=0, log_start_offset=-1,
                                                                      partition_max_bytes=1 << 20)])])
    request.with_header(correlation_id=1, client_id="read-committed-test")
    with _connect(bootstrap) as sock:
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        (partition,) = FetchResponse.decode(_read_frame(sock), version=v, header=True).responses[0].partitions
    return partition


def test_open_transaction_holds_the_last_stable_offset(kafka_broker, kafka_topic):
    broker, bootstrap = kafka_broker
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(2):
        producer.send(kafka_topic, value=f"plain-{i}".encode(), partition=0)
    producer.flush()
    producer.close()
    with LakelogClient(broker.url) as http:
        http.transactions.init_transactions(f"tx-{kafka_topic}")
        http.produce_binary(kafka_topic, [(None, b"in-transaction")], partition=0)  # offset 2, left open

        tp = TopicPartition(kafka_topic, 0)
        committed = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, isolation_level="read_committed")
        uncommitted = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        try:
            assert committed.end_offsets([tp]) == {tp: 2}
            assert uncommitted.end_offsets([tp]) == {tp: 3}
        finally:
            committed.close()
            uncommitted.close()
        answer = _fetch(bootstrap, kafka_topic, isolation_level=1)
        assert (answer.error_code, answer.high_watermark, answer.last_stable_offset) == (0, 3, 2)
        http.transactions.abort_transaction()
