"""How the gateway answers failures of the pieces under it: ZooKeeper loss is a retriable 503, a bug a 500.

The app is built around a real :class:`~lakelog.broker.Broker` (not started: nothing connects) whose
metadata read is made to fail the way kazoo fails when ZooKeeper is unreachable; no process is needed
to check the mapping.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from kazoo.exceptions import ConnectionLoss, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.ingest_api.app import create_app
from lakelog.ingest_api.deps import GatewayBroker


@pytest.fixture
def broker(tmp_path) -> Broker:
    return Broker(BrokerSettings.load(log_dirs=tmp_path, zookeeper_connect="127.0.0.1:1"))


def test_the_real_broker_has_the_gateway_surface(broker):
    assert isinstance(broker, GatewayBroker)


@pytest.mark.parametrize("failure", [ConnectionLoss, SessionExpiredError, KazooTimeoutError])
def test_zookeeper_loss_is_a_retriable_503(broker, failure):
    async def lost(name: str):
        raise failure("lost")

    broker.replica_manager.topic_fresh = lost  # type: ignore[method-assign]
    resp = TestClient(create_app(broker), raise_server_exceptions=False).get("/topics/orders")
    assert resp.status_code == 503, resp.text
    assert resp.json()["error_code"] == 50304
    assert failure.__name__ in resp.json()["message"] and "retry" in resp.json()["message"]
    assert resp.headers["X-Lakelog-Retriable"] == "true"


def test_an_unexpected_error_is_a_500_that_closes_the_connection(broker):
    async def bug(name: str):
        raise ZeroDivisionError("division by zero")

    broker.replica_manager.topic_fresh = bug  # type: ignore[method-assign]
    resp = TestClient(create_app(broker), raise_server_exceptions=False).get("/topics/orders")
    assert resp.status_code == 500
    assert resp.json() == {"error_code": 50001, "message": "Internal error: ZeroDivisionError: division by zero"}
    assert resp.headers["Connection"] == "close"
    assert resp.headers["X-Lakelog-Retriable"] == "false"
