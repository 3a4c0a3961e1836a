"""Idempotent produce across brokers: a request forwarded to its leader keeps its producer headers; after
a leader change the new leader (whose producer state came from replication) answers a retry with the
original offsets and writes nothing; and an idempotent client with retries streams 20,000+ keyed records
through SIGKILLs of leaders and of the controller with every acknowledged record exactly once, in order."""

from __future__ import annotations

import base64
import threading
import time
from collections import Counter

import httpx
import pytest

from lakelog.client import LakelogClient
from lakelog.protocol.media_types import JSON_V2
from lakelog.protocol.producer_headers import ProducerBatch
from tests.cluster.test_replication import FAST, create_topic, partition_info, wait_full_isr, wait_znode_gone
from tests.harness import NotLeaderAnswer, read_partition, wait_for

pytestmark = pytest.mark.cluster


def new_producer(url: str) -> tuple[int, int]:
    cluster = httpx.get(f"{url}/v3/clusters").json()["data"][0]["cluster_id"]
    body = httpx.post(f"{url}/v3/clusters/{cluster}/producers", json={}).json()
    return body["producer_id"], body["producer_epoch"]


def send(url: str, topic: str, producer: ProducerBatch, n: int = 5) -> list[tuple[int, int]]:
    resp = httpx.post(f"{url}/topics/{topic}", params={"acks": "all"}, timeout=20,
                      json={"records": [{"key": f"k{i}", "value": i} for i in range(n)]},
                      headers={**producer.headers(), "Content-Type": JSON_V2})
    assert resp.status_code == 200, resp.text
    offsets = resp.json()["offsets"]
    assert all(o.get("error_code") is None for o in offsets), offsets
    return [(o["partition"], o["offset"]) for o in offsets]


def test_a_retry_on_the_new_leader_and_through_a_forwarding_broker_writes_nothing(broker_factory, zk):
    brokers = {i: broker_factory(broker_id=i, extra_env=FAST) for i in range(2)}
    urls = {i: b.url for i, b in brokers.items()}
    assert create_topic(urls[0], "moves", partitions=1, rf=2).status_code == 201
    wait_full_isr(zk, "moves", 1, 2)
    leader = zk.state("moves", 0).leader
    other = 1 - leader
    pid, epoch = new_producer(urls[other])
    # seq 0 to the leader; seq 1 to the follower, which forwards it with its headers
    first = send(urls[leader], "moves", ProducerBatch(pid, epoch, 0))
    second = send(urls[other], "moves", ProducerBatch(pid, epoch, 1))
    assert send(urls[other], "moves", ProducerBatch(pid, epoch, 0)) == first  # forwarded retry: deduplicated
    assert send(urls[leader], "moves", ProducerBatch(pid, epoch, 1)) == second
    assert partition_info(urls[leader], "moves", 0)["log_end_offset"] == 10
    wait_for(lambda: partition_info(urls[other], "moves", 0).get("log_end_offset") == 10 or
             len(zk.state("moves", 0).isr) == 2, what="the follower caught up")

    brokers[leader].kill()
    wait_znode_gone(zk, leader)
    wait_for(lambda: zk.state("moves", 0).leader == other, what="the follower leads")
    for seq, original in ((0, first), (1, second)):
        assert send(urls[other], "moves", ProducerBatch(pid, epoch, seq)) == original
    info = partition_info(urls[other], "moves", 0)
    assert (info["log_end_offset"], info["high_watermark"]) == (10, 10)
    assert send(urls[other], "moves", ProducerBatch(pid, epoch, 2))[0][1] == 10  # a new request is written


