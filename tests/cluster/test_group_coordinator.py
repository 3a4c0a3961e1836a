"""Cluster-wide consumer offsets on 3 brokers: a group's commits go to its coordinator (the leader of its
``__consumer_offsets`` partition) whichever broker took them; every broker answers the same offsets; an
HTTP consumer instance on another broker resumes at them; the coordinator's broker is killed with SIGKILL
and the new coordinator, elected from the replicas, answers the same offsets; groups coordinated by
different brokers are all listed by each broker; a reset to a time through a broker that does not lead
the partitions looks the time up on their leaders."""

from __future__ import annotations

import httpx
import pytest

from lakelog.client import LakelogClient
from lakelog.consumer_groups.offset_records import partition_for
from tests.cluster.test_replication import Zk, create_topic, produce, start_cluster, wait_full_isr, wait_znode_gone
from tests.harness import wait_for

pytestmark = pytest.mark.cluster

PARTITIONS = 6
ENV = {"LAKELOG_OFFSETS_TOPIC_NUM_PARTITIONS": str(PARTITIONS)}


def committed(url: str, group: str) -> dict[tuple[str, int], int]:
    resp = httpx.get(f"{url}/consumers/{group}/offsets", timeout=30)
    assert resp.status_code == 200, resp.text
    return {(o["topic"], o["partition"]): o["offset"] for o in resp.json()["offsets"]}


def commit(url: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    resp = httpx.post(f"{url}/consumers/{group}/offsets", timeout=30, json={
        "offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in offsets.items()]})
    assert resp.status_code == 200, resp.text


def one_group_per_coordinator(zk: Zk, partitions: int, *, brokers: int = 3, prefix: str = "group") -> dict[int, str]:
    """``{broker id: group name}``: a group whose ``__consumer_offsets`` partition each broker leads."""
    leaders = {p: zk.state("__consumer_offsets", p).leader for p in range(partitions)}
    groups: dict[int, str] = {}
    for i in range(500):
        name = f"{prefix}-{i}"
        groups.setdefault(leaders[partition_for(name, partitions)], name)
    assert set(groups) == set(range(brokers)), leaders
    return groups


def test_offsets_are_cluster_wide_and_survive_the_coordinators_sigkill(broker_factory, zk):
    brokers = start_cluster(broker_factory, env=ENV)
    urls = {i: b.url for i, b in brokers.items()}
    assert create_topic(urls[0], "orders", partitions=3, rf=3).status_code == 201
    wait_full_isr(zk, "orders", 3, 3)
    for p in range(3):
        assert produce(urls[zk.state("orders", p).leader], "orders", p, [b"r%d" % i for i in range(20)]).status_code == 200

    # the first commit creates __consumer_offsets: RF 3, min.insync.replicas 2, compacted
    first = "group-first"
    commit(urls[1], first, {("orders", 0): 1})
    wait_full_isr(zk, "__consumer_offsets", PARTITIONS, 3)
    configs = {c["name"]: c["value"] for c in httpx.get(
        f"{urls[0]}/v3/clusters/{httpx.get(f'{urls[0]}/v3/clusters').json()['data'][0]['cluster_id']}"
        "/topics/__consumer_offsets/configs").json()["data"]}
    assert (configs["cleanup.policy"], configs["min.insync.replicas"]) == ("compact", "2")

    groups = one_group_per_coordinator(zk, PARTITIONS)

    # every group commits through broker 1; all three brokers answer the same offsets
    for b, group in groups.items():
        commit(urls[1], group, {("orders", 0): 5 + b, ("orders", 1): 7, ("orders", 2): 9})
    for group in groups.values():
        answers = [committed(urls[i], group) for i in range(3)]
        assert answers[0] == answers[1] == answers[2] and answers[0][("orders", 1)] == 7
    for i in range(3):
        listed = httpx.get(f"{urls[i]}/consumers", timeout=30).json()
        assert set(groups.values()) | {first} <= set(listed)

    # a reset --to-datetime through one broker: each partition's time lookup is made by its leader
    not_leading = {b: [p for p in range(3) if zk.state("orders", p).leader != b] for b in range(3)}
    b = max(not_leading, key=lambda i: len(not_leading[i]))
    assert not_leading[b], "one broker leads every partition"
    with LakelogClient(urls[b]) as client:
        for p in not_leading[b]:
            assert client.partition_offsets("orders", p, timestamp_ms=0) == {
                "beginning_offset": 0, "end_offset": 20, "last_stable_offset": 20, "offset_for_timestamp": 0}
        rows = client.groups.reset_offsets("group-reset", to="timestamp", value=0, topics=["orders"])["offsets"]
        assert [(r["partition"], r["offset"]) for r in rows] == [(0, 0), (1, 0), (2, 0)]
        rows = client.groups.reset_offsets("group-reset", to="duration", value=0, topics=["orders"])["offsets"]
        assert [(r["partition"], r["offset"]) for r in rows] == [(0, 20), (1, 20), (2, 20)]  # none that new

    # an HTTP consumer instance created on broker 2 resumes at the group's committed offsets
    victim_broker = next(b for b in groups if b != 2)  # a group coordinated elsewhere than broker 2
    group = groups[victim_broker]
    with LakelogClient(urls[2]) as client:
        consumer = client.groups.create_consumer(group, format="binary", auto_offset_reset="earliest", auto_commit=False)
        with consumer:
            consumer.subscribe(["orders"])
            seen: dict[int, int] = {}

            def polled() -> bool:
                for r in consumer.poll(timeout_ms=500):
                    seen.setdefault(r["partition"], r["offset"])
                return len(seen) == 3
            wait_for(polled, what="records of every partition")
            assert seen == {0: 5 + victim_broker, 1: 7, 2: 9}

    # SIGKILL the coordinator of `group`; the new coordinator (a former follower) answers the same offsets
    before = {g: committed(urls[2], g) for g in groups.values()}
    brokers[victim_broker].kill()
    wait_znode_gone(zk, victim_broker)
    part = partition_for(group, PARTITIONS)
    wait_for(lambda: zk.state("__consumer_offsets", part).leader not in (-1, victim_broker),
             what="a new coordinator")
    survivors = [i for i in range(3) if i != victim_broker]
    for g in groups.values():
        for i in survivors:
            assert wait_for(lambda: committed(urls[i], g) == before[g], what=f"{g}'s offsets on {i}")
    # and it takes new commits (min.insync.replicas=2 of the two live replicas)
    commit(urls[survivors[0]], group, {("orders", 0): 12})
    assert committed(urls[survivors[1]], group)[("orders", 0)] == 12
