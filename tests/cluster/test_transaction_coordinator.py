"""Transactional producers on 3 brokers: a transactional id's InitProducerId, describe and the list of
transactional ids are answered by its transaction coordinator (the leader of its ``__transaction_state``
partition) whichever broker took the request; the epoch goes up by one per InitProducerId through any
broker; each broker lists the ids of every coordinator."""

from __future__ import annotations

import time

import httpx
import pytest

from lakelog import errors
from lakelog.coordinators.transaction_records import TRANSACTION_STATE_TOPIC, partition_for
from tests.cluster.test_replication import start_cluster, wait_full_isr
from tests.harness import CONDITION_WAIT_S

pytestmark = pytest.mark.cluster

PARTITIONS = 3
ENV = {"LAKELOG_TRANSACTION_STATE_LOG_NUM_PARTITIONS": str(PARTITIONS)}


def init(url: str, cluster: str, transactional_id: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/v3/clusters/{cluster}/producers", timeout=60,
                      json={"transactional_id": transactional_id, **body})


def init_retrying(url: str, cluster: str, transactional_id: str) -> httpx.Response:
    """:func:`init`, sent again while the answer is a retriable error (NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS, LEADER_NOT_AVAILABLE while ``__transaction_state`` is being created and its
    partitions loaded), as a Kafka producer's InitProducerId is; the last answer otherwise."""
    deadline = time.monotonic() + CONDITION_WAIT_S
    while True:
        resp = init(url, cluster, transactional_id)
        error = errors.for_code(resp.json().get("error_code") or 0) if resp.status_code != 200 else None
        if error is None or not error.retriable or time.monotonic() > deadline:
            return resp
        time.sleep(0.2)


def test_transactional_ids_are_answered_by_their_coordinator_through_any_broker(broker_factory, zk):
    brokers = start_cluster(broker_factory, env=ENV)
    urls = {i: b.url for i, b in brokers.items()}
    cluster = httpx.get(f"{urls[0]}/v3/clusters", timeout=30).json()["data"][0]["cluster_id"]

    # the first InitProducerId creates __transaction_state (RF 3); then one id per coordinator. On a loaded
    # machine its partitions may still be loading when the first answer is due: 503, retriable
    first = init_retrying(urls[1], cluster, "tx-first")
    assert first.status_code == 200, first.text
    wait_full_isr(zk, TRANSACTION_STATE_TOPIC, PARTITIONS, 3)
    leaders = {p: zk.state(TRANSACTION_STATE_TOPIC, p).leader for p in range(PARTITIONS)}
    ids: dict[int, str] = {}
    for i in range(500):
        ids.setdefault(leaders[partition_for(f"tx-{i}", PARTITIONS)], f"tx-{i}")
    assert set(ids) == {0, 1, 2}, leaders

    for coordinator, tid in ids.items():
        # through each broker in turn, the coordinator last: one producer id, epochs 0, 1, 2
        order = [(coordinator + 1) % 3, (coordinator + 2) % 3, coordinator]
        answers = [init(urls[b], cluster, tid) for b in order]
        assert [a.status_code for a in answers] == [200] * 3, [a.text for a in answers]
        assert [a.json()["producer_epoch"] for a in answers] == [0, 1, 2]
        assert len({a.json()["producer_id"] for a in answers}) == 1
        # a bad timeout is refused by the coordinator, through a broker that is not it
        refused = init(urls[order[0]], cluster, tid, transaction_timeout_ms=900_001)
        assert refused.status_code == 400 and refused.json()["error_code"] == 40011
        for b in range(3):
            d = httpx.get(f"{urls[b]}/v3/clusters/{cluster}/transactions/{tid}", timeout=30).json()
            assert (d["coordinator_id"], d["state"], d["producer_epoch"]) == (coordinator, "Empty", 2)

    for b in range(3):
        listed = httpx.get(f"{urls[b]}/v3/clusters/{cluster}/transactions", timeout=30).json()["data"]
        by_id = {t["transactional_id"]: t["coordinator_id"] for t in listed}
        assert {tid: c for c, tid in ids.items()}.items() <= by_id.items() and "tx-first" in by_id
