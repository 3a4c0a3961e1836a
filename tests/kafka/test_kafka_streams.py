"""Apache Kafka Streams, unchanged: Kafka's own ``WordCountDemo`` (``kafka-streams-examples``, Maven
Central) with ``processing.guarantee=exactly_once_v2`` on three lakelog brokers, every topic with three
replicas. Its repartition and changelog topics are lakelog topics (the changelog compacted, as Streams
asks), and its counts are exact although a broker is killed with SIGKILL in the middle of the run: a
count written twice would overshoot, one lost would fall short."""

from __future__ import annotations

import collections
import struct
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from lakelog.processes import spawn
from lakelog.runtime.kafka_jars import LOG4J2_WARN, kafka_jars, kafka_streams_jars, kafka_tool_command
from tests.cluster.test_replication import FAST, wait_full_isr
from tests.harness import wait_for
from tests.kafka.conftest import KAFKA_LISTENER_ENV, kafka_bootstrap

pytestmark = [pytest.mark.cluster, pytest.mark.kafka_tools]

WORD_COUNT = "org.apache.kafka.streams.examples.wordcount.WordCountDemo"
INPUT, OUTPUT = "streams-plaintext-input", "streams-wordcount-output"  # WordCountDemo's own names
WORDS = ("kafka", "lake", "delta", "stream", "table", "offset", "leader", "replica")
LINES_PER_PHASE = 150


def _lines(phase: int) -> list[str]:
    """Deterministic lines of 3 to 5 words."""
    return [" ".join(WORDS[(phase * 7 + i * (j + 3)) % len(WORDS)] for j in range(3 + i % 3))
            for i in range(LINES_PER_PHASE)]


def _counts(bootstrap: str) -> dict[str, int]:
    """The latest committed count per word in the output topic (``read_committed``: what a downstream
    consumer sees)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(OUTPUT, timeout=30).topics[OUTPUT].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(OUTPUT, p), timeout=30)[1] for p in partitions}
        consumer.assign([TopicPartition(OUTPUT, p, 0) for p in partitions])
        latest: dict[str, int] = {}
        position = {p: 0 for p in partitions}
        deadline = time.monotonic() + 60
        while any(position[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error():
                    continue
                latest[m.key().decode()] = struct.unpack(">q", m.value())[0]
                position[m.partition()] = m.offset() + 1
            for p in partitions:  # past the last record: transaction markers end the partition
                position[p] = max(position[p], consumer.position([TopicPartition(OUTPUT, p)])[0].offset)
        return latest
    finally:
        consumer.close()


def _expected(lines: list[str]) -> dict[str, int]:
    return dict(collections.Counter(word for line in lines for word in line.split()))


def test_word_count_with_exactly_once_v2_counts_exactly_through_a_broker_sigkill(broker_factory, zk, zk_client,
                                                                                   tmp_path, leftovers):
    brokers = {i: broker_factory(broker_id=i, extra_env={**FAST, **KAFKA_LISTENER_ENV}) for i in range(3)}
    bootstrap = ",".join(kafka_bootstrap(zk_client, i) for i in brokers)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic, future in admin.create_topics([NewTopic(INPUT, 2, 3), NewTopic(OUTPUT, 2, 3)]).items():
        future.result(60)
    wait_full_isr(zk, INPUT, 2, 3)
    wait_full_isr(zk, OUTPUT, 2, 3)

    application = f"wordcount-{uuid.uuid4().hex[:6]}"
    props = tmp_path / "streams.properties"
    props.write_text("\n".join([
        f"bootstrap.servers={bootstrap}", f"application.id={application}",
        "processing.guarantee=exactly_once_v2", "replication.factor=3", f"state.dir={tmp_path / 'state'}",
        "commit.interval.ms=200"]) + "\n")
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(LOG4J2_WARN)
    log = tmp_path / "streams.log"
    with open(log, "ab") as out:
        streams = spawn(kafka_tool_command(WORD_COUNT, str(props), libs=kafka_jars(), heap="512m",
                                           extra_libs=(kafka_streams_jars(),), log4j2_file=log4j),
                        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    sent: list[str] = []

    def send(lines: list[str]) -> None:
        for line in lines:
            producer.produce(INPUT, value=line.encode())
            sent.append(line)
        assert producer.flush(120) == 0

    def counted_so_far() -> bool:
        assert streams.poll() is None, f"WordCountDemo exited:\n{log.read_text(errors='replace')[-3000:]}"
        try:
            return _counts(bootstrap) == _expected(sent)
        except KafkaException:  # a partition's leader moving after the kill: read again
            return False

    try:
        # 1. the first phase counted
        send(_lines(0))
        wait_for(counted_so_far, what="the first phase's counts", timeout_s=240, interval_s=1.0)
        changelog = f"{application}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog"
        configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, changelog)])
        (described,) = configs.values()
        assert described.result(30)["cleanup.policy"].value == "compact"
        assert f"{application}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition" in admin.list_topics(timeout=30).topics

        # 2. the second phase's first half, then the output partition 0's leader killed with SIGKILL, then the rest
        second = _lines(1)
        send(second[: LINES_PER_PHASE // 2])
        victim = zk.state(OUTPUT, 0).leader
        brokers[victim].kill()
        send(second[LINES_PER_PHASE // 2:])
        send(_lines(2))

        # 3. every count exact: nothing lost, nothing counted twice
        wait_for(counted_so_far, what="the counts of every line after the kill", timeout_s=300, interval_s=1.0)
        time.sleep(2)  # ten commit intervals: a duplicate would overshoot by now
        assert _counts(bootstrap) == _expected(sent)
        assert zk.state(OUTPUT, 0).leader != victim
    finally:
        if streams.poll() is None:
            streams.terminate()
            try:
                streams.wait(30)
            except subprocess.TimeoutExpired:
                streams.kill()
