"""Fixtures of the Kafka listener's tests: real broker processes with a Kafka listener on a free port
(``listeners=PLAINTEXT://127.0.0.1:0``), the endpoint each registered in ZooKeeper."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from kazoo.client import KazooClient

from lakelog.client import LakelogClient
from lakelog.runtime.broker_process import BrokerProcess
from tests.harness import new_chroot
from tests.cluster.test_replication import Zk

#: the listener every test broker opens (port 0: the system picks a free one, registered in ZooKeeper)
KAFKA_LISTENER_ENV = {"LAKELOG_LISTENERS": "PLAINTEXT://127.0.0.1:0"}


def kafka_bootstrap(zk_client, broker_id: int) -> str:
    """``host:port`` of broker ``broker_id``'s PLAINTEXT listener, as it registered it in ZooKeeper."""
    data = json.loads(zk_client.get(f"/lakelog/brokers/ids/{broker_id}")[0])
    (endpoint,) = [e for e in data["endpoints"] if e.startswith("PLAINTEXT://")]
    return endpoint.removeprefix("PLAINTEXT://")


@pytest.fixture
def kafka_broker(broker_factory, zk_client):
    """One broker process with a Kafka listener: ``(broker, "127.0.0.1:port")``."""
    broker = broker_factory(extra_env=dict(KAFKA_LISTENER_ENV))
    return broker, kafka_bootstrap(zk_client, 0)


@pytest.fixture
def kafka_topic(kafka_broker, topic_name):
    """A 1-partition topic on :func:`kafka_broker`; its name."""
    broker, _ = kafka_broker
    with LakelogClient(broker.url) as c:
        c.create_topic(topic_name, partitions=1, replication_factor=1)
    return topic_name


@pytest.fixture
def zk(zk_connect):
    """A :class:`~tests.cluster.test_replication.Zk` reader of this test's chroot (partition states)."""
    z = Zk(zk_connect)
    yield z
    z.close()


@contextlib.contextmanager
def broker_of_its_own(zookeeper_connect: str, log_dirs: Path, env: dict[str, str] | None = None):
    """One broker with a Kafka listener on a fresh chroot of ``zookeeper_connect`` (a cluster of its own,
    for a module-scoped fixture or a second cluster): ``(broker, "127.0.0.1:port")``; stopped by pid at
    the end."""
    chroot = new_chroot(zookeeper_connect)
    broker = BrokerProcess(zookeeper_connect=chroot, log_dirs=log_dirs,
                           extra_env={**KAFKA_LISTENER_ENV, **(env or {})}).start()
    zk = KazooClient(hosts=chroot)
    try:
        zk.start(timeout=15)
        yield broker, kafka_bootstrap(zk, 0)
    finally:
        zk.stop()
        zk.close()
        broker.stop()
