"""Transactional produce over HTTP on a real broker process (issue 15): produce requests with
``X-Lakelog-Transactional-Id`` join the producer's transaction on every partition they touch; commit and
abort write markers on each of them; the Delta tables receive committed records only; a new instance fences
the old one and aborts its open transaction; a transaction open longer than its timeout is aborted."""

from __future__ import annotations

import time

import httpx
import pyarrow as pa
from deltalake import DeltaTable

from lakelog.client import LakelogClient
from lakelog.protocol.arrow_ipc import arrow_ipc
from lakelog.protocol.media_types import ARROW_STREAM
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.metadata import BROKERS_PATH
from tests.harness import CONDITION_WAIT_S, table_offsets, wait_for

ENV = {"LAKELOG_TRANSACTION_STATE_LOG_NUM_PARTITIONS": "2",
       "LAKELOG_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS": "200"}


class Producer:
    """A transactional producer over HTTP: its id, epoch and next request sequence."""

    def __init__(self, http: httpx.Client, transactional_id: str, *, timeout_ms: int = 60_000) -> None:
        self.http, self.transactional_id = http, transactional_id
        self.cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        answer = self._retry(lambda: http.post(f"/v3/clusters/{self.cluster}/producers", json={
            "transactional_id": transactional_id, "transaction_timeout_ms": timeout_ms}))
        self.producer_id, self.epoch = answer["producer_id"], answer["producer_epoch"]
        self.sequence = 0

    @staticmethod
    def _retry(call) -> dict:
        """Send until answered other than 409 / 40920 (CONCURRENT_TRANSACTIONS, retriable)."""
        deadline = time.monotonic() + CONDITION_WAIT_S
        while True:
            resp = call()
            if resp.status_code == 409 and resp.json()["error_code"] == 40920 and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            assert resp.status_code == 200, resp.text
            return resp.json()

    def produce(self, topic: str, partition: int, values: list[bytes]) -> httpx.Response:
        headers = ProducerBatch(self.producer_id, self.epoch, self.sequence, self.transactional_id).headers()
        self.sequence += 1
        return self.http.post(f"/topics/{topic}/partitions/{partition}/records", content=arrow_ipc(
            pa.table({"value": values})), headers={**headers, "Content-Type": ARROW_STREAM})

    def end(self, outcome: str) -> httpx.Response:
        return self.http.post(f"/v3/clusters/{self.cluster}/transactions/{self.transactional_id}/{outcome}",
                              json={"producer_id": self.producer_id, "producer_epoch": self.epoch})

    def describe(self) -> dict:
        return self.http.get(f"/v3/clusters/{self.cluster}/transactions/{self.transactional_id}").json()


def create_topic(broker, topic: str, *, partitions: int) -> None:
    with LakelogClient(broker.url) as client:
        client.create_topic(topic, partitions=partitions)


def delta_values(broker, topic: str, partition: int) -> list[bytes]:
    table = DeltaTable(str(broker.log_dirs / f"{topic}-{partition}")).to_pyarrow_table(columns=["offset", "value"])
    return table.sort_by("offset")["value"].to_pylist()


def flushed(http: httpx.Client, topic: str, partition: int) -> bool:
    info = http.get(f"/topics/{topic}/partitions/{partition}").json()
    return info["lake_end_offset"] == info["log_end_offset"]


def test_a_transaction_over_three_partitions_commits_on_all_and_an_aborted_one_never_reaches_delta(
        broker_factory, topic_name):
    broker = broker_factory(extra_env=ENV)
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        create_topic(broker, topic_name, partitions=3)
        producer = Producer(http, f"{topic_name}-tx")
        for p in range(3):
            assert producer.produce(topic_name, p, [b"c%d" % p, b"c%d+" % p]).status_code == 200
        described = producer.describe()
        assert described["state"] == "Ongoing"
        assert sorted(x["partition_id"] for x in described["partitions"]) == [0, 1, 2]
        time.sleep(1.5)  # two flush intervals: the open transaction stays out of the Delta tables
        assert all(delta_values(broker, topic_name, p) == [] for p in range(3))
        committed = producer.end("commit")
        assert committed.status_code == 200 and committed.json()["state"] == "CompleteCommit", committed.text
        for p in range(3):
            wait_for(lambda: flushed(http, topic_name, p), what="the flush past the commit marker")
            assert delta_values(broker, topic_name, p) == [b"c%d" % p, b"c%d+" % p]  # no marker, nothing else
        # the next transaction aborts: its records never reach Delta; plain records after it do
        assert producer.produce(topic_name, 0, [b"aborted"]).status_code == 200
        aborted = producer.end("abort")
        assert aborted.status_code == 200 and aborted.json()["state"] == "CompleteAbort", aborted.text
        assert http.post(f"/topics/{topic_name}/partitions/0/records", content=arrow_ipc(pa.table({"value": [b"plain"]})),
                         headers={"Content-Type": ARROW_STREAM}).status_code == 200
        wait_for(lambda: flushed(http, topic_name, 0), what="the flush past the abort marker")
        assert delta_values(broker, topic_name, 0) == [b"c0", b"c0+", b"plain"]
        # offsets 2 and 4 are the markers, 3 the aborted record
        assert table_offsets(str(broker.log_dirs / f"{topic_name}-0")) == [0, 1, 5]
        # a commit with nothing produced since answers the current state (Kafka sends no EndTxn then)
        assert producer.end("commit").json()["state"] == "CompleteAbort"


