"""The gateway's HTTP answers under uvicorn as the broker runs it (server.uvicorn_config), in process
with a stand-in broker: a 500 closes its connection cleanly (a client reusing connections never sees
ECONNRESET), ``max.connections``, 405's ``Allow``, ``GET /brokers``, and what the OpenAPI document says
about statuses, media types and field ranges (issue 9, items 3, 5 and 7)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

import httpx
import pytest
import uvicorn

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.ingest_api.app import create_app
from lakelog.runtime.zookeeper_server import free_port
from lakelog.security.authentication import Authenticator
from lakelog.runtime.server import uvicorn_config
from tests.harness import wait_for


class _Metadata:
    async def brokers(self) -> dict:
        return {2: object(), 0: object(), 1: object()}


class _Requests:
    """Just enough of the request layer: topics fail (a planted bug), brokers answer."""

    def __init__(self) -> None:
        self.metadata = _Metadata()

    async def list_topics(self, *, context) -> dict:
        raise RuntimeError("planted bug")


class StandInBroker:
    """Just enough broker for ``GET /topics`` (fails: a planted bug) and ``GET /brokers``."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.requests = _Requests()
        self.authenticator = Authenticator()  # authentication.methods=none: every request is User:ANONYMOUS


@contextlib.contextmanager
def serve(tmp_path, **settings):
    """The gateway app around a :class:`StandInBroker` under uvicorn, on a free port (no lifespan)."""
    s = BrokerSettings.load(log_dirs=tmp_path, zookeeper_connect="127.0.0.1:1", port=free_port(), **settings)
    server = uvicorn.Server(uvicorn_config(create_app(StandInBroker(s)), s, log_level="critical", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, what="uvicorn started")
    try:
        yield s.advertised_url, server
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_500_closes_its_connection_and_the_next_request_on_a_reused_client_works(tmp_path):
    with serve(tmp_path) as (url, _), httpx.Client(base_url=url, timeout=10) as http:
        for _ in range(20):
            failed = http.get("/topics")
            assert failed.status_code == 500 and failed.json()["error_code"] == 50001
            assert failed.headers["connection"] == "close"
            ok = http.get("/brokers")  # no ECONNRESET: the client knew the connection was closed
            assert ok.status_code == 200 and ok.json() == {"brokers": [0, 1, 2]}
            assert ok.headers.get("connection") != "close"
            assert http.get("/brokers").status_code == 200  # kept alive after a good answer


def test_405_names_every_method_of_the_path_in_allow(tmp_path):
    with serve(tmp_path) as (url, _), httpx.Client(base_url=url, timeout=10) as http:
        resp = http.put("/topics/orders")  # GET in topics_api, POST in records_api
        assert resp.status_code == 405 and resp.json()["error_code"] == 405
        assert resp.headers["allow"] == "GET, POST"
        assert http.patch("/consumers/g/offsets").headers["allow"] == "GET, POST"
        assert http.post("/brokers").headers["allow"] == "GET"


def test_connections_beyond_max_connections_get_503_50305_then_service_resumes(tmp_path):
    with serve(tmp_path, max_connections=5) as (url, server):
        held = [socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) for _ in range(5)]
        try:
            wait_for(lambda: len(server.server_state.connections) >= 5, what="5 connections")
            resp = httpx.get(f"{url}/brokers", timeout=10)
            assert resp.status_code == 503 and resp.json()["error_code"] == 50305
            assert resp.headers["retry-after"] == "1" and resp.headers["x-lakelog-retriable"] == "true"
            assert resp.headers["connection"] == "close"
        finally:
            for s in held:
                s.close()
        wait_for(lambda: len(server.server_state.connections) == 0, what="connections closed")
        assert httpx.get(f"{url}/brokers", timeout=10).status_code == 200


def test_idle_and_slow_header_connections_are_closed_in_process(tmp_path):
    with serve(tmp_path, connections_max_idle_ms=300, request_header_timeout_ms=300) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        idle = socket.create_connection(("127.0.0.1", port))
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"GET /brokers HTTP/1.1\r\nHost: x\r\n")
        for s in (idle, slow):
            s.settimeout(5)
        started = time.monotonic()
        assert idle.recv(1024) == b""  # closed without an answer
        answer = b""
        while chunk := slow.recv(4096):
            answer += chunk
        assert time.monotonic() - started < 3
        assert answer.startswith(b"HTTP/1.1 408 ") and b'"error_code":40802' in answer
        idle.close()
        slow.close()


# -- the OpenAPI document ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    app = create_app(Broker(BrokerSettings.load(log_dirs=tmp_path_factory.mktemp("doc"),
                                                zookeeper_connect="127.0.0.1:1")))
    return app.openapi()


def _schema(doc, name):
    return doc["components"]["schemas"][name]


def test_the_document_says_400_for_parameters_and_never_fastapis_422_body(doc):
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            responses = op["responses"]
            assert "HTTPValidationError" not in json.dumps(responses), (method, path)
            if op.get("parameters"):
                assert "400" in responses, (method, path)
                assert responses["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
            if "requestBody" in op and method != "get":
                assert "422" in responses, (method, path)
    assert "404" in doc["paths"]["/consumers/{group}/lag"]["get"]["responses"]
    assert "40405" in doc["paths"]["/consumers/{group}/lag"]["get"]["responses"]["404"]["description"]
    assert doc["paths"]["/brokers"]["get"]["responses"]["200"]["content"]["application/vnd.kafka.v2+json"]["schema"][
        "$ref"].endswith("/BrokerList")


def test_the_document_states_the_ranges_the_server_enforces(doc):
    binary = _schema(doc, "BinaryRecord")["properties"]
    assert {"type": "string", "format": "byte"} in binary["key"]["anyOf"]
    assert {"type": "string", "format": "byte"} in binary["value"]["anyOf"]
    partition = next(s for s in binary["partition"]["anyOf"] if s.get("type") == "integer")
    assert partition["minimum"] == 0 and partition["maximum"] == 2**31 - 1
    v3 = _schema(doc, "V3ProduceRequest")["properties"]
    assert {"type": "string", "format": "date-time"} in v3["timestamp"]["anyOf"]
    v3_partition = next(s for s in v3["partition_id"]["anyOf"] if s.get("type") == "integer")
    assert v3_partition["minimum"] == 0 and v3_partition["maximum"] == 2**31 - 1
    offset = _schema(doc, "TopicPartitionOffset")["properties"]["offset"]
    # FastAPI writes maximum as a float (2**63 - 1 becomes 2**63): the format says int64 exactly
    assert offset["minimum"] == 0 and offset["maximum"] == float(2**63 - 1) and offset["format"] == "int64"
    assert _schema(doc, "CommitOffset")["properties"]["offset"]["format"] == "int64"
    assert partition["format"] == "int32"
    path_partition = next(p for p in doc["paths"]["/topics/{topic}/partitions/{partition}"]["get"]["parameters"]
                          if p["name"] == "partition")
    assert path_partition["schema"]["maximum"] == 2**31 - 1


def test_consumer_routes_document_rest_proxys_media_type(doc):
    create = doc["paths"]["/consumers/{group}"]["post"]["responses"]["200"]["content"]
    assert list(create) == ["application/vnd.kafka.v2+json"]
