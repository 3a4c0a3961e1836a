"""Exactly once through transactions on 3 brokers (issue 15's first done-when): an HTTP
consume-transform-produce loop (:mod:`tests.cluster.ctp_app`: read topic A read_committed, write topic B and
A's offsets in one transaction) is killed with SIGKILL three times at random points, and the broker of its
transaction coordinator and a partition leader of B are killed once each; in the end B holds every A
record exactly once, read_committed, and the group's committed offsets are A's end."""

from __future__ import annotations

import base64
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import httpx
import pytest

from tests.cluster.test_replication import FAST, create_topic, wait_full_isr, wait_znode_gone
from tests.harness import wait_for

pytestmark = pytest.mark.cluster

PARTITIONS = 3
PER_PARTITION = 600
ENV = {**FAST, "LAKELOG_TRANSACTION_STATE_LOG_NUM_PARTITIONS": "3", "LAKELOG_OFFSETS_TOPIC_NUM_PARTITIONS": "3"}


def read_committed(url: str, topic: str, p: int) -> list[bytes]:
    """Every record of a partition below its last stable offset, read_committed."""
    values, offset = [], 0
    while True:
        resp = httpx.get(f"{url}/topics/{topic}/partitions/{p}/records", timeout=20,
                         params={"offset": offset, "max_bytes": 1 << 20, "isolation_level": "read_committed"},
                         headers={"Accept": "application/vnd.kafka.binary.v2+json"})
        if resp.status_code == 421:  # a partition is read from its leader
            url = resp.json()["leader_url"]
            continue
        assert resp.status_code == 200, resp.text
        records = resp.json()
        values += [base64.b64decode(r["value"]) for r in records]
        nxt = int(resp.headers.get("X-Lakelog-Next-Offset", offset))
        if nxt == offset:
            return values
        offset = nxt


def test_consume_transform_produce_survives_kills_of_itself_its_coordinator_and_a_leader(broker_factory, zk,
                                                                                      tmp_path):
    rng = random.Random(15)
    brokers = {i: broker_factory(broker_id=i, extra_env=ENV) for i in range(3)}
    urls = [b.url for b in brokers.values()]
    for topic in ("ctp-in", "ctp-out"):
        assert create_topic(urls[0], topic, partitions=PARTITIONS, rf=3).status_code == 201
        wait_full_isr(zk, topic, PARTITIONS, 3)
    expected = Counter()
    for p in range(PARTITIONS):
        for start in range(0, PER_PARTITION, 100):
            values = [b"p%d-r%04d" % (p, i) for i in range(start, start + 100)]
            answer = httpx.post(f"{urls[0]}/topics/ctp-in", params={"acks": "all"}, timeout=20, json={"records": [
                {"partition": p, "value": base64.b64encode(v).decode()} for v in values]},
                headers={"Content-Type": "application/vnd.kafka.binary.v2+json"})
            assert answer.status_code == 200 and all(o.get("error_code") is None for o in answer.json()["offsets"])
            expected.update(v + b"!" for v in values)
    command = [sys.executable, "-m", "tests.cluster.ctp_app", ",".join(urls), "ctp-in", "ctp-out", "ctp-group",
               "ctp-tx", str(PARTITIONS), str(PER_PARTITION)]

    app_log = tmp_path / "ctp_app.log"

    def start():
        with open(app_log, "ab") as out:
            return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=out)

    def app_says() -> str:
        return app_log.read_text()[-3000:]

    def describe() -> dict:
        cluster = httpx.get(f"{urls[0]}/v3/clusters").json()["data"][0]["cluster_id"]
        return httpx.get(f"{urls[0]}/v3/clusters/{cluster}/transactions/ctp-tx", timeout=20).json()

    def kill_broker(broker_id: int) -> None:
        brokers[broker_id].kill()
        wait_znode_gone(zk, broker_id)
        time.sleep(rng.uniform(0.5, 1.5))  # the application runs on without it a while
        brokers[broker_id].start()

    app = start()
    try:
        # 1.-3. SIGKILL the application three times at random points, restarting it each time
        for _ in range(3):
            time.sleep(rng.uniform(0.4, 1.5))
            assert app.poll() is None, app_says()
            app.send_signal(signal.SIGKILL)
            app.wait(10)
            app = start()
        # 4. the broker of the transaction coordinator, then 5. a leader of B on another broker
        wait_for(lambda: describe().get("coordinator_id") is not None, what="the coordinator")
        coordinator = describe()["coordinator_id"]
        time.sleep(rng.uniform(0.2, 0.8))
        assert app.poll() is None, "the application finished before the broker kills"
        kill_broker(coordinator)
        wait_full_isr(zk, "ctp-out", PARTITIONS, 3)
        leader = next(zk.state("ctp-out", p).leader for p in range(PARTITIONS)
                      if zk.state("ctp-out", p).leader != coordinator)
        time.sleep(rng.uniform(0.2, 0.8))
        kill_broker(leader)
        deadline = time.monotonic() + 180
        while app.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert app.poll() == 0, app_says()
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(10)
    got = Counter(v for p in range(PARTITIONS) for v in read_committed(urls[0], "ctp-out", p))
    assert sum(got.values()) == sum(expected.values()) and got == expected, (
        f"duplicates: {[v for v, c in got.items() if c > 1][:5]}, missing: {list((expected - got).elements())[:5]}")
    offsets = httpx.get(f"{urls[0]}/consumers/ctp-group/offsets", timeout=20).json()["offsets"]
    assert sorted((o["partition"], o["offset"]) for o in offsets) == [(p, PER_PARTITION) for p in range(PARTITIONS)]