def test_a_new_instance_fences_the_old_one_and_aborts_its_open_transaction(broker_factory, topic_name):
    broker = broker_factory(extra_env=ENV)
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        create_topic(broker, topic_name, partitions=1)
        old = Producer(http, f"{topic_name}-tx")
        assert old.produce(topic_name, 0, [b"zombie"]).status_code == 200
        new = Producer(http, f"{topic_name}-tx")  # InitProducerId: epoch + 1, the open transaction aborted
        # (Kafka: the abort is written under epoch + 1, the retried InitProducerId then gets epoch + 2)
        assert new.producer_id == old.producer_id and new.epoch == old.epoch + 2
        fenced = old.produce(topic_name, 0, [b"late"])
        assert fenced.status_code == 409 and fenced.json()["error_code"] == 40915, fenced.text
        refused = old.end("commit")
        assert refused.status_code == 409 and refused.json()["error_code"] == 40915, refused.text
        assert new.produce(topic_name, 0, [b"fresh"]).status_code == 200
        assert new.end("commit").json()["state"] == "CompleteCommit"
        wait_for(lambda: flushed(http, topic_name, 0), what="the flush")
        assert delta_values(broker, topic_name, 0) == [b"fresh"]


def test_a_transaction_open_longer_than_its_timeout_is_aborted(broker_factory, topic_name):
    broker = broker_factory(extra_env=ENV)
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        create_topic(broker, topic_name, partitions=1)
        producer = Producer(http, f"{topic_name}-tx", timeout_ms=1000)
        assert producer.produce(topic_name, 0, [b"slow"]).status_code == 200
        wait_for(lambda: producer.describe()["state"] == "CompleteAbort", what="the timeout's abort")
        late = producer.end("commit")  # the producer was fenced by the abort's epoch bump
        assert late.status_code == 409 and late.json()["error_code"] == 40915, late.text
        wait_for(lambda: flushed(http, topic_name, 0), what="the flush past the abort marker")
        assert delta_values(broker, topic_name, 0) == []


def group_offsets(http: httpx.Client, group: str) -> dict[tuple[str, int], int]:
    answer = http.get(f"/consumers/{group}/offsets")
    assert answer.status_code == 200, answer.text
    return {(o["topic"], o["partition"]): o["offset"] for o in answer.json()["offsets"]}


def test_offsets_committed_in_a_transaction_count_only_when_it_commits_and_after_a_restart(
        broker_factory, zk_client, topic_name):
    broker = broker_factory(extra_env=ENV)
    group, source = f"{topic_name}-g", f"{topic_name}-in"
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        create_topic(broker, topic_name, partitions=1)
        producer = Producer(http, f"{topic_name}-tx")

        def transaction(offset: int, outcome: str) -> None:
            assert producer.produce(topic_name, 0, [b"out%d" % offset]).status_code == 200
            added = http.post(f"/v3/clusters/{producer.cluster}/transactions/{producer.transactional_id}/offsets", json={
                "producer_id": producer.producer_id, "producer_epoch": producer.epoch, "group_id": group,
                "offsets": [{"topic": source, "partition": 0, "offset": offset}]})
            assert added.status_code == 200, added.text
            assert group_offsets(http, group).get((source, 0)) != offset  # pending until the commit
            assert producer.end(outcome).json()["state"] in ("CompleteCommit", "CompleteAbort")

        transaction(5, "commit")
        assert group_offsets(http, group) == {(source, 0): 5}
        transaction(8, "abort")
        assert group_offsets(http, group) == {(source, 0): 5}  # the abort leaves them as they were
        transaction(9, "commit")
        # one more, left open across a crash of the broker
        assert producer.produce(topic_name, 0, [b"out10"]).status_code == 200
        assert http.post(f"/v3/clusters/{producer.cluster}/transactions/{producer.transactional_id}/offsets", json={
            "producer_id": producer.producer_id, "producer_epoch": producer.epoch, "group_id": group,
            "offsets": [{"topic": source, "partition": 0, "offset": 10}]}).status_code == 200
    broker.kill()
    wait_for(lambda: not zk_client.exists(f"{BROKERS_PATH}/0"), what="the killed broker's session ends")
    broker.start()
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        # the restarted coordinator folded the markers: 9 committed, 10 pending, 8 never
        wait_for(lambda: http.get(f"/consumers/{group}/offsets").status_code == 200, what="the coordinator's load")
        assert group_offsets(http, group) == {(source, 0): 9}
        producer.http = http
        committed = producer.end("commit")
        assert committed.status_code == 200 and committed.json()["state"] == "CompleteCommit", committed.text
        assert group_offsets(http, group) == {(source, 0): 10}
        wait_for(lambda: flushed(http, topic_name, 0), what="the flush")
        assert delta_values(broker, topic_name, 0) == [b"out5", b"out9", b"out10"]
        bad = http.post(f"/v3/clusters/{producer.cluster}/transactions/{producer.transactional_id}/offsets", json={
            "producer_id": producer.producer_id, "producer_epoch": producer.epoch, "group_id": group, "offsets": []})
        assert bad.status_code in (400, 422) and "offsets" in bad.text
