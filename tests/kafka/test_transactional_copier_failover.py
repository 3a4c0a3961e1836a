"""Exactly-once copy under failure: Apache Kafka's ``TransactionalMessageCopier`` (kafka-tools, unchanged)
copies a topic of three-replica partitions on three lakelog brokers while the leader of its input
partition and then the leader of its output partition are killed with SIGKILL. Read with
``read_committed``, the output holds each input record exactly once, in order."""

from __future__ import annotations

import json
import subprocess
import threading
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from lakelog.runtime.kafka_jars import LOG4J2_WARN, kafka_jars, kafka_tool_command
from tests.cluster.test_replication import FAST, wait_full_isr
from tests.harness import wait_for
from tests.kafka.conftest import KAFKA_LISTENER_ENV, kafka_bootstrap
from tests.kafka.test_kafka_transactions import _values

pytestmark = [pytest.mark.cluster, pytest.mark.kafka_tools]

COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"
RECORDS = 400


def test_the_copier_copies_exactly_once_while_input_and_output_leaders_are_killed(broker_factory, zk, zk_client,
                                                                                   tmp_path, leftovers):
    env = {**FAST, **KAFKA_LISTENER_ENV}
    brokers = {i: broker_factory(broker_id=i, extra_env=env) for i in range(3)}
    bootstrap = ",".join(kafka_bootstrap(zk_client, i) for i in brokers)
    source, sink = f"copy-in-{uuid.uuid4().hex[:6]}", f"copy-out-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(source, 1, 3), NewTopic(sink, 1, 3)]).values():
        future.result(60)
    wait_full_isr(zk, source, 1, 3)
    wait_full_isr(zk, sink, 1, 3)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(source, value=f"r{i}".encode(), partition=0)
    assert producer.flush(60) == 0

    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(LOG4J2_WARN)
    txn_id = f"copier-{uuid.uuid4().hex[:6]}"
    copier = subprocess.Popen(kafka_tool_command(
        COPIER, "--broker-list", bootstrap, "--input-topic", source, "--input-partition", "0",
        "--output-topic", sink, "--transactional-id", txn_id, "--consumer-group", f"g-{txn_id}",
        "--transaction-size", "10", "--max-messages", str(RECORDS), "--enable-random-aborts",
        "--group-mode", "--use-group-metadata", libs=kafka_jars(), log4j2_file=log4j),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    remaining = [RECORDS]
    lines: list[str] = []

    def read_status() -> None:
        for line in copier.stdout:
            lines.append(line)
            if line.startswith("{"):
                remaining[0] = json.loads(line).get("remaining", remaining[0])

    reader = threading.Thread(target=read_status, daemon=True)
    reader.start()
    try:
        def copied_at_least(n: int):
            assert copier.poll() is None or remaining[0] == 0, "".join(lines[-20:]) + copier.stderr.read()
            return RECORDS - remaining[0] >= n

        # 1. a third copied: the input partition's leader killed, then started again
        wait_for(lambda: copied_at_least(RECORDS // 3), what="a third of the records copied", timeout_s=240,
                 interval_s=0.2)
        victim = zk.state(source, 0).leader
        brokers[victim].kill()
        wait_for(lambda: copied_at_least(RECORDS // 2), what="half copied after the input leader's kill",
                 timeout_s=240, interval_s=0.2)
        brokers[victim] = broker_factory(broker_id=victim, extra_env=env)
        wait_full_isr(zk, source, 1, 3)
        wait_full_isr(zk, sink, 1, 3)
        # 2. two thirds copied: the output partition's leader killed
        wait_for(lambda: copied_at_least(2 * RECORDS // 3), what="two thirds copied", timeout_s=240,
                 interval_s=0.2)
        brokers[zk.state(sink, 0).leader].kill()
        copier.wait(300)
        reader.join(10)
        assert copier.returncode == 0, "".join(lines[-20:]) + copier.stderr.read()
    finally:
        if copier.poll() is None:
            copier.kill()
            copier.wait(10)
    assert remaining[0] == 0
    # 3. each input record exactly once, in order (aborted transactions' copies invisible)
    survivors = ",".join(kafka_bootstrap(zk_client, i) for i, b in brokers.items() if b.process.poll() is None)
    assert _values(survivors, sink, isolation="read_committed", count=RECORDS) == [f"r{i}".encode()
                                                                                  for i in range(RECORDS)]
