"""``GET /metrics`` and ``GET /ready`` on a real two-broker cluster: a paused follower makes its partition
under-replicated on the leader (an ISR shrink) and back (an ISR expansion); a dead broker's only replica makes
the controller report an offline partition."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.test_replication import create_topic, produce, start_cluster, wait_full_isr, wait_znode_gone
from tests.harness import wait_for

pytestmark = pytest.mark.cluster


def _metric(url: str, name: str, **labels) -> float | None:
    """The value of the one sample ``name`` (with ``labels``) scraped from ``url``; None when absent."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = [s.value for f in text_string_to_metric_families(text) for s in f.samples
             if s.name == name and all(s.labels.get(k) == str(v) for k, v in labels.items())]
    return found[0] if found else None


def test_a_paused_follower_is_counted_under_replicated_and_back(broker_factory, zk):
    brokers = start_cluster(broker_factory, n=2)
    topic = "urp"
    assert create_topic(brokers[0].url, topic, rf=2).status_code == 201
    wait_full_isr(zk, topic, 1, 2)
    state = zk.state(topic)
    leader = brokers[state.leader]
    follower = brokers[1 - state.leader]
    assert produce(leader.url, topic, 0, [b"a"] * 3).status_code == 200
    assert produce(follower.url, topic, None, [b"a"] * 2).status_code == 200  # forwarded to the leader
    wait_for(lambda: httpx.get(f"{follower.url}/ready").status_code == 200, what="the follower ready")
    # the forwarded share is the leader's request, not a failed one of the follower's
    assert _metric(leader.url, "lakelog_produce_requests_total", topic=topic) == 2
    assert _metric(leader.url, "lakelog_messages_in_total", topic=topic) == 5
    for b in (leader, follower):
        assert _metric(b.url, "lakelog_failed_produce_requests_total", topic=topic) in (None, 0)
    assert _metric(leader.url, "lakelog_under_replicated_partitions") == 0
    shrinks = _metric(leader.url, "lakelog_isr_shrinks_total")

    follower.pause()
    try:
        wait_for(lambda: _metric(leader.url, "lakelog_under_replicated_partitions") == 1,
                 what="the leader to count the partition under-replicated")
        assert _metric(leader.url, "lakelog_isr_shrinks_total") == shrinks + 1
        assert produce(leader.url, topic, 0, [b"b"] * 5).status_code == 200  # acks=all with the ISR = [leader]
        assert _metric(leader.url, "lakelog_partition_high_watermark", topic=topic, partition=0) == 10
    finally:
        follower.resume()
    wait_for(lambda: _metric(leader.url, "lakelog_under_replicated_partitions") == 0, what="the ISR back to 2")
    assert _metric(leader.url, "lakelog_isr_expands_total") >= 1
    wait_for(lambda: _metric(follower.url, "lakelog_partition_log_end_offset", topic=topic, partition=0) == 10,
             what="the follower to catch up")
    assert httpx.get(f"{follower.url}/ready").status_code == 200
    # exactly one of the two is the active controller
    assert sorted(_metric(b.url, "lakelog_active_controller") for b in brokers.values()) == [0, 1]


def test_the_controller_counts_a_partition_whose_only_replica_died_offline(broker_factory, zk):
    brokers = start_cluster(broker_factory, n=2)
    topic = "offline"
    assert create_topic(brokers[0].url, topic, partitions=2, rf=1).status_code == 201
    wait_full_isr(zk, topic, 2, 1)
    controller = brokers[zk.controller()]
    other = brokers[1 - controller.broker_id]
    assert _metric(controller.url, "lakelog_offline_partitions") == 0
    other.kill()
    wait_znode_gone(zk, other.broker_id)
    wait_for(lambda: _metric(controller.url, "lakelog_offline_partitions") == 1,
             what="the controller to count the dead broker's partition offline")
