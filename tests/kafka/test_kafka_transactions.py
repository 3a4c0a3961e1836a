"""Transactions on the Kafka listener with real clients, unchanged: confluent-kafka's (librdkafka's)
transactional producer with a group consumer's offsets in its transactions, read_committed and
read_uncommitted consumers, fencing by a second instance of the producer, kafka-python's transactional
producer; ListTransactions and DescribeTransactions, TxnOffsetCommit's member fencing (KIP-447), and one
transactional id over HTTP and over Kafka. One broker for the module."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.protocol.admin.transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.producer.transaction import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafka.record import MemoryRecords

from lakelog.client import LakelogClient
from lakelog.runtime.broker_process import BrokerProcess
from tests.harness import wait_for
from tests.kafka.conftest import broker_of_its_own
from tests.kafka.test_protocol_edges import _connect, _read_frame
from tests.kafka.test_read_committed import _fetch

ENV = {"LAKELOG_TRANSACTION_STATE_LOG_NUM_PARTITIONS": "2",
       "LAKELOG_OFFSETS_TOPIC_NUM_PARTITIONS": "2"}  # the Kafka listener: broker_of_its_own


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    """One broker with a Kafka listener for the module: ``(broker, "127.0.0.1:port")``."""
    with broker_of_its_own(zookeeper.connect_string, tmp_path_factory.mktemp("txn-logs"), ENV) as cluster:
        yield cluster


def _topics(broker: BrokerProcess, *names: str) -> None:
    with LakelogClient(broker.url) as http:
        for name in names:
            http.create_topic(name, partitions=1, replication_factor=1)


def _values(bootstrap: str, topic: str, *, isolation: str, count: int) -> list[bytes]:
    """The values of partition 0 from offset 0 read with ``isolation``, once ``count`` came (and nothing more
    came on a last poll)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": isolation, "fetch.wait.max.ms": 100})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])

        def more() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            elif msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                raise AssertionError(msg.error())
            return len(got) >= count

        wait_for(more, what=f"{count} records read {isolation}")
        extra = consumer.poll(0.5)
        assert extra is None or extra.error() is not None, extra.value()
        return got
    finally:
        consumer.close()


def _send(bootstrap: str, request, response_cls, version: int):
    request.with_header(correlation_id=7, client_id="txn-test")
    with _connect(bootstrap) as sock:
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        return response_cls.decode(_read_frame(sock), version=version, header=True)


def test_confluent_transactions_commit_abort_offsets_and_read_committed(cluster):
    """A consume-transform-produce loop: the committed transaction's records and the group's offsets are
    seen, the aborted one's records are invisible to read_committed and visible to read_uncommitted; the
    transactional id is the HTTP API's too, and ListTransactions / DescribeTransactions show it."""
    broker, bootstrap = cluster
    source, sink, group = (f"{p}-{uuid.uuid4().hex[:6]}" for p in ("in", "out", "g"))
    txn_id = f"copier-{uuid.uuid4().hex[:6]}"
    _topics(broker, source, sink)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        plain.produce(source, value=f"in-{i}".encode(), partition=0)
    assert plain.flush(60) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    try:
        consumer.subscribe([source])
        read: list = []

        def polled() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                read.append(msg)
            return len(read) >= 3

        wait_for(polled, what="the group consumer's 3 records")
        producer.init_transactions(60)
        producer.begin_transaction()
        for msg in read:
            producer.produce(sink, value=b"copy-" + msg.value(), partition=0)
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)

        producer.begin_transaction()
        producer.produce(sink, value=b"aborted-0", partition=0)
        producer.produce(sink, value=b"aborted-1", partition=0)
        assert producer.flush(60) == 0
        with LakelogClient(broker.url) as http:
            described = http.transactions.describe_transaction(txn_id)  # the HTTP API's view of the same id
            assert described["state"] == "Ongoing"
            assert [(p["topic_name"], p["partition_id"]) for p in described["partitions"]] == [(sink, 0)]
        producer.abort_transaction(60)

        committed = consumer.committed([TopicPartition(source, 0)], 30)
        assert [tp.offset for tp in committed] == [3]
    finally:
        consumer.close()

    assert _values(bootstrap, sink, isolation="read_committed", count=3) == [b"copy-in-0", b"copy-in-1", b"copy-in-2"]
    assert _values(bootstrap, sink, isolation="read_uncommitted", count=5) == [
        b"copy-in-0", b"copy-in-1", b"copy-in-2", b"aborted-0", b"aborted-1"]

    listed = _send(bootstrap, ListTransactionsRequest(version=1, state_filters=[], producer_id_filters=[],
                                                      duration_filter=-1), ListTransactionsResponse, 1)
    assert listed.error_code == 0
    (mine,) = [t for t in listed.transaction_states if t.transactional_id == txn_id]
    assert mine.transaction_state == "CompleteAbort"
    described = _send(bootstrap, DescribeTransactionsRequest(version=0, transactional_ids=[txn_id, "no-such-id"]),
                      DescribeTransactionsResponse, 0)
    found, missing = described.transaction_states
    assert (found.error_code, found.transaction_state, found.producer_id) == (0, "CompleteAbort", mine.producer_id)
    assert missing.error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND


