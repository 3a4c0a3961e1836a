"""A follower catches up on a log its leader compacted (offset gaps), on real brokers and ZooKeeper.

Kafka's followers replicate compacted segments as they are: the batches keep their offsets, gaps
included. Here: two brokers, a compacted topic of replication factor 2; the follower is stopped, keyed
records are produced and the leader's log cleaner leaves gaps in its table; the follower comes back,
fetches the gapped range, rejoins the ISR and its table holds exactly the leader's offsets.

Short settings keep it fast: ``log.retention.check.interval.ms`` 300 ms (the cleaner's round),
``lake.commit.interval.ms`` 200 ms, ``min.cleanable.dirty.ratio`` 0.01, ``segment.bytes`` 4 KiB.
"""

from __future__ import annotations

import pytest

from tests.cluster.test_replication import FAST, create_topic, partition_info, produce, wait_full_isr, wait_znode_gone
from tests.harness import read_partition, table_offsets
from tests.harness import wait_for as wait_until

pytestmark = pytest.mark.cluster

LIFECYCLE = {**FAST, "LAKELOG_LOG_RETENTION_CHECK_INTERVAL_MS": "300"}
CONFIGS = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "lake.commit.interval.ms": "200",
           "segment.bytes": "4096", "lake.vacuum.retention.ms": "0", "min.insync.replicas": "1"}
KEYS = [b"k%d" % i for i in range(7)]


def offsets_of(broker, topic: str) -> list[int] | None:
    """The offsets of a replica's Delta table; None while a VACUUM (retention 0 here) removes a file under it."""
    try:
        return table_offsets(str(broker.log_dirs / f"{topic}-0"))
    except Exception:  # noqa: BLE001 - the next poll reads the new version
        return None


def test_a_follower_replicates_the_gaps_its_leader_compacted(broker_factory, zk, topic_name):
    brokers = {i: broker_factory(broker_id=i, extra_env=LIFECYCLE) for i in range(2)}
    assert create_topic(brokers[0].url, topic_name, rf=2, configs=CONFIGS).status_code == 201
    wait_full_isr(zk, topic_name, 1, 2)
    state = zk.state(topic_name)
    leader, follower = brokers[state.leader], brokers[1 - state.leader]
    assert produce(leader.url, topic_name, 0, [b"a-%d" % i for i in range(7)], keys=KEYS).status_code == 200
    wait_until(lambda: offsets_of(follower, topic_name) == list(range(7)), what="the follower's first flush")

    follower.kill()
    wait_until(lambda: zk.state(topic_name).isr == [leader.broker_id], what="the ISR to shrink")
    for batch in range(10):  # 70 records on 7 keys: the cleaner keeps the latest of each
        values = [b"b-%d-%d" % (batch, i) for i in range(len(KEYS))]
        assert produce(leader.url, topic_name, 0, values, keys=KEYS, acks="1").status_code == 200
    end = 77
    wait_until(lambda: partition_info(leader.url, topic_name, 0)["log_end_offset"] == end, what="the leader's LEO")
    latest = list(range(end - len(KEYS), end))

    def cleaned() -> bool:
        got = offsets_of(leader, topic_name)
        return got is not None and got[-len(KEYS):] == latest and len(got) < end // 2
    wait_until(cleaned, what="the leader's cleaner to leave gaps")
    gapped = offsets_of(leader, topic_name)

    wait_znode_gone(zk, follower.broker_id)  # its killed session's registration, else the restart is refused
    follower.start()
    wait_full_isr(zk, topic_name, 1, 2)
    assert partition_info(follower.url, topic_name, 0)["log_end_offset"] == end
    # the follower's table holds what the leader's holds (its own cleaner may clean it, to the same end)
    wait_until(lambda: offsets_of(follower, topic_name) == offsets_of(leader, topic_name),
               what="the follower's table to hold the leader's offsets")
    assert set(offsets_of(follower, topic_name)) <= set(gapped) | set(range(7))

    # it goes on replicating what follows, and leads with it
    assert produce(leader.url, topic_name, 0, [b"c-%d" % i for i in range(3)], keys=KEYS[:3]).status_code == 200
    wait_until(lambda: (offsets_of(follower, topic_name) or [None])[-1] == end + 2, what="the next records")
    leader.kill()
    wait_until(lambda: zk.state(topic_name).leader == follower.broker_id, what="the follower to lead")
    records = read_partition(follower.url, topic_name, 0)
    by_key = {r["key"]: r["value"] for r in records}
    assert len(by_key) == len(KEYS)
    assert [r["offset"] for r in records][-3:] == [end, end + 1, end + 2]
