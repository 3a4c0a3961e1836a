"""``POST /v3/clusters/{c}/producers`` and ``lakelog producers init`` against a real broker process
(transactional producers in more detail: test_transactions_api.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from kazoo.client import KazooClient

from lakelog.client import GatewayError
from lakelog.producers.errors import InvalidTransactionTimeoutError
from lakelog.producers.producer_ids import PRODUCER_ID_BLOCK_PATH


def lakelog(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakelog.cli", *args], capture_output=True, timeout=60, check=check)


@pytest.fixture
def http(broker):
    with httpx.Client(base_url=broker.url, timeout=30) as c:
        yield c


def test_init_producer_id_answers_unique_ids(broker, http, client):
    path = f"/v3/clusters/{client.cluster_id}/producers"
    first = http.post(path, json={})
    second = http.post(path)  # no body at all: the same as {}
    assert first.status_code == second.status_code == 200, (first.text, second.text)
    assert set(first.json()) == {"producer_id", "producer_epoch"}
    assert first.json()["producer_epoch"] == second.json()["producer_epoch"] == 0
    ids = {first.json()["producer_id"], second.json()["producer_id"], client.init_producer_id()["producer_id"]}
    assert len(ids) == 3 and all(isinstance(i, int) and i >= 0 for i in ids)

    zk = KazooClient(hosts=broker.zookeeper_connect)
    zk.start(timeout=15)
    try:
        block = json.loads(zk.get(PRODUCER_ID_BLOCK_PATH)[0])
    finally:
        zk.stop()
        zk.close()
    assert block["version"] == 1 and block["broker"] == 0
    assert all(int(block["block_start"]) <= i <= int(block["block_end"]) for i in ids)


def test_transactional_ids_and_bad_requests(http, client):
    path = f"/v3/clusters/{client.cluster_id}/producers"
    first = http.post(path, json={"transactional_id": "tx-1"})
    assert first.status_code == 200, first.text
    assert client.init_producer_id(transactional_id="tx-1") == {"producer_id": first.json()["producer_id"],
                                                                 "producer_epoch": 1}
    refused = http.post(path, json={"transactional_id": "tx-1", "transaction_timeout_ms": 900_001})
    assert refused.status_code == 400 and refused.json()["error_code"] == 40011
    assert "transaction.max.timeout.ms" in refused.json()["message"]
    assert refused.headers["X-Lakelog-Retriable"] == "false"
    with pytest.raises(InvalidTransactionTimeoutError) as e:
        client.init_producer_id(transactional_id="tx-1", transaction_timeout_ms=0)
    assert isinstance(e.value, GatewayError) and e.value.error_code == 40011

    other = http.post("/v3/clusters/not-this-one/producers", json={})
    assert other.status_code == 404 and other.json()["error_code"] == 40409
    bad = http.post(path, json={"transactional_id": 5})
    assert bad.status_code == 422


def test_openapi_documents_the_route(http):
    doc = http.get("/openapi.json").json()
    op = doc["paths"]["/v3/clusters/{cluster_id}/producers"]["post"]
    ok = op["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/InitProducerIdResponse"}
    assert {"400", "404", "422", "503"} <= set(op["responses"])
    assert all(code in op["responses"]["400"]["description"] for code in ("40011", "40012"))
    schema = doc["components"]["schemas"]["InitProducerIdResponse"]
    assert schema["required"] == ["producer_id", "producer_epoch"]
    assert schema["properties"]["producer_id"]["format"] == "int64"
    assert "#/components/schemas/InitProducerIdRequest" in str(op["requestBody"])
    assert "transactional_id" in doc["components"]["schemas"]["InitProducerIdRequest"]["properties"]
    assert all(code in doc["paths"]["/topics/{topic}"]["post"]["responses"]["400"]["description"]
               for code in ("40009", "40011"))


def test_cli_producers_init(broker):
    b = ["--bootstrap-server", broker.url]
    answers = [json.loads(lakelog("producers", "init", *b).stdout) for _ in range(2)]
    assert [set(a) for a in answers] == [{"producer_id", "producer_epoch"}] * 2
    assert answers[0]["producer_id"] != answers[1]["producer_id"]
    assert answers[0]["producer_epoch"] == 0
    transactional = [json.loads(lakelog("producers", "init", "--transactional-id", "tx-1", *b).stdout)
                     for _ in range(2)]
    assert transactional[1] == {"producer_id": transactional[0]["producer_id"], "producer_epoch": 1}
    refused = lakelog("producers", "init", "--transactional-id", "tx-1", "--transaction-timeout-ms", "0", *b,
                      check=False)
    assert refused.returncode == 1 and "transaction.max.timeout.ms" in refused.stderr.decode()
    alone = lakelog("producers", "init", "--transaction-timeout-ms", "1000", *b, check=False)
    assert alone.returncode == 1 and "needs --transactional-id" in alone.stderr.decode()
