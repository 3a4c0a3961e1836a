"""The committer lease (``/lakelog/leases/{topic}-{p}``) against a real ZooKeeper and a real broker process:
one holder at a time, released by the holder or by its session's end, and a broker that makes no Delta
commit of its own while an outside committer holds it (records stay acknowledged and readable in the
segment tail) and flushes them once the lease is gone."""

from __future__ import annotations

import threading
import time

import pytest
from kazoo.client import KazooClient

from lakelog.replication.committer_lease import CommitterLease, lease_path, leased_partition
from lakelog.replication.errors import CommitterLeaseHeldError
from tests.harness import read_partition, wait_for


def started(zk_connect: str) -> KazooClient:
    zk = KazooClient(hosts=zk_connect)
    zk.start(timeout=15)
    return zk


def test_lease_names_parse_back_to_partitions():
    assert leased_partition("orders-3") == ("orders", 3)
    assert leased_partition("my-topic-name-12") == ("my-topic-name", 12)
    assert leased_partition("noPartition") is None and leased_partition("t-x") is None
    assert lease_path("a-b", 0) == "/lakelog/leases/a-b-0"


def test_one_holder_at_a_time_and_a_session_end_releases(zk_connect):
    first, second = started(zk_connect), started(zk_connect)
    try:
        lease = CommitterLease(first, topic="t", partition=0, holder="job one")
        lease.acquire(wait_s=5)
        other = CommitterLease(second, topic="t", partition=0, holder="job two")
        began = time.monotonic()
        with pytest.raises(CommitterLeaseHeldError) as err:
            other.acquire(wait_s=0.5)
        assert time.monotonic() - began >= 0.5 and "job one" in str(err.value)
        assert err.value.error_code == 40914 and err.value.retriable

        lease.release()  # released: the waiter gets it at once
        other.acquire(wait_s=5)
        assert other.held
        # a holder whose session ends (a crashed job) releases it without a word
        second.stop()
        second.close()
        again = CommitterLease(first, topic="t", partition=0, holder="job three")
        again.acquire(wait_s=20)
        again.release()
        assert first.exists(lease_path("t", 0)) is None
    finally:
        for zk in (first, second):
            zk.stop()
            zk.close()


def test_a_waiting_holder_gets_the_lease_when_it_is_released(zk_connect):
    first, second = started(zk_connect), started(zk_connect)
    try:
        lease = CommitterLease(first, topic="t", partition=1, holder="a")
        lease.acquire(wait_s=5)
        waiter = CommitterLease(second, topic="t", partition=1, holder="b")
        threading.Timer(0.5, lease.release).start()
        began = time.monotonic()
        waiter.acquire(wait_s=10)
        assert 0.3 < time.monotonic() - began < 5
        waiter.release()
    finally:
        for zk in (first, second):
            zk.stop()
            zk.close()


def test_the_broker_makes_no_commit_of_its_own_while_a_job_holds_the_lease(broker, client, zk_connect, topic_name):
    client.create_topic(topic_name, partitions=1, configs={"lake.commit.interval.ms": "100"})
    produced = 0

    def produce(n: int) -> None:
        nonlocal produced
        client.produce_json(topic_name, [{"value": {"i": produced + i}} for i in range(n)], partition=0)
        produced += n

    def lake_end() -> int:
        return client.topic_logs(topic_name)[0]["lake_end_offset"]

    produce(50)
    wait_for(lambda: lake_end() == 50, what="the first flush")
    zk = started(zk_connect)
    try:
        with CommitterLease(zk, topic=topic_name, partition=0, holder="test job"):
            time.sleep(0.5)  # the broker's watch sees the lease
            for _ in range(5):
                produce(20)
            time.sleep(1.0)  # ten flush intervals
            assert lake_end() == 50  # nothing went to Delta
            # acknowledged records stay readable from the segment tail
            assert [r["offset"] for r in read_partition(broker.url, topic_name, 0)] == list(range(150))
        wait_for(lambda: lake_end() == 150, what="the flush after the lease")
    finally:
        zk.stop()
        zk.close()
    assert [r["offset"] for r in read_partition(broker.url, topic_name, 0)] == list(range(150))
