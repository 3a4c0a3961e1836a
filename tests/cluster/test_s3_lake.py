"""Three real brokers, replication factor 3, on an S3 lake (the real object store): one Delta table per
partition in the store, written by the leader; after the leader is killed with SIGKILL the new leader
continues the same table, and every acknowledged record is in it once, in offset order."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from tests.cluster.test_replication import (create_topic, partition_info, produce, start_cluster, wait_full_isr,
                                            wait_znode_gone)
from tests.harness import wait_for

pytestmark = pytest.mark.cluster

TOPIC, PARTITIONS = "orders", 2


def test_rf3_on_an_s3_lake_keeps_one_table_per_partition_that_the_new_leader_continues(
        broker_factory, zk, lake, tmp_path):
    brokers = start_cluster(broker_factory, env=lake.broker_env())
    urls = {i: b.url for i, b in brokers.items()}
    resp = create_topic(urls[0], TOPIC, partitions=PARTITIONS, rf=3,
                        configs={"min.insync.replicas": "2", "lake.commit.interval.ms": "200"})
    assert resp.status_code == 201, resp.text
    wait_full_isr(zk, TOPIC, PARTITIONS, 3)
    acked: dict[int, dict[bytes, int]] = {p: {} for p in range(PARTITIONS)}
    attempts = [0]

    def send(p: int, n: int) -> None:
        """Produce ``n`` batches of 5 to the leader of ``p`` (acks=all); every attempt has values of its
        own, so a retried batch that landed unacknowledged is not taken for a duplicate."""
        for _ in range(n):
            while True:
                attempts[0] += 1
                values = [f"p{p}-a{attempts[0]}-{i}".encode() for i in range(5)]
                leader = zk.state(TOPIC, p).leader
                try:
                    resp = produce(urls[leader], TOPIC, p, values, acks="all") if leader in urls else None
                except Exception:  # noqa: BLE001 - the leader is gone: retry on the next one
                    resp = None
                if resp is not None and resp.status_code == 200:
                    offsets = [o["offset"] for o in resp.json()["offsets"]]
                    acked[p].update(zip(values, offsets))
                    break

    def tables() -> list[str]:
        return [u for u in lake.table_uris() if u.startswith(f"{lake.uri}/{TOPIC}-")]

    def table_rows(uri: str) -> list[tuple[int, bytes]]:
        t = DeltaTable(uri, storage_options=lake.storage_options).to_pyarrow_table(columns=["offset", "value"])
        return list(zip(t["offset"].to_pylist(), t["value"].to_pylist()))

    for p in range(PARTITIONS):
        send(p, 20)
    wait_for(lambda: len(tables()) == PARTITIONS, what="one table per partition in the lake")
    uris = {int(u.rsplit("/", 1)[1]): u for u in tables()}
    wait_for(lambda: len(table_rows(uris[0])) >= 50, what="the leader of partition 0 to commit to its table")

    # the leader of partition 0 dies, most likely with acknowledged records it has not committed to the
    # table yet (produced just before; the in-process tests of tests/log_tables/test_shared_lake.py make
    # that case for sure); the new one continues the same table
    send(0, 5)
    victim = zk.state(TOPIC, 0).leader
    brokers[victim].kill()
    at_kill = (len(acked[0]), len(table_rows(uris[0])))
    wait_znode_gone(zk, victim)
    wait_for(lambda: zk.state(TOPIC, 0).leader not in (victim, -1), what="a new leader of partition 0")
    for p in range(PARTITIONS):
        send(p, 20)

    for p in range(PARTITIONS):
        leader = zk.state(TOPIC, p).leader
        wait_for(lambda: (lambda i: i["high_watermark"] == i["log_end_offset"])(partition_info(urls[leader], TOPIC, p)),
                 what="HW = LEO")
        hw = partition_info(urls[leader], TOPIC, p)["high_watermark"]
        wait_for(lambda: len(table_rows(uris[p])) >= hw, what=f"partition {p}'s table up to its high watermark")
        rows = table_rows(uris[p])
        offsets = [o for o, _ in rows]
        # each offset once, the table dense from 0 to the high watermark; each acknowledged record at the
        # offset it was acknowledged with (so in offset order), once
        assert sorted(offsets) == list(range(hw)), f"partition {p}: offsets missing or twice"
        by_offset = dict(rows)
        values = [v for _, v in rows]
        for value, offset in acked[p].items():
            assert by_offset[offset] == value, f"acknowledged {value!r} lost or moved in partition {p}"
            assert values.count(value) == 1
    assert sorted(tables()) == sorted(uris.values())  # still exactly one table per partition
    for b in brokers:  # the brokers' disks hold only the tail
        for p in range(PARTITIONS):
            assert not (tmp_path / f"logs-{b}" / f"{TOPIC}-{p}" / "_delta_log").exists()
    records = sum(len(a) for a in acked.values())
    print(f"\n{records} acknowledged in {attempts[0]} attempts; leader {victim} of partition 0 killed with "
          f"{at_kill[0]} acknowledged, {at_kill[1]} in its table; tables {sorted(uris.values())}")
