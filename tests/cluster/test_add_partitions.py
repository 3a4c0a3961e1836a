"""Topic changes on a running three-broker cluster (real broker processes, one real ZooKeeper):
partitions added get leaders and followers on every broker and take records, keyed produce follows the
new partition count, and a config change reaches the open logs of every replica without a restart."""

from __future__ import annotations

import base64

import httpx
import pytest
from deltalake import DeltaTable

from lakelog.client import LakelogClient
from lakelog.protocol.partitioner import murmur2, to_positive
from tests.cluster.test_replication import FAST, partition_info, produce
from tests.harness import read_partition, wait_for

pytestmark = pytest.mark.cluster


def _partitions(url: str, topic: str) -> list[dict]:
    return httpx.get(f"{url}/topics/{topic}/partitions", timeout=10).json()


def _fully_replicated(url: str, topic: str, count: int) -> bool:
    parts = _partitions(url, topic)
    return len(parts) == count and all(
        p["leader"] >= 0 and len(p["replicas"]) == 3 and all(r["in_sync"] for r in p["replicas"]) for p in parts)


@pytest.fixture
def cluster(broker_factory) -> dict[int, str]:
    return {i: broker_factory(broker_id=i, extra_env=FAST).url for i in range(3)}


def test_added_partitions_get_leaders_and_take_records(cluster, topic_name):
    urls = cluster
    with LakelogClient(urls[0]) as client:
        client.create_topic(topic_name, partitions=3, replication_factor=3)
        for url in urls.values():
            wait_for(lambda: _fully_replicated(url, topic_name, 3), what="3 partitions in sync")
        client.produce_binary(topic_name, [(None, b"before")], partition=0)  # follows the leader (421)

        assert client.admin.add_partitions(topic_name, partitions_count=6)["partitions_count"] == 6

    # every broker serves the new partitions, each with a leader and all three replicas in sync
    for url in urls.values():
        wait_for(lambda: _fully_replicated(url, topic_name, 6), what=f"6 partitions in sync on {url}")
    parts = _partitions(urls[2], topic_name)
    assert {p["leader"] for p in parts[3:]} == {0, 1, 2}  # leaders of the new partitions are spread

    # each new partition takes records at its leader with acks=all (its followers replicate them); the
    # other brokers name that leader (421 with its URL)
    for p in (3, 4, 5):
        leader = parts[p]["leader"]
        for i in set(urls) - {leader}:
            resp = produce(urls[i], topic_name, p, [b"p%d" % p], timeout=30)
            assert resp.status_code == 421 and resp.json()["leader_url"] == urls[leader], resp.text
        resp = produce(urls[leader], topic_name, p, [b"p%d" % p], timeout=30)
        assert resp.status_code == 200 and resp.json()["offsets"][0] == {
            "partition": p, "offset": 0, "error_code": None, "error": None}, resp.text
        for url in urls.values():  # the high watermark every broker reports moved: all replicas have it
            wait_for(lambda: partition_info(url, topic_name, p)["high_watermark"] == 1, what=f"HW of {p}")
        assert [base64.b64decode(r["value"]) for r in read_partition(urls[leader], topic_name, p)] == [b"p%d" % p]

    # keyed records follow murmur2 over the new count on every broker
    keys = [k for k in (b"key-%d" % i for i in range(200)) if to_positive(murmur2(k)) % 6 >= 3][:6]
    for i, url in urls.items():
        resp = produce(url, topic_name, None, [b"keyed via %d" % i for _ in keys], keys=keys, timeout=30)
        assert resp.status_code == 200, resp.text
        assert [o["partition"] for o in resp.json()["offsets"]] == [to_positive(murmur2(k)) % 6 for k in keys]
    for p in (3, 4, 5):
        landed = [r for r in read_partition(urls[parts[p]["leader"]], topic_name, p) if r["key"] is not None]
        assert sorted(base64.b64decode(r["key"]) for r in landed) == sorted(
            k for k in keys for _ in urls if to_positive(murmur2(k)) % 6 == p)


def test_a_config_change_reaches_every_replica_and_every_broker(cluster, topic_name, tmp_path):
    urls = cluster
    with LakelogClient(urls[0]) as client:
        client.create_topic(topic_name, partitions=1, replication_factor=3,
                            configs={"lake.commit.interval.ms": "3600000"})
        for url in urls.values():
            wait_for(lambda: _fully_replicated(url, topic_name, 1), what="the partition in sync")
        client.produce_binary(topic_name, [(None, b"v%d" % i) for i in range(5)], partition=0)
        for url in urls.values():  # every replica has the records, all in its segment tail
            wait_for(lambda: partition_info(url, topic_name, 0)["high_watermark"] == 5, what="HW 5")

        client.admin.alter_topic_configs(topic_name, set={"lake.commit.interval.ms": "0", "max.message.bytes": "1000"})

    def rows(b: int) -> int:
        try:
            return DeltaTable(str(tmp_path / f"logs-{b}" / f"{topic_name}-0")).to_pyarrow_dataset().count_rows()
        except Exception:  # noqa: BLE001 - no table yet
            return 0

    for b in urls:  # leader and followers commit their tails to Delta: their open logs took the config
        wait_for(lambda: rows(b) == 5, what=f"broker {b}'s replica committed to Delta")
    for i, url in urls.items():  # every broker refuses what the new max.message.bytes refuses
        resp = wait_for(lambda: (r := produce(url, topic_name, None, [b"x" * 2000], timeout=30))
                        .status_code == 422 and r, what=f"broker {i} to refuse 2000 bytes")
        assert resp.json()["error_code"] == 42225
        with LakelogClient(url) as client:
            assert client.admin.topic_configs(topic_name)["max.message.bytes"]["value"] == "1000"
