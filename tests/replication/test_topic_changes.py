"""Topic changes on a running cluster: altering configs and adding partitions in ZooKeeper (a real
ZooKeeper chroot per test), and a running broker taking a config change without a restart."""

from __future__ import annotations

import asyncio
import threading
import types

import httpx
import pytest

from lakelog.client import LakelogClient
from lakelog.errors import ConfigError
from lakelog.replication.errors import InvalidPartitionsError, InvalidReplicationFactorError, UnknownTopicError
from lakelog.replication.metadata import BrokerInfo, ClusterMetadata, TopicMetadata
from lakelog.replication.topic_changes import TopicChanges
from lakelog.replication.topic_configs import DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, altered_configs
from tests.harness import wait_for, wait_for_async


def _cluster(zk_client, **kwargs) -> ClusterMetadata:
    """Cluster metadata with three registered (fake) brokers 0, 1, 2."""
    m = ClusterMetadata(zk_client, **kwargs)
    m.ensure_paths()
    for b in range(3):
        m.register_broker(BrokerInfo(b, "127.0.0.1", 9000 + b))
    return m


@pytest.fixture
def meta(zk_client) -> ClusterMetadata:
    """Cluster metadata with three registered (fake) brokers 0, 1, 2."""
    return _cluster(zk_client)


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


def test_a_concurrent_change_is_retried_not_lost(zk_client, meta, topic_name):
    meta.create_topic(topic_name, partitions=1, replication_factor=1)
    other = ClusterMetadata(zk_client)
    raced = []

    class Racing(ClusterMetadata):
        def topic(self, name: str) -> TopicMetadata:
            read = super().topic(name)
            if not raced:  # another admin changes the topic between our read and our write
                raced.append(other.alter_topic_configs(name, set={"retention.ms": "5000"}))
            return read

    result = Racing(zk_client).alter_topic_configs(topic_name, set={"max.message.bytes": "4096"})
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


def test_add_partitions_needs_enough_live_brokers(zk_client, meta, topic_name):
    meta.create_topic(topic_name, partitions=1, replication_factor=3)
    zk_client.delete("/lakelog/brokers/ids/2")  # broker 2 is gone
    with pytest.raises(InvalidReplicationFactorError):
        meta.add_partitions(topic_name, partitions_count=2)
    assert meta.topic(topic_name).partitions_count == 1


