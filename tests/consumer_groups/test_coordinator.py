"""The group coordinator on one real broker: ``__consumer_offsets`` is a compacted lakelog topic created on
the first commit, commits are its records, a restarted broker loads them back (replays still no-ops),
deletes are tombstones, resets take Kafka's options, and an old per-broker table is imported once."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime, timezone

import httpx
import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from lakelog.client import GatewayError, LakelogClient
from lakelog.consumer_groups.offset_records import partition_for
from lakelog.replication.metadata import ClusterMetadata
from tests.harness import read_partition, wait_for

ENV = {"LAKELOG_OFFSETS_TOPIC_NUM_PARTITIONS": "4"}


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def _records(url: str, group: str) -> list[dict]:
    """The ``__consumer_offsets`` records of ``group``'s partition (below the HW), keys and values decoded."""
    out = []
    for r in read_partition(url, "__consumer_offsets", partition_for(group, 4)):
        key = json.loads(base64.b64decode(r["key"]))
        if key["group"] == group:
            out.append({"key": key, "value": None if r["value"] is None else json.loads(base64.b64decode(r["value"]))})
    return out


def test_commits_are_records_of_a_compacted_internal_topic_and_survive_a_restart(broker_factory, tmp_path):
    broker = broker_factory(extra_env=ENV)
    group, topic = _group(), "events"
    with LakelogClient(broker.url) as client:
        client.create_topic(topic, partitions=2)
        assert "__consumer_offsets" not in client.admin.list_topics()  # created on the first commit
        assert client.committed_offsets(group) == [] and client.groups.list_groups() == []
        assert client.commit_offsets(group, [{"topic": topic, "partition": 0, "offset": 3, "metadata": "m"},
                                             {"topic": topic, "partition": 1, "offset": 5}],
                                     transaction_app_id=group, transaction_version=1)["committed"]
        configs = {c["name"]: c["value"] for c in httpx.get(
            f"{broker.url}/v3/clusters/{client.cluster_id}/topics/__consumer_offsets/configs").json()["data"]}
        assert configs["cleanup.policy"] == "compact" and configs["min.insync.replicas"] == "1"
        meta = httpx.get(f"{broker.url}/topics/__consumer_offsets").json()
        assert len(meta["partitions"]) == 4
        records = wait_for(lambda: _records(broker.url, group) or None, what="the commit's records")
        assert [r["key"] for r in records] == [
            {"type": "offset", "group": group, "topic": topic, "partition": 0},
            {"type": "offset", "group": group, "topic": topic, "partition": 1},
            {"type": "app", "group": group, "app_id": group}]
        assert records[0]["value"]["offset"] == 3 and records[0]["value"]["metadata"] == "m"
        assert records[2]["value"]["app_version"] == 1
        # a client cannot produce to the internal topic (Kafka: "Cannot append to internal topic")
        end = httpx.get(f"{broker.url}/topics/__consumer_offsets/partitions/{partition_for(group, 4)}/offsets").json()
        for path in ("/topics/__consumer_offsets", f"/topics/__consumer_offsets/partitions/{partition_for(group, 4)}"):
            resp = httpx.post(broker.url + path, json={"records": [{"key": "k", "value": 1}]},
                              headers={"Content-Type": "application/vnd.kafka.json.v2+json"})
            assert resp.status_code == 400 and resp.json()["error_code"] == 40004, resp.text
            assert "internal topic" in resp.json()["message"]
        assert httpx.get(f"{broker.url}/topics/__consumer_offsets/partitions/"
                         f"{partition_for(group, 4)}/offsets").json()["end_offset"] == end["end_offset"]
    broker.stop()
    broker.start()
    with LakelogClient(broker.url) as client:
        got = wait_for(lambda: client.committed_offsets(group) or None, what="offsets after the restart")
        assert [(o["partition"], o["offset"], o["metadata"]) for o in got] == [(0, 3, "m"), (1, 5, None)]
        assert client.groups.list_groups() == [group]
        # a replay of version 1 still writes nothing; version 2 does
        again = [{"topic": topic, "partition": 0, "offset": 9}]
        assert not client.commit_offsets(group, again, transaction_app_id=group, transaction_version=1)["committed"]
        assert client.commit_offsets(group, again, transaction_app_id=group, transaction_version=2)["committed"]
        assert client.committed_offsets(group)[0]["offset"] == 9
        # delete-offsets: a tombstone; the group keeps partition 1
        assert client.groups.delete_offsets(group, topic, [0]) == [{"topic": topic, "partition": 0}]
        assert [(o["partition"], o["offset"]) for o in client.committed_offsets(group)] == [(1, 5)]
        with pytest.raises(GatewayError) as e:
            client.groups.delete_offsets(group, topic, [0])
        assert e.value.error_code == 40405
        tomb = wait_for(lambda: [r for r in _records(broker.url, group) if r["value"] is None] or None,
                        what="the tombstone")
        assert tomb[0]["key"]["partition"] == 0


