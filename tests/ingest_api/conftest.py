"""Fixtures of the gateway tests: one real broker per test module (a broker start costs seconds),
in its own ZooKeeper chroot and log dir; every test works in its own topics."""

from __future__ import annotations

import httpx
import pytest

from lakelog.client import LakelogClient
from tests.harness import BrokerProcess, new_chroot


@pytest.fixture(scope="module")
def gw(zookeeper, tmp_path_factory):
    """One broker process for the module; stopped by pid at its end."""
    broker = BrokerProcess(zookeeper_connect=new_chroot(zookeeper.connect_string),
                           log_dirs=tmp_path_factory.mktemp("gateway") / "logs-0")
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def api(gw):
    with LakelogClient(gw.url) as c:
        yield c


@pytest.fixture
def http(gw):
    with httpx.Client(base_url=gw.url, timeout=30) as c:
        yield c