def test_broker_defaults_are_not_stored_and_a_deleted_config_falls_back_to_them(zk_client, topic_name):
    """As Kafka: ``log.retention.ms`` (say) of the broker is the default of every topic that sets no
    ``retention.ms``, also after it is deleted; only what the user set is stored on the topic."""
    m = _cluster(zk_client, topic_defaults={"retention.ms": "3600000", "max.message.bytes": "5000"})
    created = m.create_topic(topic_name, partitions=1, replication_factor=1, configs={"retention.ms": "1000"})
    assert created.configs == {"retention.ms": "1000"}
    assert TopicMetadata.from_json(topic_name, zk_client.get(m.topic_path(topic_name))[0]).configs == {"retention.ms": "1000"}
    stored = m.topic(topic_name)
    assert stored.config.retention_ms == 1000 and stored.config.max_message_bytes == 5000

    altered = m.alter_topic_configs(topic_name, delete=["retention.ms"])
    assert altered.configs == {} and altered.config.retention_ms == 3600000  # the broker's, not 7 days
    stored = m.topic(topic_name)
    assert stored.configs == {} and stored.config.retention_ms == 3600000
    assert ClusterMetadata(zk_client).topic(topic_name).config.retention_ms == 604800000  # a broker without the setting

    retention = stored.config_entry("retention.ms")
    assert (retention.value, retention.is_default, retention.source) == ("3600000", False, STATIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", "3600000", STATIC_BROKER_CONFIG), ("retention.ms", "604800000", DEFAULT_CONFIG)]
    m.alter_topic_configs(topic_name, set={"max.message.bytes": "2000"})
    size = m.topic(topic_name).config_entry("max.message.bytes")
    assert (size.value, size.is_default, size.source) == ("2000", False, DYNAMIC_TOPIC_CONFIG)
    assert [(s.name, s.value, s.source) for s in size.synonyms] == [
        ("max.message.bytes", "2000", DYNAMIC_TOPIC_CONFIG), ("message.max.bytes", "5000", STATIC_BROKER_CONFIG),
        ("max.message.bytes", "1048588", DEFAULT_CONFIG)]
    segment = m.topic(topic_name).config_entry("segment.ms")
    assert (segment.is_default, segment.source) == (True, DEFAULT_CONFIG)


@pytest.mark.parametrize("changes, message", [
    ([("segment.ms", "SET", "1000"), ("segment.ms", "SET", "2000")], "'segment.ms' appears more than once"),
    ([("segment.ms", "DELETE", None), ("segment.ms", "DELETE", None)], "'segment.ms' appears more than once"),
    ([("retention.ms", "DELETE", None), ("retention.ms", "SET", "1")], "'retention.ms' is both set and deleted"),
    ([("retention.ms", "SET", None)], "'retention.ms' is set without a value"),
    ([("retention.ms", "APPEND", "1")], "'retention.ms': unknown operation 'APPEND'"),
])
def test_each_key_is_changed_once_per_alter(meta, topic_name, changes, message):
    """The metadata layer refuses what every caller (REST, CLI, client) could send; nothing is written."""
    with pytest.raises(ConfigError, match=message):
        altered_configs({}, changes)
    meta.create_topic(topic_name, partitions=1, replication_factor=1, configs={"retention.ms": "3600000"})
    with pytest.raises(ConfigError, match=message):
        meta.alter_topic_configs(topic_name, changes)
    assert meta.topic(topic_name).configs == {"retention.ms": "3600000"} and meta.topic(topic_name).version == 0
    changed = meta.alter_topic_configs(topic_name, [("segment.ms", "SET", "1000"), ("retention.ms", "DELETE", None)])
    assert changed.configs == {"segment.ms": "1000"} == meta.topic(topic_name).configs


def test_a_topic_watch_is_set_off_the_event_loop_and_ends_with_its_znode(zk_client, meta, topic_name):
    """kazoo's DataWatch reads its znode when it is set: never on the event loop. A deleted topic's
    watch ends (its session listener is removed), and a re-created topic gets a watch of its own."""
    created = meta.create_topic(topic_name, partitions=1, replication_factor=1)
    applied: list[tuple[str, dict]] = []

    class Recording(TopicChanges):
        async def apply(self, m: TopicMetadata) -> None:
            applied.append((m.topic_id, m.configs))

    reads: list[int] = []
    zk_get = zk_client.get

    def get(*args, **kwargs):
        reads.append(threading.get_ident())
        return zk_get(*args, **kwargs)

    zk_client.get = get  # type: ignore[method-assign]
    listeners = len(zk_client.state_listeners)

    async def wait(predicate, what: str) -> None:
        await wait_for_async(predicate, what=what, interval_s=0.05)

    async def main() -> None:
        changes = Recording(types.SimpleNamespace(zk=zk_client, metadata=meta, cache=None, broker_id=7))
        changes._loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        await changes.watch({topic_name: created})  # broker 7 replicates nothing: the topic znode only
        assert reads and loop_thread not in reads
        await wait(lambda: applied == [(created.topic_id, {})], "the first call")
        assert len(zk_client.state_listeners) == listeners + 1
        await changes.watch({topic_name: created})  # watched already: no second watch
        assert len(zk_client.state_listeners) == listeners + 1

        meta.alter_topic_configs(topic_name, set={"retention.ms": "1000"})
        await wait(lambda: applied[-1] == (created.topic_id, {"retention.ms": "1000"}), "the change")
        meta.delete_topic(topic_name)
        await wait(lambda: len(zk_client.state_listeners) == listeners, "the watch to end")
        again = meta.create_topic(topic_name, partitions=1, replication_factor=1)
        await asyncio.sleep(0.3)
        assert all(topic_id == created.topic_id for topic_id, _ in applied)  # the old watch is gone
        await changes.watch({topic_name: again})
        await wait(lambda: applied[-1] == (again.topic_id, {}), "the new topic's watch")
        changes.stop()

    asyncio.run(main())


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
        client.admin.alter_topic_configs(topic_name, set={"lake.commit.interval.ms": "0"})
        wait_for(lambda: _partition(broker.url, topic_name)["lake_end_offset"] == 5, what="the tail in Delta")
        client.produce_binary(topic_name, [(b"k", b"after")], partition=0)  # a Delta commit per append now
        assert _partition(broker.url, topic_name)["lake_end_offset"] == 6
        assert client.admin.topic_configs(topic_name)["lake.commit.interval.ms"]["value"] == "0"


def test_delete_tree_removes_a_subtree_in_batches(zk_client, monkeypatch):
    from lakelog.replication import metadata as metadata_module

    monkeypatch.setattr(metadata_module, "DELETE_TREE_BATCH", 3)  # several transactions
    for p in range(5):
        zk_client.ensure_path(f"/tree/partitions/{p}/state")
    zk_client.ensure_path("/keep")
    metadata_module.delete_tree(zk_client, "/tree")
    assert zk_client.exists("/tree") is None and zk_client.exists("/keep") is not None
    metadata_module.delete_tree(zk_client, "/tree")  # nothing there: no error
