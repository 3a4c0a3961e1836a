"""Apache Kafka's own transaction tools, unchanged, against one lakelog broker's Kafka listener (the jars
from Maven Central, :func:`lakelog.runtime.kafka_jars.kafka_jars`, cached): ``kafka-transactions``
(``org.apache.kafka.tools.TransactionsCommand``: list, describe) and ``TransactionalMessageCopier`` copying a
topic exactly once (read back with read_committed: each input record once, in order). One broker for
the module."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from lakelog.client import LakelogClient
from lakelog.runtime.kafka_jars import LOG4J2_WARN, kafka_jars, kafka_tool_command
from tests.kafka.conftest import broker_of_its_own
from tests.kafka.test_kafka_transactions import _values

pytestmark = pytest.mark.kafka_tools

TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"
ENV = {"LAKELOG_TRANSACTION_STATE_LOG_NUM_PARTITIONS": "2",
       "LAKELOG_OFFSETS_TOPIC_NUM_PARTITIONS": "2"}  # the Kafka listener: broker_of_its_own


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    """One broker with a Kafka listener for the module: ``(broker, "127.0.0.1:port")``."""
    with broker_of_its_own(zookeeper.connect_string, tmp_path_factory.mktemp("txn-tools-logs"), ENV) as cluster:
        yield cluster


def _tool(tmp_path: Path, main: str, *args: str) -> str:
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(LOG4J2_WARN)
    done = subprocess.run(kafka_tool_command(main, *args, libs=kafka_jars(), log4j2_file=log4j),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{main} {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_transactional_message_copier_copies_exactly_once(cluster, tmp_path):
    """Kafka's TransactionalMessageCopier (consume, produce and commit the group's offsets in one
    transaction, aborting some at random) copies every record once, in order; ``kafka-transactions list``
    and ``describe`` show its transactional id."""
    broker, bootstrap = cluster
    source, sink = f"copy-in-{uuid.uuid4().hex[:6]}", f"copy-out-{uuid.uuid4().hex[:6]}"
    txn_id = f"copier-{uuid.uuid4().hex[:6]}"
    with LakelogClient(broker.url) as http:
        for name in (source, sink):
            http.create_topic(name, partitions=1, replication_factor=1)
    count = 200
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(source, value=f"r{i}".encode(), partition=0)
    assert producer.flush(60) == 0

    out = _tool(tmp_path, COPIER, "--broker-list", bootstrap, "--input-topic", source, "--input-partition", "0",
                "--output-topic", sink, "--transactional-id", txn_id, "--consumer-group", f"g-{txn_id}",
                "--transaction-size", "20", "--max-messages", str(count), "--enable-random-aborts",
                "--group-mode", "--use-group-metadata")
    statuses = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert statuses[-1]["remaining"] == 0, statuses[-3:]
    assert _values(bootstrap, sink, isolation="read_committed", count=count) == [f"r{i}".encode()
                                                                                 for i in range(count)]

    listed = _tool(tmp_path, TRANSACTIONS, "--bootstrap-server", bootstrap, "list")
    assert any(line.split()[:1] == [txn_id] for line in listed.splitlines()), listed
    described = _tool(tmp_path, TRANSACTIONS, "--bootstrap-server", bootstrap, "describe", "--transactional-id",
                      txn_id)
    assert txn_id in described and "CompleteCommit" in described, described