def test_second_producer_fences_the_first(cluster):
    """A second instance of a transactional id aborts the first's open transaction and fences it: the
    first gets a fatal fenced error; its records are never read_committed."""
    broker, bootstrap = cluster
    sink = f"fenced-{uuid.uuid4().hex[:6]}"
    txn_id = f"fenced-{uuid.uuid4().hex[:6]}"
    _topics(broker, sink)
    first = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    first.init_transactions(60)
    first.begin_transaction()
    first.produce(sink, value=b"zombie", partition=0)
    assert first.flush(60) == 0

    second = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    second.init_transactions(60)
    second.begin_transaction()
    second.produce(sink, value=b"live", partition=0)
    second.commit_transaction(60)

    with pytest.raises(KafkaException) as raised:
        first.produce(sink, value=b"zombie-again", partition=0)
        first.commit_transaction(60)
    error = raised.value.args[0]
    assert error.fatal(), error
    assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), error
    assert _values(bootstrap, sink, isolation="read_committed", count=1) == [b"live"]


def test_kafka_python_transactional_producer(cluster):
    """kafka-python's transactional producer: a committed and an aborted transaction."""
    broker, bootstrap = cluster
    sink = f"kp-{uuid.uuid4().hex[:6]}"
    _topics(broker, sink)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:6]}")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(sink, value=b"kept", partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(sink, value=b"dropped", partition=0)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()
    assert _values(bootstrap, sink, isolation="read_committed", count=1) == [b"kept"]
    assert _values(bootstrap, sink, isolation="read_uncommitted", count=2) == [b"kept", b"dropped"]


def test_txn_offset_commit_fences_a_zombie_member(cluster):
    """TxnOffsetCommit v3 (KIP-447) of a producer initialized over HTTP (one transactional id for both
    front doors), for a kafka-python group member: a member id the group does not have answers
    UNKNOWN_MEMBER_ID, a stale generation ILLEGAL_GENERATION; the live member's commit is taken."""
    broker, bootstrap = cluster
    source, group = f"src-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    txn_id = f"zombie-{uuid.uuid4().hex[:6]}"
    _topics(broker, source)
    consumer = KafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        wait_for(lambda: not consumer.poll(timeout_ms=200) and consumer.group_metadata().generation_id >= 0,
                 what="the member's generation")
        member = consumer.group_metadata()
        with LakelogClient(broker.url) as http:
            ids = http.transactions.init_producer_id(transactional_id=txn_id)
        v = 3

        def commit(member_id: str, generation_id: int) -> int:
            topic_cls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
            request = TxnOffsetCommitRequest(
                version=v, transactional_id=txn_id, group_id=group, producer_id=ids["producer_id"],
                producer_epoch=ids["producer_epoch"], generation_id=generation_id, member_id=member_id,
                group_instance_id=None, topics=[topic_cls(version=v, name=source, partitions=[
                    topic_cls.TxnOffsetCommitRequestPartition(version=v, partition_index=0, committed_offset=0,
                                                              committed_leader_epoch=-1, committed_metadata="")])])
            (topic,) = _send(bootstrap, request, TxnOffsetCommitResponse, v).topics
            return topic.partitions[0].error_code

        assert commit("zombie-member", member.generation_id) == 25  # UNKNOWN_MEMBER_ID
        assert commit(member.member_id, member.generation_id + 1) == 22  # ILLEGAL_GENERATION
        assert commit(member.member_id, member.generation_id) == 0
        with LakelogClient(broker.url) as http:
            assert http.transactions.describe_transaction(txn_id)["state"] == "Ongoing"
            http.transactions.end_transaction(txn_id, producer_id=ids["producer_id"],
                                              producer_epoch=ids["producer_epoch"], commit=True)
        assert consumer.committed(KafkaTopicPartition(source, 0)) == 0
    finally:
        consumer.close()


