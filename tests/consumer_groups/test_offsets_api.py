"""Committed offsets, lag and resets over HTTP against a real broker and ZooKeeper."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

from lakelog.client import GatewayError
from lakelog.replication.metadata import CONSUMERS_PATH, ClusterMetadata


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def test_commit_get_and_lag(client, topic_name):
    client.create_topic(topic_name, partitions=2)
    client.produce_binary(topic_name, [(None, b"x")] * 10, partition=0)
    client.produce_binary(topic_name, [(None, b"y")] * 4, partition=1)
    group = _group()
    assert client.commit_offsets(group, [{"topic": topic_name, "partition": 0, "offset": 6}])["committed"]
    got = client.committed_offsets(group)
    assert [(o["topic"], o["partition"], o["offset"]) for o in got] == [(topic_name, 0, 6)]
    assert group in client.groups.list_groups()
    lag = client.groups.group_lag(group)
    by_partition = {p["partition"]: p for p in lag["partitions"]}
    assert by_partition[0]["lag"] == 4 and by_partition[0]["high_watermark"] == 10
    assert by_partition[1]["committed_offset"] is None and by_partition[1]["lag"] == 4
    assert lag["total_lag"] == 8


def test_replay_is_a_no_op_and_stale_generation_is_refused(client, topic_name, zk_client):
    client.create_topic(topic_name, partitions=1)
    group = _group()
    one = [{"topic": topic_name, "partition": 0, "offset": 1}]
    assert client.commit_offsets(group, one, transaction_app_id=f"{group}/q", transaction_version=7)["committed"]
    again = [{"topic": topic_name, "partition": 0, "offset": 5}]
    assert not client.commit_offsets(group, again, transaction_app_id=f"{group}/q", transaction_version=7)["committed"]
    assert client.committed_offsets(group)[0]["offset"] == 1
    generation = ClusterMetadata(zk_client).bump_group_generation(group)
    assert client.commit_offsets(group, one, generation_id=generation)["committed"]
    ClusterMetadata(zk_client).bump_group_generation(group)
    with pytest.raises(GatewayError) as e:
        client.commit_offsets(group, again, generation_id=generation)
    assert e.value.error_code == 40904 and e.value.http_status == 409
    assert client.committed_offsets(group)[0]["offset"] == 1


def test_a_deleted_topic_takes_its_committed_offsets_and_a_new_one_starts_over(client, topic_name):
    """Kafka drops a deleted topic's committed offsets; a group left without offsets forgets its application's
    commit versions, so the same application commits again from low versions on the topic made anew."""
    client.create_topic(topic_name, partitions=2)
    other = f"{topic_name}-other"
    client.create_topic(other, partitions=1)
    group, keeps = _group(), _group()
    app = f"{group}/query"
    assert client.commit_offsets(group, [{"topic": topic_name, "partition": p, "offset": 50} for p in range(2)],
                                 transaction_app_id=app, transaction_version=100)["committed"]
    client.commit_offsets(keeps, [{"topic": topic_name, "partition": 0, "offset": 3},
                                  {"topic": other, "partition": 0, "offset": 4}])
    client.admin.delete_topic(topic_name)
    assert client.committed_offsets(group) == [] and group not in client.groups.list_groups()
    assert [(c["topic"], c["offset"]) for c in client.committed_offsets(keeps)] == [(other, 4)]
    client.create_topic(topic_name, partitions=2)
    assert client.commit_offsets(group, [{"topic": topic_name, "partition": 0, "offset": 2}],
                                 transaction_app_id=app, transaction_version=2)["committed"]  # not a replay now
    assert [c["offset"] for c in client.committed_offsets(group)] == [2]
    assert not client.commit_offsets(group, [{"topic": topic_name, "partition": 0, "offset": 1}],
                                     transaction_app_id=app, transaction_version=2)["committed"]  # this one is


def test_commit_to_a_missing_partition_is_refused(client, topic_name):
    client.create_topic(topic_name, partitions=1)
    with pytest.raises(GatewayError) as e:
        client.commit_offsets(_group(), [{"topic": topic_name, "partition": 3, "offset": 1}])
    assert e.value.error_code == 42228
    with pytest.raises(GatewayError) as e:
        client.commit_offsets(_group(), [{"topic": "missing-" + topic_name, "partition": 0, "offset": 1}])
    assert e.value.error_code == 40401


def test_reset_offsets(client, topic_name, zk_client, broker):
    client.create_topic(topic_name, partitions=1)
    client.produce_binary(topic_name, [(None, b"early")] * 5, partition=0)
    time.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    time.sleep(0.05)
    client.produce_binary(topic_name, [(None, b"late")] * 3, partition=0)
    group = _group()
    client.commit_offsets(group, [{"topic": topic_name, "partition": 0, "offset": 2}])

    def reset(**kw) -> int:
        return client.groups.reset_offsets(group, **kw)["offsets"][0]["offset"]

    assert reset(to="latest") == 8
    assert reset(to="earliest") == 0
    assert reset(to="offset", value=6) == 6
    assert reset(to="offset", value=100) == 8  # clamped to the high watermark
    assert reset(to="timestamp", value=middle_ms) == 5
    assert client.committed_offsets(group)[0]["offset"] == 5
    # the same lookup as a partition's offsets (Kafka's ListOffsets by timestamp), and on the leader itself
    assert client.partition_offsets(topic_name, 0, timestamp_ms=middle_ms) == {
        "beginning_offset": 0, "end_offset": 8, "last_stable_offset": 8, "offset_for_timestamp": 5}
    assert client.partition_offsets(topic_name, 0, timestamp_ms=0)["offset_for_timestamp"] == 0
    assert client.partition_offsets(topic_name, 0, timestamp_ms=int(time.time() * 1000) + 60_000)[
        "offset_for_timestamp"] == 8  # none that new: the high watermark
    assert client.http.get(f"/lakelog/v1/topics/{topic_name}/partitions/0/offset-for-timestamp",
                           params={"timestamp_ms": middle_ms}).json() == {"timestamp_ms": middle_ms, "offset": 5}
    for bad in (-1, "soon", 2**63 - 1):
        resp = client.http.get(f"/topics/{topic_name}/partitions/0/offsets", params={"timestamp_ms": bad})
        assert (resp.status_code, resp.json()["error_code"]) == (400, 40001), resp.text

    # a group with an active member cannot be reset
    zk_client.create(f"{CONSUMERS_PATH}/{group}/members/m-1", ephemeral=True, makepath=True)
    with pytest.raises(GatewayError) as e:
        client.groups.reset_offsets(group, to="earliest")
    assert e.value.error_code == 40905 and "m-1" in str(e.value)

    # the CLI shows the lag
    out = subprocess.run([sys.executable, "-m", "lakelog.cli", "groups", "describe", group, "--bootstrap-server",
                          broker.url], capture_output=True, timeout=60, check=True).stdout.decode()
    assert topic_name in out and "Total lag: 3" in out
