"""kill -9 a broker while a producer streams into it; restart it on the same port, log dir and chroot.

What must hold at the end (Kafka's acks=1 contract on a single-replica log):

- every acknowledged record is in the log at the (partition, offset) it was acknowledged with;
- the offsets of every partition are dense 0..N-1 (recovery leaves no gaps and reuses no offset);
- a retried batch whose first ack was lost (the commit landed, the broker died before answering) may
  appear twice: the extra copy sits at an un-acknowledged offset, before the acknowledged one;
- nothing that was never sent appears; every key is on its murmur2 partition.
"""

from __future__ import annotations

import base64
import threading
import time

import httpx
import orjson
import pytest
from kazoo.client import KazooClient

from lakelog.client import LakelogClient
from lakelog.protocol import media_types
from lakelog.protocol.partitioner import murmur2, to_positive
from lakelog.replication.metadata import BROKERS_PATH
from tests.harness import CONDITION_WAIT_S, read_partition

pytestmark = pytest.mark.cluster

PARTITIONS = 3
BATCH = 5
KILLS = 3


class Producer(threading.Thread):
    """Sends keyed batches one at a time; retries a batch until it is acknowledged."""

    def __init__(self, url: str, topic: str) -> None:
        super().__init__(name="producer", daemon=True)
        self.url, self.topic = url, topic
        self.acked: dict[str, tuple[int, int]] = {}  # record id -> (partition, offset)
        self.sent_order: list[str] = []  # record ids in the order their batch was first sent
        self.keys: dict[str, bytes] = {}
        self.attempts = 0
        self.failed_attempts = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # reported by the test
            self.error = e

    def _run(self) -> None:
        n = 0
        with httpx.Client(base_url=self.url, timeout=5) as http:
            while not self.stop.is_set():
                ids = [f"r{n + i:06d}" for i in range(BATCH)]
                for i, rid in enumerate(ids):
                    self.keys[rid] = f"key-{(n + i) % 23}".encode()
                self.sent_order += ids
                n += BATCH
                body = orjson.dumps({"records": [{"key": base64.b64encode(self.keys[r]).decode(),
                                                  "value": base64.b64encode(r.encode()).decode()} for r in ids]})
                deadline = time.monotonic() + CONDITION_WAIT_S
                while True:  # retry this batch until acknowledged
                    self.attempts += 1
                    try:
                        resp = http.post(f"/topics/{self.topic}", content=body,
                                         headers={"Content-Type": media_types.BINARY_V2})
                    except httpx.TransportError:
                        resp = None
                    if resp is not None and resp.status_code == 200:
                        entries = resp.json()["offsets"]
                        if all(e["error_code"] is None for e in entries):
                            for rid, e in zip(ids, entries):
                                self.acked[rid] = (e["partition"], e["offset"])
                            break
                    elif resp is not None and resp.status_code < 500:
                        raise AssertionError(f"non-retriable answer {resp.status_code}: {resp.text}")
                    self.failed_attempts += 1
                    if time.monotonic() > deadline:
                        raise AssertionError(f"batch {ids[0]} not acknowledged within 40 s")
                    time.sleep(0.05)


def wait_for_broker_znode_gone(zk_connect: str, broker_id: int, timeout_s: float = CONDITION_WAIT_S) -> None:
    """After a kill -9 the broker's ephemeral znode lives until its ZooKeeper session expires."""
    zk = KazooClient(hosts=zk_connect)
    zk.start(timeout=15)
    try:
        deadline = time.monotonic() + timeout_s
        while zk.exists(f"{BROKERS_PATH}/{broker_id}"):
            assert time.monotonic() < deadline, "the killed broker's session never expired"
            time.sleep(0.1)
    finally:
        zk.stop()
        zk.close()