def test_fetch_answers_transactional_and_control_batches(cluster):
    """A fetch answers a transaction's records as a transactional batch of its producer and its commit
    marker as a control batch (the CRC checked), so a consumer reaches the log end: position = high
    watermark, no lag of 1 left at the marker."""
    broker, bootstrap = cluster
    sink = f"ctl-{uuid.uuid4().hex[:6]}"
    _topics(broker, sink)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"ctl-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(sink, value=b"a", partition=0)
    producer.produce(sink, value=b"b", partition=0)
    producer.commit_transaction(60)

    for isolation_level in (0, 1):
        answer = _fetch(bootstrap, sink, isolation_level=isolation_level)
        assert (answer.error_code, answer.high_watermark, answer.last_stable_offset) == (0, 3, 3)
        records = MemoryRecords(bytes(answer.records))
        batches = []
        while (batch := records.next_batch()) is not None:
            assert batch.validate_crc()
            batches.append(batch)
        data, marker = batches
        assert (data.is_transactional, data.is_control_batch, data.base_offset, data.last_offset) == (True, False, 0, 1)
        assert (marker.is_transactional, marker.is_control_batch, marker.base_offset) == (True, True, 2)
        assert data.producer_id == marker.producer_id >= 0
        (control,) = list(marker)
        assert control.key == b"\x00\x00\x00\x01"  # version 0, COMMIT

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lag-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(sink, 0, 0)])
        seen: list = []

        def at_end() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
            return msg is not None and msg.error() is not None and msg.error().code() == KafkaError._PARTITION_EOF

        wait_for(at_end, what="the end of the partition")
        assert seen == [b"a", b"b"]
        (position,) = consumer.position([TopicPartition(sink, 0)])
        assert position.offset == 3
    finally:
        consumer.close()


def test_add_partitions_to_txn_adds_all_or_none(cluster):
    """AddPartitionsToTxn v3 naming an unknown topic answers it UNKNOWN_TOPIC_OR_PARTITION, the others
    OPERATION_NOT_ATTEMPTED, and adds none; then the known partition alone is added (Ongoing), and EndTxn
    of a stale epoch answers PRODUCER_FENCED (v2+) or INVALID_PRODUCER_EPOCH (v1)."""
    broker, bootstrap = cluster
    topic, txn_id = f"add-{uuid.uuid4().hex[:6]}", f"add-{uuid.uuid4().hex[:6]}"
    _topics(broker, topic)
    with LakelogClient(broker.url) as http:
        ids = http.transactions.init_producer_id(transactional_id=txn_id)
        v = 3

        def add(*names: str) -> dict[str, int]:
            request = AddPartitionsToTxnRequest(
                version=v, v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=ids["producer_id"],
                v3_and_below_producer_epoch=ids["producer_epoch"], v3_and_below_topics=[
                    AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(version=v, name=n, partitions=[0])
                    for n in names])
            answer = _send(bootstrap, request, AddPartitionsToTxnResponse, v)
            return {t.name: t.results_by_partition[0].partition_error_code
                    for t in answer.results_by_topic_v3_and_below}

        assert add(topic, "no-such-topic") == {topic: 55, "no-such-topic": 3}
        assert http.transactions.describe_transaction(txn_id)["state"] == "Empty"
        assert add(topic) == {topic: 0}
        described = http.transactions.describe_transaction(txn_id)
        assert (described["state"], described["partitions"]) == ("Ongoing", [{"topic_name": topic, "partition_id": 0}])

        newer = http.transactions.init_transactions(txn_id)  # aborts the open transaction, fences ids
        assert newer["producer_epoch"] > ids["producer_epoch"]
        for version, code in ((1, 47), (3, 90)):
            end = EndTxnRequest(version=version, transactional_id=txn_id, producer_id=ids["producer_id"],
                                producer_epoch=ids["producer_epoch"], committed=True)
            assert _send(bootstrap, end, EndTxnResponse, version).error_code == code
