"""Retention and VACUUM on three real brokers: every replica removes what retention lets go, a fetch below
the log start offset answers 42226 naming it, and a follower that was down while the leader's log start
offset passed its log end starts over there and catches up.

Short settings keep it fast: ``log.retention.check.interval.ms`` 300 ms, ``lake.commit.interval.ms`` 200 ms,
``lake.vacuum.retention.ms`` 0, and either ``retention.ms`` 1.5 s or records whose CreateTime is an hour old.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from deltalake import DeltaTable

from lakelog.client import LakelogClient
from tests.cluster.test_replication import FAST, create_topic, produce, wait_full_isr
from tests.harness import CONDITION_WAIT_S, read_partition
from tests.harness import wait_for as wait_until

pytestmark = pytest.mark.cluster

# replica.lag.time.max.ms 10 s, not FAST's 1.5 s: these tests are not about ISR shrinks, and on a loaded machine a
# follower a little late for 1.5 s left the ISR while an acks=all batch waited, which min.insync.replicas 2 then
# answered 503 / 50311 (written, not committed by enough replicas: a retry could duplicate it). A killed follower
# still leaves the ISR when its ZooKeeper session expires (the controller drops brokers that are not live).
LIFECYCLE = {**FAST, "LAKELOG_LOG_RETENTION_CHECK_INTERVAL_MS": "300", "LAKELOG_REPLICA_LAG_TIME_MAX_MS": "10000"}
CONFIGS = {"retention.ms": "1500", "lake.commit.interval.ms": "200", "lake.vacuum.retention.ms": "0",
           "min.insync.replicas": "2"}


def table_offsets(log_dir: Path, topic: str) -> list[int] | None:
    """The offsets a replica's Delta table holds (read from its files on disk); None while the broker's
    VACUUM / log cleanup (lake.vacuum.retention.ms=0 here) removes a file under this reader."""
    try:
        table = DeltaTable(str(log_dir / f"{topic}-0")).to_pyarrow_dataset().to_table(columns=["offset"])
    except Exception:  # noqa: BLE001 - a zero retention window: the next poll reads the new version
        return None
    return sorted(table["offset"].to_pylist())


def parquet_count(log_dir: Path, topic: str) -> int:
    return len(list((log_dir / f"{topic}-0").glob("*.parquet")))


def produce_acked(url: str, topic: str, values: list[bytes], *, timestamp_ms: int | None = None) -> None:
    """Produce ``values`` to partition 0 with acks=all (CreateTime ``timestamp_ms``, default the broker's now),
    sending again while the leader answers 503 / 50310 (NOT_ENOUGH_REPLICAS: refused before anything is
    written, which a Kafka producer retries): a follower on a loaded machine can drop out of the ISR for a
    moment. Any other answer than 200 fails the test."""
    deadline = time.monotonic() + CONDITION_WAIT_S
    while True:
        resp = produce(url, topic, 0, values, timestamp_ms=timestamp_ms)
        if resp.status_code != 503 or resp.json().get("error_code") != 50310 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert resp.status_code == 200, resp.text


def log_start(url: str, topic: str) -> int:
    return httpx.get(f"{url}/topics/{topic}/partitions/0", timeout=10).json()["log_start_offset"]


def test_every_replica_applies_retention_and_vacuums(broker_factory, zk, topic_name):
    """Retention by record time: 100 records with an hour-old CreateTime expire at once (``retention.ms`` 10
    min); the 20 produced after them stay for as long as every replica takes to show it, however slow the
    machine (a 1.5 s ``retention.ms`` made the new records expire too while a loaded machine checked)."""
    brokers = {i: broker_factory(broker_id=i, extra_env=LIFECYCLE) for i in range(3)}
    url = brokers[0].url
    assert create_topic(url, topic_name, configs={**CONFIGS, "retention.ms": "600000"}).status_code == 201
    wait_full_isr(zk, topic_name, 1, 3)
    leader = brokers[zk.state(topic_name).leader].url
    hour_ago_ms = int(time.time() * 1000) - 3_600_000
    for i in range(5):
        produce_acked(leader, topic_name, [b"old-%d" % j for j in range(20)], timestamp_ms=hour_ago_ms)
    # every replica lets the old records go before the new ones arrive, so no file holds both
    for b in brokers.values():
        wait_until(lambda: log_start(b.url, topic_name) == 100, what=f"the old records' expiry on broker {b.broker_id}")
    produce_acked(leader, topic_name, [b"new-%d" % j for j in range(20)])

    for b in brokers.values():  # each replica's table drops the expired files; VACUUM deletes them
        wait_until(lambda: table_offsets(b.log_dirs, topic_name) == list(range(100, 120)),
                   what=f"retention on broker {b.broker_id}")
        wait_until(lambda: parquet_count(b.log_dirs, topic_name) <= 2, what=f"vacuum on broker {b.broker_id}")
    resp = httpx.get(f"{leader}/topics/{topic_name}/partitions/0/records", params={"offset": 0, "max_wait_ms": 0})
    assert resp.json()["error_code"] == 42226, resp.text
    assert "100" in resp.json()["message"]
    assert [r["offset"] for r in read_partition(leader, topic_name, 0, start_offset=100)] == list(range(100, 120))


def test_a_follower_behind_the_leaders_log_start_starts_over_there(broker_factory, zk, topic_name):
    brokers = {i: broker_factory(broker_id=i, extra_env=LIFECYCLE) for i in range(3)}
    assert create_topic(brokers[0].url, topic_name, configs=CONFIGS).status_code == 201
    wait_full_isr(zk, topic_name, 1, 3)
    state = zk.state(topic_name)
    follower = next(i for i in state.isr if i != state.leader)
    leader = brokers[state.leader].url
    produce_acked(leader, topic_name, [b"a-%d" % j for j in range(10)])
    wait_until(lambda: table_offsets(brokers[follower].log_dirs, topic_name) == list(range(10)),
               what="the follower's first flush")
    brokers[follower].kill()
    wait_until(lambda: len(zk.state(topic_name).isr) == 2, what="the ISR to shrink")
    for i in range(3):
        produce_acked(leader, topic_name, [b"b-%d-%d" % (i, j) for j in range(10)])
    time.sleep(2.0)
    produce_acked(leader, topic_name, [b"c-%d" % j for j in range(10)])
    wait_until(lambda: log_start(leader, topic_name) >= 40, what="the leader's retention past the follower's end")
    with LakelogClient(leader) as api:  # keep what is left from now on (a config change, no restart)
        api.admin.alter_topic_configs(topic_name, set={"retention.ms": "-1"})
    time.sleep(1.0)
    start = log_start(leader, topic_name)
    assert 40 <= start <= 50

    brokers[follower].start()
    wait_full_isr(zk, topic_name, 1, 3)
    wait_until(lambda: table_offsets(brokers[follower].log_dirs, topic_name) == list(range(start, 50)),
               what="the follower to start over at the leader's log start offset")
    produce_acked(leader, topic_name, [b"d-%d" % j for j in range(10)])
    wait_until(lambda: table_offsets(brokers[follower].log_dirs, topic_name) == list(range(start, 60)),
               what="the follower to replicate what follows")
