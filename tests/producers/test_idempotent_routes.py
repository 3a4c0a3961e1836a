"""Idempotent produce over HTTP on a real broker: every produce route deduplicates a retried request,
the refusals (fenced epoch, sequence too old, unknown or expired producer, bad headers, acks=0) write
nothing, and a retry after a restart (kill -9, and a clean stop with its snapshot) gets the original offsets."""

from __future__ import annotations

import base64
import time

import httpx
import pyarrow as pa
from deltalake import DeltaTable

from lakelog.client import LakelogClient
from lakelog.producers.producer_state import SNAPSHOT_DIR
from lakelog.protocol.arrow_ipc import arrow_ipc
from lakelog.protocol.media_types import ARROW_STREAM, BINARY_V2, JSON_V2
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.metadata import BROKERS_PATH
from tests.harness import wait_for


def new_producer(http: httpx.Client) -> tuple[int, int]:
    cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    body = http.post(f"/v3/clusters/{cluster}/producers", json={}).json()
    return body["producer_id"], body["producer_epoch"]


def log_end(http: httpx.Client, topic: str, partitions: int) -> list[int]:
    return [http.get(f"/topics/{topic}/partitions/{p}").json()["log_end_offset"] for p in range(partitions)]


def send(http: httpx.Client, route: str, topic: str, producer: ProducerBatch, *, acks: str = "all") -> list[tuple]:
    """One request of the route; returns its records' (partition, offset)."""
    headers = producer.headers()
    keyed = [{"key": f"k{i}", "value": {"n": i}} for i in range(6)]
    if route == "v2 topic json":
        resp = http.post(f"/topics/{topic}?acks={acks}", json={"records": keyed},
                         headers={**headers, "Content-Type": JSON_V2})
    elif route == "v2 topic keyless json":
        resp = http.post(f"/topics/{topic}?acks={acks}", json={"records": [{"value": i} for i in range(4)]},
                         headers={**headers, "Content-Type": JSON_V2})
    elif route == "v2 partition binary":
        records = [{"value": base64.b64encode(b"v%d" % i).decode()} for i in range(3)]
        resp = http.post(f"/topics/{topic}/partitions/1?acks={acks}", json={"records": records},
                         headers={**headers, "Content-Type": BINARY_V2})
    elif route == "arrow":
        body = arrow_ipc(pa.table({"value": [b"a", b"b", b"c", b"d", b"e"]}))
        resp = http.post(f"/topics/{topic}/partitions/0/records?acks={acks}", content=body,
                         headers={**headers, "Content-Type": ARROW_STREAM})
        assert resp.status_code == 200, resp.text
        answer = resp.json()
        return [(0, answer["base_offset"] + i) for i in range(answer["record_count"])]
    else:
        cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        resp = http.post(f"/v3/clusters/{cluster}/topics/{topic}/records", headers=headers,
                         json={"key": {"type": "JSON", "data": "k"}, "value": {"type": "JSON", "data": 1}})
        assert resp.status_code == 200, resp.text
        return [(resp.json()["partition_id"], resp.json()["offset"])]
    assert resp.status_code == 200, resp.text
    return [(o["partition"], o["offset"]) for o in resp.json()["offsets"]]


ROUTES = ["v2 topic json", "v2 topic keyless json", "v2 partition binary", "arrow", "v3 records"]


def test_every_produce_route_answers_a_retry_with_the_original_offsets(broker, tmp_path):
    with LakelogClient(broker.url) as api, httpx.Client(base_url=broker.url, timeout=30) as http:
        api.create_topic("idem", partitions=2, configs={"lake.commit.interval.ms": "200"})
        pid, epoch = new_producer(http)
        for seq, route in enumerate(ROUTES):
            producer = ProducerBatch(pid, epoch, seq)
            first = send(http, route, "idem", producer)
            ends = log_end(http, "idem", 2)
            for _ in range(2):
                assert send(http, route, "idem", producer) == first, route
            assert log_end(http, "idem", 2) == ends, f"{route}: a retry wrote records"
        # a request without the headers is produced as before (and twice when sent twice)
        plain = http.post("/topics/idem/partitions/0", json={"records": [{"value": 1}]},
                          headers={"Content-Type": JSON_V2})
        assert plain.status_code == 200
        total = sum(log_end(http, "idem", 2))
        assert total == 6 + 4 + 3 + 5 + 1 + 1
    broker.stop()  # the tail goes to Delta: the producer columns are there
    rows = pa.concat_tables(DeltaTable(str(tmp_path / "logs-0" / f"idem-{p}")).to_pyarrow_table(
        columns=["producer_id", "producer_epoch", "sequence"]) for p in range(2))
    assert rows["producer_id"].to_pylist().count(pid) == total - 1
    assert sorted(set(rows["sequence"].drop_null().to_pylist())) == list(range(len(ROUTES)))


