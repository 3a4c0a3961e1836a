"""Apache Kafka's MirrorMaker 2, unchanged, run by ``lakelog mirror start``: from a real Apache Kafka broker
(KRaft, :class:`lakelog.runtime.apache_kafka.KafkaBroker`) to lakelog, and from one lakelog cluster to
another. The mirrored topic holds the source's records at the same offsets, and a consumer group that
committed on the source resumes on the target at MirrorMaker's translated offset (KIP-545)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from lakelog.processes import spawn
from lakelog.runtime.apache_kafka import KafkaBroker
from lakelog.runtime.mirror_maker import mirror_maker_properties

from tests.kafka.conftest import broker_of_its_own

pytestmark = pytest.mark.kafka_tools

PARTITIONS = 2
RECORDS = 400  # per partition
COMMITTED = 150  # the group's committed offset on the source, per partition
#: when the group's offsets are not translated within NUDGE_S, the source gets NUDGE_RECORDS more per partition
NUDGE_S = 45.0
NUDGE_RECORDS = 20


def _wait_until(condition, *, what: str, log: Path | None = None, timeout_s: float = 480.0, fail: bool = True):
    """Poll ``condition`` until it answers a true value (returned); fail naming ``what`` (and the tail of
    ``log``) after ``timeout_s`` (a bound for a hung JVM; each step takes seconds), or return None then
    with ``fail=False``."""
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            if not fail:
                return None
            pytest.fail(f"timed out waiting for {what}\n{_log_tail(log)}")
        time.sleep(0.5)
    return value


def _log_tail(log: Path | None) -> str:
    return log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""


def _nudge(bootstrap: str, topic: str, group: str, records: list[list[tuple[bytes, bytes]]]) -> int:
    """Write NUDGE_RECORDS more records to each partition of the source (kept in ``records``) and commit
    the group NUDGE_RECORDS // 2 before the new end; the committed offset."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p, rows in enumerate(records):
        start = len(rows)
        for i in range(start, start + NUDGE_RECORDS):
            rows.append((f"k{p}-{i}".encode(), f"v{p}-{i}".encode()))
            producer.produce(topic, key=rows[-1][0], value=rows[-1][1], partition=p)
    assert producer.flush(60) == 0
    committed = len(records[0]) - NUDGE_RECORDS // 2
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, committed) for p in range(PARTITIONS)], asynchronous=False)
    finally:
        consumer.close()
    return committed


