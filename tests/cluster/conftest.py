"""Fixtures of the multi-broker tests."""

from __future__ import annotations

import pytest

from tests.cluster.test_replication import Zk


@pytest.fixture
def zk(zk_connect):
    """A test-side ZooKeeper client of this test's chroot, reading lakelog's metadata."""
    z = Zk(zk_connect)
    yield z
    z.close()
