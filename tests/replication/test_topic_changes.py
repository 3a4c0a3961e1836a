"""Topic changes on a running cluster: altering configs and adding partitions in ZooKeeper (a real
ZooKeeper chroot per test), and a running broker taking a config change without a restart."""

from __future__ import annotations

import httpx
import pytest

from lakelog.client import LakelogClient
from lakelog.errors import ConfigError
from lakelog.replication.errors import InvalidPartitionsError, InvalidReplicationFactorError, UnknownTopicError
from lakelog.replication.metadata import BrokerInfo, ClusterMetadata, TopicMetadata
from tests.harness import wait_for


@pytest.fixture
def meta(zk) -> ClusterMetadata:
    """Cluster metadata with three registered (fake) brokers 0, 1, 2."""
    m = ClusterMetadata(zk)
    m.ensure_paths()
    for b in range(3):
        m.register_broker(BrokerInfo(b, "127.0.0.1", 9000 + b))
    return m


def test_alter_sets_and_deletes_configs_with_a_version_check(meta, topic_name):
    created = meta.create_topic(topic_name, partitions=2, replication_factor=2,
                                configs={"retention.ms": "3600000", "cleanup.policy": "delete"})
    altered = meta.alter_topic_configs(topic_name, set={"max.message.bytes": "2000", "cleanup.policy": "delete, compact"},
                                       delete=["retention.ms"])
    stored = meta.topic(topic_name)
    # normalised values, the deleted config gone (back to its default), assignment untouched
    assert stored.configs == {"cleanup.policy": "compact,delete", "max.message.bytes": "2000"}
    assert stored == altered and stored.version == altered.version == created.version + 1
    assert stored.replicas == created.replicas and stored.topic_id == created.topic_id
    assert stored.config.retention_ms == 604800000 and stored.config.max_message_bytes == 2000
    # deleting a known config that is not set changes nothing (and writes nothing)
    assert meta.alter_topic_configs(topic_name, delete=["segment.ms"]).configs == stored.configs
    assert meta.topic(topic_name).version == stored.version


@pytest.mark.parametrize("change, named", [
    ({"set": {"retention.mss": "1"}}, "retention.mss"),
    ({"set": {"max.message.bytes": "0"}}, "max.message.bytes"),
    ({"set": {"cleanup.policy": "sometimes"}}, "cleanup.policy"),
    ({"delete": ["no.such.config"]}, "no.such.config"),
    ({"set": {"retention.ms": "1"}, "delete": ["retention.ms"]}, "retention.ms"),
])
def test_bad_alters_are_refused_naming_the_key_and_write_nothing(meta, topic_name, change, named):
    meta.create_topic(topic_name, partitions=1, replication_factor=1, configs={"retention.ms": "3600000"})
    before = meta.topic(topic_name)
    with pytest.raises(ConfigError, match=f"'{named}'") as e:
        meta.alter_topic_configs(topic_name, set={"segment.ms": "1000", **change.get("set", {})},
                                 delete=change.get("delete"))
    assert e.value.error_code == 40003 and e.value.http_status == 400
    after = meta.topic(topic_name)
    assert after.configs == before.configs and after.version == before.version


def test_validate_only_writes_nothing_and_unknown_topics_are_refused(meta, topic_name):
    meta.create_topic(topic_name, partitions=1, replication_factor=1)
    checked = meta.alter_topic_configs(topic_name, set={"retention.ms": "1000"}, validate_only=True)
    assert checked.configs == {"retention.ms": "1000"}
    assert meta.topic(topic_name).configs == {}
    with pytest.raises(UnknownTopicError):
        meta.alter_topic_configs("no-such-topic", set={"retention.ms": "1000"})
    with pytest.raises(UnknownTopicError):
        meta.add_partitions("no-such-topic", partitions_count=3)


def test_a_concurrent_change_is_retried_not_lost(zk, meta, topic_name):
    meta.create_topic(topic_name, partitions=1, replication_factor=1)
    other = ClusterMetadata(zk)
    raced = []

    class Racing(ClusterMetadata):
        def topic(self, name: str) -> TopicMetadata:
            read = super().topic(name)
            if not raced:  # another admin changes the topic between our read and our write
                raced.append(other.alter_topic_configs(name, set={"retention.ms": "5000"}))
            return read

    result = Racing(zk).alter_topic_configs(topic_name, set={"max.message.bytes": "4096"})
    assert result.configs == {"max.message.bytes": "4096", "retention.ms": "5000"}
    assert meta.topic(topic_name).configs == result.configs
    assert meta.topic(topic_name).version == 2  # two writes: the racer's, then ours on its version


