"""Group membership answers a ZooKeeper it cannot reach with lakelog's retriable
:class:`~lakelog.replication.errors.ZooKeeperUnavailableError`, never a raw kazoo error: a real ZooKeeper
server of this test's own, stopped by pid while a kazoo client is connected to it (the client's
connection retries are bounded, so it gives the connection up once the server is gone)."""

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException
from kazoo.retry import KazooRetry

from lakelog.consumer_groups.membership import GroupMembership
from lakelog.replication.errors import ZooKeeperUnavailableError
from lakelog.runtime.zookeeper_server import ZooKeeperServer, free_port


def test_membership_answers_a_stopped_zookeeper_with_a_retriable_lakelog_error(tmp_path):
    server = ZooKeeperServer(data_dir=tmp_path / "zookeeper", client_port=free_port(), tick_time_ms=500)
    server.start(timeout_s=60)
    zk = KazooClient(hosts=server.connect_string, timeout=5,
                     connection_retry=KazooRetry(max_tries=3, delay=0.1, max_delay=0.5))
    try:
        zk.start(timeout=15)
        membership = GroupMembership(zk, partition_counts=lambda topics: {t: 1 for t in topics})
        membership.join("g", "m1", topics=["orders"], assignor="range", broker_id=0, base_uri="http://b0")
        assert membership.groups_with_members() == ["g"]
        assert membership.rebalance("g").members == {"m1": [("orders", 0)]}

        lost = threading.Event()
        zk.add_listener(lambda state: lost.set() if state == KazooState.LOST else None)
        server.stop()  # SIGTERM to the server's pid
        assert lost.wait(60), "the client never gave up its connection to the stopped ZooKeeper"

        for call in (membership.groups_with_members, lambda: membership.members("g"),
                     lambda: membership.assignment("g"), lambda: membership.rebalance("g"),
                     lambda: membership.register_instance("g", "m2", broker_id=0, base_uri="http://b0"),
                     lambda: membership.join("g", "m2", topics=["orders"], assignor="range", broker_id=0,
                                             base_uri="http://b0")):
            with pytest.raises(ZooKeeperUnavailableError) as e:
                call()
            assert isinstance(e.value.__cause__, KazooException)
            assert (e.value.http_status, e.value.error_code, e.value.retriable) == (503, 50304, True)
    finally:
        zk.stop()
        zk.close()
        server.stop()
