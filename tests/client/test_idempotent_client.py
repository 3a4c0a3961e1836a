"""``LakelogClient`` as an idempotent producer against a real broker process: a producer id asked once and
lazily, a sequence per request in the three headers on every produce method, retries that repeat the
sequence (a connection dropped after the broker answered, a dead bootstrap server, a broker restarted
during the produce), and no headers with ``enable_idempotence=False``."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import httpx
import pyarrow as pa
import pytest
from kazoo.client import KazooClient

from lakelog.client import LakelogClient
from lakelog.producers.producer_ids import PRODUCER_ID_BLOCK_PATH
from lakelog.protocol.producer_headers import PRODUCER_ID_HEADER, SEQUENCE_HEADER, producer_batch_from_headers
from lakelog.runtime.zookeeper_server import free_port


class Recorder:
    """An httpx ``request`` event hook: every request the client sends (also the ones that fail)."""

    def __init__(self, client: LakelogClient) -> None:
        self.requests: list[httpx.Request] = []
        client.http.event_hooks["request"].append(self.requests.append)

    def paths(self) -> list[str]:
        return [f"{r.method} {r.url.path}" for r in self.requests]

    def produces(self) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == "POST" and r.url.path.startswith("/topics/")]

    def batches(self):
        return [producer_batch_from_headers(r.headers) for r in self.produces()]


class DropFirstProduceAnswer(httpx.BaseTransport):
    """Sends every request to the real broker, but the answer of the first produce request is lost (the
    connection breaks after the broker handled it): an ambiguous failure."""

    def __init__(self, before_first=None) -> None:
        self.inner = httpx.HTTPTransport()
        self.dropped = 0
        self.before_first = before_first

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        first = request.method == "POST" and request.url.path.startswith("/topics/") and not self.dropped
        if first and self.before_first is not None:
            self.dropped += 1
            self.before_first()
            return self.inner.handle_request(request)
        resp = self.inner.handle_request(request)
        if first:
            resp.read()
            resp.close()
            self.dropped += 1
            raise httpx.RemoteProtocolError("connection dropped after the broker answered", request=request)
        return resp

    def close(self) -> None:
        self.inner.close()


def _with_transport(client: LakelogClient, transport: httpx.BaseTransport) -> LakelogClient:
    client.http.close()
    client.http = httpx.Client(base_url=client.urls[0], timeout=30, transport=transport)
    return client


def _records(n: int) -> list[dict]:
    return [{"key": f"k{i}", "value": {"i": i}} for i in range(n)]


def test_every_produce_method_sends_the_headers(broker, topic_name):
    with LakelogClient(broker.url) as admin:
        admin.create_topic(topic_name, partitions=2)
    with LakelogClient(broker.url) as client:
        seen = Recorder(client)
        assert client.producer is not None and client.producer.producer_id is None
        client.produce_json(topic_name, _records(3))
        assert seen.paths()[:2] == ["GET /v3/clusters", f"POST /v3/clusters/{client.cluster_id}/producers"]
        client.produce_json(topic_name, _records(2), partition=1)
        client.produce_raw_json(topic_name, json.dumps({"records": _records(2)}).encode())
        client.produce_binary(topic_name, [(b"k", b"v")])
        client.produce_binary(topic_name, [(None, b"v")], partition=0)
        answer = client.produce_arrow(topic_name, 1, pa.table({"key": [b"a", b"b"], "value": [b"1", b"2"]}))
        assert answer["record_count"] == 2
        batches = seen.batches()
        assert [b.sequence for b in batches] == [0, 1, 2, 3, 4, 5]
        assert {(b.producer_id, b.producer_epoch) for b in batches} == {(client.producer.producer_id, 0)}
        assert sum("/producers" in p for p in seen.paths()) == 1  # asked once, on the first produce


def test_threads_sharing_a_client_ask_for_one_producer_id(broker, topic_name):
    with LakelogClient(broker.url) as client:
        client.create_topic(topic_name, partitions=3)
        seen = Recorder(client)
        threads = [threading.Thread(target=lambda: [client.produce_json(topic_name, _records(5)) for _ in range(5)])
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sum("/producers" in p for p in seen.paths()) == 1
        assert sorted(b.sequence for b in seen.batches()) == list(range(20))


def test_a_dropped_answer_is_retried_with_the_same_sequence(broker, topic_name):
    with LakelogClient(broker.url) as client:
        client.create_topic(topic_name, partitions=1)
        transport = DropFirstProduceAnswer()
        _with_transport(client, transport)
        seen = Recorder(client)
        answer = client.produce_json(topic_name, _records(10), partition=0)
        assert transport.dropped == 1 and len(answer["offsets"]) == 10
        first, retry = seen.produces()
        assert first.headers[SEQUENCE_HEADER] == retry.headers[SEQUENCE_HEADER] == "0"
        assert first.headers[PRODUCER_ID_HEADER] == retry.headers[PRODUCER_ID_HEADER]
        assert first.content == retry.content
        client.produce_json(topic_name, _records(1), partition=0)
        assert seen.batches()[-1].sequence == 1


def test_a_dropped_answer_is_written_once(broker, topic_name):
    """The broker remembers the request's sequence: the retry gets the original offsets, nothing new."""
    with LakelogClient(broker.url) as client:
        client.create_topic(topic_name, partitions=1)
        _with_transport(client, DropFirstProduceAnswer())
        answer = client.produce_json(topic_name, _records(10), partition=0)
        assert [o["offset"] for o in answer["offsets"]] == list(range(10))  # the original offsets
        assert client.partition_offsets(topic_name, 0)["end_offset"] == 10


