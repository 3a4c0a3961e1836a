"""Shared fixtures: one real ZooKeeper server per test session, a fresh chroot and tmp dir per test,
real broker processes stopped by pid.

Every process these fixtures start dies with the test process (:func:`lakelog.processes.spawn`), even
when pytest itself is killed; they are started from the main thread or lakelog's spawner thread, both
of which live as long as the process.
"""

from __future__ import annotations

import os
import signal
import uuid

import pytest
from kazoo.client import KazooClient

from lakelog.client import LakelogClient
from lakelog.runtime.zookeeper_ensemble import ZooKeeperEnsemble
from lakelog.runtime.zookeeper_server import ZooKeeperServer, free_port
from tests.harness import BrokerProcess, Lake, new_chroot, pids_mentioning, wait_gone


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """A real standalone ZooKeeper server for the whole session; stopped by pid at the end."""
    server = ZooKeeperServer(data_dir=tmp_path_factory.mktemp("zookeeper"), client_port=free_port(), tick_time_ms=500)
    server.start(timeout_s=60)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def object_store(tmp_path_factory):
    """A real S3-compatible server (s3proxy, :class:`lakelog.runtime.object_store.ObjectStoreServer`) for the
    whole session, started at first use; stopped by pid at the end."""
    from lakelog.runtime.object_store import ObjectStoreServer

    server = ObjectStoreServer(data_dir=tmp_path_factory.mktemp("object-store"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def lake(object_store) -> Lake:
    """A fresh lake for this test: its own bucket on the session's object store (``lake.uri`` and
    ``lake.storage.*`` to give brokers, delta-rs storage options to read its tables)."""
    bucket = f"lake-{uuid.uuid4().hex[:16]}"
    object_store.create_bucket(bucket)
    return Lake(object_store, f"s3://{bucket}/lakelog")


@pytest.fixture
def zookeeper_ensemble(tmp_path):
    """A real 3-node ZooKeeper ensemble (500 ms tick: sessions of 1-10 s) of this test alone, its nodes under
    ``tmp_path/zookeeper/node-N``; the test may kill and restart its nodes. Every node is stopped by pid at
    the end."""
    ensemble = ZooKeeperEnsemble(data_dir=tmp_path / "zookeeper", nodes=3, tick_time_ms=500)
    ensemble.start(timeout_s=120)
    yield ensemble
    ensemble.stop()


@pytest.fixture
def zk_connect(zookeeper) -> str:
    """``host:port/chroot`` with a fresh chroot for this test."""
    return new_chroot(zookeeper.connect_string)


@pytest.fixture
def zk_client(zk_connect) -> KazooClient:
    """A started kazoo client on this test's chroot; stopped and closed at its end."""
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


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
def leftovers(tmp_path):
    """At the end of the test, SIGKILL by pid every process that still has this test's tmp dir in its
    command line (what a failing test would otherwise leave running); yields the tmp dir."""
    yield tmp_path
    left = pids_mentioning(os.path.join(tmp_path, ""))
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_gone(left, what="leftover processes")


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"
