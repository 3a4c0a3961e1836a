"""The watched partition states behind views of many partitions (a real ZooKeeper, one chroot per test):
the first read answers what one read per partition answers, a change reaches the cache by its watch, a
deleted topic leaves it, and a view of a deleted topic is UnknownTopicError."""

from __future__ import annotations

import asyncio

import pytest

from lakelog.replication.errors import UnknownTopicError
from lakelog.replication.metadata import BrokerInfo, ClusterMetadata, PartitionState
from lakelog.replication.partition_state_cache import PartitionStateCache
from tests.harness import wait_for


def _metadata(zk_client) -> ClusterMetadata:
    metadata = ClusterMetadata(zk_client)
    metadata.ensure_paths()
    for broker_id in (0, 1, 2):
        metadata.register_broker(BrokerInfo(broker_id=broker_id, host="127.0.0.1", port=9000 + broker_id))
    return metadata


def test_watched_states_follow_zookeeper(zk_client):
    metadata = _metadata(zk_client)
    metadata.create_topic("orders", partitions=40, replication_factor=2)
    cache = PartitionStateCache(metadata)
    partitions = list(range(40))

    first = asyncio.run(cache.states("orders", partitions))
    assert list(first) == partitions
    assert first == {p: metadata.partition_state("orders", p) for p in partitions}
    assert cache._armed == {("orders", p) for p in partitions}  # one watch a znode

    # a leader change and a shrunk ISR on some partitions reach the cache through the watches
    for p in range(0, 40, 3):
        old = metadata.partition_state("orders", p)
        metadata.set_partition_state("orders", p, PartitionState(old.isr[-1], old.leader_epoch + 1, old.isr[-1:],
                                                                 old.controller_epoch, old.version))
    expected = {p: metadata.partition_state("orders", p) for p in partitions}
    wait_for(lambda: asyncio.run(cache.states("orders", partitions)) == expected,
             what="the watched states to follow the changes")
    assert expected[3].leader_epoch == 1 and len(expected[3].isr) == 1 and expected[1].leader_epoch == 0
    assert cache._armed == {("orders", p) for p in partitions}  # re-armed, not doubled

    metadata.delete_topic("orders")
    wait_for(lambda: "orders" not in cache._states, what="the deleted topic to leave the cache")
    with pytest.raises(UnknownTopicError):
        asyncio.run(cache.states("orders", partitions))
    cache.stop()


def test_a_session_lost_empties_the_cache(zk_client):
    metadata = _metadata(zk_client)
    metadata.create_topic("events", partitions=3, replication_factor=1)
    cache = PartitionStateCache(metadata)
    asyncio.run(cache.states("events", [0, 1, 2]))
    assert set(cache._states["events"]) == {0, 1, 2}
    cache._on_connection_state("LOST")  # kazoo's KazooState.LOST: the session's watches are gone
    assert cache._states == {} and cache._armed == set()
    assert set(asyncio.run(cache.states("events", [0, 1, 2]))) == {0, 1, 2}  # read and watched again
    cache.stop()