def error_of(resp: httpx.Response) -> tuple[int, int]:
    return resp.status_code, resp.json()["error_code"]


def test_refused_requests_write_nothing(broker):
    with LakelogClient(broker.url) as api, httpx.Client(base_url=broker.url, timeout=30) as http:
        api.create_topic("refusals", partitions=1)
        pid, _ = new_producer(http)

        def post(headers: dict, *, acks: str = "all") -> httpx.Response:
            return http.post(f"/topics/refusals/partitions/0?acks={acks}", json={"records": [{"value": 1}]},
                             headers={**headers, "Content-Type": JSON_V2})
        for seq in range(6):
            assert post(ProducerBatch(pid, 3, seq).headers()).status_code == 200
        assert log_end(http, "refusals", 1) == [6]
        fenced = post(ProducerBatch(pid, 2, 6).headers())
        assert error_of(fenced) == (409, 40915) and "fenced" in fenced.json()["message"]
        assert fenced.headers["X-Lakelog-Retriable"] == "false"
        assert error_of(post(ProducerBatch(pid, 3, 0).headers())) == (409, 40916)  # 1..5 remembered
        unknown = post(ProducerBatch(2**50, 0, 0).headers())
        assert error_of(unknown) == (409, 40917) and "never handed out" in unknown.json()["message"]
        partial = {k: v for k, v in ProducerBatch(pid, 3, 9).headers().items() if "Sequence" not in k}
        assert error_of(post(partial)) == (400, 40009)
        assert error_of(post({**ProducerBatch(pid, 3, 9).headers(), "X-Lakelog-Sequence": "-1"})) == (400, 40009)
        assert error_of(post(ProducerBatch(pid, 3, 9).headers(), acks="0")) == (400, 40009)
        assert log_end(http, "refusals", 1) == [6]
        assert post(ProducerBatch(pid, 3, 5).headers()).json()["offsets"][0]["offset"] == 5  # still a duplicate


def test_an_expired_producer_is_refused(broker_factory):
    broker = broker_factory(extra_env={"LAKELOG_PRODUCER_ID_EXPIRATION_MS": "1000"})
    with LakelogClient(broker.url) as api, httpx.Client(base_url=broker.url, timeout=30) as http:
        api.create_topic("expiry", partitions=1)
        pid, epoch = new_producer(http)
        send(http, "arrow", "expiry", ProducerBatch(pid, epoch, 0))
        time.sleep(1.5)
        resp = http.post("/topics/expiry/partitions/0/records", content=arrow_ipc(pa.table({"value": [b"x"]})),
                         headers={**ProducerBatch(pid, epoch, 1).headers(), "Content-Type": ARROW_STREAM})
        assert error_of(resp) == (409, 40917) and "expired" in resp.json()["message"]
        assert log_end(http, "expiry", 1) == [5]


def test_a_retry_after_a_restart_gets_the_original_offsets(broker_factory, tmp_path, zk_client):
    env = {"LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": "2000"}  # the killed broker's registration expires soon
    broker = broker_factory(extra_env=env)
    port = broker.port
    with LakelogClient(broker.url) as api, httpx.Client(base_url=broker.url, timeout=30) as http:
        api.create_topic("restarts", partitions=2, configs={"lake.commit.interval.ms": "3600000"})
        pid, epoch = new_producer(http)
        sent = {seq: send(http, "v2 topic json", "restarts", ProducerBatch(pid, epoch, seq)) for seq in range(3)}
        ends = log_end(http, "restarts", 2)
    broker.kill()  # no snapshot, nothing flushed to Delta: the state comes from the segment tail
    wait_for(lambda: not zk_client.exists(f"{BROKERS_PATH}/0"), what="the killed broker's session ends")
    snapshots = tmp_path / "logs-0" / "restarts-0" / SNAPSHOT_DIR
    assert not snapshots.exists() or not list(snapshots.glob("*.snapshot"))
    for restart in ("after kill -9", "after a clean stop"):
        broker = broker_factory(port=port, extra_env=env)
        with httpx.Client(base_url=broker.url, timeout=30) as http:
            wait_for(lambda: log_end(http, "restarts", 2) == ends, what="the partitions are served again")
            for seq, original in sent.items():
                assert send(http, "v2 topic json", "restarts", ProducerBatch(pid, epoch, seq)) == original, restart
            assert log_end(http, "restarts", 2) == ends, restart
        broker.stop()
        assert list(snapshots.glob("*.snapshot")), "a clean stop snapshots the producer state"
