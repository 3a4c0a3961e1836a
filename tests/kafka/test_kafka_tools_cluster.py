"""Apache Kafka's own tools, unchanged (jars from Maven Central, :func:`lakelog.runtime.kafka_jars.kafka_jars`),
against one cluster of three lakelog brokers whose topics have three replicas, shared by the module:
``kafka-console-producer`` then ``kafka-console-consumer`` (a group member, ``--from-beginning``,
``--max-messages``), ``kafka-consumer-groups --describe`` (committed offset, log end offset and lag per
partition), ``kafka-producer-perf-test`` and ``kafka-consumer-perf-test``."""

from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from lakelog.client import LakelogClient
from lakelog.runtime.kafka_jars import LOG4J2_WARN, kafka_jars, kafka_tool_command
from tests.cluster.test_replication import FAST, Zk, wait_full_isr
from tests.harness import BrokerProcess, new_chroot, wait_for
from tests.kafka.conftest import KAFKA_LISTENER_ENV, kafka_bootstrap

pytestmark = [pytest.mark.cluster, pytest.mark.kafka_tools]

PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
PERF_RECORDS = 20_000


class Cluster:
    """Three broker processes with Kafka listeners on one chroot; Kafka's tools on the module's jars."""

    def __init__(self, brokers: dict[int, BrokerProcess], bootstrap: str, zk: Zk, libs: Path, log4j: Path) -> None:
        self.brokers, self.bootstrap, self.zk, self.libs, self.log4j = brokers, bootstrap, zk, libs, log4j

    @property
    def url(self) -> str:
        return self.brokers[0].url

    def topic(self, *, partitions: int) -> str:
        """A new topic with ``partitions`` partitions of three replicas each, every ISR full; its name."""
        name = f"tools-{uuid.uuid4().hex[:10]}"
        with LakelogClient(self.url) as http:
            http.create_topic(name, partitions=partitions, replication_factor=3)
        wait_full_isr(self.zk, name, partitions, 3)
        return name

    def tool(self, main: str, *args: str, stdin: str | None = None) -> str:
        """Run Kafka tool ``main`` to its end against the cluster; its stdout (exit 0 asserted)."""
        done = subprocess.run(kafka_tool_command(main, *args, libs=self.libs, log4j2_file=self.log4j),
                              input=stdin, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{main} {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    libs = kafka_jars()
    tmp = tmp_path_factory.mktemp("kafka-tools-cluster")
    log4j = tmp / "log4j2.properties"
    log4j.write_text(LOG4J2_WARN)
    connect = new_chroot(zookeeper.connect_string)
    brokers: dict[int, BrokerProcess] = {}
    zk = Zk(connect)
    kazoo = KazooClient(hosts=connect)
    kazoo.start(timeout=15)
    try:
        for i in range(3):
            brokers[i] = BrokerProcess(zookeeper_connect=connect, log_dirs=tmp / f"logs-{i}", broker_id=i,
                                       extra_env={**FAST, **KAFKA_LISTENER_ENV}).start()
        bootstrap = ",".join(kafka_bootstrap(kazoo, i) for i in brokers)
        yield Cluster(brokers, bootstrap, zk, libs, log4j)
    finally:
        kazoo.stop()
        kazoo.close()
        zk.close()
        for b in brokers.values():
            b.stop()


def _end_offsets(url: str, topic: str, partitions: int) -> dict[int, int]:
    with LakelogClient(url) as http:
        return {p: http.admin.partition_offsets(topic, p)["end_offset"] for p in range(partitions)}


def test_console_producer_then_console_consumer_read_back_every_line(cluster):
    topic = cluster.topic(partitions=3)
    lines = [f"k{i}:v{i}" for i in range(60)]
    cluster.tool(PRODUCER, "--bootstrap-server", cluster.bootstrap, "--topic", topic,
                 "--producer-property", "acks=all", "--property", "parse.key=true", "--property", "key.separator=:",
                 stdin="\n".join(lines) + "\n")
    group = f"console-{uuid.uuid4().hex[:8]}"
    out = cluster.tool(CONSUMER, "--bootstrap-server", cluster.bootstrap, "--topic", topic, "--group", group,
                       "--from-beginning", "--max-messages", str(len(lines)), "--timeout-ms", "120000",
                       "--property", "print.key=true", "--property", "key.separator=:")
    got = [line for line in out.splitlines() if line]
    assert sorted(got) == sorted(lines)
    described = cluster.tool(GROUPS, "--bootstrap-server", cluster.bootstrap, "--describe", "--group", group)
    rows = _describe_rows(described, group)
    assert {p for p, _, _, _ in rows} == {0, 1, 2}  # every partition had a key among 60 (murmur2)
    assert all(lag == 0 and current == end for _, current, end, lag in rows), described


def _describe_rows(out: str, group: str) -> list[tuple[int, int, int, int]]:
    """``(partition, current offset, log end offset, lag)`` of each row ``kafka-consumer-groups --describe`` printed."""
    rows = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[0] == group:
            partition, current, end, lag = fields[2:6]
            rows.append((int(partition), int(current), int(end), int(lag)))
    return sorted(rows)


def test_kafka_consumer_groups_describes_offsets_and_lag(cluster):
    from confluent_kafka import Consumer, TopicPartition

    topic = cluster.topic(partitions=2)
    per_partition = {0: 30, 1: 12}
    with LakelogClient(cluster.url) as http:
        for p, n in per_partition.items():
            http.produce_json(topic, [{"value": f"{p}-{i}"} for i in range(n)], partition=p)
    group = f"lag-{uuid.uuid4().hex[:8]}"
    committed = {0: 10, 1: 12}
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False)
    finally:
        consumer.close()
    out = cluster.tool(GROUPS, "--bootstrap-server", cluster.bootstrap, "--describe", "--group", group)
    assert "CURRENT-OFFSET" in out and "LOG-END-OFFSET" in out and "LAG" in out, out
    assert _describe_rows(out, group) == [(0, 10, 30, 20), (1, 12, 12, 0)], out


_PRODUCED = re.compile(r"(\d+) records sent, [\d.]+ records/sec")


def test_producer_performance_then_consumer_performance(cluster):
    topic = cluster.topic(partitions=3)
    out = cluster.tool(PRODUCER_PERF, "--topic", topic, "--num-records", str(PERF_RECORDS), "--record-size", "100",
                       "--throughput", "-1", "--producer-props", f"bootstrap.servers={cluster.bootstrap}", "acks=all")
    assert int(_PRODUCED.findall(out)[-1]) == PERF_RECORDS, out
    wait_for(lambda: sum(_end_offsets(cluster.url, topic, 3).values()) == PERF_RECORDS,
             what="every record ProducerPerformance sent in the log")
    out = cluster.tool(CONSUMER_PERF, "--bootstrap-server", cluster.bootstrap, "--topic", topic,
                       "--messages", str(PERF_RECORDS), "--group", f"perf-{uuid.uuid4().hex[:8]}",
                       "--timeout", "120000")
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ...
    (result,) = [line for line in out.splitlines() if line[:1].isdigit() and line.count(",") >= 9]
    assert int(result.split(",")[4].strip()) == PERF_RECORDS, out