def test_acknowledged_records_survive_kill_9_at_their_offsets(broker_factory, zk_connect):
    started = time.monotonic()
    # A short ZooKeeper session, so the killed broker's registration expires quickly.
    broker = broker_factory(extra_env={"LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": "2000"})
    topic = "crash-recovery"
    with LakelogClient(broker.url) as api:
        api.create_topic(topic, partitions=PARTITIONS)

    producer = Producer(broker.url, topic)
    producer.start()
    acked_at_kill = []
    for _ in range(KILLS):
        # let some batches through, then crash mid-stream
        target = len(producer.acked) + 60
        deadline = time.monotonic() + CONDITION_WAIT_S
        while len(producer.acked) < target and producer.is_alive():
            assert time.monotonic() < deadline, "the producer made no progress"
            time.sleep(0.01)
        assert producer.error is None, producer.error
        broker.kill()
        acked_at_kill.append(len(producer.acked))
        wait_for_broker_znode_gone(zk_connect, broker.broker_id)
        broker.start()  # same port, log dir and chroot

    # a little more traffic after the last restart, then stop
    target = len(producer.acked) + 60
    deadline = time.monotonic() + CONDITION_WAIT_S
    while len(producer.acked) < target and producer.is_alive():
        assert time.monotonic() < deadline, "the producer made no progress after the last restart"
        time.sleep(0.01)
    producer.stop.set()
    producer.join(45)
    assert not producer.is_alive()
    assert producer.error is None, producer.error
    assert producer.failed_attempts > 0, "no request failed: the kills did not hit the stream"
    assert acked_at_kill == sorted(acked_at_kill) and len(producer.acked) > acked_at_kill[-1]

    with httpx.Client(base_url=broker.url, timeout=30) as http:
        logs = {p: read_partition(http, topic, p) for p in range(PARTITIONS)}
        ends = {p: http.get(f"/topics/{topic}/partitions/{p}/offsets").json() for p in range(PARTITIONS)}

    sent = set(producer.sent_order)
    seq = {rid: i for i, rid in enumerate(producer.sent_order)}
    occurrences: dict[str, list[tuple[int, int]]] = {}
    for p, records in logs.items():
        # dense offsets 0..N-1, and the offsets endpoint agrees
        assert [r["offset"] for r in records] == list(range(len(records))), f"gap or reuse in partition {p}"
        assert ends[p] == {"beginning_offset": 0, "end_offset": len(records), "last_stable_offset": len(records)}
        for r in records:
            rid = base64.b64decode(r["value"]).decode()
            assert rid in sent, f"record {rid!r} was never sent"
            key = base64.b64decode(r["key"])
            assert key == producer.keys[rid]
            assert p == to_positive(murmur2(key)) % PARTITIONS
            occurrences.setdefault(rid, []).append((p, r["offset"]))

    # every acknowledged record is at its acknowledged offset, exactly once there
    for rid, where in producer.acked.items():
        assert where in occurrences.get(rid, []), f"acknowledged {rid} at {where} is lost"
        # other copies come from attempts whose ack was lost: earlier, never at an acked offset
        for other in occurrences[rid]:
            if other != where:
                assert other[0] == where[0] and other[1] < where[1], (rid, other, where)
    acked_positions = list(producer.acked.values())
    assert len(set(acked_positions)) == len(acked_positions), "two acks for one offset"

    # per partition, acknowledged offsets follow the send order (one batch in flight at a time)
    for p in range(PARTITIONS):
        in_order = sorted((seq[r], off) for r, (pp, off) in producer.acked.items() if pp == p)
        assert [off for _, off in in_order] == sorted(off for _, off in in_order)

    duplicates = sum(len(v) - 1 for v in occurrences.values())
    unacked_present = [r for r in occurrences if r not in producer.acked]
    print(f"\n{len(producer.acked)} acked, {producer.failed_attempts} failed attempts, {duplicates} duplicate "
          f"copies, {len(unacked_present)} un-acked records present, {time.monotonic() - started:.1f} s")
