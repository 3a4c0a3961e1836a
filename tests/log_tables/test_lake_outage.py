"""The object store goes away under a broker with a shared lake (its own S3 server, stopped by pid and
started again on the same port): produce and fetch go on from the segment tail up to
``lake.tail.max.bytes``, then produce is refused (retriable, nothing written); nothing acknowledged is
lost, and the records reach the table, each once, when the store is back."""

from __future__ import annotations

import httpx

from lakelog.runtime.object_store import ObjectStoreServer
from tests.cluster.test_replication import create_topic, produce
from tests.harness import Lake, wait_for


def test_a_store_outage_loses_nothing_acknowledged(broker_factory, tmp_path):
    store = ObjectStoreServer(data_dir=tmp_path / "store")
    store.start()
    try:
        store.create_bucket("lake")
        lake = Lake(store, "s3://lake/lakelog")
        broker = broker_factory(extra_env=lake.broker_env())
        assert create_topic(broker.url, "orders", partitions=1, rf=1,
                            configs={"lake.commit.interval.ms": "200", "lake.tail.max.bytes": "4000"}).status_code == 201
        sent = [f"before-{i}".encode() for i in range(5)]
        assert produce(broker.url, "orders", 0, sent, acks="all").status_code == 200

        wait_for(lambda: lake.partition_values("orders") == sent, what="the first records in the table")
        store.stop()  # the outage: the flusher's commits fail from now on
        during = [f"during-{i}".encode() for i in range(5)]
        for value in during:  # acknowledged from the segment tail, one request each
            resp = produce(broker.url, "orders", 0, [value], acks="all")
            assert resp.status_code == 200, resp.text
        sent += during
        refused = None
        for i in range(200):  # the tail passes lake.tail.max.bytes: refused, retriable, nothing written
            resp = produce(broker.url, "orders", 0, [b"x" * 200], acks="all")
            if resp.status_code != 200:
                refused = resp
                break
            sent.append(b"x" * 200)
        assert refused is not None and (refused.status_code, refused.json()["error_code"]) == (503, 50331), \
            refused and refused.text
        def fetch(offset: int) -> httpx.Response:
            return httpx.get(f"{broker.url}/topics/orders/partitions/0/records", params={"offset": offset},
                             headers={"Accept": "application/vnd.kafka.binary.v2+json"}, timeout=60)

        fetched = fetch(5)  # the records of the outage, from the tail
        assert fetched.status_code == 200, fetched.text
        assert [r["offset"] for r in fetched.json()] == list(range(5, len(sent)))
        refused = fetch(0)  # only in the table: a retriable 503, not an internal error
        assert (refused.status_code, refused.json()["error_code"]) == (503, 50331), refused.text
        assert httpx.get(f"{broker.url}/health", timeout=10).status_code == 200
        store.start()  # back on the same port and data
        wait_for(lambda: lake.partition_values("orders") == sent, what="every acknowledged record in the table, once")
        assert [r["offset"] for r in fetch(0).json()][:10] == list(range(10))
        assert produce(broker.url, "orders", 0, [b"after"], acks="all").status_code == 200  # taken again
    finally:
        store.stop()
