"""Apache Kafka's own console producer (idempotent, ``acks=all``, unchanged, from Maven Central's jars)
writes to a partition with three replicas on three lakelog brokers; its leader is killed with SIGKILL
in the middle of the run. Every line the producer sent is in the log exactly once, in order: Kafka's
idempotent producer retries against the new leader, whose producer state (replicated with the records)
refuses the duplicates of batches the old leader had taken."""

from __future__ import annotations

import base64
import subprocess
import time

import pytest

from lakelog.runtime.kafka_jars import LOG4J2_WARN, kafka_jars, kafka_tool_command
from tests.cluster.test_replication import FAST, wait_full_isr
from tests.harness import read_partition, wait_for
from tests.kafka.conftest import KAFKA_LISTENER_ENV, kafka_bootstrap

pytestmark = [pytest.mark.cluster, pytest.mark.kafka_tools]

LINES = 300


def test_a_java_producer_loses_and_duplicates_nothing_when_the_leader_is_killed(broker_factory, zk, zk_client,
                                                                                  topic_name, tmp_path):
    libs = kafka_jars()
    brokers = {i: broker_factory(broker_id=i, extra_env={**FAST, **KAFKA_LISTENER_ENV}) for i in range(3)}
    bootstrap = ",".join(kafka_bootstrap(zk_client, i) for i in brokers)
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(LOG4J2_WARN)
    created = subprocess.run(kafka_tool_command(
        "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--create", "--topic", topic_name,
        "--partitions", "1", "--replication-factor", "3", libs=libs, log4j2_file=log4j),
        capture_output=True, text=True, timeout=300)
    assert created.returncode == 0, created.stdout + created.stderr
    wait_full_isr(zk, topic_name, 1, 3)
    leader = zk.state(topic_name, 0).leader
    producer = subprocess.Popen(kafka_tool_command(
        "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", bootstrap, "--topic", topic_name, "--sync",
        "--producer-property", "acks=all", "--producer-property", "enable.idempotence=true",
        "--producer-property", "linger.ms=0",
        "--producer-property", "delivery.timeout.ms=300000", "--producer-property", "request.timeout.ms=10000",
        libs=libs, log4j2_file=log4j), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        survivor = brokers[next(b for b in brokers if b != leader)]
        for i in range(LINES):
            producer.stdin.write(f"line-{i}\n")
            producer.stdin.flush()
            if i == LINES // 2:  # half sent: the leader is acknowledged up to about here
                wait_for(lambda: len(read_partition(brokers[leader].url, topic_name, 0)) >= LINES // 4,
                         what="the producer's first lines acknowledged by the leader")
                killed_at = len(read_partition(brokers[leader].url, topic_name, 0))
                brokers[leader].kill()
            time.sleep(0.005)
        out, err = producer.communicate(timeout=600)  # closes its stdin: the producer flushes and exits
        assert producer.returncode == 0, out + err
    finally:
        if producer.poll() is None:
            producer.kill()
    assert killed_at < LINES  # the leader died in the middle of the run
    assert zk.state(topic_name, 0).leader != leader
    wait_for(lambda: len(read_partition(survivor.url, topic_name, 0)) >= LINES,
             what="every line in the partition on the new leader")
    values = [base64.b64decode(r["value"]).decode() for r in read_partition(survivor.url, topic_name, 0)]
    assert values == [f"line-{i}" for i in range(LINES)]
