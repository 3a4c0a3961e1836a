"""The ``lakelog`` command against a real broker: topics, produce from stdin, consume."""

from __future__ import annotations

import subprocess
import sys


def lakelog(*args: str, input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakelog.cli", *args], input=input, capture_output=True,
                          timeout=60, check=check)


def test_topics_produce_consume_round_trip(broker, topic_name):
    b = ["--bootstrap-server", broker.url]
    out = lakelog("topics", "create", topic_name, "--partitions", "2", "--config", "retention.ms=3600000", *b)
    assert f"Created topic {topic_name}" in out.stdout.decode()
    assert topic_name in lakelog("topics", "list", *b).stdout.decode().split()

    lines = "".join(f"k{i % 3}:value {i}\n" for i in range(50)).encode()
    produced = lakelog("produce", topic_name, "--key-separator", ":", *b, input=lines)
    assert "50 records produced" in produced.stderr.decode()

    described = lakelog("topics", "describe", topic_name, *b).stdout.decode()
    assert "retention.ms=3600000" in described and "PartitionCount: 2" in described

    consumed = lakelog("consume", topic_name, "--from-beginning", "--print-key", "--key-separator", ":", *b)
    got = sorted(consumed.stdout.decode().splitlines())
    assert got == sorted(f"k{i % 3}:value {i}" for i in range(50))
    assert "Processed a total of 50 messages" in consumed.stderr.decode()
    # the same key always lands on the same partition, so per key the order is the produce order
    for key in ("k0", "k1", "k2"):
        mine = [line for line in consumed.stdout.decode().splitlines() if line.startswith(key + ":")]
        assert mine == [f"{key}:value {i}" for i in range(50) if f"k{i % 3}" == key]


def test_cli_errors_are_clear(broker, topic_name):
    b = ["--bootstrap-server", broker.url]
    missing = lakelog("topics", "describe", "no-such-topic", *b, check=False)
    assert missing.returncode == 1
    assert "Topic 'no-such-topic' not found" in missing.stderr.decode()
    bad = lakelog("topics", "create", topic_name, "--config", "retention.mss=1", *b, check=False)
    assert bad.returncode == 1 and "unknown config 'retention.mss'" in bad.stderr.decode()


def test_topics_alter_configs_and_partitions(broker, topic_name):
    b = ["--bootstrap-server", broker.url]
    lakelog("topics", "create", topic_name, "--partitions", "2", "--config", "retention.ms=3600000",
            "--config", "segment.ms=60000", *b)
    out = lakelog("topics", "alter", topic_name, "--config", "max.message.bytes=2000", "--config",
                  "cleanup.policy=compact,delete", "--delete-config", "retention.ms", "--partitions", "4", *b)
    text = out.stdout.decode()
    assert f"Altered configs of topic {topic_name}" in text and f"Topic {topic_name} has 4 partitions now" in text

    described = lakelog("topics", "describe", topic_name, *b).stdout.decode()
    assert "PartitionCount: 4" in described
    assert "max.message.bytes=2000" in described and "cleanup.policy=compact,delete" in described
    assert "retention.ms=604800000" in described and "segment.ms=60000" in described  # deleted: the default

    bad = lakelog("topics", "alter", topic_name, "--config", "retention.mss=1", "--config", "segment.ms=1", *b,
                  check=False)
    assert bad.returncode == 1 and "unknown config 'retention.mss'" in bad.stderr.decode()
    both = lakelog("topics", "alter", topic_name, "--config", "segment.ms=1", "--delete-config", "segment.ms", *b,
                   check=False)
    assert both.returncode == 1 and "config 'segment.ms' is both set and deleted" in both.stderr.decode()
    twice = lakelog("topics", "alter", topic_name, "--delete-config", "segment.ms", "--delete-config", "segment.ms",
                    *b, check=False)
    assert twice.returncode == 1 and "config 'segment.ms' appears more than once" in twice.stderr.decode()
    fewer = lakelog("topics", "alter", topic_name, "--partitions", "3", *b, check=False)
    assert fewer.returncode == 1
    assert "Topic currently has 4 partitions, which is higher than the requested 3." in fewer.stderr.decode()
    nothing = lakelog("topics", "alter", topic_name, *b, check=False)
    assert nothing.returncode == 1 and "nothing to alter" in nothing.stderr.decode()
    assert "segment.ms=60000" in lakelog("topics", "describe", topic_name, *b).stdout.decode()  # unchanged
