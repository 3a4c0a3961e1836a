"""A broker restarted at once after kill -9 comes back (Kafka since KAFKA-7165): its new process waits for
the ZooKeeper session of the killed one to expire instead of exiting with "broker.id is already
registered"; a second live broker with the same id is still refused."""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient

from lakelog.client import LakelogClient
from lakelog.replication.metadata import BROKERS_PATH
from lakelog.runtime.broker_process import BrokerProcess
from tests.harness import read_partition

pytestmark = pytest.mark.cluster

#: zookeeper.session.timeout.ms of these brokers (the test ZooKeeper's tick of 500 ms allows 1 to 10 s)
SESSION_TIMEOUT_MS = 6000
ENV = {"LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS)}


def test_a_broker_restarted_within_a_second_of_kill_9_serves_within_the_session_timeout(
        broker_factory, zk_client, topic_name):
    broker = broker_factory(extra_env=ENV)
    with LakelogClient(broker.url) as client:
        client.create_topic(topic_name)
        client.produce_binary(topic_name, [(b"k", b"before the kill")])

    broker.kill()  # SIGKILL: its ZooKeeper session, and with it its registration, lives on for a while
    killed_at = time.monotonic()
    assert zk_client.exists(f"{BROKERS_PATH}/0") is not None, "the killed broker's registration is still there"
    broker.start(timeout_s=SESSION_TIMEOUT_MS / 1000 + 10)  # same id, port and log dir, started at once
    assert time.monotonic() - killed_at < SESSION_TIMEOUT_MS / 1000 + 10
    assert "waiting up to 6000 ms" in broker.log_tail(200)  # it said what it waited for

    with LakelogClient(broker.url) as client:
        assert client.produce_binary(topic_name, [(b"k", b"after the restart")])["offsets"][0]["offset"] == 1
    assert [r["offset"] for r in read_partition(broker.url, topic_name, 0)] == [0, 1]


def test_a_second_live_broker_with_the_same_id_is_refused(broker_factory, zk_connect, tmp_path):
    first = broker_factory(extra_env=ENV)
    zk = KazooClient(hosts=zk_connect)
    zk.start(timeout=15)
    try:
        owner = zk.exists(f"{BROKERS_PATH}/0").ephemeralOwner
        second = BrokerProcess(zookeeper_connect=zk_connect, log_dirs=tmp_path / "second", broker_id=0, extra_env=ENV)
        with pytest.raises(RuntimeError, match="exited with"):
            second.start(timeout_s=120)  # it waits one session timeout, then gives up
        assert "broker.id 0 is already registered by a live broker" in second.log_tail(200)
        assert zk.exists(f"{BROKERS_PATH}/0").ephemeralOwner == owner  # the first one's, untouched
    finally:
        zk.stop()
        zk.close()
    with LakelogClient(first.url) as client:
        assert client.cluster_id  # the first broker still serves
