"""kazoo's "ZooKeeper is not reachable" errors become ZooKeeperUnavailableError where they enter the
replication layer (a real ZooKeeper; the connection is closed by stopping the real kazoo client)."""

from __future__ import annotations

import asyncio

import pytest
from kazoo.exceptions import ConnectionClosedError

from lakelog.replication.cluster_views import controller_id
from lakelog.replication.errors import UnknownTopicError, ZooKeeperUnavailableError
from lakelog.replication.metadata import ClusterMetadata


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
