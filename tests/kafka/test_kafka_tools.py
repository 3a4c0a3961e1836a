"""Apache Kafka's own tools, unchanged, against a lakelog broker's Kafka listener: ``kafka-topics``
(``org.apache.kafka.tools.TopicCommand``: create, list, describe, alter partitions, delete) and
``kafka-configs`` (``kafka.admin.ConfigCommand``: describe and alter a topic's configs,
describe a broker's), the jars from Maven Central (:func:`lakelog.runtime.kafka_jars.kafka_jars`, cached)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lakelog.client import LakelogClient
from lakelog.runtime.kafka_jars import LOG4J2_WARN, kafka_jars, kafka_tool_command

pytestmark = pytest.mark.kafka_tools

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "kafka.admin.ConfigCommand"  # Scala, in kafka_2.13 (Kafka 4.1 has no tools port of it)


@pytest.fixture(scope="module")
def kafka_libs() -> Path:
    return kafka_jars()


def _tool(libs: Path, tmp_path: Path, main: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(LOG4J2_WARN)
    done = subprocess.run(kafka_tool_command(main, *args, libs=libs, log4j2_file=log4j), capture_output=True,
                          text=True, timeout=300)
    if check:
        assert done.returncode == 0, f"{main} {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def test_kafka_topics_and_kafka_configs(kafka_broker, kafka_libs, topic_name, tmp_path):
    broker, bootstrap = kafka_broker
    b = ["--bootstrap-server", bootstrap]

    def topics(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        return _tool(kafka_libs, tmp_path, TOPICS, *b, *args, check=check)

    def configs(*args: str) -> str:
        return _tool(kafka_libs, tmp_path, CONFIGS, *b, *args).stdout

    created = topics("--create", "--topic", topic_name, "--partitions", "3", "--replication-factor", "1",
                     "--config", "retention.ms=3600000")
    assert f"Created topic {topic_name}." in created.stdout
    again = topics("--create", "--topic", topic_name, "--partitions", "1", check=False)
    assert again.returncode != 0 and "already exists" in again.stdout + again.stderr
    assert topic_name in topics("--list").stdout.split()
    described = topics("--describe", "--topic", topic_name).stdout
    assert "PartitionCount: 3" in described and "retention.ms=3600000" in described
    assert described.count("Leader: 0") == 3

    with LakelogClient(broker.url) as http:
        assert len(http.admin.describe_topic(topic_name)["partitions"]) == 3

        out = configs("--alter", "--entity-type", "topics", "--entity-name", topic_name,
                      "--add-config", "segment.ms=60000", "--delete-config", "retention.ms")
        assert f"Completed updating config for topic {topic_name}." in out
        dynamic = {k: v["value"] for k, v in http.admin.topic_configs(topic_name).items()
                   if v["source"] == "DYNAMIC_TOPIC_CONFIG"}
        assert dynamic == {"segment.ms": "60000"}
        shown = configs("--describe", "--entity-type", "topics", "--entity-name", topic_name)
        assert "segment.ms=60000" in shown and "retention.ms=" not in shown
        brokers = configs("--describe", "--entity-type", "brokers", "--entity-name", "0", "--all")
        assert "broker.id=0" in brokers and "listeners=PLAINTEXT://127.0.0.1:0" in brokers

        topics("--alter", "--topic", topic_name, "--partitions", "4")
        assert len(http.admin.describe_topic(topic_name)["partitions"]) == 4

        topics("--delete", "--topic", topic_name)
        assert topic_name not in http.admin.list_topics()
