"""``lakelog.__consumer_offsets`` on 3 brokers: the SQL view over every partition of the internal topic shows
the commits of groups coordinated by different brokers (each partition read from its leader's table)."""

from __future__ import annotations

import time

import pytest

from lakelog.client import LakelogClient
from lakelog.consumer_groups.offset_records import partition_for
from lakelog.spark.sql import register_topics_from_gateway
from tests.cluster.test_group_coordinator import commit, one_group_per_coordinator
from tests.cluster.test_replication import Zk, create_topic, start_cluster, wait_full_isr
from tests.harness import CONDITION_WAIT_S

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

PARTITIONS = 6


def test_the_sql_view_shows_the_commits_of_groups_coordinated_by_every_broker(spark, broker_factory, zk_connect):
    brokers = start_cluster(broker_factory, env={"LAKELOG_OFFSETS_TOPIC_NUM_PARTITIONS": str(PARTITIONS)})
    urls = {i: b.url for i, b in brokers.items()}
    zk = Zk(zk_connect)
    try:
        assert create_topic(urls[0], "orders", partitions=3, rf=3).status_code == 201
        commit(urls[1], "sql-first", {("orders", 0): 1})  # creates __consumer_offsets (RF 3)
        wait_full_isr(zk, "__consumer_offsets", PARTITIONS, 3)
        groups = one_group_per_coordinator(zk, PARTITIONS, prefix="sql-group")
        for b, group in groups.items():  # all through broker 1: each lands on its own coordinator
            commit(urls[1], group, {("orders", 0): 10 + b, ("orders", 2): 20 + b})
        expected = {(g, t, p, o + b) for b, g in groups.items() for t, p, o in (("orders", 0, 10), ("orders", 2, 20))}

        # each commit is in its partition leader's Delta table once that leader's flusher ran (~1 s)
        with LakelogClient(urls[0]) as client:
            deadline = time.monotonic() + CONDITION_WAIT_S
            while True:
                register_topics_from_gateway(spark, client)
                rows = spark.sql("SELECT `group`, topic, `partition`, `offset`, deleted FROM lakelog.__consumer_offsets "
                                 "WHERE `group` LIKE 'sql-group-%'").collect()
                got = {(r.group, r.topic, r.partition, r.offset) for r in rows}
                if got == expected or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        assert got == expected and not any(r.deleted for r in rows)
        coordinators = {zk.state("__consumer_offsets", partition_for(g, PARTITIONS)).leader for g in groups.values()}
        assert coordinators == {0, 1, 2}
    finally:
        zk.close()
