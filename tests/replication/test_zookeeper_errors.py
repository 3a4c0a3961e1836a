"""kazoo's "ZooKeeper is not reachable" errors become ZooKeeperUnavailableError where they enter the
replication layer (a real ZooKeeper; the connection is closed by stopping the real kazoo client)."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionClosedError

from lakelog.replication.cluster_views import controller_id
from lakelog.replication.errors import UnknownTopicError, ZooKeeperUnavailableError
from lakelog.replication.metadata import ClusterMetadata
from lakelog.runtime.zookeeper_server import ZooKeeperServer, free_port
from tests.harness import wait_for


def test_cluster_metadata_answers_a_lost_zookeeper_with_a_retriable_lakelog_error(zk_client):
    metadata = ClusterMetadata(zk_client)
    metadata.ensure_paths()
    assert metadata.topics() == []
    assert asyncio.run(controller_id(metadata)) is None
    with pytest.raises(UnknownTopicError):  # an answer of ZooKeeper (no znode), not an outage: as before
        metadata.topic("missing")

    zk_client.stop()  # from now on every kazoo call raises ConnectionClosedError
    for call in (metadata.topics, metadata.brokers, lambda: metadata.topic("orders"),
                 lambda: asyncio.run(controller_id(metadata))):
        with pytest.raises(ZooKeeperUnavailableError) as e:
            call()
        assert isinstance(e.value.__cause__, ConnectionClosedError)
        assert (e.value.http_status, e.value.error_code, e.value.retriable) == (503, 50304, True)
        assert "ConnectionClosedError" in e.value.message and "retry" in e.value.message


def test_a_suspended_connection_fails_at_once_instead_of_waiting_for_a_server(tmp_path):
    """kazoo queues the calls of a suspended client until a server answers; ClusterMetadata answers 50304 at
    once instead (no quorum: a topic creation or an ISR write must not wait for it)."""
    server = ZooKeeperServer(data_dir=tmp_path / "zookeeper", client_port=free_port(), tick_time_ms=500)
    server.start(timeout_s=60)
    client = KazooClient(hosts=server.connect_string, timeout=10.0)
    client.start(timeout=15)
    try:
        metadata = ClusterMetadata(client)
        metadata.ensure_paths()
        server.kill()
        wait_for(lambda: client.state == KazooState.SUSPENDED, what="the connection to drop")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(metadata.topics)
            with pytest.raises(ZooKeeperUnavailableError) as e:
                answer.result(timeout=30)  # before: blocked until the server came back (it is not started yet)
        assert (e.value.http_status, e.value.error_code, e.value.retriable) == (503, 50304, True)
        assert "not connected to ZooKeeper" in e.value.message
        server.start(timeout_s=60)  # back on the same session: calls go through again
        wait_for(lambda: client.state == KazooState.CONNECTED, what="the connection to come back")
        assert metadata.topics() == []
    finally:
        client.stop()
        client.close()
        server.stop()