def _fill_source(bootstrap: str, topic: str, group: str) -> list[list[tuple[bytes, bytes]]]:
    """Create ``topic`` on the source, write RECORDS keyed records per partition, and commit the group at
    COMMITTED per partition after consuming that far; the records per partition."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    records = [[(f"k{p}-{i}".encode(), f"v{p}-{i}".encode()) for i in range(RECORDS)] for p in range(PARTITIONS)]
    for p, rows in enumerate(records):
        for key, value in rows:
            producer.produce(topic, key=key, value=value, partition=p)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 120
        while seen < PARTITIONS * RECORDS and time.monotonic() < deadline:
            seen += len(consumer.consume(500, 1.0))
        consumer.commit(offsets=[TopicPartition(topic, p, COMMITTED) for p in range(PARTITIONS)], asynchronous=False)
    finally:
        consumer.close()
    return records


def _read(bootstrap: str, topic: str, partition: int, start: int, count: int) -> list[tuple[int, bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        out: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + 60
        while len(out) < count and time.monotonic() < deadline:
            out += [(m.offset(), m.key(), m.value()) for m in consumer.consume(count - len(out), 1.0) if not m.error()]
        return out
    finally:
        consumer.close()


def _mirror(tmp: Path, *, source: str, target: str, source_alias: str, topic: str, group: str) -> subprocess.Popen:
    """``lakelog mirror start`` for ``source_alias`` -> ``target`` (a child process, stopped by pid)."""
    return spawn([sys.executable, "-m", "lakelog.cli", "mirror", "start", "--source-bootstrap", source,
                  "--target-bootstrap", target, "--source-alias", source_alias, "--target-alias", "target",
                  "--topics", topic, "--groups", group, "--interval-s", "1", "--config", "offset.lag.max=10",
                  "--log-file", str(tmp / f"mirror-{source_alias}.log")],
                 stdout=open(tmp / f"mirror-{source_alias}.out", "ab"), stderr=subprocess.STDOUT,
                 start_new_session=True, death_signal=signal.SIGTERM)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # the CLI stops MirrorMaker's JVM by its pid, then exits
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _check_mirrored(tmp: Path, *, source: str, target: str, source_alias: str, topic: str, group: str) -> None:
    records = _fill_source(source, topic, group)
    mirror = _mirror(tmp, source=source, target=target, source_alias=source_alias, topic=topic, group=group)
    mirrored = f"{source_alias}.{topic}"  # DefaultReplicationPolicy's name
    try:
        target_admin = AdminClient({"bootstrap.servers": target})

        def ends() -> bool:
            consumer = Consumer({"bootstrap.servers": target, "group.id": "probe"})
            try:
                if mirrored not in consumer.list_topics(timeout=10).topics:
                    return False
                return all(consumer.get_watermark_offsets(TopicPartition(mirrored, p), timeout=10)[1] == RECORDS
                           for p in range(PARTITIONS))
            finally:
                consumer.close()

        log = tmp / f"mirror-{source_alias}.log"
        _wait_until(ends, what=f"{mirrored} on the target with {RECORDS} records per partition", log=log)
        # 1. the same records at the same offsets, partition by partition
        for p in range(PARTITIONS):
            assert _read(target, mirrored, p, 0, RECORDS) == [(i, k, v) for i, (k, v) in enumerate(records[p])]

        # 2. the group's offsets, translated and committed on the target by MirrorMaker's checkpoints.
        #    MirrorMaker translates only with offset syncs its checkpoint task saw after reading the
        #    offset-syncs topic to its end (KAFKA-14666): when replication finished before that task
        #    started (a loaded machine), the group's offset cannot be translated until the source moves
        #    on, so every NUDGE_S the test writes NUDGE_RECORDS more per partition and commits the group there
        committed = COMMITTED

        def translated() -> list[int] | None:
            answer = target_admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)])[group].result(30)
            offsets = {tp.partition: tp.offset for tp in answer.topic_partitions if tp.topic == mirrored}
            return [offsets[p] for p in range(PARTITIONS)] if len(offsets) == PARTITIONS and all(
                o > 0 for o in offsets.values()) else None

        deadline, positions = time.monotonic() + 480, None
        while positions is None:
            positions = _wait_until(translated, what="-", timeout_s=NUDGE_S, fail=False)
            if positions is None:
                if time.monotonic() > deadline:
                    pytest.fail(f"timed out waiting for group {group}'s translated offsets on the target\n"
                                f"{_log_tail(log)}")
                committed = _nudge(source, topic, group, records)
        assert all(0 < o <= committed for o in positions), positions  # conservative: never past the source's
    finally:
        _stop(mirror)

    # 3. a consumer of the group moved to the target resumes at the translated offsets
    consumer = Consumer({"bootstrap.servers": target, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([mirrored])
        first: dict[int, int] = {}
        deadline = time.monotonic() + 120
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            for m in consumer.consume(100, 1.0):
                if not m.error():
                    first.setdefault(m.partition(), m.offset())
        assert [first.get(p) for p in range(PARTITIONS)] == positions
    finally:
        consumer.close()


def test_mirror_maker_copies_an_apache_kafka_topic_and_its_group_offsets_to_lakelog(
        kafka_broker, topic_name, tmp_path, leftovers):
    _, lakelog_bootstrap = kafka_broker
    kafka = KafkaBroker(tmp_path / "apache-kafka", heap="512m").start()
    try:
        _check_mirrored(tmp_path, source=kafka.bootstrap, target=lakelog_bootstrap, source_alias="kafka",
                        topic=topic_name, group=f"g-{topic_name}")
    finally:
        kafka.stop()


def test_mirror_maker_copies_between_two_lakelog_clusters(kafka_broker, zookeeper, topic_name, tmp_path, leftovers):
    _, target_bootstrap = kafka_broker
    # a second lakelog cluster: its own ZooKeeper chroot, its own broker
    with broker_of_its_own(zookeeper.connect_string, tmp_path / "source-logs") as (_, source_bootstrap):
        _check_mirrored(tmp_path, source=source_bootstrap, target=target_bootstrap, source_alias="east",
                        topic=topic_name, group=f"g-{topic_name}")

def test_mirror_maker_properties_refuse_what_mirror_maker_would_misread():
    text = mirror_maker_properties(source_alias="east", source_bootstrap="a:9092", target_alias="west",
                                   target_bootstrap="b:9092", topics="orders.*", overrides={"offset.lag.max": "10"})
    assert "east->west.enabled = true\n" in text and "west->east.enabled = false\n" in text
    assert "east->west.topics = orders.*\n" in text and text.endswith("offset.lag.max = 10\n")
    for kwargs, message in (({"source_alias": "a.b"}, "letters, digits"),
                            ({"target_alias": "east"}, "both 'east'"),
                            ({"target_bootstrap": " "}, "bootstrap servers are empty"),
                            ({"replication_factor": 0}, "at least 1")):
        args = dict(source_alias="east", source_bootstrap="a:9092", target_alias="west", target_bootstrap="b:9092")
        with pytest.raises(ValueError, match=message):
            mirror_maker_properties(**{**args, **kwargs})
