"""DeleteRecords on two real brokers: a request to any broker reaches each partition's leader (forwarded
through the inter-broker client), the answer comes once every replica moved its log start offset (the
followers take it from their leader's replica fetch answers and say theirs with the next fetch: Kafka's
delayed DeleteRecords), and every replica's Delta table drops the files below it."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from lakelog.client import LakelogClient
from tests.cluster.test_replication import create_topic, produce, wait_full_isr
from tests.harness import table_offsets, wait_for

pytestmark = pytest.mark.cluster


def log_start(url: str, topic: str, partition: int) -> int:
    return httpx.get(f"{url}/topics/{topic}/partitions/{partition}", timeout=10).json()["log_start_offset"]


def replica_log_start(url: str, topic: str, partition: int) -> int:
    """The log start offset of the broker's own replica (its ``lakelog_partition_log_start_offset``)."""
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text):
        for sample in family.samples:
            if sample.name == "lakelog_partition_log_start_offset" and sample.labels.get("topic") == topic \
                    and sample.labels.get("partition") == str(partition):
                return int(sample.value)
    raise AssertionError(f"no log start offset of {topic}-{partition} in {url}/metrics")


def test_delete_records_sent_to_any_broker_moves_every_replica_of_each_partition(broker_factory, zk, topic_name):
    brokers = {i: broker_factory(broker_id=i) for i in range(2)}
    # a Delta commit per append on every replica, each batch on every replica before the next is sent:
    # the data files of every replica hold offsets 0-9, 10-19, 20-29
    assert create_topic(brokers[0].url, topic_name, partitions=2, rf=2,
                        configs={"lake.commit.interval.ms": "0"}).status_code == 201
    wait_full_isr(zk, topic_name, 2, 2)
    leaders = {p: zk.state(topic_name, p).leader for p in range(2)}

    def table(broker_id: int, p: int) -> list[int]:
        return table_offsets(str(brokers[broker_id].log_dirs / f"{topic_name}-{p}"))

    for p in range(2):
        for batch in range(3):
            resp = produce(brokers[leaders[p]].url, topic_name, p, [b"%d-%d" % (batch, i) for i in range(10)])
            assert resp.status_code == 200, resp.text
            for b in brokers:
                wait_for(lambda: table(b, p) == list(range(10 * batch + 10)),
                         what=f"batch {batch} of {topic_name}-{p} in broker {b}'s table")

    # one request to the broker that does not lead partition 0: that partition is forwarded to its leader
    entry = 1 - leaders[0]
    with LakelogClient(brokers[entry].url) as api:
        assert api.admin.delete_records({(topic_name, 0): 12, (topic_name, 1): -1}) == {
            (topic_name, 0): 12, (topic_name, 1): 30}
    for p, start in ((0, 12), (1, 30)):
        assert log_start(brokers[leaders[p]].url, topic_name, p) == start
        for b in brokers:  # answered once every replica had moved: no waiting here
            assert replica_log_start(brokers[b].url, topic_name, p) == start
    for b in brokers:  # the files wholly below the new start leave every replica's table
        wait_for(lambda: table(b, 1) == [], what=f"broker {b} to drop the files of {topic_name}-1")
        wait_for(lambda: table(b, 0) == list(range(10, 30)), what=f"broker {b} to drop the first file of {topic_name}-0")
