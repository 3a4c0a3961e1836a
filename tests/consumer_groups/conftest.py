"""Fixtures of the consumer group tests: one broker per module for the API tests (a broker start
costs seconds), with a short ``consumer.instance.timeout.ms``; each test uses its own topics and groups."""

from __future__ import annotations

import uuid

import pytest

from lakelog.client import LakelogClient
from tests.harness import BrokerProcess, new_chroot

INSTANCE_TIMEOUT_MS = 1500


@pytest.fixture(scope="module")
def gw(zookeeper, tmp_path_factory):
    """One broker process for the module (consumer.instance.timeout.ms = 1.5 s); stopped by pid at its end."""
    broker = BrokerProcess(zookeeper_connect=new_chroot(zookeeper.connect_string),
                           log_dirs=tmp_path_factory.mktemp("consumers") / "logs-0",
                           extra_env={"LAKELOG_CONSUMER_INSTANCE_TIMEOUT_MS": str(INSTANCE_TIMEOUT_MS)})
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def api(gw):
    with LakelogClient(gw.url) as c:
        yield c


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"