def test_add_partitions_assigns_replicas_and_creates_their_states(meta):
    topic_name = "orders"  # a fixed name: creation starts its assignment at broker crc32(name) % 3 = 2
    created = meta.create_topic(topic_name, partitions=3, replication_factor=2, configs={"retention.ms": "3600000"})
    assert created.replicas == {0: [2, 0], 1: [0, 1], 2: [1, 2]}
    grown = meta.add_partitions(topic_name, partitions_count=7)
    stored = meta.topic(topic_name)
    assert stored == grown and stored.partitions_count == 7 and stored.version == created.version + 1
    assert {p: stored.replicas[p] for p in range(3)} == created.replicas  # old partitions untouched
    assert stored.configs == created.configs and stored.topic_id == created.topic_id
    # Kafka's pattern continued from partition 0's first replica (broker 2): leaders go on round the
    # brokers, and after every 3 partitions the followers shift by one more
    assert stored.replicas == {0: [2, 0], 1: [0, 1], 2: [1, 2], 3: [2, 1], 4: [0, 2], 5: [1, 0], 6: [2, 0]}
    for p in range(3, 7):
        replicas = stored.replicas[p]
        assert len(set(replicas)) == 2
        state = meta.partition_state(topic_name, p)
        assert (state.leader, state.leader_epoch, state.isr) == (replicas[0], 0, replicas)


def test_partitions_are_never_fewer(meta, topic_name):
    meta.create_topic(topic_name, partitions=3, replication_factor=1)
    with pytest.raises(InvalidPartitionsError,
                       match=r"^Topic currently has 3 partitions, which is higher than the requested 2\.$") as e:
        meta.add_partitions(topic_name, partitions_count=2)
    assert e.value.error_code == 40005
    with pytest.raises(InvalidPartitionsError, match="already has 3 partitions"):
        meta.add_partitions(topic_name, partitions_count=3)
    with pytest.raises(InvalidPartitionsError, match="between 1 and 10000"):
        meta.add_partitions(topic_name, partitions_count=10_001)
    with pytest.raises(InvalidPartitionsError, match="At most 1000 partitions can be added at a time"):
        meta.add_partitions(topic_name, partitions_count=1004)  # more would exceed one ZooKeeper request
    assert meta.topic(topic_name).partitions_count == 3
    assert meta.add_partitions(topic_name, partitions_count=4, validate_only=True).partitions_count == 4
    assert meta.topic(topic_name).partitions_count == 3


def test_the_most_partitions_added_at_once_fit_one_zookeeper_request(meta):
    name = "t" * 249  # the longest topic name: the longest znode paths
    meta.create_topic(name, partitions=1, replication_factor=3)
    assert meta.add_partitions(name, partitions_count=1001).partitions_count == 1001
    assert meta.partition_state(name, 1000).isr == meta.topic(name).replicas[1000]


def test_add_partitions_needs_enough_live_brokers(zk, meta, topic_name):
    meta.create_topic(topic_name, partitions=1, replication_factor=3)
    zk.delete("/lakelog/brokers/ids/2")  # broker 2 is gone
    with pytest.raises(InvalidReplicationFactorError):
        meta.add_partitions(topic_name, partitions_count=2)
    assert meta.topic(topic_name).partitions_count == 1


# -- a running broker ------------------------------------------------------------------------------

def _partition(url: str, topic: str, p: int = 0) -> dict:
    return httpx.get(f"{url}/topics/{topic}/partitions/{p}", timeout=30).json()


def test_a_running_broker_applies_a_config_change_to_its_open_logs(broker, topic_name):
    """``lake.commit.interval.ms`` is read by the partition log itself: an hour means the segment tail
    stays out of Delta; altered to 0 the open log commits its tail to the Delta table (no restart)."""
    with LakelogClient(broker.url) as client:
        client.create_topic(topic_name, partitions=1, configs={"lake.commit.interval.ms": "3600000"})
        client.produce_binary(topic_name, [(b"k", b"v%d" % i) for i in range(5)], partition=0)
        before = _partition(broker.url, topic_name)
        assert before["log_end_offset"] == 5 and before["lake_end_offset"] == 0
        client.alter_topic_configs(topic_name, set={"lake.commit.interval.ms": "0"})
        wait_for(lambda: _partition(broker.url, topic_name)["lake_end_offset"] == 5, what="the tail in Delta")
        client.produce_binary(topic_name, [(b"k", b"after")], partition=0)  # a Delta commit per append now
        assert _partition(broker.url, topic_name)["lake_end_offset"] == 6
        assert client.topic_configs(topic_name)["lake.commit.interval.ms"]["value"] == "0"