class IdempotentStream(threading.Thread):
    """One idempotent client (retries on, every broker a bootstrap server) sending 25 keyed records a
    request, one request at a time; each value names the record (``r000123``), so duplicates and order
    are visible in the log."""

    def __init__(self, urls: list[str], topic: str) -> None:
        super().__init__(name="idempotent-producer", daemon=True)
        self.urls, self.topic = urls, topic
        self.acked: dict[bytes, tuple[int, int]] = {}  # value -> (partition, offset)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.tries: Counter[str] = Counter()  # sequence -> tries of the request

    def _count_try(self, request: httpx.Request) -> None:
        if "X-Lakelog-Sequence" in request.headers and request.url.path.startswith("/topics/"):
            self.tries[request.headers["X-Lakelog-Sequence"]] += 1

    def run(self) -> None:
        n = 0
        try:
            with LakelogClient(",".join(self.urls), timeout_s=10, delivery_timeout_ms=90_000) as client:
                client.http.event_hooks["request"].append(self._count_try)
                while not self.stop.is_set():
                    values = [b"r%06d" % (n + i) for i in range(BATCH)]
                    keys = [b"customer-%d" % ((n + i) % 1000) for i in range(BATCH)]
                    before = client.producer.next_sequence
                    answer = client.produce_binary(self.topic, list(zip(keys, values)))
                    assert client.producer.next_sequence == before + 1
                    for value, o in zip(values, answer["offsets"]):
                        assert o.get("error_code") is None, o
                        self.acked[value] = (o["partition"], o["offset"])
                    n += BATCH
        except BaseException as e:  # reported by the test
            self.error = e


BATCH = 25


def test_an_idempotent_client_writes_every_record_once_while_leaders_and_the_controller_die(
        broker_factory, zk, tmp_path):
    topic, partitions = "payments", 3
    brokers = {i: broker_factory(broker_id=i, extra_env=FAST) for i in range(3)}
    urls = {i: b.url for i, b in brokers.items()}
    assert create_topic(urls[0], topic, partitions=partitions, rf=3,
                        configs={"min.insync.replicas": "2"}).status_code == 201
    wait_full_isr(zk, topic, partitions, 3)
    stream = IdempotentStream(list(urls.values()), topic)
    stream.start()

    def progress(n: int) -> None:
        target = len(stream.acked) + n
        wait_for(lambda: len(stream.acked) >= target or stream.error is not None,
                 what="producer progress")
        assert stream.error is None, stream.error

    # SIGKILL the leader of partition 0 three times, then the controller
    for round_ in range(4):
        progress(1500)
        victim = zk.controller() if round_ == 3 else zk.state(topic, 0).leader
        brokers[victim].kill()
        wait_znode_gone(zk, victim)
        wait_for(lambda: zk.state(topic, 0).leader not in (victim, -1), what="a new leader")
        progress(500)  # produce goes on with 2 of 3 in sync
        brokers[victim].start()
        wait_full_isr(zk, topic, partitions, 3)
    wait_for(lambda: len(stream.acked) >= 20_000 or stream.error is not None,
             what="20,000 acknowledged records")
    stream.stop.set()
    stream.join(120)
    assert not stream.is_alive() and stream.error is None, stream.error

    seen: dict[bytes, tuple[int, int]] = {}
    def read_at_leader(p: int) -> list[dict]:
        """The partition's records from its leader once HW = LEO there; again from the new leader when the
        controller moved leadership meanwhile (the restarted preferred replica takes it back)."""
        for _ in range(10):
            leader = zk.state(topic, p).leader
            wait_for(lambda: (lambda i: i.get("high_watermark") == i.get("log_end_offset"))(
                partition_info(urls[leader], topic, p)), what="HW = LEO")
            try:
                return read_partition(urls[leader], topic, p)
            except NotLeaderAnswer:
                time.sleep(0.2)
        raise AssertionError(f"partition {p}: leadership kept moving")

    for p in range(partitions):
        records = read_at_leader(p)
        values = [base64.b64decode(r["value"]) for r in records]
        assert len(values) == len(set(values)), f"duplicates in partition {p}"
        assert values == sorted(values), f"partition {p} out of send order"
        seen.update({v: (p, r["offset"]) for v, r in zip(values, records)})
    assert len(stream.acked) >= 20_000
    retried = sum(1 for n in stream.tries.values() if n > 1)
    assert retried > 0, "no request was retried: the kills did not hit the stream"
    missing = [v for v, where in stream.acked.items() if seen.get(v) != where]
    assert not missing, f"{len(missing)} acknowledged records not at their acknowledged offsets, e.g. {missing[:3]}"
    # every record in the log was acknowledged (the producer stopped only between requests)
    assert set(seen) == set(stream.acked)
