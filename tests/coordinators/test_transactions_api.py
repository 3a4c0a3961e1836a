"""Transactional producers over HTTP on one real in-process broker and ZooKeeper, the gateway served by
uvicorn: ``POST /v3/clusters/{c}/producers`` with a ``transactional_id`` (InitProducerId: the same producer
id, epoch + 1, which fences), its timeout and id checks, ``GET /v3/clusters/{c}/transactions[/{id}]`` and
``lakelog transactions list|describe`` showing an open transaction with its partitions and age.

The open transaction is begun on the coordinator directly (``add_partitions``): produce requests join
transactions in a later part of the transactions work."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid

import httpx
import uvicorn

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.ingest_api.app import create_app
from lakelog.runtime.zookeeper_server import free_port


def _tid() -> str:
    return f"tx-{uuid.uuid4().hex[:8]}"


@contextlib.asynccontextmanager
async def _served_broker(zk_connect: str, log_dirs):
    """A started in-process broker with its gateway served by uvicorn on its port; yields (broker, http)."""
    port = free_port()
    broker = Broker(BrokerSettings(broker_id=0, port=port, log_dirs=log_dirs, zookeeper_connect=zk_connect,
                                   transaction_state_log_num_partitions=3))
    await broker.start()
    server = uvicorn.Server(uvicorn.Config(create_app(broker), host="127.0.0.1", port=port, lifespan="off",
                                           log_level="warning"))
    serving = asyncio.get_running_loop().create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            yield broker, http
    finally:
        server.should_exit = True
        await serving
        await broker.stop()


async def _lakelog(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "lakelog.cli", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


def test_init_fences_checks_its_input_and_describe_list_show_the_transaction(zk_connect, tmp_path):
    tid, other = _tid(), _tid()

    async def main() -> None:
        async with _served_broker(zk_connect, tmp_path / "logs") as (broker, http):
            producers = f"/v3/clusters/{broker.cluster_id}/producers"
            transactions = f"/v3/clusters/{broker.cluster_id}/transactions"
            # before any transactional producer: nothing listed, an unknown id is 404 / 40408
            assert (await http.get(transactions)).json()["data"] == []
            unknown = await http.get(f"{transactions}/{tid}")
            assert unknown.status_code == 404 and unknown.json()["error_code"] == 40408, unknown.text
            assert tid in unknown.json()["message"] and "transactional_id" in unknown.json()["message"]

            # InitProducerId twice: the same producer id, the epoch + 1 (fencing the first instance)
            first = await http.post(producers, json={"transactional_id": tid, "transaction_timeout_ms": 30_000})
            assert first.status_code == 200, first.text
            assert first.json()["producer_epoch"] == 0
            again = await http.post(producers, json={"transactional_id": tid})  # timeout: the default, 60000
            assert again.json() == {"producer_id": first.json()["producer_id"], "producer_epoch": 1}
            idempotent = (await http.post(producers, json={})).json()  # without one: as before
            assert idempotent["producer_epoch"] == 0 and idempotent["producer_id"] != first.json()["producer_id"]
            assert (await http.post(producers, json={"transactional_id": other})).json()["producer_epoch"] == 0

            # bad input: 400 saying what to fix
            for timeout_ms in (900_001, 0, -5):
                bad = await http.post(producers, json={"transactional_id": tid, "transaction_timeout_ms": timeout_ms})
                assert bad.status_code == 400 and bad.json()["error_code"] == 40011, bad.text
                assert "transaction.max.timeout.ms" in bad.json()["message"]
            empty = await http.post(producers, json={"transactional_id": ""})
            assert empty.status_code == 400 and empty.json()["error_code"] == 40012
            assert "must not be empty" in empty.json()["message"]
            assert (await http.get(f"{transactions}/{tid}")).json()["producer_epoch"] == 1  # nothing changed

            # an open transaction: state, partitions, start time and age
            pid = first.json()["producer_id"]
            await broker.transaction_state_manager.add_partitions(
                tid, producer_id=pid, producer_epoch=1, partitions=[("orders", 1), ("orders", 0), ("audit", 2)])
            await asyncio.sleep(0.05)
            described = await http.get(f"{transactions}/{tid}")
            assert described.status_code == 200, described.text
            d = described.json()
            assert (d["kind"], d["transactional_id"], d["state"], d["producer_id"], d["producer_epoch"],
                    d["transaction_timeout_ms"], d["coordinator_id"]) == (
                "KafkaTransaction", tid, "Ongoing", pid, 1, 60_000, 0)
            assert d["partitions"] == [{"topic_name": "audit", "partition_id": 2},
                                       {"topic_name": "orders", "partition_id": 0},
                                       {"topic_name": "orders", "partition_id": 1}]
            assert d["transaction_start_time_ms"] > 0 and d["transaction_duration_ms"] >= 50
            assert d["metadata"]["self"].endswith(f"{transactions}/{tid}")
            assert (await http.get(d["metadata"]["self"])).status_code == 200
            assert (await http.get(d["coordinator"]["related"])).status_code == 200

            listed = (await http.get(transactions)).json()
            assert listed["kind"] == "KafkaTransactionList"
            by_id = {t["transactional_id"]: t for t in listed["data"]}
            assert list(by_id) == sorted([tid, other])
            assert by_id[tid]["partitions"] == d["partitions"] and by_id[tid]["transaction_duration_ms"] >= 50
            assert (by_id[other]["state"], by_id[other]["partitions"], by_id[other]["transaction_duration_ms"]) == (
                "Empty", [], None)
            ongoing = (await http.get(transactions, params={"state": ["Ongoing", "PrepareCommit"]})).json()["data"]
            assert [t["transactional_id"] for t in ongoing] == [tid]
            bad_state = await http.get(transactions, params={"state": "Open"})
            assert bad_state.status_code == 400 and bad_state.json()["error_code"] == 40001

            # the command line shows the same
            b = ["--bootstrap-server", str(http.base_url)]
            code, out, err = await _lakelog("transactions", "list", *b)
            assert code == 0, err
            row = next(line for line in out.splitlines() if tid in line)
            assert "Ongoing" in row and "audit-2,orders-0,orders-1" in row and str(pid) in row
            assert any(other in line and "Empty" in line for line in out.splitlines())
            code, out, err = await _lakelog("transactions", "list", "--state", "Ongoing", *b)
            assert tid in out and other not in out
            code, out, err = await _lakelog("transactions", "describe", tid, *b)
            assert code == 0, err
            assert "Ongoing" in out and "audit-2,orders-0,orders-1" in out and "60000" in out
            code, out, err = await _lakelog("transactions", "describe", "no-such-id", *b)
            assert code == 1 and "Transactional id 'no-such-id' not found" in err

    asyncio.run(main())


def test_openapi_documents_the_transaction_routes(zk_connect, tmp_path):
    app = create_app(Broker(BrokerSettings(broker_id=0, port=free_port(), log_dirs=tmp_path,
                                           zookeeper_connect=zk_connect)))
    doc = app.openapi()
    request = doc["components"]["schemas"]["InitProducerIdRequest"]["properties"]
    assert "fencing" in request["transactional_id"]["description"]
    assert "40011" in request["transaction_timeout_ms"]["description"]
    init = doc["paths"]["/v3/clusters/{cluster_id}/producers"]["post"]
    assert {"400", "404", "409", "503"} <= set(init["responses"])
    listing = doc["paths"]["/v3/clusters/{cluster_id}/transactions"]["get"]
    assert listing["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/TransactionDataList"}
    describe = doc["paths"]["/v3/clusters/{cluster_id}/transactions/{transactional_id}"]["get"]
    assert "40408" in describe["responses"]["404"]["description"]
    data = doc["components"]["schemas"]["TransactionData"]["properties"]
    assert all(data[f].get("description") for f in ("state", "partitions", "transaction_duration_ms",
                                                     "transaction_start_time_ms", "coordinator_id"))
    assert not [p for p in doc["paths"] if p.startswith("/lakelog/v1/coordinator")]
