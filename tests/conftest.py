"""Shared fixtures: one real ZooKeeper server per test session, a fresh chroot and tmp dir per test,
real broker processes stopped by pid."""

from __future__ import annotations

import uuid

import pytest

from lakelog.client import LakelogClient
from lakelog.replication.zookeeper_server import ZooKeeperServer, free_port
from tests.harness import BrokerProcess, new_chroot


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """A real standalone ZooKeeper server for the whole session; stopped by pid at the end."""
    server = ZooKeeperServer(data_dir=tmp_path_factory.mktemp("zookeeper"), client_port=free_port(), tick_time_ms=500)
    server.start(timeout_s=60)
    yield server
    server.stop()


@pytest.fixture
def zk_connect(zookeeper) -> str:
    """``host:port/chroot`` with a fresh chroot for this test."""
    return new_chroot(zookeeper.connect_string)


@pytest.fixture
def broker_factory(zk_connect, tmp_path):
    """Start brokers (child processes) for this test; all are stopped by pid at its end."""
    started: list[BrokerProcess] = []

    def start(broker_id: int = 0, **kwargs) -> BrokerProcess:
        b = BrokerProcess(zookeeper_connect=zk_connect, log_dirs=tmp_path / f"logs-{broker_id}",
                          broker_id=broker_id, **kwargs)
        started.append(b)
        return b.start()

    yield start
    errors = []
    for b in started:  # each in its own try: one failure must not leave the others running
        try:
            b.stop()
        except Exception as e:  # noqa: BLE001 - reported after every broker was stopped
            errors.append(e)
            try:
                b.kill()
            except Exception:  # noqa: BLE001
                pass
    if errors:
        raise errors[0]


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    """One running broker with a fresh chroot and log dir."""
    return broker_factory()


@pytest.fixture
def client(broker):
    with LakelogClient(broker.url) as c:
        yield c


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"