def test_a_dead_bootstrap_server_is_skipped_with_the_same_sequence(broker, topic_name):
    with LakelogClient(broker.url) as admin:
        admin.create_topic(topic_name, partitions=1)
    with LakelogClient(f"127.0.0.1:{free_port()},{broker.url}") as client:
        seen = Recorder(client)
        client.produce_binary(topic_name, [(b"k", b"v")], partition=0)
        dead_port = int(client.urls[0].rsplit(":", 1)[1])
        assert [r.url.port for r in seen.produces()] == [dead_port, broker.port]
        assert [b.sequence for b in seen.batches()] == [0, 0]
        client.produce_binary(topic_name, [(b"k", b"v")], partition=0)  # goes on with the live server
        assert [b.sequence for b in seen.batches()] == [0, 0, 1]
        assert seen.produces()[-1].url.port == broker.port


def test_no_headers_without_idempotence(broker, topic_name):
    with LakelogClient(broker.url, enable_idempotence=False) as client:
        client.create_topic(topic_name, partitions=1)
        seen = Recorder(client)
        client.produce_json(topic_name, _records(2))
        client.produce_arrow(topic_name, 0, pa.table({"key": [b"a"], "value": [b"1"]}))
        assert client.producer is None
        assert not any("/producers" in p for p in seen.paths())
        assert all(not any(h.lower().startswith("x-lakelog-") for h in r.headers) for r in seen.produces())


def test_cli_produce_is_idempotent_unless_told(broker, topic_name):
    b = ["--bootstrap-server", broker.url]

    def block_exists() -> bool:
        zk = KazooClient(hosts=broker.zookeeper_connect)
        zk.start(timeout=15)
        try:
            return zk.exists(PRODUCER_ID_BLOCK_PATH) is not None
        finally:
            zk.stop()
            zk.close()

    def produce(*flags: str) -> str:
        return subprocess.run([sys.executable, "-m", "lakelog.cli", "produce", topic_name, *flags, *b],
                              input=b"a\nb\nc\n", capture_output=True, timeout=60, check=True).stderr.decode()

    with LakelogClient(broker.url) as admin:
        admin.create_topic(topic_name, partitions=1)
    assert "3 records produced" in produce("--no-idempotence")
    assert not block_exists()  # no producer id was asked for
    assert "3 records produced" in produce()
    assert block_exists()


@pytest.mark.cluster
def test_a_broker_restarted_during_a_produce(broker, topic_name):
    """The broker is stopped (SIGTERM, by pid) as the first try goes out and started again: the client
    retries with the same sequence until it answers (well within delivery.timeout.ms)."""
    with LakelogClient(broker.url) as admin:
        admin.create_topic(topic_name, partitions=1)
        admin.produce_json(topic_name, _records(1), partition=0)
    restart = threading.Thread(target=broker.start)

    def stop_and_restart() -> None:
        broker.stop()
        restart.start()

    with LakelogClient(broker.url) as client:
        seen = Recorder(_with_transport(client, DropFirstProduceAnswer(before_first=stop_and_restart)))
        answer = client.produce_json(topic_name, _records(5), partition=0)
        restart.join(timeout=90)
        assert len(answer["offsets"]) == 5 and all(o["error_code"] is None for o in answer["offsets"])
        batches = seen.batches()
        assert len(batches) >= 2 and {b.sequence for b in batches} == {0}
        assert len({b.producer_id for b in batches}) == 1