def test_reset_offsets_takes_kafkas_options(broker_factory, zk_connect):
    broker = broker_factory(extra_env=ENV)
    group, topic = _group(), "reset"
    with LakelogClient(broker.url) as client:
        client.create_topic(topic, partitions=3)
        for p in range(3):
            client.produce_binary(topic, [(None, b"x")] * 10, partition=p)
        client.commit_offsets(group, [{"topic": topic, "partition": p, "offset": 4} for p in range(3)])

        def reset(**kw) -> dict[int, int]:
            return {o["partition"]: o["offset"] for o in client.groups.reset_offsets(group, **kw)["offsets"]}

        assert reset(to="shift", value=3, dry_run=True) == {0: 7, 1: 7, 2: 7}
        assert {o["offset"] for o in client.committed_offsets(group)} == {4}  # a dry run commits nothing
        assert reset(to="shift", value=-2, partitions=[(topic, 0), (topic, 2)]) == {0: 2, 2: 2}
        assert {o["partition"]: o["offset"] for o in client.committed_offsets(group)} == {0: 2, 1: 4, 2: 2}
        assert reset(to="shift", value=100, topics=[topic]) == {0: 10, 1: 10, 2: 10}  # clamped to the HW
        assert reset(to="shift", value=-100) == {0: 0, 1: 0, 2: 0}  # to the log start
        assert reset(to="current") == {0: 0, 1: 0, 2: 0}
        assert reset(to="duration", value=3_600_000) == {0: 0, 1: 0, 2: 0}  # an hour ago: before every record
        assert reset(to="duration", value=0, partitions=[(topic, 1)]) == {1: 10}  # now: after every record
        with pytest.raises(GatewayError) as e:
            client.groups.reset_offsets(group, to="shift")
        assert e.value.error_code == 42228
        with pytest.raises(GatewayError) as e:
            client.groups.reset_offsets(group, to="earliest", partitions=[(topic, 7)])
        assert e.value.error_code == 42228


OLD_SCHEMA = pa.schema([
    pa.field("group", pa.string(), nullable=False), pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False), pa.field("offset", pa.int64(), nullable=False),
    pa.field("metadata", pa.string()), pa.field("generation", pa.int32()),
    pa.field("commit_timestamp", pa.timestamp("us", tz="UTC"), nullable=False)])


def test_an_old_per_broker_table_is_imported_once_newest_commit_winning(broker_factory, tmp_path, zk_connect):
    log_dirs = tmp_path / "logs-0"
    old = log_dirs / "__consumer_offsets"
    old.parent.mkdir(parents=True)

    def rows(group, offsets, ts):
        return pa.Table.from_pylist([{"group": group, "topic": "old", "partition": p, "offset": o, "metadata": None,
                                      "generation": 2, "commit_timestamp": datetime.fromtimestamp(ts, timezone.utc)}
                                     for p, o in offsets], schema=OLD_SCHEMA)
    write_deltalake(str(old), rows("spark-q", [(0, 10), (1, 20)], 1_000))
    write_deltalake(str(old), rows("spark-q", [(0, 15)], 2_000), mode="append", commit_properties=CommitProperties(
        app_transactions=[Transaction(app_id="spark-q", version=41, last_updated=2_000_000)]))
    write_deltalake(str(old), rows("tool", [(1, 3)], 1_500), mode="append")
    assert DeltaTable(str(old)).transaction_version("spark-q") == 41

    broker = broker_factory(extra_env=ENV)
    with LakelogClient(broker.url) as client:
        client.create_topic("old", partitions=2)
        got = wait_for(lambda: client.committed_offsets("spark-q") or None, what="the imported offsets")
        assert [(o["partition"], o["offset"]) for o in got] == [(0, 15), (1, 20)]
        assert [(o["partition"], o["offset"]) for o in client.committed_offsets("tool")] == [(1, 3)]
        assert sorted(client.groups.list_groups()) == ["spark-q", "tool"]
        # the imported transaction version still makes a replay a no-op
        replay = [{"topic": "old", "partition": 0, "offset": 99}]
        assert not client.commit_offsets("spark-q", replay, transaction_app_id="spark-q",
                                         transaction_version=41)["committed"]
    assert not old.exists() and len(list(log_dirs.glob("__consumer_offsets.imported-*"))) == 1
    assert "imported the committed offsets of 2 group(s)" in broker.log_tail(200)
    # once: a restart imports nothing again
    broker.stop()
    broker.start()
    with LakelogClient(broker.url) as client:
        wait_for(lambda: client.committed_offsets("spark-q") or None, what="offsets after the restart")
    assert broker.log_tail(400).count("imported the committed offsets") == 1


def test_a_group_generation_fences_commits_through_the_coordinator(broker_factory, zk_connect, zk_client):
    broker = broker_factory(extra_env=ENV)
    group = _group()
    with LakelogClient(broker.url) as client:
        client.create_topic("fenced", partitions=1)
        generation = ClusterMetadata(zk_client).bump_group_generation(group)
        one = [{"topic": "fenced", "partition": 0, "offset": 1}]
        assert client.commit_offsets(group, one, generation_id=generation)["committed"]
        ClusterMetadata(zk_client).bump_group_generation(group)
        with pytest.raises(GatewayError) as e:
            client.commit_offsets(group, [{"topic": "fenced", "partition": 0, "offset": 5}], generation_id=generation)
        assert e.value.error_code == 40904
        assert client.committed_offsets(group)[0]["offset"] == 1
